"""A purge deleting retryable failures past their scope's horizon, racing the runs that take them over, on both stores.

A retryable failure is deleted once its scope's horizon is over; a run of its key coming back at that moment takes
it over as a new attempt. Whichever lands first, the run is granted once: the purge's delete is conditioned on the
version it listed (a claim taken over is kept, ``changed``), and a run whose takeover meets a deleted claim claims
the key anew. A run coming back with changed data, or a flow reporting a conflict, opens a conflict instead, and a
claim with an open conflict must be kept, even when the conflict opens between the purge's reading of the conflicts
and its delete: the claim is written first (its last change moved to the conflict's answer), so the purge's delete,
conditioned on the version it listed, fails and keeps it; a claim the purge deleted first fails that write, and the
run decides again on what is there (no claim: its key proceeds, as a key never seen). Before that write, with real
threads, 10 to 21 of 40 such conflicts were left open on a deleted claim, on both stores.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim, HistoryEvent
from oncegate.domain.statuses import AttentionReason, ClaimStatus, ConflictStatus, Decision, EventKind
from oncegate.models import ClaimCounts, ClaimResponse, ListClaimsQuery, ListConflictsQuery
from oncegate.service.core import TICK
from oncegate.service.retention import Kept, PurgeReport, gone_at
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, history, record, report, scopes, set_scope

DAY = 24 * 3600
KEYS = 12
RUNS_PER_KEY = 3
INSTANCES = 3
RACING_CONFLICTS = 40
RACING_RUNS = 16


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


def test_a_conflict_opened_on_a_retryable_failure_while_the_purge_deletes_it_keeps_the_claim(
    faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    purger = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    (claim_id,) = failed_long_ago(purger, clock, ["ORDER-1"]).values()
    other = new_service()
    listed = faults.get_claim(claim_id)
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
    # The run wrote the claim before opening its conflict: the purge's delete, conditioned on the version it
    # listed, failed and kept it; its last change is the conflict's answer, so the next purge does not list it.
    assert report.deleted_total == 0
    assert report.kept == Counter({Kept.CHANGED: 1})
    written = faults.get_claim(claim_id)
    assert (written.version != listed.version, written.updated_at) == (True, clock())
    again = purger.retention.purge()
    assert (again.examined, again.deleted_total) == (0, 0)
    # Past the horizon again, the open conflict keeps it, as the purge read it.
    clock.advance(2 * DAY)
    later = purger.retention.purge()
    assert (later.deleted_total, later.kept) == (0, Counter({Kept.OPEN_CONFLICT: 1}))
    assert other.get_conflict(conflict.conflict_id).status is ConflictStatus.OPEN


def test_a_run_with_changed_data_whose_failure_the_purge_deleted_after_it_read_it_claims_the_key_anew(
    faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    purger = new_service()
    (claim_id,) = failed_long_ago(purger, clock, ["ORDER-1"]).values()
    run = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    purged = []

    # The run has read the failure and compares its data with the claim's when the purge deletes the failure.
    faults.interleave(1, "get_fingerprints", lambda: purged.append(purger.retention.purge()))
    answer = claim(run, run="run-2", key="ORDER-1", fingerprint="v2")
    faults.disarm()

    # The purge deleted the failure as it listed it; the run's write before its conflict failed, and the run,
    # deciding again, found no claim: its key proceeds as a key never seen, and no conflict is left on nothing.
    assert [report.deleted_total for report in purged] == [1]
    assert (answer.decision, answer.claim_id, answer.attempt, answer.conflict_id) == (
        Decision.PROCEED,
        claim_id,
        1,
        None,
    )
    assert history(run, claim_id) == [(EventKind.CLAIM, "proceed")]
    assert run.list_conflicts(ListConflictsQuery(status=None)) == ([], None)


def test_a_conflict_a_flow_reports_on_a_retryable_failure_while_the_purge_deletes_it_keeps_the_claim(
    faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    purger = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    (claim_id,) = failed_long_ago(purger, clock, ["ORDER-1"]).values()
    other = new_service()
    reported: list[str] = []

    # Right after the purge read the open conflicts (none), the flow reports one it found itself.
    faults.interleave(1, "list_conflicts", lambda: reported.append(report(other, key="ORDER-1").conflict_id))
    purged = purger.retention.purge()
    faults.disarm()

    assert (purged.deleted_total, purged.kept) == (0, Counter({Kept.CHANGED: 1}))
    assert other.get_conflict(reported[0]).status is ConflictStatus.OPEN
    assert other.get_claim(claim_id).status is ClaimStatus.FAILED


def test_a_conflict_opened_on_a_tombstone_while_the_purge_deletes_it_at_its_horizon_keeps_the_tombstone(
    faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    purger = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    set_scope(purger, SCOPE, retention_days=1, horizon_days=1)
    made = claim(purger, run="run-1", key="ORDER-1")
    record(purger, made, target_record_id="SO-1")
    clock.advance(2 * DAY)
    other = new_service()
    opened: list[ClaimResponse] = []

    # The purge leaves the claim's tombstone (its horizon counted from the result, already over) and, right after it
    # listed the tombstones past their horizon, a late replay comes with changed data: a conflict on the tombstone.
    def come_back() -> None:
        opened.append(claim(other, run="run-2", key="ORDER-1", fingerprint="v2"))

    faults.interleave(2, "list_claims", come_back)
    purged = purger.retention.purge()
    faults.disarm()

    assert [answer.decision for answer in opened] == [Decision.CONFLICT]
    assert opened[0].conflict_id is not None
    assert (purged.deleted_total, sum(purged.tombstones_deleted.values())) == (1, 0)
    assert other.get_conflict(opened[0].conflict_id).status is ConflictStatus.OPEN
    assert other.get_claim(made.claim_id).purged_at is not None


def test_runs_with_changed_data_coming_back_while_a_purge_deletes_their_failures_leave_no_conflict_without_its_claim(
    faults: FaultyStore, open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    keys = [f"ORDER-{number}" for number in range(RACING_CONFLICTS)]
    purger = Gate(faults, KeyHasher(KEY_SECRET), clock=clock)
    ids = failed_long_ago(purger, clock, keys)
    read = threading.Barrier(len(keys) + 1)
    go = threading.Event()
    stores = [FaultyStore(open_store(), Fault.BEFORE) for _ in keys]
    for store in stores:
        # Each run has read its failure and compared its data when the purge reads the open conflicts (none); then
        # the run opens its conflict as the purge deletes.
        store.interleave(1, "get_fingerprints", lambda: (read.wait(timeout=30), go.wait(timeout=30)))
    runs = [Gate(store, KeyHasher(KEY_SECRET), clock=clock) for store in stores]

    def purge_once_read() -> None:
        read.wait(timeout=30)
        go.set()

    def run(index: int) -> ClaimResponse:
        return claim(runs[index], run=f"run-{index}", key=keys[index], fingerprint="v2")

    faults.interleave(1, "list_conflicts", purge_once_read)
    with ThreadPoolExecutor(1 + len(keys)) as pool:
        purged = pool.submit(purger.retention.purge, page_size=len(keys))
        answers = list(pool.map(run, range(len(keys))))
        report = purged.result()
    for store in (faults, *stores):
        store.disarm()

    # A key whose failure the purge deleted first proceeds as a key never seen; every other opens a conflict, and
    # its claim is there for the conflict to be about.
    reader = runs[0]
    decisions = Counter(answer.decision for answer in answers)
    assert set(decisions) <= {Decision.PROCEED, Decision.CONFLICT}, decisions
    for index, answer in enumerate(answers):
        assert answer.claim_id == ids[keys[index]]
        view = reader.get_claim(answer.claim_id)
        if answer.decision is Decision.PROCEED:
            assert (view.status, view.attempt, answer.conflict_id) == (ClaimStatus.IN_PROGRESS, 1, None)
            continue
        assert answer.conflict_id is not None
        assert reader.get_conflict(answer.conflict_id).status is ConflictStatus.OPEN
        assert (view.status, view.attempt) == (ClaimStatus.FAILED, 1)
    # Kept: the claims the runs wrote before the purge's delete, which then failed (changed).
    assert report.error is None
    assert report.deleted == Counter({(SCOPE, ClaimStatus.FAILED): decisions[Decision.PROCEED]})
    assert report.kept == Counter({Kept.CHANGED: decisions[Decision.CONFLICT]})
    print(f"split: {decisions[Decision.PROCEED]} deleted first, {decisions[Decision.CONFLICT]} conflicts kept")


def test_a_conflict_on_a_failure_nobody_reviewed_leaves_the_claim_and_its_attention_time_as_they_were(
    service: Gate, clock: FakeClock
) -> None:
    # The purge never deletes it (it waits for a reviewer): nothing to keep it from, and its time says since when.
    answer = claim(service, run="run-1", key="ORDER-1")
    record(service, answer, "failed", error="ERP refused the order", retryable=False)
    failed = service.store.get_claim(answer.claim_id)
    clock.advance(3600)

    conflict = claim(service, run="run-2", key="ORDER-1", fingerprint="v2")

    assert conflict.decision is Decision.CONFLICT
    assert service.store.get_claim(answer.claim_id).version == failed.version
    page, _ = service.attention_page(ListClaimsQuery(attention=True))
    assert [(item.why, item.since) for item in page] == [(AttentionReason.FAILED_UNREVIEWED, failed.updated_at)]


@pytest.mark.parametrize(
    ("status", "retryable", "reviewer"),
    [
        (status, retryable, reviewer)
        for status in ClaimStatus
        for retryable in (None, True, False)
        for reviewer in (None, "ana")
    ],
)
def test_a_conflict_writes_first_exactly_the_claims_retention_may_delete(
    status: ClaimStatus, retryable: bool | None, reviewer: str | None
) -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    row = Claim(
        claim_id="c",
        scope=SCOPE,
        status=status,
        attempt=1,
        fingerprint=None,
        grant_id=None,
        run_id="run-1",
        flow=None,
        first_received_at=at,
        last_attempt_at=at,
        updated_at=at,
        retryable=retryable,
        reviewer=reviewer,
    )
    assert row.purgeable is (gone_at(row, None) is not None)


@pytest.mark.parametrize("settled_ago", [0, 2 * DAY], ids=["settled-a-moment-ago", "settled-past-its-retention"])
def test_runs_with_changed_data_answered_together_each_get_the_conflict(
    new_service: Callable[[], Gate], clock: FakeClock, settled_ago: int
) -> None:
    # A claim a purge may not delete yet is not written before its conflict: written, the runs answered together
    # raced for it, and 14 of 24 were answered 503 on a claim settled a moment before. One a purge may delete is
    # written once: the runs that lose the write read it again, changed now, and leave it as it is.
    first = new_service()
    set_scope(first, SCOPE, retention_days=1, horizon_days=1)
    answer = claim(first, run="run-0", key="ORDER-1")
    record(first, answer, "succeeded")
    clock.advance(settled_ago)
    before = first.store.get_claim(answer.claim_id)
    instances = [new_service() for _ in range(4)]
    together = threading.Barrier(RACING_RUNS)

    def run(index: int) -> ClaimResponse:
        together.wait(timeout=30)
        return claim(instances[index % len(instances)], run=f"run-{index + 1}", key="ORDER-1", fingerprint="v2")

    with ThreadPoolExecutor(RACING_RUNS) as pool:
        answers = list(pool.map(run, range(RACING_RUNS)))

    assert Counter(answer.decision for answer in answers) == {Decision.CONFLICT: RACING_RUNS}
    assert len({answer.conflict_id for answer in answers}) == 1
    after = first.store.get_claim(answer.claim_id)
    if settled_ago:
        assert after.version != before.version
        # Moved to the conflict's answer: the time it was decided, which is the clock, or a tick past each earlier
        # time the same instance stamped on the claim (ClaimsCore.decided_at), whichever run won the write.
        assert clock() <= after.updated_at <= clock() + RACING_RUNS * TICK
    else:
        assert after.version == before.version


def test_a_duplicate_answered_from_a_tombstone_the_purge_deletes_before_its_line_is_written_leaves_no_line(
    open_store: Callable[[], ClaimStore], new_service: Callable[[], Gate], clock: FakeClock, store_kind: str
) -> None:
    if store_kind == "tables":
        # No entity-group transaction reads the claim row: the line is only kept from a claim gone by reading it
        # after the write, a fourth request for a series' first duplicate (the target is three). Left to decide.
        pytest.xfail("Table Storage writes a series' first line without its claim row")
    purger = new_service()
    set_scope(purger, SCOPE, retention_days=1, horizon_days=2)
    made = claim(purger, run="run-1", key="ORDER-1")
    record(purger, made, target_record_id="SO-1")
    clock.advance(2 * DAY)
    assert purger.retention.purge().deleted_total == 1
    clock.advance(3 * DAY)
    late = open_store()
    replayer = Gate(late, KeyHasher(KEY_SECRET), clock=clock)
    count_event = late.count_event
    purged: list[PurgeReport] = []

    def purged_first(line: HistoryEvent) -> None:
        purged.append(purger.retention.purge())
        count_event(line)

    # A run resubmitted at the horizon reads the tombstone (duplicate); the purge deletes the tombstone before the
    # run's answer is counted in its history. Before the line was written only while its claim is there, it stayed,
    # history without a claim, and the key's next claim, made anew, showed that duplicate as its own history.
    late.count_event = purged_first  # type: ignore[method-assign,assignment]
    replayed = claim(replayer, run="run-2", key="ORDER-1")
    late.count_event = count_event  # type: ignore[method-assign]

    assert replayed.decision is Decision.DUPLICATE
    assert [sum(report.tombstones_deleted.values()) for report in purged] == [1]
    anew = claim(new_service(), run="run-3", key="ORDER-1")
    assert (anew.decision, anew.claim_id, anew.attempt) == (Decision.PROCEED, made.claim_id, 1)
    assert history(purger, made.claim_id) == [(EventKind.CLAIM, "proceed")]
