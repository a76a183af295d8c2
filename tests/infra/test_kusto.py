"""Every workbook, alert and docs query, through Microsoft's Kusto parser (npm ``@kusto/language-service-next``).

``test_monitoring.py`` holds the queries to the events the app sends; this runs each through the parser
the Azure portal's query editor uses (``kusto.js``), against the schema of the tables it reads:
Application Insights' ``customEvents`` and ``traces`` for the app's telemetry and log, and for the audit
tile Log Analytics' ``AzureDiagnostics`` (Key Vault's AuditEvent) and ``StorageTableLogs``. Any diagnostic
fails: a syntax error, a column or function that does not exist, a type that does not fit. Workbook parameters
and the alerts' placeholders are filled in first, as the workbook and alerts.bicep fill them. The parser is
installed by ``make test`` from package.json, like Azurite.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infra.test_monitoring import alert_queries, audit_queries, docs_queries, workbook_queries
from tests.support.once import once_per_run

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("kusto.js")
PARSER = ROOT / "node_modules" / "@kusto" / "language-service-next" / "Kusto.Language.Bridge.js"

# learn.microsoft.com/azure/azure-monitor/reference/tables/appevents: customEvents, the classic name of
# AppEvents that a workspace-based component's queries read.
CUSTOM_EVENTS = (
    "(timestamp:datetime, name:string, itemType:string, customDimensions:dynamic, customMeasurements:dynamic,"
    " operation_Name:string, operation_Id:string, operation_ParentId:string, operation_SyntheticSource:string,"
    " session_Id:string, user_Id:string, user_AuthenticatedId:string, user_AccountId:string,"
    " application_Version:string, client_Type:string, client_Model:string, client_OS:string, client_IP:string,"
    " client_City:string, client_StateOrProvince:string, client_CountryOrRegion:string, client_Browser:string,"
    " cloud_RoleName:string, cloud_RoleInstance:string, appId:string, appName:string, iKey:string,"
    " sdkVersion:string, itemId:string, itemCount:int, _ResourceId:string)"
)
# .../tables/azurediagnostics: the fixed columns; a resource's own ones (id_s, identity_claim_*) come and
# go with its logs, so the tile reads them with column_ifexists().
AZURE_DIAGNOSTICS = (
    "(TimeGenerated:datetime, ResourceId:string, ResourceProvider:string, ResourceType:string, Resource:string,"
    " Category:string, OperationName:string, ResultType:string, ResultSignature:string, ResultDescription:string,"
    " CallerIPAddress:string, CorrelationId:string, DurationMs:long, Level:string, Type:string)"
)
# .../tables/storagetablelogs.
STORAGE_TABLE_LOGS = (
    "(TimeGenerated:datetime, AccountName:string, Location:string, Protocol:string, OperationName:string,"
    " AuthenticationType:string, StatusCode:string, StatusText:string, DurationMs:real, ServerLatencyMs:real,"
    " Uri:string, CallerIpAddress:string, CorrelationId:string, SchemaVersion:string, OperationVersion:string,"
    " AuthenticationHash:string, RequesterObjectId:string, RequesterTenantId:string, RequesterAppId:string,"
    " RequesterAudience:string, RequesterTokenIssuer:string, RequesterUpn:string, RequesterUserName:string,"
    " UserAgentHeader:string, ReferrerHeader:string, ClientRequestId:string, Etag:string, ObjectKey:string,"
    " Category:string, _ResourceId:string)"
)
# .../tables/apptraces: traces, the classic name a workspace-based component's queries read (the app's log).
TRACES = (
    "(timestamp:datetime, message:string, severityLevel:int, itemType:string, customDimensions:dynamic,"
    " customMeasurements:dynamic, operation_Name:string, operation_Id:string, operation_ParentId:string,"
    " cloud_RoleName:string, cloud_RoleInstance:string, appId:string, appName:string, iKey:string, sdkVersion:string,"
    " itemId:string, itemCount:int, _ResourceId:string)"
)
TABLES = {
    "customEvents": CUSTOM_EVENTS,
    "traces": TRACES,
    "AzureDiagnostics": AZURE_DIAGNOSTICS,
    "StorageTableLogs": STORAGE_TABLE_LOGS,
}
# What the workbook's parameters and the alerts' placeholders stand for when a query runs.
FILLED = {"{Scope}": "*", "{TimeRange:grain}": "1h", "{conflictAlertHours}": "24"}


def filled(query: str) -> str:
    for placeholder, value in FILLED.items():
        query = query.replace(placeholder, value)
    assert not re.search(r"\{\w+(:\w+)?\}", query), f"a placeholder FILLED does not know: {query}"
    return query


def diagnostics(queries: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    node = shutil.which("node")
    assert node is not None, "node is not installed"
    assert PARSER.is_file(), f"no Kusto parser at {PARSER}: run make test (npm ci installs it from package.json)"
    document = json.dumps({"tables": TABLES, "queries": {name: filled(query) for name, query in queries.items()}})
    done = subprocess.run([node, str(SCRIPT)], input=document, capture_output=True, text=True, check=True, timeout=60)
    found: dict[str, list[dict[str, Any]]] = json.loads(done.stdout)
    return found


# Planted faults, run with the real queries (one start of the parser): each must be found.
PLANTED = {
    "no such column": ('customEvents | where nam == "OnceGate.Check"', "KS142"),
    "a parenthesis missing": ("customEvents | summarize by tostring(customDimensions.scope", "KS005"),
    "a string compared with a number": ("StorageTableLogs | where RequesterUpn > 3", "KS"),
    "a resource's own column read bare": ("AzureDiagnostics | project id_s", "KS142"),
}


def all_queries() -> dict[str, str]:
    return {**workbook_queries(), **audit_queries(), **alert_queries(), **docs_queries()}


@pytest.fixture(scope="module")
def every_query() -> dict[str, str]:
    return all_queries()


@pytest.fixture(scope="session")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """The parser's diagnostics of every query and the planted ones: it runs once per run, in whichever process
    first asks (make test runs the suite in two)."""
    planted = {f"planted: {name}": query for name, (query, _) in PLANTED.items()}
    found: dict[str, list[dict[str, Any]]] = once_per_run(
        tmp_path_factory, "kusto-diagnostics", lambda: diagnostics({**all_queries(), **planted})
    )
    return found


def test_every_workbook_alert_and_docs_query_parses_clean(
    every_query: dict[str, str], found: dict[str, list[dict[str, Any]]]
) -> None:
    assert len(every_query) >= 20, "fewer queries than the workbook and the alerts hold"
    assert every_query.keys() <= found.keys()
    assert {name: found[name] for name in every_query if found[name]} == {}


def test_the_docs_queries_are_among_those_parsed(every_query: dict[str, str]) -> None:
    documented = docs_queries()
    assert len(documented) >= 2, "the docs' kusto blocks were not found"
    assert documented.items() <= every_query.items()


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_parser_finds_what_is_wrong(name: str, found: dict[str, list[dict[str, Any]]]) -> None:
    problems, (query, code) = found[f"planted: {name}"], PLANTED[name]
    assert problems, f"the parser found nothing in {query!r}"
    assert any(problem["code"].startswith(code) for problem in problems), problems
