"""A reviewer settles an attempt in doubt, on both stores: without the run's claim token, fenced by the attempt.

Issue 22: a claim left ``in_progress`` past its lease, or ``unknown``, had no way off the attention
list but a run's claim token, which no reviewer has. Settled, it takes the outcome the reviewer found
in the target system, the history names the reviewer, and the claim is purged with its scope's retention.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from oncegate.domain.statuses import ClaimStatus, Decision, EventKind, Outcome
from oncegate.domain.transitions import Refusal, Settlement, settle
from oncegate.entrypoints import error_map
from oncegate.errors import InvalidRequest, StateConflict
from oncegate.models import ClaimResponse, ClaimView, ListClaimsQuery, ReviewClaimRequest
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim, history, record
from tests.support.records import T0
from tests.support.records import claim as claim_record

REVIEWER = "ana@contoso.com"
LEASE = 60
DAY = 24 * 3600


def settle_review(service: Gate, claim_id: str, outcome: str, attempt: int = 1, **fields: Any) -> ClaimView:
    request = ReviewClaimRequest.model_validate(
        {"reviewer": REVIEWER, "outcome": outcome, "attempt": attempt, **fields}
    )
    return service.review(claim_id, request)


def expired(service: Gate, clock: FakeClock, key: str = "ORDER-1") -> ClaimResponse:
    """A claim whose run took it and vanished: ``in_progress``, its lease over."""
    answer = claim(service, run=f"run-{key}", key=key, lease_seconds=LEASE)
    clock.advance(LEASE + 1)
    return answer


def attention(service: Gate) -> list[str]:
    page, _ = service.attention_page(ListClaimsQuery.model_validate({"attention": True}))
    return [item.claim.claim_id for item in page]


def test_an_expired_claim_is_settled_succeeded_without_its_token(service: Gate, clock: FakeClock) -> None:
    answer = expired(service, clock)
    assert attention(service) == [answer.claim_id]

    settled = settle_review(
        service, answer.claim_id, "succeeded", targetRecordId="SO-77", data={"order": 77}, note="found in the ERP"
    )

    assert (settled.status, settled.target_record_id, settled.data) == (ClaimStatus.SUCCEEDED, "SO-77", {"order": 77})
    assert (settled.reviewer, settled.lease_expires_at) == (REVIEWER, None)
    assert attention(service) == []
    entry = (service.get_claim(answer.claim_id).history or [])[-1]
    assert (entry.kind, entry.outcome, entry.attempt) == (EventKind.REVIEW, "succeeded", 1)
    assert entry.details == {
        "reviewer": REVIEWER,
        "previousStatus": "in_progress",
        "targetRecordId": "SO-77",
        "data": {"order": 77},
        "note": "found in the ERP",
    }
    assert REVIEWER in entry.recognised_by
    # The next run of the key is told what the reviewer found, and does nothing again.
    again = claim(service, run="run-later", key="ORDER-1")
    assert again.decision is Decision.DUPLICATE
    assert again.result is not None
    assert again.result.target_record_id == "SO-77"


def test_an_unknown_claim_settled_failed_lets_the_next_run_proceed(service: Gate) -> None:
    answer = claim(service)
    record(service, answer, "unknown", error="the ERP timed out")

    settled = settle_review(service, answer.claim_id, "failed")

    assert (settled.status, settled.retryable) == (ClaimStatus.FAILED, True)
    assert settled.error == f"Reviewer {REVIEWER} found that attempt 1 did nothing."
    assert attention(service) == []
    nxt = claim(service, run="run-2")
    assert (nxt.decision, nxt.attempt) == (Decision.PROCEED, 2)


def test_a_settled_claim_is_purged_after_its_retention(service: Gate, clock: FakeClock) -> None:
    answer = expired(service, clock)
    settle_review(service, answer.claim_id, "succeeded", targetRecordId="SO-1")

    clock.advance(91 * DAY)
    report = service.retention.purge()

    assert report.deleted_total == 1


def test_a_live_lease_is_refused_and_nothing_is_written(service: Gate) -> None:
    answer = claim(service, lease_seconds=LEASE)
    before = history(service, answer.claim_id)

    with pytest.raises(StateConflict) as refused:
        settle_review(service, answer.claim_id, "succeeded", targetRecordId="SO-1")

    assert (error_map.code(refused.value), refused.value.target) == ("claim_busy", "claimId")
    assert "holds the lease of attempt 1" in refused.value.message
    assert history(service, answer.claim_id) == before
    assert service.get_claim(answer.claim_id).status is ClaimStatus.IN_PROGRESS


def test_a_run_that_took_the_claim_over_since_is_never_overwritten(service: Gate, clock: FakeClock) -> None:
    answer = expired(service, clock)
    taken = claim(service, run="run-next", key="ORDER-1")
    assert (taken.decision, taken.attempt) == (Decision.RECONCILE, 2)
    # The new run's lease runs out as well: in doubt again, but not the attempt the reviewer looked at.
    clock.advance(3600)
    before = history(service, answer.claim_id)

    with pytest.raises(StateConflict) as refused:
        settle_review(service, answer.claim_id, "failed", attempt=1)

    assert (error_map.code(refused.value), refused.value.target) == ("stale_claim", "attempt")
    assert history(service, answer.claim_id) == before


def test_the_same_settlement_again_is_a_no_op(service: Gate, clock: FakeClock) -> None:
    answer = expired(service, clock)
    first = settle_review(service, answer.claim_id, "succeeded", targetRecordId="SO-1")

    again = settle_review(service, answer.claim_id, "succeeded", targetRecordId="SO-1")

    assert again == first
    assert [event for event, _ in history(service, answer.claim_id)].count(EventKind.REVIEW) == 1


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_an_attempt_that_ended_is_not_settled(service: Gate, outcome: str) -> None:
    answer = claim(service)
    record(service, answer, "succeeded", target_record_id="SO-1")

    with pytest.raises(StateConflict) as refused:
        settle_review(
            service, answer.claim_id, outcome, **({"targetRecordId": "SO-2"} if outcome == "succeeded" else {})
        )

    assert (error_map.code(refused.value), refused.value.target) == ("stale_claim", "outcome")


@pytest.mark.parametrize(
    ("fields", "target"),
    [
        ({"outcome": "succeeded", "targetRecordId": "SO-1"}, "attempt"),
        ({"attempt": 1}, "attempt"),
        ({"targetRecordId": "SO-1"}, "targetRecordId"),
        ({"outcome": "failed", "attempt": 1, "targetRecordId": "SO-1"}, "targetRecordId"),
        ({"outcome": "failed", "attempt": 1, "data": {"a": 1}}, "data"),
    ],
)
def test_the_settlement_fields_go_together(
    service: Gate, clock: FakeClock, fields: dict[str, Any], target: str
) -> None:
    answer = expired(service, clock)

    with pytest.raises(InvalidRequest) as refused:
        service.review(answer.claim_id, ReviewClaimRequest.model_validate({"reviewer": REVIEWER, **fields}))

    assert refused.value.target == target


def test_acknowledging_a_claim_in_doubt_says_to_settle_it(service: Gate, clock: FakeClock) -> None:
    answer = expired(service, clock)

    with pytest.raises(StateConflict) as refused:
        service.review(answer.claim_id, ReviewClaimRequest(reviewer=REVIEWER))

    assert error_map.code(refused.value) == "claim_not_blocked"
    assert "settled instead" in refused.value.message


# -- the decision alone ------------------------------------------------------------------------


def test_a_lease_that_ends_this_very_instant_is_in_doubt() -> None:
    lease = T0 + timedelta(seconds=LEASE)
    held = claim_record(lease_expires_at=lease)
    at_the_end = Settlement(REVIEWER, 1, Outcome.FAILED, now=lease)
    just_before = Settlement(REVIEWER, 1, Outcome.FAILED, now=lease - timedelta(microseconds=1))

    settled = settle(held, at_the_end)
    refused = settle(held, just_before)

    assert not isinstance(settled, Refusal)
    assert (settled.status, settled.retryable, settled.lease_expires_at) == (ClaimStatus.FAILED, True, None)
    assert isinstance(refused, Refusal)
    assert (refused.busy, refused.target) == (True, "claimId")
