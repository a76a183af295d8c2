"""Operator mistakes that used to end in a second ``proceed`` are refused loudly instead (issue 22).

Each test runs two service instances configured differently over one store, as two app instances
would be while a setting change rolls over (or when an operator gets a step wrong), and races them
with real threads on the same keys. Each instance reads the store's marks on every request
(``check_interval`` 0), so what one instance records the other sees at once; in production it
sees it within seconds, which the switch grace covers (``oncegate.domain.safeguard``).

Measured on main before this change: forgetting ``ONCEGATE_KEY_SECRET_PREVIOUS`` let 10/10 keys done
before proceed again; skipping the runbook's first step let 29/150 (SQLite) and 12/150 (Tables)
keys proceed twice; swapped secrets looped ``in_progress`` for 30/30 keys.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.marks import StoreMarks
from oncegate.domain.safeguard import SWITCH_GRACE, check_clock, clock_skew
from oncegate.domain.statuses import ClaimStatus, Decision, Resolution
from oncegate.entrypoints import error_map
from oncegate.errors import ClockSkewed, InvalidRequest, NotConfigured, StateConflict, StoreUnavailable
from oncegate.models import ResolveConflictRequest, SetScopeRequest
from oncegate.service.safeguard import PinnedFile, PinnedSetting
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from oncegate.stores.tables.store import table_names
from tests.conftest import FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, record, ring

A = "secret-a-" + "a" * 32
B = "secret-b-" + "b" * 32
KEYS = 60
RACERS_PER_SIDE = 2


@pytest.fixture
def instance(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[..., Gate]:
    """An app instance with these key secrets over the test's store, reading its marks on every request."""

    def make(keys: KeyRing, **options: Any) -> Gate:
        return Gate(open_store(), keys, clock=clock, check_interval=timedelta(0), **options)

    return make


def race(left: Gate, right: Gate, keys: list[str]) -> tuple[Counter[int], Counter[str]]:
    """Both instances, each with ``RACERS_PER_SIDE`` threads, ask for every key at once.

    Returns the keys by how many proceed answers each got, and every answer (or error) by name.
    """
    services = [left, right] * RACERS_PER_SIDE
    proceeds: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(len(services))

    def ask(index: int) -> None:
        for key in keys:
            barrier.wait(timeout=30)
            try:
                answer = claim(services[index], key=key, run=f"run-{index}").decision
                name = answer.value
            except Exception as error:  # every outcome is counted, an error too
                answer, name = None, type(error).__name__
            with lock:
                answers[name] += 1
                proceeds[key] += answer is Decision.PROCEED

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(len(services))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return Counter(proceeds[key] for key in keys), answers


def done_before(service: Gate, count: int) -> list[str]:
    keys = [f"SO-done-{index}" for index in range(count)]
    for key in keys:
        record(service, claim(service, key=key, run="run-first"))
    return keys


def refused_targets(service: Gate, keys: list[str]) -> list[str | None]:
    """Each key asked again of ``service``: the setting each refusal names (every one must be refused)."""
    targets = []
    for key in keys:
        with pytest.raises(NotConfigured) as refused:
            claim(service, key=key, run="run-again")
        targets.append(refused.value.target)
    return targets


# -- 1. switching secrets without ONCEGATE_KEY_SECRET_PREVIOUS ----------------------------------------


def test_the_new_secret_alone_after_step_one_is_refused_naming_previous(instance: Callable[..., Gate]) -> None:
    before = instance(ring(A))
    keys = done_before(before, 10)
    instance(ring(A, next_=B)).health()  # the runbook's first step: B is announced
    alone = instance(ring(B))

    targets = refused_targets(alone, keys)
    with pytest.raises(NotConfigured) as health:
        alone.health()

    assert targets == ["ONCEGATE_KEY_SECRET_PREVIOUS"] * 10
    assert health.value.target == "ONCEGATE_KEY_SECRET_PREVIOUS"
    assert KeyHasher(A).key_id in health.value.message
    assert "oncegate keys retire" in health.value.message
    assert all(claim(before, key=key, run="run-again").decision is Decision.DUPLICATE for key in keys)


