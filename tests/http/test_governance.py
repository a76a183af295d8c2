"""Governance over HTTP and on the timers: the claims needing attention, reviews, the purge and the watch."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from azure.functions.timer import TimerRequest

from oncegate.entrypoints import timers
from tests.conftest import FakeClock
from tests.http.client import FUNCTIONS, Api, succeed
from tests.http.test_actions import claim_body, ok, utc

DAY = 24 * 3600
TIMERS_LOGGER = "oncegate.entrypoints.timers"


def failed_for_good(api: Api, key: str, **fields: Any) -> dict[str, Any]:
    answer = ok(api.call("check_and_claim", claim_body(key=key, run=f"run-{key}", **fields)))
    result = {"claimToken": answer["claimToken"], "outcome": "failed", "retryable": False, "error": "ERP said no"}
    ok(api.call("record_result", result, route={"claimId": answer["claimId"]}))
    return answer


def attention(api: Api, **params: str) -> Any:
    return api.call("list_claims_needing_attention", params={"attention": "true", **params})


def run_timer(name: str) -> None:
    """Call the timer function as the host does on schedule."""
    FUNCTIONS[name].get_user_function()(TimerRequest(past_due=False))


def timer_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == TIMERS_LOGGER]


# -- the list ---------------------------------------------------------------------------------------


def test_the_claims_needing_attention_come_oldest_first_with_why_and_since(api: Api, clock: FakeClock) -> None:
    held = ok(api.call("check_and_claim", claim_body(key="held", leaseSeconds=15)))
    clock.advance(1)
    blocked = failed_for_good(api, "blocked")
    ok(succeed(api, ok(api.call("check_and_claim", claim_body(key="done", run="run-done")))))
    clock.advance(30)

    listed = ok(attention(api))

    assert "nextLink" not in listed
    assert [(item["why"], item["claim"]["claimId"]) for item in listed["value"]] == [
        ("failed_unreviewed", blocked["claimId"]),
        ("lease_expired", held["claimId"]),
    ]
    first, second = listed["value"]
    assert utc(second["since"]) == utc(held["leaseExpiresAt"])
    assert (first["claim"]["status"], first["claim"]["retryable"]) == ("failed", False)
    assert "history" not in first["claim"]


@pytest.mark.parametrize("params", [{}, {"attention": "false"}, {"attention": "maybe"}], ids=["absent", "false", "bad"])
def test_listing_claims_without_attention_true_is_a_400_naming_attention(api: Api, params: dict[str, str]) -> None:
    reply = api.call("list_claims_needing_attention", params=params)

    assert (reply.status, reply.code) == (400, "invalid_request")
    assert reply.targets == ["attention"]


def test_the_list_pages_by_next_link(api: Api, clock: FakeClock) -> None:
    ids = []
    for index in range(3):
        ids.append(failed_for_good(api, f"ORDER-{index}")["claimId"])
        clock.advance(1)

    pages = [ok(attention(api, top="1"))]
    while "nextLink" in pages[-1]:
        pages.append(ok(api.follow(pages[-1]["nextLink"])))

    assert [[item["claim"]["claimId"] for item in page["value"]] for page in pages] == [[ids[0]], [ids[1]], [ids[2]]]


# -- reviews --------------------------------------------------------------------------------------


def test_a_reviewed_failure_leaves_the_list_and_stays_blocked(api: Api) -> None:
    blocked = failed_for_good(api, "blocked")

    reviewed = ok(
        api.call(
            "review_claim", {"reviewer": "ana@contoso.com", "note": "closed"}, route={"claimId": blocked["claimId"]}
        )
    )

    assert (reviewed["status"], reviewed["reviewer"]) == ("failed", "ana@contoso.com")
    assert ok(attention(api))["value"] == []
    again = ok(api.call("check_and_claim", claim_body(key="blocked", run="run-again")))
    assert again["decision"] == "blocked"


@pytest.mark.parametrize(
    ("state", "body", "status", "code", "target"),
    [
        ("succeeded", {"reviewer": "ana@contoso.com"}, 409, "claim_not_blocked", "claimId"),
        ("blocked", {}, 400, "invalid_request", "reviewer"),
        ("blocked", {"reviewer": "ana@contoso.com", "decision": "ok"}, 400, "invalid_request", "decision"),
        ("missing", {"reviewer": "ana@contoso.com"}, 404, "not_found", "claimId"),
        (
            "blocked",
            {"reviewer": "ana@contoso.com", "outcome": "unknown", "attempt": 1},
            400,
            "invalid_request",
            "outcome",
        ),
        ("blocked", {"reviewer": "ana@contoso.com", "outcome": "failed"}, 400, "invalid_request", "attempt"),
        ("blocked", {"reviewer": "ana@contoso.com", "outcome": "failed", "attempt": 1}, 409, "stale_claim", "outcome"),
    ],
)
def test_a_review_is_refused_when_it_does_not_fit(
    api: Api, state: str, body: dict[str, Any], status: int, code: str, target: str
) -> None:
    if state == "succeeded":
        claim_id = ok(succeed(api, ok(api.call("check_and_claim", claim_body()))))["claimId"]
    elif state == "blocked":
        claim_id = failed_for_good(api, "blocked")["claimId"]
    else:
        claim_id = "a" * 52

    reply = api.call("review_claim", body, route={"claimId": claim_id})

    assert (reply.status, reply.code) == (status, code)
    assert target in reply.targets


def test_a_reviewer_settles_an_expired_claim_over_http_and_a_live_lease_is_refused(api: Api, clock: FakeClock) -> None:
    """Issue 22: an attempt in doubt is settled with the outcome found in the target system, without a token."""
    held = ok(api.call("check_and_claim", claim_body(key="held", leaseSeconds=60)))
    route = {"claimId": held["claimId"]}
    settlement = {"reviewer": "ana@contoso.com", "outcome": "succeeded", "attempt": 1, "targetRecordId": "SO-9"}

    live = api.call("review_claim", settlement, route=route)
    clock.advance(61)
    settled = ok(api.call("review_claim", settlement, route=route))

    assert (live.status, live.code, live.targets) == (409, "claim_busy", ["claimId"])
    assert (settled["status"], settled["targetRecordId"], settled["reviewer"]) == (
        "succeeded",
        "SO-9",
        "ana@contoso.com",
    )
    entry = ok(api.call("get_claim", route=route))["history"][-1]
    assert (entry["event"], entry["outcome"], entry["details"]["reviewer"]) == (
        "review",
        "succeeded",
        "ana@contoso.com",
    )
    assert ok(attention(api))["value"] == []
    again = ok(api.call("check_and_claim", claim_body(key="held", run="run-again")))
    assert (again["decision"], again["result"]["targetRecordId"]) == ("duplicate", "SO-9")


# -- the timers ----------------------------------------------------------------------------------


def test_the_purge_timer_deletes_what_retention_allows_and_logs_a_summary(
    api: Api, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    done = ok(succeed(api, ok(api.call("check_and_claim", claim_body()))))
    clock.advance(91 * DAY)

    with caplog.at_level(logging.INFO, logger=TIMERS_LOGGER):
        run_timer("purge_finished_claims")

    # Its tombstone stays (issue 26): the claim shows as purged, without its history.
    purged = ok(api.call("get_claim", route={"claimId": done["claimId"]}))
    assert (purged["status"], purged["purgedAt"], purged["history"]) == (
        "succeeded",
        clock().isoformat().replace("+00:00", "Z"),
        [],
    )
    (summary,) = timer_records(caplog)
    assert summary.levelno == logging.INFO
    assert "1 page, 1 claim examined, deleted 1 (erp.create-order succeeded 1)" in summary.getMessage()


def test_the_purge_timer_warns_when_it_stopped_early(
    api: Api, clock: FakeClock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    for index in range(2):
        ok(succeed(api, ok(api.call("check_and_claim", claim_body(key=f"ORDER-{index}", run=f"run-{index}")))))
    clock.advance(91 * DAY)
    monkeypatch.setattr(timers, "PURGE_PAGE_SIZE", 1)
    monkeypatch.setattr(timers, "PURGE_TIME_BUDGET", timedelta(0))

    with caplog.at_level(logging.INFO, logger=TIMERS_LOGGER):
        run_timer("purge_finished_claims")

    levels = [record.levelno for record in timer_records(caplog)]
    assert levels == [logging.INFO, logging.WARNING]
    warning = timer_records(caplog)[1].getMessage()
    assert "stopped early after 1 page (time budget" in warning
    assert "oncegate purge --resume " in warning


def test_the_attention_timer_logs_one_warning_with_the_count_per_scope(
    api: Api, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    failed_for_good(api, "a")
    failed_for_good(api, "b")
    ok(api.call("check_and_claim", claim_body(key="held", scope="mail.send-invoice", leaseSeconds=15)))
    clock.advance(16)

    with caplog.at_level(logging.INFO, logger=TIMERS_LOGGER):
        run_timer("watch_claims_needing_attention")

    (line,) = timer_records(caplog)
    assert line.levelno == logging.WARNING
    assert line.getMessage().startswith(
        "3 claims need attention: erp.create-order 2 (failed_unreviewed 2); mail.send-invoice 1 (lease_expired 1); "
    )


def test_the_attention_timer_says_nothing_when_all_is_well(
    api: Api, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    ok(succeed(api, ok(api.call("check_and_claim", claim_body()))))
    ok(api.call("check_and_claim", claim_body(key="live", run="run-live")))

    with caplog.at_level(logging.DEBUG, logger=TIMERS_LOGGER):
        run_timer("watch_claims_needing_attention")

    assert timer_records(caplog) == []
