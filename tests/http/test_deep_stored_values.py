"""A result's data or a conflict's details stored nested deeper than the limit is shown as its JSON text, never a 500.

Releases before 0.5.0 stored such values as sent (the 400 of ``test_nesting.py`` came later), and every answer
showing one failed: Get claim, a duplicate's result, Lookup claim, List claims, Get conflict, and List conflicts
for every caller. A read now shows the value as its compact JSON text (a string), which every answer can write:
nothing stored is lost, and a person or a flow can still read it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from oncegate.domain.limits import MAX_NESTING
from oncegate.domain.statuses import EventKind
from oncegate.stores.port import ClaimStore
from tests.gate import Gate
from tests.http.client import Api
from tests.http.test_actions import claim_body, ok
from tests.http.test_nesting import DEEPEST_TAKEN, nested


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Each store reads back what an earlier release wrote to it."""
    kind: str = request.param
    return kind


def text_of(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def written_by_an_earlier_release(store: ClaimStore, claim_id: str, conflict_id: str, deep: Any) -> None:
    """The claim's data, its result's history line and the conflict's details as an earlier release kept them."""
    claim = store.get_claim(claim_id)
    (result,) = [event for event in store.list_events(claim_id) if event.kind is EventKind.RESULT]
    line = replace(result, event_id=f"{result.event_id}-deep", details={**result.details, "data": deep})
    store.update_claim(replace(claim, data=deep), line)
    store.update_conflict(replace(store.get_conflict(conflict_id), details=deep))


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, DEEPEST_TAKEN])
def test_a_value_stored_nested_too_deep_is_shown_as_its_json_text_by_every_read(
    api: Api, wired: Gate, depth: int
) -> None:
    answer = ok(api.call("check_and_claim", claim_body(reference="SO-1")))
    result = {"claimToken": answer["claimToken"], "outcome": "succeeded", "targetRecordId": "SO-1", "data": {"a": 1}}
    ok(api.call("record_result", result, route={"claimId": answer["claimId"]}))
    changed = claim_body(run="run-2", payload={"amount": 2})
    conflict = ok(api.call("report_conflict", {**changed, "reason": "another amount", "details": {"a": 1}}))
    deep = nested(depth)
    written_by_an_earlier_release(wired.store, answer["claimId"], conflict["conflictId"], deep)
    shown = text_of(deep)

    claim = ok(api.call("get_claim", route={"claimId": answer["claimId"]}))
    again = ok(api.call("check_and_claim", claim_body(run="run-3")))
    looked_up = ok(api.call("lookup_claim", {"scope": "erp.create-order", "key": "ORDER-1001"}))
    listed = ok(api.call("list_claims", params={"reference": "SO-1"}))["value"]

    assert claim["data"] == shown
    assert [entry["details"]["data"] for entry in claim["history"] if entry["event"] == "result"] == [{"a": 1}, shown]
    assert (again["decision"], again["result"]["data"]) == ("duplicate", shown)
    assert looked_up["data"] == shown
    assert [found["data"] for found in listed] == [shown]
    assert ok(api.call("get_conflict", route={"conflictId": conflict["conflictId"]}))["details"] == shown
    assert [shown_conflict["details"] for shown_conflict in ok(api.call("list_conflicts"))["value"]] == [shown]


def test_a_value_at_the_limit_is_shown_as_it_is(api: Api, wired: Gate) -> None:
    answer = ok(api.call("check_and_claim", claim_body()))
    result = {"claimToken": answer["claimToken"], "outcome": "succeeded", "data": {"a": 1}}
    ok(api.call("record_result", result, route={"claimId": answer["claimId"]}))
    conflict = ok(api.call("report_conflict", {**claim_body(run="run-2", payload={"amount": 2}), "reason": "amount"}))
    written_by_an_earlier_release(wired.store, answer["claimId"], conflict["conflictId"], nested(MAX_NESTING))

    assert ok(api.call("get_claim", route={"claimId": answer["claimId"]}))["data"] == nested(MAX_NESTING)
    assert ok(api.call("get_conflict", route={"conflictId": conflict["conflictId"]}))["details"] == nested(MAX_NESTING)