def test_racing_step_one_instances_and_the_new_secret_alone_never_both_proceed(
    instance: Callable[..., Gate],
) -> None:
    done_before(instance(ring(A)), 1)
    step_one, alone = instance(ring(A, next_=B)), instance(ring(B))
    step_one.health()

    proceeds, answers = race(step_one, alone, [f"SO-race-{index}" for index in range(KEYS)])

    assert proceeds == Counter({1: KEYS}), answers
    assert answers["NotConfigured"] == KEYS * RACERS_PER_SIDE


def test_retiring_the_old_secret_counts_the_claims_it_would_orphan(
    instance: Callable[..., Gate], clock: FakeClock
) -> None:
    before = instance(ring(A))
    done_before(before, 3)
    switched = instance(ring(B, previous=A))
    switched.health()
    admin = switched.services.key_secrets
    with pytest.raises(InvalidRequest) as during:
        admin.retire(KeyHasher(A).key_id, orphan=3)
    clock.advance(SWITCH_GRACE.total_seconds() + 1)

    with pytest.raises(InvalidRequest) as refused:
        admin.retire(KeyHasher(A).key_id, orphan=None)
    with pytest.raises(InvalidRequest) as current:
        admin.retire(KeyHasher(B).key_id, orphan=0)
    admin.retire(KeyHasher(A).key_id, orphan=3)

    assert "under way" in during.value.message
    assert refused.value.target == "orphan"
    assert "found only through it: 3 claims (" in refused.value.message
    assert "--orphan 3" in refused.value.message
    assert current.value.target == "keyId"
    # Retired: an instance on B alone now works, and the operator accepted that those keys proceed again.
    assert claim(instance(ring(B)), key="SO-done-0", run="run-again").decision is Decision.PROCEED
    with pytest.raises(NotConfigured) as retired:
        instance(ring(A)).health()
    assert retired.value.target == "ONCEGATE_KEY_SECRET"


def test_once_the_new_secret_is_in_use_a_step_one_instance_claims_with_it_and_retiring_orphans_nothing_more(
    instance: Callable[..., Gate], clock: FakeClock
) -> None:
    # Found by an outside test: a step-one instance went on claiming with the old secret after the switch,
    # so claims made after `keys retire` counted them were orphaned (191 keys proceeded twice on SQLite).
    done_before(instance(ring(A)), 2)
    step_one = instance(ring(A, next_=B))
    step_one.health()
    switched = instance(ring(B, previous=A))
    switched.health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)

    made = claim(step_one, key="SO-after-the-switch")
    switched.services.key_secrets.retire(KeyHasher(A).key_id, orphan=2)
    with pytest.raises(NotConfigured) as retired:
        claim(step_one, key="SO-after-the-retirement")

    assert made.claim_id == KeyHasher(B).claim_id(SCOPE, "SO-after-the-switch")
    assert retired.value.target == "ONCEGATE_KEY_SECRET"
    assert claim(instance(ring(B)), key="SO-after-the-switch", run="run-2").decision is Decision.IN_PROGRESS


# -- 2. skipping step 1 --------------------------------------------------------------------------------


@pytest.mark.parametrize("grace", ["during the switch grace", "after it"])
def test_an_old_secret_instance_beside_a_switched_one_never_proceeds_twice(
    instance: Callable[..., Gate], clock: FakeClock, grace: str
) -> None:
    done_before(instance(ring(A)), 1)
    old_only, switched = instance(ring(A)), instance(ring(B, previous=A))
    switched.health()  # the switched instance records B's switch
    if grace == "after it":
        clock.advance(SWITCH_GRACE.total_seconds() + 1)

    proceeds, answers = race(old_only, switched, [f"SO-race-{index}" for index in range(KEYS)])

    assert proceeds == Counter({1: KEYS}), answers
    assert answers["NotConfigured"] == KEYS * RACERS_PER_SIDE
    with pytest.raises(NotConfigured) as refused:
        old_only.health()
    assert refused.value.target == "ONCEGATE_KEY_SECRET"
    assert KeyHasher(B).key_id in refused.value.message


