"""The workbook and the alert rules (issue 14), held to the telemetry events the app sends.

``oncegate.telemetry`` is the one list of event names and dimensions: every KQL query of the workbook
(``infra/core/monitor/workbook.json``) and of the alerts (``infra/core/monitor/alerts/*.kql``) may read
only those, each dimension from an event the query names, and docs/operations.md must name them all.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oncegate import telemetry
from oncegate.domain.performing import PerformDecision
from oncegate.domain.statuses import Decision
from oncegate.domain.warnings import ANOTHER_FLOW_COPY
from tests.infra.bicep import BicepFile, Declaration, Fail, call_name, deploy_module, string_value, text, unwrap

ROOT = Path(__file__).resolve().parents[2]
MONITOR = ROOT / "infra" / "core" / "monitor"
WORKBOOK = MONITOR / "workbook.json"
ALERT_QUERIES = MONITOR / "alerts"
OPERATIONS = ROOT / "docs" / "operations.md"

EVENT = re.compile(r'"(OnceGate\.\w+)"')
DIMENSION = re.compile(r'customDimensions(?:\.(\w+)|\["(\w+)"\])')
# Application Insights tables other than customEvents: the app sends nothing else these queries could count on.
OTHER_TABLES = re.compile(
    r"\b(traces|requests|dependencies|exceptions|customMetrics|pageViews|availabilityResults|App[A-Z]\w*)\b"
)
DECISION_TEST = re.compile(r'\bdecision\)?\s*(?:==\s*"(\w+)"|in\s*\(([^)]*)\))')
WARNING_TEST = re.compile(r'\bwarnings\)?\s+has\s+"(\w+)"')
PLACEHOLDER = re.compile(r"\{(\w+)(?::\w+)?\}")
COMMENT = re.compile(r"^\s*//.*$", re.M)
EVENTS = {event.name: event for event in telemetry.EVENTS}
QUERY_ITEM, PARAMETERS_ITEM, TEXT_ITEM = 3, 9, 1
COMPONENT, WORKSPACE = "microsoft.insights/components", "microsoft.operationalinsights/workspaces"
# What workbook.bicep replaces with the Log Analytics workspace's resource ID.
WORKSPACE_PLACEHOLDER = "<log-analytics-workspace-id>"


def workbook() -> dict[str, Any]:
    content: dict[str, Any] = json.loads(WORKBOOK.read_text(encoding="utf-8"))
    return content


def audit_queries() -> dict[str, str]:
    """The tiles on the workspace's audit logs (Key Vault, table service), not on the app's telemetry."""
    return {
        item["name"]: item["content"]["query"]
        for item in workbook()["items"]
        if item["type"] == QUERY_ITEM and item["content"]["resourceType"] == WORKSPACE
    }


def workbook_queries() -> dict[str, str]:
    """Every query of the workbook on the app's telemetry, parameters' included, by the item (or parameter)."""
    queries = {}
    for item in workbook()["items"]:
        if item["type"] == QUERY_ITEM and item["name"] not in audit_queries():
            queries[item["name"]] = item["content"]["query"]
        elif item["type"] == PARAMETERS_ITEM:
            for parameter in item["content"]["parameters"]:
                if "query" in parameter:
                    queries[f"parameter {parameter['name']}"] = parameter["query"]
    return queries


def alert_queries() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(ALERT_QUERIES.glob("*.kql"))}


# The queries the docs give operators to paste into Logs: a runbook's query is product too.
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KUSTO_BLOCK = re.compile(r"^```kusto\n(.*?)^```", re.M | re.S)


def docs_queries() -> dict[str, str]:
    """Each ``kusto`` block of the README and docs/, by its file and its number there."""
    return {
        f"{path.name} query {number}": block
        for path in DOCUMENTS
        for number, block in enumerate(KUSTO_BLOCK.findall(path.read_text(encoding="utf-8")), start=1)
    }


def all_queries() -> dict[str, str]:
    return {**workbook_queries(), **alert_queries()}


def problems_of(query: str) -> list[str]:
    """What a query reads that the app does not send, or reads from an event the query does not name."""
    query = COMMENT.sub("", query)
    named = set(EVENT.findall(query))
    found = [f"event {name} is not sent (oncegate.telemetry.EVENTS)" for name in sorted(named - EVENTS.keys())]
    declared = set().union(*(EVENTS[name].dimensions for name in named & EVENTS.keys()))
    for dotted, indexed in DIMENSION.findall(query):
        dimension = dotted or indexed
        if dimension not in declared:
            found.append(f"dimension {dimension} is not one of the events {sorted(named)} sends")
    if "customEvents" not in query or not named:
        found.append("reads no OnceGate event from customEvents")
    found += [f"reads table {table}, which the app does not send to" for table in OTHER_TABLES.findall(query)]
    for single, listed in DECISION_TEST.findall(query):
        for value in [single] if single else re.findall(r'"(\w+)"', listed):
            if value not in {decision.value for decision in (*Decision, *PerformDecision)}:
                found.append(f"decision {value!r} is not a decision")
    found += [f"warning {w!r} is not sent" for w in WARNING_TEST.findall(query) if w != ANOTHER_FLOW_COPY]
    return found


# -- the queries ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(all_queries()))
def test_every_query_reads_only_what_the_app_sends(name: str) -> None:
    assert problems_of(all_queries()[name]) == []


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ('customEvents | where name == "OnceGate.Checks"', "event OnceGate.Checks is not sent"),
        ('customEvents | where name == "OnceGate.Check" | extend d = customDimensions.decisions', "decisions"),
        ('customEvents | where name == "OnceGate.Purge" | extend s = customDimensions.scope', "dimension scope"),
        ('customEvents | where name == "OnceGate.Check" | union traces', "table traces"),
        ('customEvents | where name == "OnceGate.Check" and tostring(customDimensions.decision) == "skip"', "'skip'"),
        ('customEvents | where name == "OnceGate.Check" | where warnings has "copy"', "warning 'copy'"),
    ],
)
def test_the_query_check_finds_what_is_not_sent(query: str, problem: str) -> None:
    assert any(problem in found for found in problems_of(query)), problems_of(query)


LOGGED_MESSAGE = re.compile(r'message\s+(?:startswith|has|contains)\s+"([^"]+)"')


@pytest.mark.parametrize("name", sorted(docs_queries()))
def test_every_docs_query_reads_what_the_app_sends_or_logs(name: str) -> None:
    """A query of the docs on customEvents reads the app's events as the workbook's do; one on traces looks
    for a message the app logs, word for word (its source text, up to the first placeholder)."""
    query = docs_queries()[name]
    if "customEvents" in query:
        assert problems_of(query) == []
        return
    assert COMMENT.sub("", query).lstrip().startswith("traces"), f"{name} reads neither customEvents nor traces"
    messages = LOGGED_MESSAGE.findall(query)
    assert messages, f"{name} looks for no message of the app's log"
    source = "\n".join(path.read_text(encoding="utf-8") for path in (ROOT / "oncegate").rglob("*.py"))
    for message in messages:
        assert f'"{message}' in source, f"{name}: the app logs no message starting {message!r}"


def test_docs_name_every_event_dimension_tile_and_alert(bicep: dict[str, BicepFile]) -> None:
    docs = OPERATIONS.read_text(encoding="utf-8")
    names = [event.name for event in telemetry.EVENTS]
    names += sorted(set().union(*(event.dimensions for event in telemetry.EVENTS)))
    names += [item["content"]["title"] for item in workbook()["items"] if item["type"] == QUERY_ITEM]
    names += [string_value(rule.get("properties", "displayName")) or "" for rule in rules(bicep)]
    missing = [name for name in names if f"`{name}`" not in docs and f"**{name}**" not in docs]
    assert missing == [], f"docs/operations.md does not name {missing}"


# -- the workbook ---------------------------------------------------------------------------------------


def test_the_workbook_is_a_valid_workbook_of_the_component() -> None:
    content = workbook()
    assert content["version"] == "Notebook/1.0"
    names = [item["name"] for item in content["items"]]
    assert len(names) == len(set(names)), "item names repeat"
    parameters = {
        parameter["name"]
        for item in content["items"]
        if item["type"] == PARAMETERS_ITEM
        for parameter in item["content"]["parameters"]
    }
    for item in content["items"]:
        assert item["type"] in (TEXT_ITEM, QUERY_ITEM, PARAMETERS_ITEM), item["name"]
        if item["type"] != QUERY_ITEM:
            continue
        query = item["content"]
        assert query["version"] == "KqlItem/1.0"
        if item["name"] in audit_queries():
            # The workspace, named by the placeholder workbook.bicep fills in.
            assert query["crossComponentResources"] == [WORKSPACE_PLACEHOLDER], item["name"]
        else:
            assert (query["queryType"], query["resourceType"]) == (0, COMPONENT), item["name"]
        assert query["title"], item["name"]
        assert query["visualization"] in ("table", "timechart", "tiles", "barchart"), item["name"]
        assert "timeContext" in query or query.get("timeContextFromParameter") in parameters, item["name"]
    for name, query in {**workbook_queries(), **audit_queries()}.items():
        unknown = set(PLACEHOLDER.findall(query)) - parameters
        assert not unknown, f"{name} reads parameters nobody sets: {unknown}"


def tile(name: str) -> str:
    (item,) = [item for item in workbook()["items"] if item["name"] == name]
    query: str = item["content"]["query"]
    return query


def test_the_workbook_shows_what_the_issue_asks_for() -> None:
    # Decisions over time, per scope (the Scope parameter).
    assert '"OnceGate.Check"' in tile("decisions-over-time")
    assert "{Scope}" in tile("decisions-over-time")
    assert "bin(timestamp, {TimeRange:grain})" in tile("decisions-over-time")
    # Side effects prevented: duplicates and conflicts, a headline and per flow.
    for name in ("prevented", "prevented-per-flow"):
        assert 'decision in ("duplicate", "conflict")' in tile(name)
    assert "customDimensions.flowName" in tile("prevented-per-flow")
    # Flows and their overlaps.
    assert "customDimensions.holderFlowName" in tile("flow-overlaps")
    # What waits for a person, oldest first, from the watch's last run.
    assert '"OnceGate.Attention", "OnceGate.OpenConflicts"' in tile("waiting")
    assert tile("waiting").rstrip().endswith("order by OldestSince asc")
    # Latency p50 and p95; 503s; refused requests.
    assert "percentile(latencyMs, 50)" in tile("latency")
    assert "percentile(latencyMs, 95)" in tile("latency")
    assert '"OnceGate.Unavailable"' in tile("unavailable")
    assert "isnotempty(code)" in tile("refused")


def the_component_of(file: BicepFile) -> None:
    """``file`` refers to the Application Insights component the deployment made, as an existing resource."""
    component = file.declaration("resource", "applicationInsights")
    assert component.existing
    assert component.declared_type.startswith("Microsoft.Insights/components@")


def test_the_workbook_is_deployed_on_the_component(bicep: dict[str, BicepFile]) -> None:
    file = bicep["core/monitor/workbook.bicep"]
    the_component_of(file)
    resource = file.declaration("resource", "workbook")
    assert resource.texts("sourceId") == ["applicationInsights.id"]
    assert resource.texts("serializedData") == ["string(content)"]
    content = file.declaration("var", "content").value
    assert content is not None
    assert "loadTextContent('workbook.json'), workspacePlaceholder, logAnalyticsWorkspaceId" in text(content)
    assert "applicationInsights.id" in text(content)
    placeholder = file.declaration("var", "workspacePlaceholder").value
    assert placeholder is not None
    assert string_value(placeholder) == WORKSPACE_PLACEHOLDER
    assert WORKBOOK.read_text(encoding="utf-8").count(WORKSPACE_PLACEHOLDER) == len(audit_queries())


def test_the_audit_tile_reads_the_logs_the_diagnostic_settings_send() -> None:
    (query,) = audit_queries().values()
    # Key Vault's AuditEvent (in AzureDiagnostics) and the table service's write and delete logs.
    assert 'ResourceProvider == "MICROSOFT.KEYVAULT" and Category == "AuditEvent"' in query
    assert 'StorageTableLogs\n    | where Category in ("StorageWrite", "StorageDelete")' in query
    # A workspace without one of the tables yet (no log sent so far) shows the other, not an error.
    assert "union isfuzzy=true" in query


# -- the alerts -----------------------------------------------------------------------------------------


def rules(bicep: dict[str, BicepFile]) -> list[Declaration]:
    file = bicep["core/monitor/alerts.bicep"]
    return [
        r
        for r in file.declarations("resource")
        if r.declared_type.startswith("Microsoft.Insights/scheduledQueryRules@")
    ]


def rule_query(rule: Declaration) -> tuple[str, str]:
    """The query file a rule loads, and its text as the rule sends it (its placeholders filled in)."""
    (criterion,) = unwrap(rule.get("properties", "criteria", "allOf") or rule.node).named_children
    expression = text(unwrap(criterion))
    (path,) = re.findall(r"loadTextContent\('alerts/([^']+)'\)", expression)
    query = (ALERT_QUERIES / path).read_text(encoding="utf-8")
    for placeholder, value in re.findall(r"'\{(\w+)\}',\s*string\((\w+)\)", expression):
        query = query.replace(f"{{{placeholder}}}", f"<{value}>")
    return path, query


def test_each_alert_query_file_is_one_rule_with_every_placeholder_filled(bicep: dict[str, BicepFile]) -> None:
    used = []
    for rule in rules(bicep):
        path, query = rule_query(rule)
        used.append(path)
        assert not PLACEHOLDER.findall(COMMENT.sub("", query)), f"{path}: a placeholder alerts.bicep does not fill"
    assert sorted(used) == sorted(alert_queries())


def test_the_alerts_query_the_component_and_mail_the_optional_action_group(bicep: dict[str, BicepFile]) -> None:
    file = bicep["core/monitor/alerts.bicep"]
    the_component_of(file)
    group = file.declaration("resource", "actionGroup")
    assert group.condition is not None
    assert text(group.condition) == "!empty(alertEmail)"
    assert group.texts("emailAddress") == ["alertEmail"]
    assert "empty(alertEmail) ? [] :" in text(file.declaration("var", "actions").value or group.node)
    assert len(rules(bicep)) == 5
    for rule in rules(bicep):
        assert rule.texts("kind") == ["'LogAlert'"]
        assert text(unwrap(rule.get("properties", "scopes") or rule.node)).split() == [
            "[",
            "applicationInsights.id",
            "]",
        ]
        assert rule.texts("actions") == ["actions"]
        assert rule.texts("enabled") == ["true"]


def test_main_deploys_the_workbook_and_the_alerts_on_the_monitoring_component(main_bicep: BicepFile) -> None:
    for name in ("workbook", "alerts"):
        module = main_bicep.declaration("module", name)
        component = module.get("params", "applicationInsightsName")
        assert component is not None
        assert text(component) == "monitoring.outputs.applicationInsightsName"
    alerts = main_bicep.declaration("module", "alerts")
    for name in ("alertEmail", "conflictAlertHours", "unavailableAlertThreshold"):
        given = alerts.get("params", name)
        assert given is not None
        assert text(given) == name
    email = main_bicep.declaration("param", "alertEmail")
    assert email.value is not None
    assert string_value(email.value) == ""
    assert call_name(email.value) is None


def test_the_docs_describe_the_alerts_as_the_stateful_rules_they_are(bicep: dict[str, BicepFile]) -> None:
    """Every rule resolves itself (autoMitigate): Azure Monitor's stateful alerts "fire when the condition is met.
    They don't fire again or trigger any more actions until the conditions are resolved." The docs said the
    attention alert fires again every 15 minutes while claims wait, and had operators set its "mute actions"
    in the portal, which every redeploy of the rule sets back."""
    rules = [
        resource
        for resource in bicep["core/monitor/alerts.bicep"].declarations("resource")
        if resource.declared_type.startswith("Microsoft.Insights/scheduledQueryRules@")
    ]
    assert len(rules) == 5
    for rule in rules:
        assert rule.texts("autoMitigate") == ["true"], rule.name
        assert rule.get("properties", "muteActionsDuration") is None, rule.name
    prose = " ".join(OPERATIONS.read_text(encoding="utf-8").split())
    assert "fires again" not in prose
    assert "mute actions" not in prose.lower()
    assert "does not fire again while" in prose


def duration(value: str) -> timedelta:
    """An ISO 8601 duration of the forms the alert rules use: PnD, PTnH, PTnM."""
    match = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?)?", value)
    assert match is not None, value
    assert any(match.groups()), value
    days, hours, minutes = (int(part or 0) for part in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes)


def test_the_attention_alert_reads_the_last_run_of_every_schedule_a_deployment_accepts(
    bicep: dict[str, BicepFile], main_bicep: BicepFile
) -> None:
    """The rule's query takes the watch's last run; the rule reads what its query time range holds
    (windowSize times numberOfEvaluationPeriods unless overrideQueryTimeRange says otherwise). With 30 minutes,
    an hourly ONCEGATE_ATTENTION_SCHEDULE had no run in range for half of each hour while claims waited: the
    alert resolved, then fired again at the next run. Every schedule a deployment accepts runs at least daily,
    and the range holds a day and one evaluation more, within the two days a log search alert may read."""
    (rule,) = [r for r in rules(bicep) if r.name == "attentionAlert"]
    frequency = rule.get("properties", "evaluationFrequency")
    assert frequency is not None
    override = rule.get("properties", "overrideQueryTimeRange")
    window = rule.get("properties", "windowSize")
    assert window is not None
    query_range = duration(string_value(override)) if override is not None else duration(string_value(window))
    assert query_range >= timedelta(days=1) + duration(string_value(frequency))
    assert query_range <= timedelta(days=2)
    for schedule in ("", "0 */15 * * * *", "0 0 * * * *", "0 30 2 * * *", "0 0 */6 * * *"):
        assert (
            deploy_module(
                main_bicep, "attentionScheduleDaily", {"location": "swedencentral", "attentionSchedule": schedule}
            )
            is None
        )
    for schedule in ("0 0 9 * * 1", "0 0 0 1 * *", "0 0 9 */2 * *", "0 0 0 * 1 *", "*/15 * * * *"):
        with pytest.raises(Fail, match=r"^attentionSchedule-must-run-every-day: value is shorter than 1$"):
            deploy_module(
                main_bicep, "attentionScheduleDaily", {"location": "swedencentral", "attentionSchedule": schedule}
            )
