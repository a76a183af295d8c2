"""Every row of the contract's decision table."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from oncegate.domain.statuses import AnswerStatus, ClaimStatus, Decision
from oncegate.entrypoints import error_map
from oncegate.errors import StateConflict
from oncegate.models import ClaimResponse, ClaimResult
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW, FLOW_COPY, claim, keyed, record, record_with, release, succeeded


@pytest.fixture
def store_kind() -> str:
    """SQLite only: the decision table is the service's (domain/decisions.py) over the store port.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


# -- proceed ------------------------------------------------------------------------------------


def test_a_new_key_proceeds_with_a_token_and_a_lease(service: Gate, clock: FakeClock) -> None:
    answer = claim(service, lease_seconds=120)

    assert answer.decision is Decision.PROCEED
    assert (answer.status, answer.attempt) == (AnswerStatus.IN_PROGRESS, 1)
    assert answer.claim_token
    assert answer.lease_expires_at == clock.now + timedelta(seconds=120)
    assert answer.warnings == []
    stored = service.get_claim(answer.claim_id)
    assert (stored.status, stored.run_id, stored.lease_expires_at) == (
        ClaimStatus.IN_PROGRESS,
        "run-1",
        answer.lease_expires_at,
    )


def test_the_default_lease_is_300_seconds(service: Gate, clock: FakeClock) -> None:
    assert claim(service).lease_expires_at == clock.now + timedelta(seconds=300)


