"""Every field of every body takes only the JSON type the connector declares for it (issue 31).

The cases are read from the connector's definition, so a field added later is covered without a line here: each
field is sent each JSON type it does not declare (a quoted number, a number for a boolean, ...) and must be a
400 naming it and nothing else; and sent a value of its declared type, it must not be refused for its type, so
the definition and the service agree both ways. A bulk call's item is its own: a wrong type in one item is that
item's 400. Query parameters are strings by nature and are read as their types (tested in test_errors).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from tests.connector.spec import DEFINITIONS, load
from tests.gate import Gate
from tests.http.client import Api, Reply
from tests.http.test_errors import CLAIM, CONFLICT, RESOLVE, TOKEN
from tests.service.calls import claim
from tools.connector.operations import OPERATIONS

DEFINITION = load(DEFINITIONS["key"])
HELD = "<the held claim's id>"

# A body of each action, valid alone: the case sets one field in it. A new action's test fails until it has one.
BODIES: dict[str, dict[str, Any]] = {
    "check_and_claim": CLAIM,
    "record_result": {"claimToken": TOKEN, "outcome": "failed"},
    "release_claim": {"claimToken": TOKEN},
    "renew_claim": {"claimToken": TOKEN},
    "review_claim": {"reviewer": "ops@contoso", "outcome": "succeeded", "attempt": 1, "targetRecordId": "SO-1"},
    "lookup_claim": {"scope": CLAIM["scope"], "key": CLAIM["key"]},
    "report_conflict": CONFLICT,
    "resolve_conflict": RESOLVE,
    "register_flow": {"name": "Create ERP order", "environment": "Default-contoso"},
    "set_scope": {"scope": CLAIM["scope"]},
}
# A bulk call's item, valid alone, by the bulk action.
ITEMS: dict[str, dict[str, Any]] = {
    "check_and_claim_many": CLAIM,
    "record_results": {"claimId": HELD, "claimToken": TOKEN, "outcome": "succeeded"},
}
ROUTES = {"record_result", "release_claim", "renew_claim", "review_claim"}


def _body_schema(name: str) -> dict[str, Any]:
    """The schema the connector declares for the body of the app's function ``name``."""
    operation_id = OPERATIONS[name].designer.operation_id
    for item in DEFINITION["paths"].values():
        for spec in item.values():
            if isinstance(spec, dict) and spec.get("operationId") == operation_id:
                (body,) = [parameter for parameter in spec["parameters"] if parameter["in"] == "body"]
                schema: dict[str, Any] = DEFINITION["definitions"][body["schema"]["$ref"].rsplit("/", 1)[1]]
                return schema
    raise AssertionError(f"{operation_id} is not in the connector's definition")


