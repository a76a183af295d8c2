"""Every action over HTTP as a flow uses it: camelCase JSON, RFC 3339 UTC times, lists with nextLink."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from oncegate import __version__
from tests.conftest import FakeClock
from tests.http.client import Api, Reply, succeed

FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}
ORDER = {"customer": "C-7", "amount": 10.0}


def claim_body(key: str = "ORDER-1001", run: str = "run-1", **fields: Any) -> dict[str, Any]:
    return {"scope": "erp.create-order", "key": key, "runId": run, "flow": FLOW, "payload": ORDER, **fields}


def ok(reply: Reply) -> dict[str, Any]:
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def utc(text: str) -> datetime:
    assert text.endswith("Z"), f"{text} is not RFC 3339 UTC"
    return datetime.fromisoformat(text)


def test_claim_record_and_duplicate_round_trip(api: Api, clock: FakeClock) -> None:
    claimed_at = clock.now
    first = ok(api.call("check_and_claim", claim_body()))
    clock.advance(5)
    recorded = ok(succeed(api, first, targetRecordId="SO-1", data={"n": 1}))
    duplicate = ok(api.call("check_and_claim", claim_body(run="run-2", payload={"amount": 10, "customer": "C-7"})))

    assert (first["decision"], first["status"], first["attempt"]) == ("proceed", "in_progress", 1)
    assert first["warnings"] == []
    assert utc(first["leaseExpiresAt"]) == claimed_at + timedelta(seconds=300)
    assert "result" not in first
    assert (recorded["status"], recorded["targetRecordId"], recorded["data"]) == ("succeeded", "SO-1", {"n": 1})
    assert "claimToken" not in recorded
    assert duplicate["decision"] == "duplicate"
    assert "claimToken" not in duplicate
    result = duplicate["result"]
    assert (result["targetRecordId"], result["data"]) == ("SO-1", {"n": 1})
    assert (result["runId"], result["flow"]) == ("run-1", FLOW)
    assert utc(result["completedAt"]) == clock.now


def test_get_and_lookup_return_the_claim_with_its_history(api: Api, clock: FakeClock) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    clock.advance(1)
    ok(api.call("check_and_claim", claim_body(run="run-2")))

    got = ok(api.call("get_claim", route={"claimId": first["claimId"]}))
    looked_up = ok(api.call("lookup_claim", {"scope": "ERP.Create-Order", "key": " ORDER-1001 "}))

    assert looked_up == got
    assert (got["claimId"], got["scope"], got["runId"]) == (first["claimId"], "erp.create-order", "run-1")
    assert [(entry["event"], entry["outcome"], entry["runId"]) for entry in got["history"]] == [
        ("claim", "proceed", "run-1"),
        ("claim", "in_progress", "run-2"),
    ]
    assert all(entry["recognisedBy"] and utc(entry["at"]) for entry in got["history"])


def test_heartbeat_and_release(api: Api, clock: FakeClock) -> None:
    first = ok(api.call("check_and_claim", claim_body(leaseSeconds=60)))
    route = {"claimId": first["claimId"]}
    clock.advance(30)

    renewed = ok(api.call("renew_claim", {"claimToken": first["claimToken"], "leaseSeconds": 600}, route=route))
    released = ok(
        api.call("release_claim", {"claimToken": first["claimToken"], "reason": "order cancelled"}, route=route)
    )
    again = ok(api.call("check_and_claim", claim_body(run="run-2")))

    assert utc(renewed["leaseExpiresAt"]) == clock.now + timedelta(seconds=600)
    assert (released["status"], "leaseExpiresAt" in released) == ("released", False)
    assert (again["decision"], again["attempt"]) == ("proceed", 2)


def test_conflicts_are_reported_fetched_and_resolved(api: Api) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    ok(succeed(api, first))
    changed = ok(api.call("check_and_claim", claim_body(run="run-2", payload={**ORDER, "amount": 11.0})))
    conflict_id = changed["conflictId"]

    reported = ok(
        api.call(
            "report_conflict",
            {
                **claim_body(run="run-3", payload={**ORDER, "amount": 11.0}),
                "reason": "ERP differs",
                "details": {"erp": 11},
            },
        )
    )
    fetched = ok(api.call("get_conflict", route={"conflictId": conflict_id}))
    resolved = ok(
        api.call(
            "resolve_conflict",
            {"decision": "keep_original", "reviewer": "ops@contoso"},
            route={"conflictId": conflict_id},
        )
    )
    after = ok(api.call("check_and_claim", claim_body(run="run-4", payload={**ORDER, "amount": 11.0})))

    assert changed["decision"] == "conflict"
    assert reported["conflictId"] == conflict_id
    assert (fetched["status"], fetched["claimId"], fetched["source"]) == ("open", first["claimId"], "claim")
    assert (resolved["status"], resolved["resolution"]["decision"]) == ("resolved", "keep_original")
    assert after["decision"] == "duplicate"


def open_conflict(api: Api, key: str, scope: str = "erp.create-order") -> str:
    first = ok(api.call("check_and_claim", claim_body(key=key, scope=scope, payload=None, fingerprint="v1")))
    ok(succeed(api, first))
    changed = ok(
        api.call("check_and_claim", claim_body(key=key, scope=scope, run="run-2", payload=None, fingerprint="v2"))
    )
    conflict_id: str = changed["conflictId"]
    return conflict_id


def test_the_conflict_list_pages_through_next_link_giving_each_conflict_once(api: Api, clock: FakeClock) -> None:
    expected = []
    for index in range(5):
        expected.append(open_conflict(api, f"ORDER-{index}"))
        if index != 2:  # two conflicts share an instant: the cursor must neither skip nor repeat one
            clock.advance(1)
    open_conflict(api, "MAIL-1", scope="mail.send-invoice")

    pages = [api.call("list_conflicts", params={"top": "1", "scope": "erp.create-order"})]
    while "nextLink" in ok(pages[-1]):
        assert len(pages) <= len(expected), "nextLink never ends"
        pages.append(api.follow(pages[-1].body["nextLink"]))
    listed = [conflict["conflictId"] for page in pages for conflict in ok(page)["value"]]

    assert sorted(listed) == sorted(expected)
    assert len(set(listed)) == len(listed)
    assert [len(page.body["value"]) for page in pages] == [1] * len(expected)


def test_an_empty_conflict_list_has_no_next_link(api: Api) -> None:
    assert ok(api.call("list_conflicts")) == {"value": []}


def test_health_names_the_store_and_the_version(api: Api) -> None:
    assert ok(api.call("health")) == {"status": "ok", "store": "sqlite", "version": __version__}


def test_a_long_history_pages_from_get_claim_and_lookup_through_their_history_link(api: Api, clock: FakeClock) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    ok(succeed(api, first, targetRecordId="SO-1"))
    for index in range(55):
        clock.advance(1)
        flow = {"name": f"Flow {index}", "environment": "Default-contoso"}
        ok(api.call("check_and_claim", claim_body(run=f"run-{index}", flow=flow)))
    for _ in range(3):
        ok(api.call("check_and_claim", claim_body(run="run-again")))
    claim_id = first["claimId"]

    got = ok(api.call("get_claim", route={"claimId": claim_id}))
    looked_up = ok(api.call("lookup_claim", {"scope": "erp.create-order", "key": "ORDER-1001"}))
    pages = [ok(api.follow(got["historyNextLink"]))]
    while "nextLink" in pages[-1]:
        pages.append(ok(api.follow(pages[-1]["nextLink"])))
    history = [*got["history"], *(entry for page in pages for entry in page["value"])]

    assert len(got["history"]) == len(looked_up["history"]) == 50
    assert ok(api.follow(looked_up["historyNextLink"])) == pages[0]
    assert [entry["outcome"] for entry in history] == ["proceed", "succeeded", *["duplicate"] * 56]
    assert history[-1]["count"] == 3
    assert utc(history[-1]["firstAt"]) == utc(history[-1]["at"]) <= utc(history[-1]["lastAt"])
    assert "count" not in history[0]


def test_a_history_cursor_of_one_claim_is_refused_by_another(api: Api) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    other = ok(api.call("check_and_claim", claim_body(key="ORDER-2")))
    ok(api.call("check_and_claim", claim_body(run="run-2")))
    page = ok(api.call("list_claim_history", route={"claimId": first["claimId"]}, params={"top": "1"}))
    cursor = dict(parse_qsl(urlsplit(page["nextLink"]).query))["cursor"]

    refused = api.call("list_claim_history", route={"claimId": other["claimId"]}, params={"cursor": cursor})

    assert (refused.status, refused.code, refused.targets) == (400, "invalid_request", ["cursor"])
    assert api.call("list_claim_history", route={"claimId": "a" * 52}).status == 404
