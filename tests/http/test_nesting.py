"""Stored JSON values nested past the limit are refused at the edge: never stored to make every answer showing them
a 500.

Result data and conflict details are stored as sent and shown by every view of their claim or conflict, lists
included. The JSON writer of an answer stops at 255 levels, and a view puts its own levels around the value: a
value the request's model took could be stored and then not written in any answer, List conflicts' for every
caller included. So they nest at most ``MAX_NESTING`` deep (docs/contract.md, *Limits*), a 400 naming the field
beyond, with nothing stored.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from oncegate.domain.limits import MAX_NESTING, json_depth
from tests.http.client import Api
from tests.http.test_actions import claim_body, ok
from tests.http.test_errors import CONFLICT

# The deepest value the request's model took before the limit, and no answer could write once stored: Report conflict
# and Record result stored it and answered 500, and so did Get claim, and List conflicts for every caller, from then on.
DEEPEST_TAKEN = 254


def nested(depth: int) -> Any:
    """An object ``depth`` levels deep: {"a": {"a": ... 1}}."""
    return json.loads('{"a":' * depth + "1" + "}" * depth)


def test_json_depth_counts_objects_and_arrays() -> None:
    assert [json_depth(value) for value in (1, "x", None, [], {}, [1], {"a": [1, {"b": []}]})] == [0, 0, 0, 1, 1, 1, 4]
    assert json_depth(nested(900)) == 900  # iterative: deeper than any recursion would go


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, DEEPEST_TAKEN])
def test_conflict_details_nested_too_deep_are_a_400_and_nothing_is_stored(api: Api, depth: int) -> None:
    ok(api.call("check_and_claim", claim_body(payload=None, fingerprint="v1")))

    reply = api.call("report_conflict", {**CONFLICT, "runId": "run-9", "details": nested(depth)})

    assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", ["details"]), reply.body
    assert ok(api.call("list_conflicts"))["value"] == []


def test_conflict_details_at_the_limit_are_stored_and_shown(api: Api) -> None:
    ok(api.call("check_and_claim", claim_body(payload=None, fingerprint="v1")))
    details = nested(MAX_NESTING)

    conflict = ok(api.call("report_conflict", {**CONFLICT, "runId": "run-9", "details": details}))

    assert conflict["details"] == details
    assert ok(api.call("get_conflict", route={"conflictId": conflict["conflictId"]}))["details"] == details
    assert [shown["details"] for shown in ok(api.call("list_conflicts"))["value"]] == [details]


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, DEEPEST_TAKEN])
def test_result_data_nested_too_deep_is_refused_alone_in_a_bulk_call(api: Api, depth: int) -> None:
    claims = [ok(api.call("check_and_claim", claim_body(key=f"ORDER-{n}", reference=f"SO-{n}"))) for n in (1, 2)]
    items = [
        {"claimId": answer["claimId"], "claimToken": answer["claimToken"], "outcome": "succeeded", "data": data}
        for answer, data in zip(claims, [{"id": 1}, nested(depth)], strict=True)
    ]

    first, second = ok(api.call("record_results", {"items": items}))["value"]

    assert first["status"] == "succeeded"
    assert (second["error"]["code"], [detail["target"] for detail in second["error"]["details"]]) == (
        "invalid_request",
        ["data"],
    )
    assert ok(api.call("get_claim", route={"claimId": claims[1]["claimId"]}))["status"] == "in_progress"


def test_result_data_nested_too_deep_is_a_400_and_the_claim_is_unchanged(api: Api) -> None:
    answer = ok(api.call("check_and_claim", claim_body()))
    body = {"claimToken": answer["claimToken"], "outcome": "succeeded", "data": nested(MAX_NESTING + 1)}

    reply = api.call("record_result", body, route={"claimId": answer["claimId"]})

    assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", ["data"]), reply.body
    assert ok(api.call("get_claim", route={"claimId": answer["claimId"]}))["status"] == "in_progress"


def test_result_data_at_the_limit_is_stored_and_shown_in_lists(api: Api) -> None:
    answer = ok(api.call("check_and_claim", claim_body(reference="SO-1")))
    data = nested(MAX_NESTING)
    item = {"claimId": answer["claimId"], "claimToken": answer["claimToken"], "outcome": "succeeded", "data": data}

    (recorded,) = ok(api.call("record_results", {"items": [item]}))["value"]

    assert recorded["data"] == data
    assert ok(api.call("get_claim", route={"claimId": answer["claimId"]}))["data"] == data
    assert [claim["data"] for claim in ok(api.call("list_claims", params={"reference": "SO-1"}))["value"]] == [data]


@pytest.mark.parametrize("field", ["payload", "data"])
def test_a_value_nested_past_what_the_service_reads_is_a_400_naming_its_field(api: Api, field: str) -> None:
    answer = ok(api.call("check_and_claim", claim_body()))
    deep = json.loads("[" * 300 + "]" * 300)  # within what the JSON decoder reads, past the models' validator
    if field == "payload":
        reply = api.call("check_and_claim", claim_body(key="ORDER-2", payload=deep))
    else:
        body = {"claimToken": answer["claimToken"], "outcome": "succeeded", "data": deep}
        reply = api.call("record_result", body, route={"claimId": answer["claimId"]})

    assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", [field]), reply.body
    assert "deeper than this service reads" in reply.body["error"]["message"]
    assert len(json.dumps(reply.body)) < 1000  # not the path down, level by level
