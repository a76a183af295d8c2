"""A lone surrogate in any string of any body is a 400 naming its field, never a 500 (issue 31).

JSON may write one (``"\\ud800"``) though UTF-8 cannot carry it: every digest, HMAC and canonical
JSON the service makes of a string encodes it, and failed there. A bulk call answered 500 for all
its items when one held one; now that item alone is refused, and the others are answered.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.http.client import Api
from tests.http.test_errors import CLAIM, send

LONE = "\ud800"
FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}
RICH_CLAIM: dict[str, Any] = {
    **{name: value for name, value in CLAIM.items() if name != "fingerprint"},
    "source": "shop-eu",
    "reference": "SO-1001",
    "payload": {"customer": {"name": "Contoso"}, "lines": ["widget"]},
}
TOKEN = "<the claim's token>"
# (function, a valid body holding every string field the action reads)
BODIES: list[tuple[str, dict[str, Any]]] = [
    ("check_and_claim", {**RICH_CLAIM, "key": "ORDER-2002"}),
    ("lookup_claim", {"scope": "erp.create-order", "key": "ORDER-1001"}),
    (
        "record_result",
        {"claimToken": TOKEN, "outcome": "succeeded", "targetRecordId": "SO-1", "data": {"order": ["SO-1"]}},
    ),
    ("record_result", {"claimToken": TOKEN, "outcome": "failed", "error": "the ERP said no", "retryable": True}),
    ("release_claim", {"claimToken": TOKEN, "reason": "cancelled"}),
    ("renew_claim", {"claimToken": TOKEN}),
    ("review_claim", {"reviewer": "ops@contoso", "note": "checked", "data": {"seen": "yes"}}),
    (
        "report_conflict",
        {**RICH_CLAIM, "reason": "the ERP holds another amount", "details": {"erp": {"amount": "12"}}},
    ),
    ("resolve_conflict", {"decision": "dismiss", "reviewer": "ops@contoso", "note": "fine"}),
    ("register_flow", {**FLOW, "owner": "ops@contoso", "notes": "imports orders"}),
    (
        "set_scope",
        {
            "scope": "erp.create-order",
            "owner": "ops@contoso",
            "description": "orders",
            "keyPattern": "^ORDER-[0-9]+$",
            "fingerprintIgnore": ["/requestedAt"],
        },
    ),
]


def strings(body: Any, path: str = "") -> Iterator[tuple[str, list[str | int]]]:
    """Each string in ``body`` (a member's name as well as its value): its target, and the parts leading to it."""
    if isinstance(body, dict):
        for name, value in body.items():
            inner = f"{path}.{name}" if path else name
            yield from ((target, [name, *parts]) for target, parts in strings(value, inner))
    elif isinstance(body, list):
        for index, value in enumerate(body):
            yield from ((target, [index, *parts]) for target, parts in strings(value, f"{path}.{index}"))
    elif isinstance(body, str):
        yield path, []


def with_lone_surrogate(body: Any, parts: list[str | int]) -> Any:
    """``body`` with a lone surrogate in place of the string at ``parts``."""
    if not parts:
        return LONE
    copied = json.loads(json.dumps(body))
    copied[parts[0]] = with_lone_surrogate(copied[parts[0]], parts[1:])
    return copied


CASES = [
    pytest.param(name, with_lone_surrogate(body, parts), target, id=f"{name}:{target}")
    for name, body in BODIES
    for target, parts in strings(body)
    if body.get(parts[0]) != TOKEN
]


def claim_route(api: Api, name: str, body: Any, held: tuple[str, str]) -> Any:
    if name == "review_claim":
        return api.call(name, body, route={"claimId": held[0]})
    return send(api, name, body, held)


@pytest.mark.parametrize(("name", "body", "target"), CASES)
def test_a_lone_surrogate_in_any_string_is_a_400_naming_its_field(
    api: Api, held: tuple[str, str], name: str, body: Any, target: str
) -> None:
    reply = claim_route(api, name, body, held)

    assert (reply.status, reply.code) == (400, "invalid_request"), reply.body
    assert reply.targets == [target]
    assert "surrogate" in reply.body["error"]["message"]


@pytest.mark.parametrize("name", sorted({name for name, _ in BODIES}))
def test_a_lone_surrogate_in_a_members_name_is_a_400_naming_it(api: Api, held: tuple[str, str], name: str) -> None:
    body = {**dict(BODIES)[name], f"x{LONE}": 1}

    reply = claim_route(api, name, body, held)

    assert (reply.status, reply.code) == (400, "invalid_request"), reply.body
    assert reply.targets == ["x\\ud800"]


def reference_of(api: Api, claim_id: str) -> str:
    reference: str = api.call("get_claim", route={"claimId": claim_id}).body["reference"]
    return reference


def test_a_surrogate_pair_is_a_character_and_is_taken(api: Api) -> None:
    reply = api.call("check_and_claim", {**RICH_CLAIM, "key": "ORDER-3003", "reference": "SO-\ud83d\ude00"})

    assert reply.status == 200, reply.body
    assert reference_of(api, reply.body["claimId"]) == "SO-\U0001f600"


def test_text_that_only_looks_like_an_escaped_surrogate_is_taken(api: Api) -> None:
    reply = api.call("check_and_claim", {**RICH_CLAIM, "key": "ORDER-4004", "reference": "C:\\ud800"})

    assert reply.status == 200, reply.body
    assert reference_of(api, reply.body["claimId"]) == "C:\\ud800"


def bulk_items(count: int) -> list[dict[str, Any]]:
    return [{**RICH_CLAIM, "key": f"ORDER-9{n}", "reference": f"row-{n}"} for n in range(count)]


@pytest.mark.parametrize(("target", "parts"), list(strings(bulk_items(1)[0])))
def test_a_lone_surrogate_in_one_item_of_check_and_claim_many_refuses_that_item_alone(
    api: Api, target: str, parts: list[str | int]
) -> None:
    """Issue 31: the whole call was a 500 (UnicodeEncodeError in the call's digest); a single call was a 400."""
    items = bulk_items(3)
    items[1] = with_lone_surrogate(items[1], parts)

    reply = api.call("check_and_claim_many", {"items": items})

    assert reply.status == 200, reply.body
    entries = reply.body["value"]
    assert [entry.get("decision") for entry in entries] == ["proceed", None, "proceed"]
    assert entries[1]["error"]["code"] == "invalid_request"
    assert [detail["target"] for detail in entries[1]["error"]["details"]] == [target]


def test_a_lone_surrogate_in_one_item_of_record_results_refuses_that_item_alone(api: Api) -> None:
    claimed = api.call("check_and_claim_many", {"items": bulk_items(2)}).body["value"]
    results = [
        {"claimId": entry["claimId"], "claimToken": entry["claimToken"], "outcome": "succeeded", "targetRecordId": "R"}
        for entry in claimed
    ]
    results[0]["targetRecordId"] = f"R{LONE}"

    reply = api.call("record_results", {"items": results})

    assert reply.status == 200, reply.body
    first, second = reply.body["value"]
    assert [detail["target"] for detail in first["error"]["details"]] == ["targetRecordId"]
    assert second["status"] == "succeeded"


@pytest.mark.parametrize(
    "target",
    [
        "/api/claim-list?reference=%ED%A0%80",
        "/api/claim-list?source=%ED%A0%80",
        "/api/claims?attention=true&scope=%ED%A0%80",
        "/api/conflicts?scope=%ED%A0%80",
        "/api/claims/%ED%A0%80",
        "/api/claims/" + "a" * 24 + "/wait?ticket=%ED%A0%80",
        "/api/claim-list?cursor=%ED%A0%80",
    ],
)
def test_a_surrogate_sent_in_the_url_is_never_a_500(local_server: tuple[str, int], target: str) -> None:
    """Percent-encoded, a surrogate is not UTF-8 either: the URL's parts are read as text with it replaced."""
    connection = http.client.HTTPConnection(*local_server, timeout=10)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        body = json.loads(response.read())
    finally:
        connection.close()

    assert response.status < 500, body
