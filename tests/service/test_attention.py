"""Claims needing attention on both stores, and reviewing a failure that is not retryable."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import AttentionReason, ClaimStatus, Decision, EventKind
from oncegate.entrypoints import error_map
from oncegate.errors import InvalidRequest, StateConflict
from oncegate.models import ClaimView, ListClaimsQuery, ReviewClaimRequest
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, history, record, release, resolve, succeeded

OTHER = "mail.send-invoice"
MINUTE = 60


def listed(service: Gate, **query: object) -> list[tuple[str, AttentionReason]]:
    """Every claim needing attention as (claim id, why), following the cursor to the end."""
    items: list[tuple[str, AttentionReason]] = []
    cursor = None
    while True:
        page, cursor = service.attention_page(
            ListClaimsQuery.model_validate({"attention": True, **query, "cursor": cursor})
        )
        items += [(item.claim.claim_id, item.why) for item in page]
        if cursor is None:
            return items


def review(
    service: Gate, claim_id: str, reviewer: str | None = "ana@contoso.com", note: str | None = None
) -> ClaimView:
    return service.review(claim_id, ReviewClaimRequest(reviewer=reviewer, note=note))


def failed(service: Gate, key: str, *, retryable: bool, scope: str = SCOPE) -> str:
    answer = claim(service, run=f"run-{key}", key=key, scope=scope)
    record(service, answer, "failed", error="ERP said no", retryable=retryable)
    return answer.claim_id


def recorded_at(service: Gate, claim_id: str) -> datetime:
    """When the claim's outcome was recorded: its last history line's time."""
    return (service.get_claim(claim_id).history or [])[-1].at


def test_the_list_holds_what_needs_a_person_oldest_first(service: Gate, clock: FakeClock) -> None:
    expired = claim(service, run="run-held", key="held", lease_seconds=60)
    clock.advance(10)
    unknown = record(service, claim(service, run="run-u", key="unknown"), "unknown", error="timed out")
    clock.advance(10)
    blocked = failed(service, "blocked", retryable=False)
    # What needs nobody: a retry is coming, it is done, or a reviewer looked, or it is still young.
    failed(service, "retryable", retryable=True)
    succeeded(service, key="done", run="run-done")
    release(service, claim(service, run="run-rel", key="released"))
    review(service, failed(service, "reviewed", retryable=False))
    clock.advance(20 * MINUTE - 20 - MINUTE)
    record(service, claim(service, run="run-young", key="young-unknown"), "unknown")
    clock.advance(MINUTE)
    claim(service, run="run-live", key="live", lease_seconds=3600)

    page, cursor = service.attention_page(ListClaimsQuery(attention=True))

    assert cursor is None
    assert [(item.claim.claim_id, item.why) for item in page] == [
        (unknown.claim_id, AttentionReason.UNKNOWN),
        (blocked, AttentionReason.FAILED_UNREVIEWED),
        (expired.claim_id, AttentionReason.LEASE_EXPIRED),
    ]
    assert [item.since for item in page] == [
        recorded_at(service, unknown.claim_id),
        recorded_at(service, blocked),
        expired.lease_expires_at,
    ]
    assert page[2].claim.status is ClaimStatus.IN_PROGRESS
    assert page[2].claim.history is None


def test_an_unknown_outcome_needs_attention_after_the_threshold(
    open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    service = Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, unknown_alert=timedelta(minutes=5))
    held = claim(service)
    clock.advance(1)
    answer = record(service, held, "unknown")

    clock.advance(5 * MINUTE - 1)
    before = listed(service)
    clock.advance(1)

    assert before == []
    assert listed(service) == [(answer.claim_id, AttentionReason.UNKNOWN)]


def test_pages_follow_the_cursor_and_a_scope_narrows_the_list(service: Gate, clock: FakeClock) -> None:
    ids = []
    for index in range(5):
        ids.append(failed(service, f"ORDER-{index}", retryable=False, scope=OTHER if index == 2 else SCOPE))
        clock.advance(1)

    pages = []
    cursor = None
    while True:
        page, cursor = service.attention_page(ListClaimsQuery(attention=True, top=2, cursor=cursor))
        pages.append([item.claim.claim_id for item in page])
        if cursor is None:
            break

    assert pages == [ids[0:2], ids[2:4], ids[4:]]
    assert [claim_id for claim_id, _ in listed(service, scope=SCOPE.upper())] == [ids[0], ids[1], ids[3], ids[4]]


def test_counts_per_scope_and_why(service: Gate, clock: FakeClock) -> None:
    assert service.attention.counts() == {}
    failed(service, "a", retryable=False)
    failed(service, "b", retryable=False, scope=OTHER)
    claim(service, run="run-held", key="held", lease_seconds=15)
    clock.advance(16)

    assert service.attention.counts() == {
        SCOPE: Counter({AttentionReason.FAILED_UNREVIEWED: 1, AttentionReason.LEASE_EXPIRED: 1}),
        OTHER: Counter({AttentionReason.FAILED_UNREVIEWED: 1}),
    }


def test_a_review_takes_the_failure_off_the_list_and_the_key_stays_blocked(service: Gate) -> None:
    claim_id = failed(service, "blocked", retryable=False)

    reviewed = review(service, claim_id, note="The customer is closed; nothing to redo.")
    again = review(service, claim_id)

    assert reviewed.reviewer == again.reviewer == "ana@contoso.com"
    assert listed(service) == []
    assert claim(service, run="run-2", key="blocked").decision is Decision.BLOCKED
    events = service.get_claim(claim_id).history or []
    reviews = [entry for entry in events if entry.kind is EventKind.REVIEW]
    assert len(reviews) == 1
    assert (reviews[0].outcome, reviews[0].details) == (
        "acknowledged",
        {"note": "The customer is closed; nothing to redo."},
    )
    assert "ana@contoso.com" in reviews[0].recognised_by


def test_another_reviewer_is_recorded_too(service: Gate) -> None:
    claim_id = failed(service, "blocked", retryable=False)
    review(service, claim_id)

    assert review(service, claim_id, reviewer="kim@contoso.com").reviewer == "kim@contoso.com"
    assert [event for event, _ in history(service, claim_id)].count(EventKind.REVIEW) == 2


@pytest.mark.parametrize("state", ["succeeded", "retryable", "in_progress"])
def test_only_a_failure_that_is_not_retryable_is_reviewed(service: Gate, state: str) -> None:
    if state == "succeeded":
        claim_id = succeeded(service).claim_id
    elif state == "retryable":
        claim_id = failed(service, "retry-me", retryable=True)
    else:
        claim_id = claim(service).claim_id
    before = history(service, claim_id)

    with pytest.raises(StateConflict) as refused:
        review(service, claim_id)

    assert error_map.code(refused.value) == "claim_not_blocked"
    assert history(service, claim_id) == before


def test_a_review_needs_a_reviewer(service: Gate) -> None:
    claim_id = failed(service, "blocked", retryable=False)

    with pytest.raises(InvalidRequest) as refused:
        review(service, claim_id, reviewer=None)

    assert refused.value.target == "reviewer"


def test_a_new_failure_for_good_waits_for_a_review_of_its_own(service: Gate) -> None:
    # The reviewer of a conflict saw the earlier version: the failure of the new one is not reviewed yet.
    first = succeeded(service)
    changed = claim(service, run="run-2", fingerprint="v2")
    resolve(service, changed.conflict_id, "accept_new")
    retried = claim(service, run="run-3", fingerprint="v2")
    assert service.get_claim(first.claim_id).reviewer == "ops@contoso"

    recorded = record(service, retried, "failed", error="ERP refused v2", retryable=False)

    assert recorded.reviewer is None
    assert listed(service) == [(first.claim_id, AttentionReason.FAILED_UNREVIEWED)]
