"""Record result, release and heartbeat written from the claim as this instance last wrote it (issue 12).

The instance that granted a claim writes the run's result in one request, conditioned on the version
it wrote: no read first. Whatever changed the claim since (another instance, a purge) fails that
write, and the change is decided again on a fresh read, so answers are the same as without the memory.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, Decision
from oncegate.entrypoints import error_map
from oncegate.errors import StateConflict
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import claim, heartbeat, record, record_with, release, resolve
from tests.service.test_round_trips import Requests
from tests.support.azurite import TableStoreFactory


@pytest.mark.azurite
def test_record_result_is_one_request_on_the_instance_that_granted_the_claim(
    table_store_factory: TableStoreFactory, clock: FakeClock
) -> None:
    requests = Requests()
    served = Gate(table_store_factory(raw_response_hook=requests), KeyHasher(KEY_SECRET), clock=clock)
    claim(served, key="WARM-UP")
    granted = claim(served, run="run-1")

    recorded = requests.of(lambda: record(served, granted, target_record_id="SO-1"))
    again = requests.of(lambda: record(served, granted, target_record_id="SO-1"))

    assert recorded == 1
    # The same result again writes nothing: it is answered from a fresh read, never from memory.
    assert again == 1
    assert served.get_claim(granted.claim_id).target_record_id == "SO-1"


def test_a_result_after_another_instance_renewed_the_lease_is_written(new_service: Callable[[], Gate]) -> None:
    granting, other = new_service(), new_service()
    granted = claim(granting, run="run-1")
    heartbeat(other, granted, lease_seconds=900)

    view = record(granting, granted, target_record_id="SO-1")

    assert (view.status, view.target_record_id) == (ClaimStatus.SUCCEEDED, "SO-1")
    assert view.lease_expires_at is None


def test_a_token_this_instance_never_saw_is_checked_against_the_store(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    """Instance A remembers attempt 1; attempt 2 was granted by B. A must not call attempt 2's token stale."""
    granting, other = new_service(), new_service()
    first = claim(granting, run="run-1", lease_seconds=60)
    clock.advance(61)
    second = claim(other, run="run-2")
    assert second.decision is Decision.RECONCILE

    view = record(granting, second, target_record_id="SO-2")

    assert (view.status, view.attempt, view.target_record_id) == (ClaimStatus.SUCCEEDED, 2, "SO-2")
    with pytest.raises(StateConflict) as refused:
        record(granting, first, target_record_id="SO-1")
    assert error_map.code(refused.value) == "stale_claim"


def test_the_same_result_again_is_refused_once_a_reviewer_moved_the_claim_on(new_service: Callable[[], Gate]) -> None:
    """A remembers the claim succeeded; B accepted a new version since. The old run's retry is not a no-op."""
    granting, reviewing = new_service(), new_service()
    granted = claim(granting, run="run-1")
    record(granting, granted, target_record_id="SO-1")
    conflict = claim(reviewing, run="run-2", fingerprint="v2")
    resolve(reviewing, conflict.conflict_id, "accept_new")

    with pytest.raises(StateConflict) as refused:
        record(granting, granted, target_record_id="SO-1")

    assert error_map.code(refused.value) == "stale_claim"
    assert granting.get_claim(granted.claim_id).status is ClaimStatus.FAILED


def test_a_result_for_a_claim_deleted_and_made_again_elsewhere_changes_nothing(
    new_service: Callable[[], Gate],
) -> None:
    """A remembers attempt 1 of a claim that was deleted and made again elsewhere: A's copy must match nothing."""
    granting, other = new_service(), new_service()
    first = claim(granting, run="run-1")
    stored = other.store.get_claim(first.claim_id)
    other.store.delete_claim(stored)
    again = claim(other, run="run-2")
    assert again.decision is Decision.PROCEED

    with pytest.raises(StateConflict):
        record_with(granting, first.claim_id, first.claim_token, "succeeded", target_record_id="SO-1")
    with pytest.raises(StateConflict):
        release(granting, first)

    view = granting.get_claim(again.claim_id)
    assert (view.status, view.run_id, view.target_record_id) == (ClaimStatus.IN_PROGRESS, "run-2", None)
