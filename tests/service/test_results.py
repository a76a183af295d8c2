"""Record result, release and heartbeat: every write presents the current claim token."""

from __future__ import annotations

from datetime import timedelta

import pytest

from oncegate.domain.statuses import ClaimStatus, Decision, EventKind
from oncegate.entrypoints import error_map
from oncegate.errors import NotFound, StateConflict
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim, heartbeat, history, record, record_with, release


@pytest.fixture
def store_kind() -> str:
    """SQLite only: the claim token is checked by the service; the store's part, a write at the current version.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


def test_recording_success_keeps_the_result_and_ends_the_lease(service: Gate, clock: FakeClock) -> None:
    answer = claim(service)
    clock.advance(7)

    view = record(service, answer, target_record_id="SO-1001", data={"orderNumber": "SO-1001"})

    assert (view.status, view.target_record_id, view.data) == (
        ClaimStatus.SUCCEEDED,
        "SO-1001",
        {"orderNumber": "SO-1001"},
    )
    assert (view.completed_at, view.lease_expires_at) == (clock.now, None)
    assert service.get_claim(answer.claim_id).model_dump(exclude={"history"}) == view.model_dump(exclude={"history"})


def test_the_same_result_sent_again_with_the_same_token_is_a_no_op(service: Gate, clock: FakeClock) -> None:
    answer = claim(service)
    record(service, answer, target_record_id="SO-1", data={"n": 1})
    before = service.get_claim(answer.claim_id)
    clock.advance(30)

    again = record(service, answer, target_record_id="SO-1", data={"n": 1})

    assert again.model_dump(exclude={"history"}) == before.model_dump(exclude={"history"})
    assert service.get_claim(answer.claim_id) == before
    assert history(service, answer.claim_id).count((EventKind.RESULT, "succeeded")) == 1


def test_a_final_failure_sent_again_is_a_no_op_too(service: Gate) -> None:
    answer = claim(service)
    record(service, answer, "failed", error="account closed", retryable=False)

    record(service, answer, "failed", error="account closed", retryable=False)

    assert history(service, answer.claim_id).count((EventKind.RESULT, "failed")) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"target_record_id": "SO-2"},
        {"outcome": "failed", "error": "rejected"},
        {"data": {"n": 2}},
    ],
    ids=["other-record", "other-outcome", "other-data"],
)
def test_a_different_result_with_the_same_token_after_completion_is_rejected(
    service: Gate, change: dict[str, object]
) -> None:
    answer = claim(service)
    record(service, answer, target_record_id="SO-1", data={"n": 1})
    before = service.get_claim(answer.claim_id)
    fields: dict[str, object] = {"target_record_id": "SO-1", "data": {"n": 1}, **change}
    outcome = str(fields.pop("outcome", "succeeded"))

    with pytest.raises(StateConflict) as rejected:
        record(service, answer, outcome, **fields)

    assert error_map.status(rejected.value) == 409
    assert service.get_claim(answer.claim_id) == before


def test_a_token_from_an_earlier_attempt_is_stale(service: Gate) -> None:
    first = claim(service, run="run-1")
    record(service, first, "failed", retryable=True)
    second = claim(service, run="run-2")

    with pytest.raises(StateConflict) as stale:
        record(service, first, "failed", retryable=True)

    assert (error_map.code(stale.value), stale.value.target) == ("stale_claim", "claimToken")
    assert service.get_claim(second.claim_id).status is ClaimStatus.IN_PROGRESS


def test_a_made_up_token_is_stale(service: Gate) -> None:
    answer = claim(service)

    with pytest.raises(StateConflict) as stale:
        record_with(service, answer.claim_id, "1.not-the-token", "succeeded")

    assert error_map.code(stale.value) == "stale_claim"
    assert service.get_claim(answer.claim_id).status is ClaimStatus.IN_PROGRESS


def test_a_result_for_a_claim_that_does_not_exist_is_not_found(service: Gate) -> None:
    with pytest.raises(NotFound):
        record_with(service, "a" * 52, "1.token", "succeeded")


# -- release --------------------------------------------------------------------------------------


def test_release_gives_the_claim_up_and_says_why_in_the_history(service: Gate, clock: FakeClock) -> None:
    answer = claim(service)
    clock.advance(1)  # events of one instant have no order

    view = release(service, answer, "the order was cancelled")

    assert (view.status, view.lease_expires_at) == (ClaimStatus.RELEASED, None)
    entries = service.get_claim(answer.claim_id).history or []
    assert (entries[-1].kind, entries[-1].outcome) == (EventKind.RELEASE, "released")
    assert "the order was cancelled" in entries[-1].recognised_by


def test_release_with_a_stale_token_changes_nothing(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", lease_seconds=60)
    clock.advance(61)
    second = claim(service, run="run-2")

    with pytest.raises(StateConflict) as stale:
        release(service, first)

    assert error_map.code(stale.value) == "stale_claim"
    assert service.get_claim(second.claim_id).status is ClaimStatus.IN_PROGRESS
    assert claim(service, run="run-3").decision is Decision.IN_PROGRESS


def test_a_succeeded_claim_cannot_be_released(service: Gate) -> None:
    answer = claim(service)
    record(service, answer, target_record_id="SO-1")

    with pytest.raises(StateConflict):
        release(service, answer)

    assert service.get_claim(answer.claim_id).status is ClaimStatus.SUCCEEDED


# -- heartbeat ------------------------------------------------------------------------------------


def test_heartbeat_extends_the_lease_past_its_first_end(service: Gate, clock: FakeClock) -> None:
    answer = claim(service, run="run-1", lease_seconds=60)
    clock.advance(50)

    view = heartbeat(service, answer, lease_seconds=120)
    clock.advance(60)  # past the first lease, inside the renewed one

    assert view.lease_expires_at == clock.now - timedelta(seconds=60) + timedelta(seconds=120)
    assert claim(service, run="run-2").decision is Decision.IN_PROGRESS
    clock.advance(61)
    assert claim(service, run="run-3").decision is Decision.RECONCILE


def test_heartbeat_with_a_stale_token_is_rejected_and_extends_nothing(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", lease_seconds=60)
    clock.advance(61)
    second = claim(service, run="run-2", lease_seconds=60)

    with pytest.raises(StateConflict) as stale:
        heartbeat(service, first, lease_seconds=3600)

    assert error_map.code(stale.value) == "stale_claim"
    assert service.get_claim(second.claim_id).lease_expires_at == second.lease_expires_at


def test_heartbeat_after_the_result_is_rejected(service: Gate) -> None:
    answer = claim(service)
    record(service, answer, target_record_id="SO-1")

    with pytest.raises(StateConflict):
        heartbeat(service, answer, lease_seconds=60)