def test_during_the_switch_grace_new_claims_are_made_with_the_previous_secret(
    instance: Callable[..., Gate], clock: FakeClock
) -> None:
    done_before(instance(ring(A)), 1)
    switched = instance(ring(B, previous=A))

    during = claim(switched, key="SO-during")
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    after = claim(switched, key="SO-after")

    assert during.claim_id == KeyHasher(A).claim_id(SCOPE, "SO-during")
    assert after.claim_id == KeyHasher(B).claim_id(SCOPE, "SO-after")
    assert claim(switched, key="SO-during", run="run-2").decision is Decision.IN_PROGRESS


# -- 3. secrets swapped --------------------------------------------------------------------------------


def test_swapped_secrets_are_refused_naming_the_setting_instead_of_looping(instance: Callable[..., Gate]) -> None:
    before = instance(ring(A))
    keys = done_before(before, 5)
    swapped = instance(ring(B, next_=A))

    targets = refused_targets(swapped, keys)
    with pytest.raises(NotConfigured) as health:
        swapped.health()

    assert targets == ["ONCEGATE_KEY_SECRET_NEXT"] * 5
    assert "swapped" in health.value.message
    swapped_after = instance(ring(A, previous=B))
    instance(ring(B, previous=A)).health()  # B switched in properly
    with pytest.raises(NotConfigured) as previous_swapped:
        swapped_after.health()
    assert previous_swapped.value.target in ("ONCEGATE_KEY_SECRET", "ONCEGATE_KEY_SECRET_PREVIOUS")


# -- 4. a wiped store ---------------------------------------------------------------------------------


def test_a_sqlite_database_wiped_beside_its_store_id_file_is_refused_until_store_init(
    tmp_path: Path, clock: FakeClock
) -> None:
    database = tmp_path / "claims.db"
    pin = PinnedFile(tmp_path / "claims.store-id")

    def serve() -> Gate:
        return Gate(SqliteStore(database), KeyHasher(A), clock=clock, pin=pin, check_interval=timedelta(0))

    first = serve()
    done = done_before(first, 3)
    first.store.close()
    for path in tmp_path.glob("claims.db*"):
        if path != pin.path:
            path.unlink()

    wiped = serve()
    with pytest.raises(NotConfigured) as refused:
        claim(wiped, key=done[0], run="run-again")
    with pytest.raises(NotConfigured):
        wiped.health()
    store_id = wiped.services.key_secrets.start_store()

    assert refused.value.target == "ONCEGATE_STORE_ID"
    assert "oncegate store init" in refused.value.message
    assert store_id == pin.pinned()
    assert claim(wiped, key=done[0], run="run-again").decision is Decision.PROCEED


def test_two_workers_starting_on_a_new_sqlite_store_agree_on_its_id(tmp_path: Path, clock: FakeClock) -> None:
    """`serve --workers 2` on a new database: one worker marks the store and writes the store-id file between the
    other's read of the store and its read of the file. That worker must not take the new store for a wiped one
    (it answered 503 not_configured to the first claims until its next check)."""
    database = tmp_path / "claims.db"
    pin = PinnedFile(tmp_path / "claims.store-id")
    faults = FaultyStore(SqliteStore(database), Fault.BEFORE)
    second = Gate(faults, KeyHasher(A), clock=clock, pin=pin, check_interval=timedelta(0))
    first = Gate(SqliteStore(database), KeyHasher(A), clock=clock, pin=pin, check_interval=timedelta(0))

    faults.interleave(1, "read_marks", first.health)
    answer = claim(second, key="SO-1", run="run-1")

    assert faults.disarm()[0] == "read_marks"
    assert answer.decision is Decision.PROCEED
    assert second.store.read_marks().store_id == pin.pinned() == first.store.read_marks().store_id