def test_a_retryable_failure_lets_the_next_run_proceed_with_a_new_token(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    record(service, first, "failed", error="ERP timed out", retryable=True)
    clock.advance(30)

    second = claim(service, run="run-2")

    assert second.decision is Decision.PROCEED
    assert (second.status, second.attempt) == (AnswerStatus.IN_PROGRESS, 2)
    assert second.claim_token not in (None, first.claim_token)
    assert second.lease_expires_at == clock.now + timedelta(seconds=300)


def test_a_released_claim_lets_the_next_run_proceed(service: Gate) -> None:
    first = claim(service, run="run-1")
    release(service, first, "the order was cancelled before sending")

    second = claim(service, run="run-2")

    assert (second.decision, second.attempt) == (Decision.PROCEED, 2)
    assert second.claim_token != first.claim_token


def test_the_same_run_asking_again_while_holding_the_lease_gets_the_same_token(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    clock.advance(10)

    again = claim(service, run="run-1")

    assert again.decision is Decision.PROCEED
    assert (again.claim_token, again.attempt) == (first.claim_token, 1)
    assert again.lease_expires_at == first.lease_expires_at
    # The token it got twice is the live one: its result is accepted.
    assert record(service, again, target_record_id="SO-1").status is ClaimStatus.SUCCEEDED


# -- duplicate ------------------------------------------------------------------------------------


def test_a_succeeded_claim_answers_duplicate_with_the_original_result(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    clock.advance(5)
    record(service, first, target_record_id="SO-1001", data={"orderNumber": "SO-1001", "lines": 2})
    completed_at = clock.now
    clock.advance(3600)

    again = claim(service, run="run-2", flow=FLOW)

    assert again.decision is Decision.DUPLICATE
    assert (again.status, again.attempt) == (AnswerStatus.SUCCEEDED, 1)
    assert again.claim_token is None
    assert again.result == ClaimResult(
        target_record_id="SO-1001",
        data={"orderNumber": "SO-1001", "lines": 2},
        completed_at=completed_at,
        run_id="run-1",
        flow=FLOW,
    )
    assert again.warnings == []


def test_the_run_that_succeeded_asking_again_gets_duplicate(service: Gate) -> None:
    first = succeeded(service, run="run-1")

    again = claim(service, run="run-1")

    assert again.decision is Decision.DUPLICATE
    assert again.claim_id == first.claim_id


# -- in_progress ----------------------------------------------------------------------------------


def test_another_run_during_a_live_lease_is_told_in_progress_with_the_holder(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", lease_seconds=300)
    clock.advance(280)

    other = claim(service, run="run-2")

    assert other.decision is Decision.IN_PROGRESS
    assert (other.status, other.attempt) == (AnswerStatus.IN_PROGRESS, 1)
    assert other.claim_token is None
    assert other.holder is not None
    assert other.holder.flow == FLOW
    # Never the holder's run id: with it, another caller could pass for the holder.
    assert "runId" not in other.model_dump_json(by_alias=True)
    # Waiting as told never runs past the holder's lease.
    assert other.retry_after_seconds is not None
    assert 1 <= other.retry_after_seconds <= 20
    # The holder's token still holds.
    assert record(service, first).status is ClaimStatus.SUCCEEDED


def test_another_flow_sending_the_holders_run_id_is_in_progress_and_cannot_take_the_claim(
    service: Gate,
) -> None:
    # Issue 9: flow B reused flow A's run id (a constant typed by hand) and was handed A's live token.
    holder = claim(service, run="run-A", flow=FLOW, fingerprint="v1")
    other = claim(service, run="run-A", flow=FLOW_COPY, fingerprint="v1")

    assert (other.decision, other.claim_token) == (Decision.IN_PROGRESS, None)
    assert record(service, holder).status is ClaimStatus.SUCCEEDED


@pytest.mark.parametrize(
    "asks_again",
    [
        pytest.param({"flow": None, "fingerprint": "v1"}, id="no flow"),
        pytest.param({"flow": FLOW, "fingerprint": None}, id="no fingerprint"),
    ],
)
def test_the_holders_run_id_without_its_flow_and_fingerprint_is_in_progress(
    service: Gate, asks_again: dict[str, Any]
) -> None:
    holder = claim(service, run="run-A", flow=FLOW, fingerprint="v1")

    other = claim(service, run="run-A", **asks_again)

    assert (other.decision, other.claim_token) == (Decision.IN_PROGRESS, None)
    assert record(service, holder).status is ClaimStatus.SUCCEEDED


def test_the_very_same_run_asking_again_gets_its_lease_and_token_back(service: Gate) -> None:
    first = claim(service, run="run-A", flow=FLOW, fingerprint="v1")

    again = claim(service, run="run-A", flow=FLOW, fingerprint="v1")

    assert (again.decision, again.claim_token, again.attempt) == (Decision.PROCEED, first.claim_token, 1)


def test_one_second_before_the_lease_ends_it_is_still_held(service: Gate, clock: FakeClock) -> None:
    claim(service, run="run-1", lease_seconds=60)
    clock.advance(59)

    assert claim(service, run="run-2").decision is Decision.IN_PROGRESS


# -- reconcile ------------------------------------------------------------------------------------


def test_an_expired_lease_without_a_result_is_reconciled_never_proceeded(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", lease_seconds=60)
    clock.advance(61)

    second = claim(service, run="run-2", flow=FLOW_COPY)

    assert second.decision is Decision.RECONCILE
    assert (second.status, second.attempt) == (AnswerStatus.IN_PROGRESS, 2)
    assert second.claim_token not in (None, first.claim_token)
    assert second.lease_expires_at == clock.now + timedelta(seconds=300)
    last = second.earlier_attempt
    assert last is not None
    assert (last.attempt, last.run_id, last.flow, last.status) == (1, "run-1", FLOW, ClaimStatus.IN_PROGRESS)
    assert last.lease_expires_at == first.lease_expires_at


def test_after_reconcile_the_earlier_token_is_stale(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", lease_seconds=60)
    clock.advance(61)
    second = claim(service, run="run-2")

    with pytest.raises(StateConflict) as stale:
        record(service, first, target_record_id="SO-late")

    assert error_map.code(stale.value) == "stale_claim"
    assert service.get_claim(first.claim_id).status is ClaimStatus.IN_PROGRESS
    assert record(service, second, target_record_id="SO-found").target_record_id == "SO-found"


def test_even_the_same_run_is_reconciled_once_its_lease_expired(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", lease_seconds=60)
    clock.advance(61)

    again = claim(service, run="run-1")

    assert again.decision is Decision.RECONCILE
    assert again.claim_token != first.claim_token


def test_an_unknown_outcome_is_reconciled_with_its_last_attempt(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    record(service, first, "unknown", error="the ERP call timed out after sending")
    clock.advance(5)

    second = claim(service, run="run-2")

    assert second.decision is Decision.RECONCILE
    assert second.earlier_attempt is not None
    assert (second.earlier_attempt.status, second.earlier_attempt.error) == (
        ClaimStatus.UNKNOWN,
        "the ERP call timed out after sending",
    )


@pytest.mark.parametrize("deadline", [timedelta(days=365), timedelta(minutes=10)])
def test_an_unknown_outcome_whose_own_data_names_a_call_with_a_later_deadline_is_still_reconciled(
    service: Gate, clock: FakeClock, deadline: timedelta
) -> None:
    """A flow's result data is its own: one naming a member ``call`` with a ``deadline`` (a courier's pick-up, say)
    is no call of Perform once's, whose deadline is at most its target's longest timeout (90 s) after the call was
    recorded. Taken for one, the next run was told in_progress, without a token, until that time (a year here)."""
    first = claim(service, run="run-1")
    data = {"call": {"target": "courier", "deadline": (clock.now + deadline).isoformat()}}
    record(service, first, "unknown", error="the courier's API timed out", data=data)
    clock.advance(5)

    second = claim(service, run="run-2")

    assert (second.decision, second.retry_after_seconds) == (Decision.RECONCILE, None)
    assert second.claim_token


def test_a_reconciled_claim_recorded_as_found_answers_duplicate_with_that_record(
    service: Gate, clock: FakeClock
) -> None:
    claim(service, run="run-1", lease_seconds=60)
    clock.advance(61)
    second = claim(service, run="run-2")
    record(service, second, target_record_id="SO-found-in-erp")

    third = claim(service, run="run-3")

    assert third.decision is Decision.DUPLICATE
    assert third.result is not None
    assert (third.result.target_record_id, third.result.run_id) == ("SO-found-in-erp", "run-2")


# -- conflict -------------------------------------------------------------------------------------


def _leave_in_progress(service: Gate, answer: ClaimResponse) -> None:
    return None


SETTLED: dict[str, Callable[[Gate, ClaimResponse], object]] = {
    "in_progress": _leave_in_progress,
    "succeeded": lambda service, answer: record(service, answer, target_record_id="SO-1"),
    "failed_retryable": lambda service, answer: record(service, answer, "failed", retryable=True),
    "failed_final": lambda service, answer: record(service, answer, "failed", retryable=False),
    "unknown": lambda service, answer: record(service, answer, "unknown"),
}


@pytest.mark.parametrize("settle", SETTLED.values(), ids=SETTLED.keys())
def test_a_different_fingerprint_is_a_conflict_in_every_unreleased_status(
    service: Gate, settle: Callable[[Gate, ClaimResponse], object]
) -> None:
    first = claim(service, run="run-1", fingerprint="v1")
    settle(service, first)
    before = service.get_claim(first.claim_id)

    changed = claim(service, run="run-2", fingerprint="v2")

    assert changed.decision is Decision.CONFLICT
    assert changed.conflict_id
    assert (changed.claim_token, changed.result) == (None, None)
    after = service.get_claim(first.claim_id)
    assert (after.status, after.attempt, after.fingerprint) == (before.status, before.attempt, keyed("v1"))
    conflict = service.get_conflict(changed.conflict_id)
    assert (conflict.fingerprint, conflict.claim_fingerprint, conflict.claim_id) == (
        keyed("v2"),
        keyed("v1"),
        first.claim_id,
    )


def test_the_conflict_id_is_stable_for_the_same_key_and_fingerprint_while_open(service: Gate) -> None:
    succeeded(service, fingerprint="v1")

    first = claim(service, run="run-2", fingerprint="v2")
    again = claim(service, run="run-3", fingerprint="v2")
    other = claim(service, run="run-4", fingerprint="v3")
    other_key = succeeded(service, key="ORDER-2002", fingerprint="v1")
    other_key_conflict = claim(service, run="run-5", key="ORDER-2002", fingerprint="v2")

    assert first.conflict_id == again.conflict_id
    assert other.conflict_id not in (None, first.conflict_id)
    assert other_key.claim_id != first.claim_id
    assert other_key_conflict.conflict_id not in (None, first.conflict_id)


def test_a_released_claim_with_a_new_fingerprint_proceeds(service: Gate) -> None:
    first = claim(service, run="run-1", fingerprint="v1")
    release(service, first)

    changed = claim(service, run="run-2", fingerprint="v2")

    assert (changed.decision, changed.attempt) == (Decision.PROCEED, 2)
    assert service.get_claim(first.claim_id).fingerprint == keyed("v2")


# -- blocked --------------------------------------------------------------------------------------


def test_a_final_failure_blocks_every_later_run(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    record(service, first, "failed", error="customer account closed", retryable=False)

    for run in ("run-2", "run-3"):
        clock.advance(600)
        blocked = claim(service, run=run)
        assert blocked.decision is Decision.BLOCKED
        assert (blocked.status, blocked.attempt, blocked.claim_token) == (AnswerStatus.FAILED, 1, None)
    assert "customer account closed" in blocked.reason


def test_a_run_that_names_no_flow_or_no_business_data_never_gets_a_live_claim_back(service: Gate) -> None:
    # Two items of one key in an "Apply to each" share the run's name: with nothing more, they are two runs.
    bare = claim(service, run="run-A", flow=None, fingerprint=None)

    again = claim(service, run="run-A", flow=None, fingerprint=None)

    assert (bare.decision, again.decision, again.claim_token) == (Decision.PROCEED, Decision.IN_PROGRESS, None)


def test_a_wrong_token_is_refused_without_naming_the_holder(service: Gate) -> None:
    holder = claim(service, run="run-holder")

    with pytest.raises(StateConflict) as refused:
        record_with(service, holder.claim_id, "hello", "succeeded")

    assert "run-holder" not in refused.value.message
    assert "does not match" in refused.value.message
