"""A purge deleting retryable failures past their scope's horizon, racing the runs that take them over, on both stores.

A retryable failure is deleted once its scope's horizon is over; a run of its key coming back at that moment takes
it over as a new attempt. Whichever lands first, the run is granted once: the purge's delete is conditioned on the
version it listed (a claim taken over is kept, ``changed``), and a run whose takeover meets a deleted claim claims
the key anew. A run coming back with changed data opens a conflict instead, and a claim with an open conflict must
be kept, even when the conflict opens between the purge's reading of the conflicts and its delete: it is not yet
(a strict expected failure below; with real threads, 10 to 21 of 40 such conflicts were left open on a deleted
claim, on both stores).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision, EventKind
from oncegate.models import ClaimCounts, ClaimResponse
from oncegate.service.retention import Kept
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, history, record, scopes, set_scope

DAY = 24 * 3600
KEYS = 12
RUNS_PER_KEY = 3
INSTANCES = 3


@pytest.fixture
def faults(open_store: Callable[[], ClaimStore]) -> FaultyStore:
    """The purger's store, running another instance's action right after the call the test names."""
    return FaultyStore(open_store(), Fault.BEFORE)


def failed_long_ago(service: Gate, clock: FakeClock, keys: list[str]) -> dict[str, str]:
    """A retryable failure of each key, its scope's horizon (a day) over: the claim ids by key."""
    set_scope(service, SCOPE, retention_days=1, horizon_days=1)
    ids = {}
    for key in keys:
        answer = claim(service, run=f"run-{key}-0", key=key)
        record(service, answer, "failed", error="ERP down", retryable=True)
        ids[key] = answer.claim_id
    clock.advance(2 * DAY)
    return ids


def test_runs_taking_over_retryable_failures_while_a_purge_deletes_them_are_each_granted_once(
    faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    keys = [f"ORDER-{number}" for number in range(KEYS)]
    purger = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    ids = failed_long_ago(purger, clock, keys)
    instances = [new_service() for _ in range(INSTANCES)]
    listed = threading.Event()
    barrier = threading.Barrier(KEYS * RUNS_PER_KEY)

    def run(index: int) -> tuple[str, ClaimResponse]:
        key = keys[index % KEYS]
        # The runs come back together once the purge has listed every failure, as it deletes them.
        assert listed.wait(timeout=30)
        barrier.wait(timeout=30)
        return key, claim(instances[index % INSTANCES], run=f"run-{key}-{index}", key=key)

    faults.interleave(1, "list_claims", listed.set)
    with ThreadPoolExecutor(1 + KEYS * RUNS_PER_KEY) as pool:
        purged = pool.submit(purger.retention.purge, page_size=KEYS)
        answers = list(pool.map(run, range(KEYS * RUNS_PER_KEY)))
        report = purged.result()
    faults.disarm()

    # Every key granted to exactly one run, on the claim id it had; never two at once.
    by_key: dict[str, list[ClaimResponse]] = {key: [] for key in keys}
    for key, answer in answers:
        by_key[key].append(answer)
    reader = new_service()
    attempts: Counter[int] = Counter()
    for key, given in by_key.items():
        decisions = Counter(answer.decision for answer in given)
        assert decisions == {Decision.PROCEED: 1, Decision.IN_PROGRESS: RUNS_PER_KEY - 1}, key
        winner = next(answer for answer in given if answer.decision is Decision.PROCEED)
        assert {answer.claim_id for answer in given} == {ids[key]}
        view = reader.get_claim(ids[key])
        assert (view.status, view.attempt, view.run_id) == (ClaimStatus.IN_PROGRESS, winner.attempt, view.run_id)
        assert winner.attempt in (1, 2)  # 1: claimed anew after the delete; 2: the failure taken over first
        attempts[winner.attempt] += 1
        lines = history(reader, ids[key])
        assert lines.count((EventKind.CLAIM, "proceed")) == (1 if winner.attempt == 1 else 2), lines
        # Nothing of the deleted claim is left to a claim made anew; everything of a claim taken over is.
        assert ((EventKind.RESULT, "failed") in lines) is (winner.attempt == 2), lines
    # The purge listed every failure, deleted exactly the claims made anew and kept, changed, those taken over first.
    assert report.error is None
    assert report.examined == KEYS
    assert report.deleted == Counter({(SCOPE, ClaimStatus.FAILED): attempts[1]})
    assert report.kept == Counter({Kept.CHANGED: attempts[2]}) if attempts[2] else not report.kept
    print(f"split: {attempts[1]} deleted first, {attempts[2]} taken over first")
    # The catalogue's counts add up: no failure is counted twice, none left over.
    for instance in (*instances, purger):
        instance.inventory.flush()
    assert scopes(reader)[SCOPE].claims == ClaimCounts(in_progress=KEYS)
    # The claims now run: nothing of them is left for a purge.
    assert reader.retention.purge().deleted_total == 0


@pytest.mark.xfail(
    strict=True,
    reason="defect: the purge reads the open conflicts before it deletes and a run opens its conflict without reading "
    "the claim again, so a conflict opened in between is left open on a deleted claim (get_conflict: NotFound); "
    "the fix needs the claim path (claims.py) to read the claim after opening a conflict as well",
)
def test_a_conflict_opened_on_a_retryable_failure_while_the_purge_deletes_it_keeps_the_claim(
    faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    purger = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    (claim_id,) = failed_long_ago(purger, clock, ["ORDER-1"]).values()
    other = new_service()
    opened: list[ClaimResponse] = []

    # Right after the purge read the open conflicts (none), a run comes back with changed data: a conflict opens.
    def come_back() -> None:
        opened.append(claim(other, run="run-2", key="ORDER-1", fingerprint="v2"))

    faults.interleave(1, "list_conflicts", come_back)
    report = purger.retention.purge()
    faults.disarm()

    assert [answer.decision for answer in opened] == [Decision.CONFLICT]
    assert opened[0].conflict_id is not None
    conflict = other.get_conflict(opened[0].conflict_id)
    assert conflict.status is ConflictStatus.OPEN
    view = other.get_claim(claim_id)  # the claim the open conflict is about is there, with its history
    assert (view.status, view.attempt) == (ClaimStatus.FAILED, 1)
    assert (EventKind.RESULT, "failed") in history(other, claim_id)
    assert report.deleted_total == 0
    assert report.kept == Counter({Kept.OPEN_CONFLICT: 1})