def test_a_store_wiped_under_a_running_instance_is_refused_without_a_pin(instance: Callable[..., Gate]) -> None:
    running = instance(ring(A))
    done = done_before(running, 2)
    store_id = running.store.read_marks().store_id
    _wipe(running.store)

    with pytest.raises((NotConfigured, StoreUnavailable)):
        claim(running, key=done[0], run="run-again")
    assert running.store.read_marks().store_id is None
    assert store_id is not None


def _wipe(store: Any) -> None:
    """Every row gone, as a restored-empty database or an emulator restarted in memory leaves it."""
    if isinstance(store, SqliteStore):
        connection = store._connection()  # the test's own wipe: nothing in the app deletes rows like this
        with connection:
            for table in ("claims", "history", "key_ids", "store_identity", "conflicts", "fingerprints"):
                connection.execute(f"DELETE FROM {table}")
        return
    # Table Storage: the tables dropped and made again empty, as Azurite restarted in memory leaves them.
    service = store._service
    for table in (store._claims, store._conflicts, store._flows, store._scopes, store._overlaps, store._keys):
        service.delete_table(table.table_name)
        service.create_table(table.table_name)


@pytest.mark.azurite
def test_missing_tables_are_refused_and_never_made_again_under_a_pinned_store_id(
    table_store_factory: Any, clock: FakeClock
) -> None:
    running = Gate(table_store_factory(), KeyHasher(A), clock=clock, check_interval=timedelta(0))
    done = done_before(running, 2)
    store_id = running.store.read_marks().store_id
    assert store_id is not None
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as service:
        for name in table_names(table_store_factory.prefix):
            service.delete_table(name)

    # Not an outage: no retry brings a table back (issue 31).
    with pytest.raises(NotConfigured) as missing:
        claim(running, key=done[0], run="run-again")
    with pytest.raises(NotConfigured):
        running.health()
    restarted = Gate(
        table_store_factory(), KeyHasher(A), clock=clock, pin=PinnedSetting(store_id), check_interval=timedelta(0)
    )
    with pytest.raises(NotConfigured) as refused:
        claim(restarted, key=done[0], run="run-again")

    assert f"the table {table_store_factory.prefix}Claims, {table_store_factory.prefix}Keys does not exist" in (
        missing.value.message
    )
    assert refused.value.target == "ONCEGATE_STORE_ID"
    assert restarted.services.key_secrets.start_store() == store_id
    assert claim(restarted, key=done[0], run="run-again").decision is Decision.PROCEED


# -- 5. a resolved conflict outlives its purged claim ------------------------------------------------


def test_a_conflict_of_a_purged_claim_decides_nothing_about_the_key_claimed_again(
    instance: Callable[..., Gate], clock: FakeClock
) -> None:
    service = instance(ring(A))
    # Retention and horizon of a day: the purge deletes the claim and then its tombstone (issue 26).
    service.set_scope(SetScopeRequest(scope=SCOPE, retention_days=1, horizon_days=1))
    record(service, claim(service, key="SO-5", run="run-v1", fingerprint="v1"), target_record_id="ERP-1")
    opened = claim(service, key="SO-5", run="run-v2", fingerprint="v2")
    assert opened.conflict_id is not None
    service.resolve_conflict(
        opened.conflict_id, ResolveConflictRequest(decision=Resolution.ACCEPT_NEW, reviewer="ana@contoso.com")
    )
    record(service, claim(service, key="SO-5", run="run-v2b", fingerprint="v2"), target_record_id="ERP-2")
    clock.advance(2 * 86400)
    purged = service.retention.purge()
    assert (purged.deleted_total, sum(purged.tombstones_deleted.values())) == (1, 1)

    again = claim(service, key="SO-5", run="run-v1-late", fingerprint="v1")
    record(service, again, target_record_id="ERP-3")
    later = claim(service, key="SO-5", run="run-v2-late", fingerprint="v2")

    assert again.decision is Decision.PROCEED  # by design: past the horizon, the key is forgotten
    assert later.decision is Decision.CONFLICT
    assert later.conflict_id not in (None, opened.conflict_id)
    stored = service.get_claim(again.claim_id)
    assert (stored.status, stored.target_record_id) == (ClaimStatus.SUCCEEDED, "ERP-3")
    with pytest.raises(StateConflict):
        service.resolve_conflict(
            opened.conflict_id, ResolveConflictRequest(decision=Resolution.ACCEPT_NEW, reviewer="ana@contoso.com")
        )
    assert service.get_conflict(opened.conflict_id).status.value == "resolved"
    assert service.get_claim(again.claim_id).target_record_id == "ERP-3"


