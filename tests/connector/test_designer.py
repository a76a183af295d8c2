"""What makers see in the designer: titles, help text, visibility, pickers, enums and the trigger."""

from __future__ import annotations

import re
from typing import Any

import pytest

from oncegate.domain.statuses import ClaimStatus, Decision
from oncegate.entrypoints.operations import OPERATIONS
from oncegate.models import INTERNAL
from tests.connector.spec import (
    descriptions,
    operation,
    operations,
    parameter,
    properties,
    resolve,
    schemas,
    success_schema,
)

SMALL_WORDS = {"a", "an", "and", "at", "by", "for", "in", "of", "on", "or", "the", "to"}
VISIBILITIES = {"important", "advanced", "internal"}
# The actions the connector offers, as the operation table declares them (an entry the connector leaves out, the
# operators' own, is not one); the definition is checked against the table, not against a second list of names.
OFFERED = {operation.designer.operation_id for operation in OPERATIONS if operation.in_connector}
ACTIONS = {
    operation.designer.operation_id
    for operation in OPERATIONS
    if operation.in_connector and operation.designer.visibility != INTERNAL
}


def is_sentence(text: str) -> bool:
    return bool(re.fullmatch(r"[A-Z0-9].*\S[.!?]", text, re.DOTALL)) and len(text.split()) >= 4


def is_title_case(text: str) -> bool:
    words = text.split()
    return words[0][0].isupper() and all(word[0].isupper() or word in SMALL_WORDS for word in words)


def test_every_action_of_the_table_is_there(definition: dict[str, Any]) -> None:
    ids = {op.id for op in operations(definition)}
    assert ids == OFFERED
    # Health, and the addresses Check and claim (wait) and Perform once (wait) poll, hidden from the designer; every
    # other action is one makers pick.
    assert ids - ACTIONS == {"GetHealth", "WaitForClaim", "WaitForPerform"}
    assert {op.id for op in operations(definition) if op.spec.get("x-ms-visibility") == "internal"} == ids - ACTIONS


@pytest.mark.parametrize("operation_id", ["CheckAndClaim", "WaitForClaim"])
def test_check_and_claim_declares_the_asynchronous_pattern(definition: dict[str, Any], operation_id: str) -> None:
    # Power Automate and Logic Apps treat an action as asynchronous when it declares 202 with Location (issue 25).
    (op,) = [op for op in operations(definition) if op.id == operation_id]
    accepted = op.spec["responses"]["202"]

    assert set(accepted["headers"]) == {"Location", "Retry-After"}
    assert accepted["schema"] == {"$ref": "#/definitions/ClaimResponse"}
    assert op.spec["responses"]["200"]["schema"] == {"$ref": "#/definitions/ClaimResponse"}
    assert (op.spec["x-ms-visibility"] == "internal") is (operation_id == "WaitForClaim")


