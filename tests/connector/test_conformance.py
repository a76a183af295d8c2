"""The local server keeps the promises of the connector definition: no 5xx, and every answer as declared.

Schemathesis generates requests for each operation from the definition itself, valid and invalid ones,
and checks each response's status, content type, headers and body against it. A scripted run of the
standard pattern then checks the answers a flow really gets, which random keys rarely reach.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import jsonschema
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import CheckContext, Response
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.connector.spec import DEFINITIONS, load, operation, operations, resolve

MAX_EXAMPLES = 25


def content_type_of_bodies(ctx: CheckContext, response: Response, case: schemathesis.Case[Any]) -> bool | None:
    """Content type conformance for answers that have a body: the trigger's 202 has none, and so no type."""
    return content_type_conformance(ctx, response, case) if response.content else None


CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_of_bodies,
    response_headers_conformance,
    response_schema_conformance,
]
# Every operation, with valid and with invalid input (for those that take any input).
CASES = [
    pytest.param(op.id, mode, id=f"{op.id}-{mode.value}")
    for op in operations(load(DEFINITIONS["key"]))
    for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    if op.spec["parameters"] or mode is schemathesis.GenerationMode.POSITIVE
]
# Bulk calls answer 200 with an error entry for an item the definition does not allow (issue 24): by design
# an item's refusal does not refuse the others, so only a body that is not 1 to 100 items is a 4xx.
ITEM_BY_ITEM = {"CheckAndClaimMany", "RecordResults"}
HEADERS = {"x-functions-key": "local-tests-send-a-key-as-the-gateway-does"}


@pytest.fixture(scope="module")
def api(definition: dict[str, Any], base_url: str) -> schemathesis.BaseSchema:
    # The definition's host is a placeholder replaced by the dynamichosturl policy: point it at the local app.
    loaded = schemathesis.openapi.from_dict(copy.deepcopy(definition))
    loaded.config.update(base_url=base_url)
    # The key is the gateway's business, and the local server checks none (as Core Tools does not).
    loaded.config.generation.update(with_security_parameters=False)
    return loaded


@pytest.mark.parametrize(("operation_id", "mode"), CASES)
def test_operation_conforms_to_the_definition(
    api: schemathesis.BaseSchema, definition: dict[str, Any], operation_id: str, mode: schemathesis.GenerationMode
) -> None:
    op = operation(definition, operation_id)
    api_operation = api[op.path][op.method.upper()]
    negative = mode is schemathesis.GenerationMode.NEGATIVE and operation_id not in ITEM_BY_ITEM
    checks = [*CONFORMANCE, negative_data_rejection] if negative else CONFORMANCE

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=api_operation.as_strategy(generation_mode=mode))
    def call(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(headers=HEADERS, checks=checks, timeout=10)

    call()


# -- the standard pattern, every answer checked against the definition ------------------------------


class Connector:
    """Calls the local app as the connector's gateway would, validating each answer against the definition."""

    def __init__(self, base_url: str, definition: dict[str, Any]) -> None:
        self.base_url = base_url
        self.definition = definition

    def call(self, operation_id: str, body: Any = None, params: dict[str, str] | None = None, **path: str) -> Any:
        op = operation(self.definition, operation_id)
        response = requests.request(
            op.method,
            self.base_url + op.path.format(**path),
            json=body,
            params=params,
            headers=HEADERS,
            timeout=10,
        )
        assert response.status_code == 200, response.text
        schema = {**resolve(self.definition, op.spec["responses"]["200"]["schema"])}
        schema["definitions"] = self.definition["definitions"]
        jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER).validate(
            response.json()
        )
        return response.json()


def test_the_standard_pattern_conforms_to_the_definition(base_url: str, definition: dict[str, Any]) -> None:
    connector = Connector(base_url, definition)
    scope, key = f"conformance-{uuid.uuid4().hex[:8]}", "SO-1001"
    order = {"customer": "C-42", "amount": 120.5}
    run = {"flow": {"name": "Create ERP order", "environment": "Default-contoso"}}

    first = connector.call("CheckAndClaim", {"scope": scope, "key": key, "payload": order, "runId": "run-1", **run})
    assert first["decision"] == "proceed"
    claim_id, token = first["claimId"], first["claimToken"]
    connector.call("RenewClaim", {"claimToken": token, "leaseSeconds": 600}, claimId=claim_id)
    result = {"claimToken": token, "outcome": "succeeded", "targetRecordId": "ERP-778812", "data": {"total": 120.5}}
    connector.call("RecordResult", result, claimId=claim_id)

    again = connector.call("CheckAndClaim", {"scope": scope, "key": key, "payload": order, "runId": "run-2", **run})
    assert again["decision"] == "duplicate"
    assert again["result"]["targetRecordId"] == "ERP-778812"

    changed = {**order, "amount": 99}
    conflict = connector.call(
        "CheckAndClaim", {"scope": scope, "key": key, "payload": changed, "runId": "run-3", **run}
    )
    assert conflict["decision"] == "conflict"
    listed = connector.call("ListConflicts", params={"scope": scope, "status": "open"})
    assert [item["conflictId"] for item in listed["value"]] == [conflict["conflictId"]]
    connector.call("GetConflict", conflictId=conflict["conflictId"])
    resolution = {"decision": "keep_original", "reviewer": "ana@contoso.com", "note": "rounding in the shop"}
    resolved = connector.call("ResolveConflict", resolution, conflictId=conflict["conflictId"])
    assert resolved["resolution"]["decision"] == "keep_original"

    history = connector.call("LookupClaim", {"scope": scope, "key": key})["history"]
    assert len(history) >= 5
    connector.call("GetClaim", claimId=claim_id)
    connector.call(
        "ReportConflict", {"scope": scope, "key": key, "fingerprint": "v2", "runId": "run-4", "reason": "ERP differs."}
    )

    other = connector.call("CheckAndClaim", {"scope": scope, "key": "SO-1002", "fingerprint": "v1", "runId": "run-5"})
    connector.call(
        "ReleaseClaim", {"claimToken": other["claimToken"], "reason": "Not needed."}, claimId=other["claimId"]
    )
    connector.call("GetHealth")
