"""The claim's changes after Check and claim, as pure functions (oncegate.domain.transitions, issue 23)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from oncegate.domain.records import Claim, EarlierAttempt
from oncegate.domain.statuses import ClaimStatus, Outcome
from oncegate.domain.transitions import RELEASED_IN_DOUBT, Result, extended, recorded, released
from oncegate.errors import StateConflict

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
HELD = Claim(
    claim_id="c",
    scope="erp",
    status=ClaimStatus.IN_PROGRESS,
    attempt=2,
    fingerprint="f",
    grant_id="g",
    run_id="run-1",
    flow=None,
    first_received_at=NOW,
    last_attempt_at=NOW,
    updated_at=NOW,
    lease_expires_at=NOW + timedelta(minutes=5),
    reviewer="ana@contoso.com",
)
LATER = NOW + timedelta(seconds=30)


def test_a_result_ends_the_attempt_and_the_same_result_again_changes_nothing() -> None:
    done = recorded(HELD, Result(Outcome.SUCCEEDED, target_record_id="ERP-1", data={"n": 1}), LATER)
    again = recorded(done.record, Result(Outcome.SUCCEEDED, target_record_id="ERP-1", data={"n": 1}), LATER)

    assert (done.record.status, done.record.completed_at, done.record.lease_expires_at) == (
        ClaimStatus.SUCCEEDED,
        LATER,
        None,
    )
    assert done.recognised_by == "Run run-1 recorded succeeded (target record ERP-1)."
    assert not again.changes(done.record)
    with pytest.raises(StateConflict) as other:
        recorded(done.record, Result(Outcome.FAILED, error="no"), LATER)
    assert other.value.target == "outcome"


def test_a_failure_for_good_waits_for_a_review_of_its_own() -> None:
    for_good = recorded(HELD, Result(Outcome.FAILED, error="no", retryable=False), LATER).record
    retryable = recorded(HELD, Result(Outcome.FAILED, error="busy", retryable=True), LATER).record

    assert (for_good.reviewer, for_good.retryable) == (None, False)
    assert (retryable.reviewer, retryable.retryable) == ("ana@contoso.com", True)


def test_a_release_while_reconciling_keeps_the_claim_in_doubt() -> None:
    reconciling = replace(HELD, earlier_attempt=EarlierAttempt(1, "run-0", None, ClaimStatus.IN_PROGRESS, NOW))

    plain = released(HELD, None, LATER)
    doubtful = released(reconciling, "nothing found", LATER)

    assert plain.record.status is ClaimStatus.RELEASED
    assert (doubtful.record.status, doubtful.record.released_in_doubt) == (ClaimStatus.UNKNOWN, True)
    assert (doubtful.record.error or "").startswith(RELEASED_IN_DOUBT)
    assert not released(doubtful.record, None, LATER).changes(doubtful.record)


def test_a_heartbeat_extends_the_lease_and_never_moves_the_last_change_back() -> None:
    behind = NOW - timedelta(milliseconds=3)  # another instance's clock, a little behind

    beat = extended(HELD, timedelta(minutes=10), behind)

    assert beat.record.lease_expires_at == behind + timedelta(minutes=10)
    assert beat.record.updated_at == NOW
    with pytest.raises(StateConflict):
        extended(replace(HELD, status=ClaimStatus.SUCCEEDED), timedelta(minutes=1), LATER)