def test_summaries_are_sentence_case(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        first, *rest = op.spec["summary"].split()
        assert first[0].isupper(), op.id
        assert all(word.islower() for word in rest), f"{op.id}: {op.spec['summary']!r}"


def test_every_description_is_a_sentence(any_definition: dict[str, Any]) -> None:
    assert [f"{where}: {text!r}" for where, text in descriptions(any_definition) if not is_sentence(text)] == []


def test_descriptions_carry_no_addresses(any_definition: dict[str, Any]) -> None:
    # Links belong in the README: the designer shows descriptions as plain text.
    assert [where for where, text in descriptions(any_definition) if "://" in text] == []


def test_definitions_carry_no_defaults(any_definition: dict[str, Any]) -> None:
    # A default in a body definition pre-fills the designer; the service applies its own when a field is absent.
    assert [where for where, node in schemas(any_definition) if "default" in node] == []


def test_every_parameter_has_a_summary_and_a_description(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        for param in op.spec["parameters"]:
            assert param.get("x-ms-summary"), f"{op.id} {param['name']}"
            assert param.get("description"), f"{op.id} {param['name']}"
            assert is_title_case(param["x-ms-summary"]), f"{op.id} {param['name']}"


def test_every_property_has_a_summary_and_a_description(any_definition: dict[str, Any]) -> None:
    # Request fields and response fields alike: every one is a field or dynamic content in the designer.
    for where, node in properties(any_definition):
        assert node.get("x-ms-summary"), where
        assert node.get("description"), where
        assert is_title_case(node["x-ms-summary"]), f"{where}: {node['x-ms-summary']!r}"


def test_every_response_header_has_a_summary(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        for response in op.spec["responses"].values():
            for name, header in response.get("headers", {}).items():
                assert header.get("x-ms-summary"), f"{op.id} {name}"


def test_every_operation_and_parameter_has_a_visibility(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        assert op.spec.get("x-ms-visibility") in VISIBILITIES, op.id
        for param in op.spec["parameters"]:
            if param["in"] != "body":
                assert param.get("x-ms-visibility") in VISIBILITIES, f"{op.id} {param['name']}"
    request_bodies = [name for name in any_definition["definitions"] if name.endswith("Request")]
    for name in request_bodies:
        for field, node in any_definition["definitions"][name]["properties"].items():
            assert node.get("x-ms-visibility") in VISIBILITIES, f"{name}.{field}"


def test_the_run_and_the_flow_are_advanced(definition: dict[str, Any]) -> None:
    claim = definition["definitions"]["ClaimRequest"]["properties"]
    assert claim["runId"]["x-ms-visibility"] == "advanced"
    assert claim["flow"]["x-ms-visibility"] == "advanced"
    assert claim["flow"]["properties"]["name"]["x-ms-visibility"] == "advanced"


def test_decision_claim_id_and_claim_token_come_first(definition: dict[str, Any]) -> None:
    answer = definition["definitions"]["ClaimResponse"]["properties"]
    for name in ("decision", "claimId", "claimToken"):
        assert answer[name]["x-ms-visibility"] == "important", name
    assert (
        definition["definitions"]["RecordResultRequest"]["properties"]["claimToken"]["x-ms-visibility"] == "important"
    )
    for op in operations(definition):
        if "{claimId}" in op.path:
            assert parameter(op, "claimId")["x-ms-visibility"] == "important", op.id


def test_decision_is_documented_value_by_value(definition: dict[str, Any]) -> None:
    decision = definition["definitions"]["ClaimResponse"]["properties"]["decision"]
    assert decision["enum"] == [value.value for value in Decision]
    for value in Decision:
        assert re.search(rf"\b{value.value}: ", decision["description"]), f"what {value.value} means for the flow"


def test_every_enum_has_display_names(any_definition: dict[str, Any]) -> None:
    nodes = [node for _, node in properties(any_definition)]
    nodes += [param for op in operations(any_definition) for param in op.spec["parameters"]]
    enums = [node for node in nodes if "enum" in node]
    assert enums
    for node in enums:
        assert [item["value"] for item in node["x-ms-enum-values"]] == node["enum"]


def test_conflict_ids_are_picked_from_the_open_conflicts(definition: dict[str, Any]) -> None:
    for operation_id in ("ResolveConflict", "GetConflict"):
        picker = parameter(operation(definition, operation_id), "conflictId")["x-ms-dynamic-values"]
        assert picker["operationId"] == "ListConflicts"
        assert (picker["value-collection"], picker["value-path"]) == ("value", "conflictId")
        # InvokedOperationShouldProduceArray / InvokedOperationShouldProduceProperty:
        listed = success_schema(definition, operation(definition, "ListConflicts"))["properties"]
        items = listed[picker["value-collection"]]
        assert items["type"] == "array"
        assert {picker["value-path"], picker["value-title"]} <= set(items["items"]["properties"])


def test_conflict_list_is_pageable(definition: dict[str, Any]) -> None:
    listed = operation(definition, "ListConflicts")
    assert listed.spec["x-ms-pageable"] == {"nextLinkName": "nextLink"}
    status = parameter(listed, "status")
    assert status["enum"] == ["open", "resolved", "all"]
    assert status["default"] == "open"
    assert parameter(listed, "cursor")["x-ms-visibility"] == "internal"
    assert (parameter(listed, "top")["minimum"], parameter(listed, "top")["maximum"]) == (1, 200)


def test_trigger_follows_the_polling_contract(definition: dict[str, Any]) -> None:
    trigger = operation(definition, "OnConflictReported")
    assert trigger.method == "get"
    assert trigger.spec["x-ms-trigger"] == "batch"
    assert trigger.spec["summary"] == "When a conflict is reported"
    responses = trigger.spec["responses"]
    for status in ("200", "202"):
        assert set(responses[status]["headers"]) == {"Location", "Retry-After"}, status
    assert "schema" not in responses["202"]
    batch = success_schema(definition, trigger)
    assert batch["properties"]["value"]["type"] == "array"
    assert "nextLink" not in batch["properties"]
    assert parameter(trigger, "state")["x-ms-visibility"] == "internal"
    assert parameter(trigger, "scope")["required"] is False


def test_bodies_are_flattened_by_the_designer(definition: dict[str, Any]) -> None:
    # One body parameter, a reference to a named definition: the designer shows its fields one by one.
    for op in operations(definition):
        bodies = [param for param in op.spec["parameters"] if param["in"] == "body"]
        if op.method == "post":
            assert len(bodies) == 1, op.id
            assert resolve(definition, bodies[0]["schema"])["type"] == "object"
            assert bodies[0]["required"] is True


# Power Platform products (and Logic Apps) that the string guidance keeps out of the connector's description.
PRODUCTS = ("Power Automate", "Power Apps", "Power Platform", "Power BI", "Power Pages", "Copilot", "Logic Apps")


def test_the_connector_description_names_no_platform_product(any_definition: dict[str, Any]) -> None:
    description = any_definition["info"]["description"]
    assert [product for product in PRODUCTS if product.lower() in description.lower()] == []
    assert not re.search(r"\bAPI\b", description, re.IGNORECASE)


def _titles(node: dict[str, Any]) -> list[str]:
    """The titles of an object's fields as dynamic content shows them: nested objects' fields too, not arrays'."""
    titles: list[str] = []
    for child in node.get("properties", {}).values():
        nested = child.get("type") == "object" and "properties" in child
        titles += _titles(child) if nested else [child["x-ms-summary"]]
    return titles


def _objects(node: dict[str, Any]) -> list[dict[str, Any]]:
    """An answer's object and each object an array of it holds, whose fields dynamic content shows apart."""
    found = [node]
    for child in node.get("properties", {}).values():
        items = child.get("items", {}) if child.get("type") == "array" else {}
        found += _objects(items) if "properties" in items else []
        found += _objects(child)[1:] if child.get("type") == "object" else []
    return found


def test_no_two_fields_of_one_answer_share_a_title(definition: dict[str, Any]) -> None:
    # The result's, the holder's and the last attempt's flows each read "Flow Name" before (issue 13).
    for name, node in definition["definitions"].items():
        for scope in _objects(node):
            titles = _titles(scope)
            assert sorted({title for title in titles if titles.count(title) > 1}) == [], name
    answer = definition["definitions"]["ClaimResponse"]["properties"]
    assert answer["result"]["properties"]["flow"]["properties"]["name"]["x-ms-summary"] == "Result Flow Name"
    assert answer["holder"]["properties"]["flow"]["properties"]["environment"]["x-ms-summary"] == (
        "Holder Flow Environment"
    )


def test_output_descriptions_are_not_request_help(definition: dict[str, Any]) -> None:
    requests = {name for name in definition["definitions"] if name.endswith("Request")}
    outputs = [
        where
        for where, node in properties(definition)
        if where.split(".")[0].removeprefix("#/definitions/") not in requests and "expression" in node["description"]
    ]
    assert outputs == []


def test_the_claim_answer_requires_its_status_and_warnings(definition: dict[str, Any]) -> None:
    answer = definition["definitions"]["ClaimResponse"]
    assert {"decision", "claimId", "status", "attempt", "reason", "warnings"} <= set(answer["required"])
    assert answer["properties"]["status"]["enum"] == [*(status.value for status in ClaimStatus), "none"]