# -- 6. clocks that disagree ---------------------------------------------------------------------------


def test_clock_skew_is_measured_from_the_store_answer_and_bounded() -> None:
    now = FakeClock()()
    marks = StoreMarks(store_id="s", secrets=(), clock=now.replace(microsecond=0), asked_at=now, answered_at=now)
    skewed = StoreMarks(
        store_id="s",
        secrets=(),
        clock=now.replace(microsecond=0),
        asked_at=now + timedelta(seconds=20),
        answered_at=now + timedelta(seconds=20, milliseconds=30),
    )

    check_clock(marks)
    with pytest.raises(ClockSkewed) as refused:
        check_clock(skewed)
    assert clock_skew(StoreMarks(store_id="s", secrets=())) is None  # SQLite shares this machine's clock
    assert error_map.status(refused.value) == 503
    assert error_map.code(refused.value) == "clock_skew"
    assert "19.6 s ahead of the store" in refused.value.message


def test_a_reading_over_a_slow_round_trip_lets_through_only_a_clock_it_can_tell_is_near_enough() -> None:
    # Measured 5.5 s ahead over a 3 s round trip: the store may have answered at any time in it, so the clock may
    # really be 5.5 + 0.5 + 1.5 = 7.5 s ahead, further than MAX_CLOCK_ERROR; the check let it through before.
    store = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
    asked = store + timedelta(seconds=4.5)

    def read(round_trip: float) -> StoreMarks:
        return StoreMarks(
            store_id="s", secrets=(), clock=store, asked_at=asked, answered_at=asked + timedelta(seconds=round_trip)
        )

    check_clock(read(0.2))  # 4.1 s measured, at most 4.7 s off
    with pytest.raises(ClockSkewed) as refused:
        check_clock(read(3))

    assert clock_skew(read(3)) == timedelta(seconds=5.5)
    assert error_map.code(refused.value) == "clock_skew"
    assert "measured over a round trip of 3.0 s" in refused.value.message


@pytest.mark.azurite
def test_an_instance_whose_clock_runs_20_s_ahead_of_the_store_grants_and_expires_nothing(
    table_store_factory: Any,
) -> None:
    from datetime import UTC, datetime

    def ahead() -> datetime:
        return datetime.now(UTC) + timedelta(seconds=20)

    honest = Gate(table_store_factory(), KeyHasher(A), check_interval=timedelta(0))
    skewed = Gate(table_store_factory(), KeyHasher(A), clock=ahead, wall_clock=ahead, check_interval=timedelta(0))
    holders = [claim(honest, key=f"SO-skew-{index}", run="run-holder", lease_seconds=15) for index in range(20)]

    refused = 0
    for index in range(20):
        try:
            claim(skewed, key=f"SO-skew-{index}", run="run-other")
        except ClockSkewed:
            refused += 1

    assert refused == 20
    assert all(record(honest, holder).status is ClaimStatus.SUCCEEDED for holder in holders)
    assert skewed.services.claims._core.safeguard.skew is not None