def _fields(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every field the schema declares, nested ones and an array's items (at index 0) included."""
    for name, field in schema.get("properties", {}).items():
        yield (*path, name), field
        yield from _fields(field, (*path, name))
        if field.get("type") == "array":
            yield (*path, name, "0"), field["items"]
            yield from _fields(field["items"], (*path, name, "0"))


def _valid(field: dict[str, Any], base: Any) -> Any:
    """A value of the field's declared type that it takes: the body's own, else one within its bounds."""
    if base is not None:
        return base
    kind = field.get("type")
    if kind in ("integer", "number"):
        return field.get("maximum", field.get("minimum", 1))
    if kind == "string":
        return field["enum"][0] if "enum" in field else "x"
    return {"boolean": True, "array": [], "object": {}}.get(kind)


def _wrong(field: dict[str, Any], valid: Any) -> list[Any]:
    """A value of each JSON type the field does not declare; a quoted number or boolean first."""
    kind = field["type"]
    if kind in ("integer", "number"):
        # A whole number written 60.0 is a number, not an integer, as in the definition's JSON Schema (draft 4).
        return [str(valid), True, [valid], *([float(valid)] if kind == "integer" else [])]
    if kind == "boolean":
        return ["true", "yes", 0, 1, 1.0]
    if kind == "string":
        return [60, True, [valid], {"value": valid}]
    return ["x", 1, [valid] if kind == "object" else {"value": valid}]


def _at(body: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if body is None:
            return None
        body = body[int(part)] if isinstance(body, list) else body.get(part)
    return body


def _placed(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of ``body`` with ``value`` at ``path``, the containers on the way made when missing."""
    placed = copy.deepcopy(body)
    node: Any = placed
    for part, following in itertools.pairwise(path):
        child = [] if following == "0" else {}
        if isinstance(node, list):
            node[:] = node or [child]
            node = node[int(part)]
        else:
            node = node.setdefault(part, child)
    if isinstance(node, list):
        node[:] = [value]
    else:
        node[path[-1]] = value
    return placed


def _cases() -> Iterator[Any]:
    for name, operation in OPERATIONS.items():
        if operation.body is None:
            continue
        schema = _body_schema(name)
        if name in ITEMS:
            schema, base = schema["properties"]["items"]["items"], ITEMS[name]
        else:
            base = BODIES[name]
        for path, field in _fields(schema):
            if "type" in field:  # a field of any JSON value (payload, data) declares none
                yield pytest.param(name, path, field, base, id=f"{name}-{'.'.join(path)}")


@pytest.fixture
def held(service: Gate) -> tuple[str, str]:
    answer = claim(service)
    assert answer.claim_token is not None
    return answer.claim_id, answer.claim_token


def _held_in(value: Any, held: tuple[str, str]) -> Any:
    """``value`` with the held claim's id and token in place of HELD and TOKEN."""
    if isinstance(value, dict):
        return {name: _held_in(part, held) for name, part in value.items()}
    if isinstance(value, list):
        return [_held_in(part, held) for part in value]
    return {HELD: held[0], TOKEN: held[1]}.get(value, value) if isinstance(value, str) else value


def _send(api: Api, name: str, body: dict[str, Any], held: tuple[str, str]) -> Reply:
    """The body for the held claim; a bulk call's item comes second, after a valid one."""
    if name in ITEMS:
        body = {"items": [ITEMS[name], body]}
    route = {"claimId": held[0]} if name in ROUTES else {"conflictId": "a" * 24} if name == "resolve_conflict" else None
    return api.call(name, _held_in(body, held), route=route)


def _refused_for(reply: Reply, name: str) -> set[str | None]:
    """The fields the answer refuses for invalid_request: the whole call's, or a bulk call's second item's (the
    first, valid, is answered in its place)."""
    if name in ITEMS:
        assert reply.status == 200, reply.body
        first, entry = reply.body["value"]
        assert "error" not in first, first
        error = entry.get("error") or {}
    else:
        error = reply.body.get("error") or {} if reply.status == 400 else {}
    if error.get("code") != "invalid_request":
        return set()
    return {detail.get("target") for detail in error["details"]}


def test_every_action_with_a_body_has_a_body_here() -> None:
    bodies = {name for name, operation in OPERATIONS.items() if operation.body is not None}

    assert bodies == set(BODIES) | set(ITEMS)


def test_the_definition_declares_every_field_of_every_body() -> None:
    for name, operation in OPERATIONS.items():
        if operation.body is not None:
            declared = set(_body_schema(name)["properties"])
            assert declared == {field.alias or field_name for field_name, field in operation.body.model_fields.items()}


@pytest.mark.parametrize(("name", "path", "field", "base"), list(_cases()))
def test_a_field_of_another_json_type_is_a_400_naming_it(
    api: Api, held: tuple[str, str], name: str, path: tuple[str, ...], field: dict[str, Any], base: dict[str, Any]
) -> None:
    target = ".".join(path)
    valid = _valid(field, _at(base, path))

    for wrong in _wrong(field, valid):
        reply = _send(api, name, _placed(base, path, wrong), held)
        assert _refused_for(reply, name) == {target}, (wrong, reply.body)
    # The declared type is taken: the connector's definition and the service agree.
    reply = _send(api, name, _placed(base, path, valid), held)
    assert target not in _refused_for(reply, name), (valid, reply.body)


# The values issue 31 found coerced, each sent as the reproduction sent it.
FOUND: list[tuple[str, dict[str, Any], str]] = [
    ("check_and_claim", {**CLAIM, "leaseSeconds": "60"}, "leaseSeconds"),
    ("check_and_claim", {**CLAIM, "wait": True, "maxWaitSeconds": "10"}, "maxWaitSeconds"),
    ("check_and_claim", {**CLAIM, "wait": True, "maxWaitSeconds": True}, "maxWaitSeconds"),
    ("check_and_claim", {**CLAIM, "wait": "yes"}, "wait"),
    ("set_scope", {"scope": CLAIM["scope"], "horizonDays": "400"}, "horizonDays"),
    ("record_result", {"claimToken": TOKEN, "outcome": "failed", "retryable": "yes"}, "retryable"),
    ("record_result", {"claimToken": TOKEN, "outcome": "failed", "retryable": 0}, "retryable"),
]


@pytest.mark.parametrize(("name", "body", "target"), FOUND, ids=[f"{case[0]}-{case[2]}" for case in FOUND])
def test_what_the_issue_found_coerced_is_a_400_naming_the_field(
    api: Api, held: tuple[str, str], name: str, body: dict[str, Any], target: str
) -> None:
    reply = _send(api, name, body, held)

    assert (reply.status, reply.code) == (400, "invalid_request")
    assert reply.targets == [target]
    assert target in reply.body["error"]["message"]
