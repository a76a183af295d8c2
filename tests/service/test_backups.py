"""Export and import (issue 35): a store exported, wiped and imported keeps its promise, on both stores.

Every key done before the export is still answered ``duplicate``, every conflict, tombstone and fingerprint
record is back, and a claim's history reads the same. An import is refused without the export's time and
into a store that holds anything; cut short, it goes on when run again; an export made while claims are
being made names the claims that changed after it read them. The declared targets of Perform once come back
with the claims (by their secrets' names: a store holds no secret), and an export of format 1, which had
none, still imports.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.bootstrap import STORE_ID_SUFFIX
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.records import ClaimFilter, ScopeRecord
from oncegate.domain.safeguard import SWITCH_GRACE
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision
from oncegate.domain.store_id import check_store_id
from oncegate.domain.targets import Target, TargetAuth
from oncegate.errors import InvalidRequest, NotConfigured
from oncegate.service import backups
from oncegate.service.backups import BackupStore
from oncegate.service.core import utc_now
from oncegate.service.key_secrets import KeySecrets
from oncegate.service.safeguard import PinnedFile, PinnedSetting, StoreIdPin
from oncegate.stores import export_format, row_writing
from oncegate.stores.paging import utc_text
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from oncegate.stores.tables.store import table_names
from tests.conftest import SQLITE_FILE, FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW_COPY, claim, record, register, release, resolve, set_scope
from tests.support.azurite import TableStoreFactory

DAY = 24 * 3600
OLD = "old-secret-" + "o" * 32
NEW = "new-secret-" + "n" * 32
BEFORE = KeyRing(KeyHasher(OLD))
NEXT = KeyRing(KeyHasher(OLD), next_=KeyHasher(NEW))
SWITCHED = KeyRing(KeyHasher(NEW), previous=KeyHasher(OLD))
# Each key done before the export, by the secret's phase it was claimed in.
DONE = ["SO-done", "SO-purged", "SO-conflict", "SO-kept", "SO-new-secret"]
# Targets as operators declare them: every field set on one, the defaults on the other.
TARGETS = [
    Target(
        name="erp",
        base_url="https://erp.contoso.com/api",
        timeout_seconds=45,
        lookup_path="/orders?reference={reference}",
        auth=TargetAuth.SECRET,
        auth_value="X-Api-Key=oncegate-target-erp",
        allow_cidrs=("10.20.0.0/16",),
        honours_idempotency_key=True,
        success_statuses=(200, 201),
        retryable_statuses=(409,),
        record_pointer="/id",
        kept_headers=("Location",),
        kept_pointers=("/id", "/status"),
        declared_by="ops@contoso.com",
        declared_at=datetime(2026, 11, 30, 8, 15, 30, 123456, tzinfo=UTC),
    ),
    Target(name="mail", base_url="https://mail.contoso.com"),
]
LEGACY_EXPORT = Path(__file__).parent.parent / "fixtures" / "legacy" / "export-1.jsonl"
LEGACY_SECRET = "legacy-fixture-secret-" + "s" * 32


class Stores:
    """Stores of one kind on this test's data, and a wipe that drops it all, as a deleted account would."""

    def __init__(self, kind: str, tmp_path: Path, factory: TableStoreFactory | None) -> None:
        self.kind, self._path, self._factory = kind, tmp_path / SQLITE_FILE, factory
        self._opened: list[ClaimStore] = []

    def open(self) -> ClaimStore:
        store: ClaimStore
        store = self._factory() if self._factory is not None else SqliteStore(self._path)
        self._opened.append(store)
        return store

    def wipe(self) -> None:
        for store in self._opened:
            store.close()
        self._opened.clear()
        if self._factory is None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self._path}{suffix}").unlink(missing_ok=True)
            return
        with TableServiceClient.from_connection_string(self._factory.connection_string) as service:
            for name in table_names(self._factory.prefix):
                service.delete_table(name)

    def close(self) -> None:
        for store in self._opened:
            store.close()

    def pin(self, store_id: str | None) -> StoreIdPin:
        """Where the app keeps the store's id, as bootstrap wires it: a file beside the database, or the setting."""
        if self._factory is None:
            return PinnedFile(self._path.with_name(self._path.stem + STORE_ID_SUFFIX))
        return PinnedSetting(store_id)


@pytest.fixture
def stores(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stores]:
    factory = request.getfixturevalue("table_store_factory") if store_kind == "tables" else None
    made = Stores(store_kind, tmp_path, factory)
    yield made
    made.close()


def gate(
    stores: Stores, clock: Callable[[], datetime], ring: KeyRing = SWITCHED, pin: StoreIdPin | None = None
) -> Gate:
    return Gate(stores.open(), ring, clock=clock, check_interval=timedelta(0), pin=pin)


def fill(stores: Stores, clock: FakeClock) -> dict[str, Any]:
    """Claims in every state, a tombstone, conflicts open and resolved, fingerprint records, scopes with rules,
    flows with an overlap, and two key secrets after a rotation; what the test checks after the round trip."""
    before = gate(stores, clock, BEFORE)
    purged = claim(before, key="SO-purged", run="run-0")
    record(before, purged, target_record_id="ERP-0")
    clock.advance(91 * DAY)
    assert before.retention.purge().deleted_total == 1
    set_scope(before, owner="erp@contoso", retention_days=120, horizon_days=400, fingerprint_ignore=["/note"])
    set_scope(before, owner="erp@contoso", retention_days=120, horizon_days=400, fingerprint_ignore=["/memo"])
    register(before)
    done = claim(before, key="SO-done", run="run-1", source="shop-eu", reference="order 1")
    record(before, done, target_record_id="ERP-1", data={"order": 1})
    claim(before, key="SO-done", run="run-2", flow=FLOW_COPY)  # a duplicate from another copy: an overlap
    conflicted = claim(before, key="SO-conflict", run="run-3")
    record(before, conflicted)
    opened = claim(before, key="SO-conflict", run="run-4", fingerprint="v2")
    kept = claim(before, key="SO-kept", run="run-5")
    record(before, kept)
    keep = claim(before, key="SO-kept", run="run-6", fingerprint="v2")
    resolve(before, keep.conflict_id, "keep_original")
    failed = claim(before, key="SO-failed", run="run-7")
    record(before, failed, "failed", error="the ERP said no", retryable=False)
    unknown = claim(before, key="SO-unknown", run="run-8")
    record(before, unknown, "unknown")
    held = claim(before, key="SO-held", run="run-9", lease_seconds=86_400)
    released = claim(before, key="SO-released", run="run-10")
    release(before, released)
    gate(stores, clock, NEXT).health()
    gate(stores, clock, SWITCHED).health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    after = gate(stores, clock, SWITCHED)
    newer = claim(after, key="SO-new-secret", run="run-11")
    record(after, newer)
    after.inventory.usage.flush()
    assert len(after.store.read_marks().secrets) == 2
    for target in TARGETS:
        after.store.save_target(target)
    return {"opened": opened.conflict_id, "kept": keep.conflict_id, "held": held, "unknown": unknown.claim_id}


def stored(store: ClaimStore) -> dict[str, Any]:
    """Everything the promise needs, as stored, without the versions each store gives its rows."""
    marks = store.read_marks()
    conflicts = store.list_conflicts(status=None, scope=None, limit=1000, cursor=None).items
    claims = {
        backup.claim.claim_id: (
            row_writing.claim_to_row(backup.claim),
            [row_writing.event_to_row(event) for event in backup.events],
            sorted(
                (row_writing.fingerprint_to_row(each) for each in backup.fingerprints),
                key=lambda row: row["Fingerprint"],
            ),
        )
        for backup in store.export_claims()
    }
    return {
        "store id": marks.store_id,
        "secrets": sorted((replace(each, version=None) for each in marks.secrets), key=lambda each: each.key_id),
        "conflicts": [replace(each, version=None) for each in conflicts],
        # A scope's counts tally its claims, and lag behind them by what instances have not merged yet: an import
        # counts them again from the claims (test_a_restored_store_counts_each_scopes_claims_as_it_holds_them).
        "scopes": [replace(each, version=None, claims_by_status={}) for each in store.list_scopes()],
        "flows": sorted((replace(each, version=None) for each in store.list_flows()), key=str),
        "overlaps": [replace(each, version=None) for each in store.list_overlaps()],
        "targets": [replace(each, version=None) for each in store.list_targets()],
        "claims": claims,
    }


def exported(store: BackupStore, path: Path, clock: FakeClock) -> backups.ExportFile:
    backups.export(store, path, now=clock)
    return backups.read_export(path)


def test_a_store_exported_wiped_and_imported_keeps_every_key_conflict_tombstone_and_history(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    made = fill(stores, clock)
    before = stored(stores.open())
    export_file = exported(stores.open(), tmp_path / "export.jsonl.gz", clock)
    stores.wipe()
    clock.advance(3600)

    report = backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    marks = stores.open().read_marks()
    # Served as bootstrap serves it: pinned by the store-id file (SQLite) or ONCEGATE_STORE_ID (Table Storage).
    restored = gate(stores, clock, pin=stores.pin(export_file.store_id))

    assert stored(restored.store) == before
    assert before["targets"] == TARGETS
    assert report.counts["claim"] == len(before["claims"]) == 9
    assert report.counts["target"] == 2
    # The exported store's id, and each guarded table's own mark naming it (issue 31): a whole store, not refused.
    assert marks.store_id == export_file.store_id
    assert marks.tables_marked
    assert [mark.store_id for mark in marks.tables] == [export_file.store_id] * len(marks.tables)
    assert check_store_id(marks, pinned=export_file.store_id, seen=None, fresh="new", may_start=False) is None
    assert restored.health().status == "ok"
    for key in DONE:
        assert claim(restored, key=key, run="run-after").decision is Decision.DUPLICATE, key
    assert claim(restored, key="SO-held", run="run-after").decision is Decision.IN_PROGRESS
    assert claim(restored, key="SO-failed", run="run-after").decision is Decision.BLOCKED
    assert claim(restored, key="SO-unknown", run="run-after").decision is not Decision.PROCEED
    assert restored.get_conflict(made["opened"]).status is ConflictStatus.OPEN
    assert restored.get_conflict(made["kept"]).status is ConflictStatus.RESOLVED
    tombstones = restored.store.list_claims(ClaimFilter([ClaimStatus.SUCCEEDED], tombstones=True), limit=10).items
    assert [each.target_record_id for each in tombstones] == ["ERP-0"]
    assert record(restored, made["held"]).status is ClaimStatus.SUCCEEDED  # the holder's token still holds
    restore = restored.store.read_restore()
    assert restore is not None
    assert restore.completed_at == clock()
    assert (restore.exported_at, restore.forgotten_until) == (export_file.started_at, clock() + timedelta(days=400))


def test_a_restored_store_counts_each_scopes_claims_as_it_holds_them(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    """Restored on Azurite: a drill's 24 claims were counted by the serving instance but not yet merged when the daily
    export ran, so the export's scope row said 0 and the restored store `succeeded 2` until a `store recount`. The
    claims are what the store holds: the restored counts are theirs, in scopes whose row the export lacked too."""
    service = gate(stores, clock)
    set_scope(service, scope="erp.create-order", retention_days=30)
    for index in range(3):
        record(service, claim(service, key=f"SO-{index}", run=f"run-{index}"))
    claim(service, key="SO-held", run="run-held")
    release(service, claim(service, key="SO-off", run="run-off", scope="mail.send-invoice"))
    export_file = exported(stores.open(), tmp_path / "export.jsonl.gz", clock)
    stores.wipe()

    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    restored = {record.scope: record for record in stores.open().list_scopes()}

    assert dict(restored["erp.create-order"].claims_by_status) == {ClaimStatus.SUCCEEDED: 3, ClaimStatus.IN_PROGRESS: 1}
    assert restored["erp.create-order"].retention_days == 30
    assert dict(restored["mail.send-invoice"].claims_by_status) == {ClaimStatus.RELEASED: 1}


def test_a_restored_store_says_so_in_its_health_until_the_horizon_of_the_keys_it_forgot(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    service = gate(stores, clock)
    set_scope(service, retention_days=30, horizon_days=200)
    record(service, claim(service, key="SO-1"))
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    clock.advance(600)
    restored_at = clock()
    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    restored = gate(stores, clock)

    told = restored.health().restored
    clock.advance(DAY * 365 - 1)
    still = restored.health().restored
    clock.advance(1)
    past = restored.health()

    assert told is not None
    assert (told.restored_from, told.exported_at, told.restored_at) == (
        export_file.store_id,
        export_file.started_at,
        restored_at,
    )
    # The longest horizon of any scope, or the default one: a year.
    assert told.forgotten_until == restored_at + timedelta(days=365)
    assert told.message == (
        f"Restored from an export: keys done after {export_file.header['startedAt']} are forgotten until "
        f"{utc_text(told.forgotten_until)}."
    )
    assert still == told
    assert past.restored is None
    assert past.status == "ok"


def test_a_claim_listed_in_the_export_is_found_by_its_source_after_the_import(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    service = gate(stores, clock)
    done = claim(service, key="SO-1", run="run-1", source="shop-eu")
    record(service, done)
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()

    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    found = gate(stores, clock).store.list_claims(ClaimFilter(list(ClaimStatus), source="shop-eu"), limit=10)
    assert [each.claim_id for each in found.items] == [done.claim_id]


def test_an_import_is_refused_without_the_exports_time_and_into_a_store_that_holds_anything(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    record(gate(stores, clock), claim(gate(stores, clock), key="SO-1"))
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)

    with pytest.raises(InvalidRequest) as wrong_time:
        backups.import_export(
            stores.open(), export_file, forget_after=export_file.started_at + timedelta(seconds=1), now=clock
        )
    with pytest.raises(InvalidRequest) as not_empty:
        backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    assert wrong_time.value.target == "--forget-after"
    assert backups.moment_text(export_file.started_at) in wrong_time.value.message
    assert not_empty.value.message == (
        "the store is not empty: it holds claims, key secrets, store id. Import into an empty store."
    )
    assert stores.open().read_restore() is None


def test_a_store_that_never_served_a_claim_has_nothing_to_export(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    with pytest.raises(InvalidRequest, match="the store has no id: it never served a claim"):
        backups.export(stores.open(), tmp_path / "export.jsonl", now=clock)

    assert list(tmp_path.glob("export*")) == []


def test_a_store_restored_from_one_export_refuses_another(stores: Stores, clock: FakeClock, tmp_path: Path) -> None:
    record(gate(stores, clock), claim(gate(stores, clock), key="SO-1"))
    first = exported(stores.open(), tmp_path / "first.jsonl", clock)
    clock.advance(60)
    second = exported(stores.open(), tmp_path / "second.jsonl", clock)
    stores.wipe()
    backups.import_export(stores.open(), first, forget_after=first.started_at, now=clock)

    with pytest.raises(InvalidRequest) as refused:
        backups.import_export(stores.open(), second, forget_after=second.started_at, now=clock)

    assert refused.value.message == (
        f"the store was restored from another export (of store {first.store_id}, taken at "
        f"{backups.moment_text(first.started_at)}): import into an empty store."
    )


def test_an_import_fills_a_store_marked_already_as_the_exported_one_and_refuses_one_marked_as_another(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    done = claim(gate(stores, clock), key="SO-1")
    record(gate(stores, clock), done)
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    stores.open().mark_store("another-store", at=clock())

    with pytest.raises(InvalidRequest, match="it holds store id"):
        backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    stores.wipe()
    stores.open().mark_store(export_file.store_id, at=clock())  # as a deployment marks its new store
    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    assert claim(gate(stores, clock), key="SO-1", run="run-2").decision is Decision.DUPLICATE


def test_an_import_fills_a_store_store_init_marked_as_the_exported_one_and_the_app_pinned_to_it_serves_it(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    done = claim(gate(stores, clock), key="SO-1")
    record(gate(stores, clock), done)
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    # The app's pin names the exported store (SQLite: the store-id file left beside the database moved aside), and
    # `oncegate store init` marks the empty store with it.
    pin = stores.pin(export_file.store_id)
    pin.keep(export_file.store_id)
    marked = KeySecrets(stores.open(), clock=clock, pin=pin).start_store()
    contents = stores.open().stored_contents()

    with pytest.raises(InvalidRequest) as pinned_elsewhere:
        backups.import_export(
            stores.open(), export_file, forget_after=export_file.started_at, now=clock, pinned="another-store"
        )
    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    assert marked == export_file.store_id
    assert contents == ["store id"]  # the tables' mark rows are the store's id, not claims or key secrets
    assert pinned_elsewhere.value.target == "ONCEGATE_STORE_ID"
    assert "names store another-store, while the export is of store" in pinned_elsewhere.value.message
    assert claim(gate(stores, clock, pin=pin), key="SO-1", run="run-2").decision is Decision.DUPLICATE
    assert claim(gate(stores, clock, pin=pin), key="SO-2").decision is Decision.PROCEED


def test_a_store_whose_claims_table_lost_its_mark_is_not_exported(
    stores: Stores, clock: FakeClock, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    record(gate(stores, clock), claim(gate(stores, clock), key="SO-1"))
    store = stores.open()
    if stores.kind == "sqlite":
        with store._connection() as connection:  # type: ignore[attr-defined]  # the test's own damage
            connection.execute("DELETE FROM claims")
    else:
        factory = request.getfixturevalue("table_store_factory")
        with TableServiceClient.from_connection_string(factory.connection_string) as service:
            table = service.get_table_client(table_names(factory.prefix)[0])
            for row in list(table.list_entities(select=["PartitionKey", "RowKey"])):
                table.delete_entity(row["PartitionKey"], row["RowKey"])

    # Exported, the import would mark what is left whole as the store it was: SO-1 would proceed again.
    with pytest.raises(NotConfigured, match="lost its mark"):
        backups.export(stores.open(), tmp_path / "export.jsonl", now=clock)

    assert list(tmp_path.glob("export*")) == []


def test_an_export_cut_short_is_refused_by_the_import(stores: Stores, clock: FakeClock, tmp_path: Path) -> None:
    record(gate(stores, clock), claim(gate(stores, clock), key="SO-1"))
    path = tmp_path / "export.jsonl"
    exported(stores.open(), path, clock)
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))

    with pytest.raises(InvalidRequest, match="has no end: the export was cut short"):
        backups.read_export(path)


class Interrupting:
    """A store that fails its ``n``-th claim write, as a stopped import would stop there."""

    def __init__(self, store: ClaimStore, n: int) -> None:
        self._store, self._left = store, n

    def restore_claim(self, backup: Any) -> None:
        self._left -= 1
        if self._left == 0:
            raise KeyboardInterrupt
        self._store.restore_claim(backup)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_an_import_cut_short_goes_on_where_it_stopped_when_run_again(
    stores: Stores, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backups, "PROGRESS_EVERY", 3)
    service = gate(stores, clock)
    for index in range(10):
        record(service, claim(service, key=f"SO-{index}", run=f"run-{index}"))
    before = stored(stores.open())
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()

    with pytest.raises(KeyboardInterrupt):
        backups.import_export(
            Interrupting(stores.open(), 8), export_file, forget_after=export_file.started_at, now=clock
        )
    cut = stores.open()
    half = cut.read_restore()
    not_marked = cut.read_marks().store_id
    again = backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    twice = backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    kinds = [each["record"] for each in export_format.records(export_file.path)][1:]
    stopped_at = [index for index, kind in enumerate(kinds, 1) if kind == "claim"][7]
    assert half is not None
    assert half.completed_at is None
    assert half.records_done == (stopped_at - 1) // 3 * 3  # the last progress saved before it stopped
    assert not_marked is None
    assert again.resumed_after == half.records_done
    assert sum(again.counts.values()) == export_file.records - half.records_done
    assert twice.already_done
    # The scope its instance had not merged yet gets its row, counting its claims, as a recount would make it.
    assert before["scopes"] == []
    assert stored(stores.open()) == {**before, "scopes": [ScopeRecord("erp.create-order")]}
    (scope,) = stores.open().list_scopes()
    assert dict(scope.claims_by_status) == {ClaimStatus.SUCCEEDED: 10}


class PausingExport:
    """A store whose export stops after ``n`` claims until ``meanwhile`` has run: writes land mid-export.

    SQLite reads claims a page at a time: the claims after the ``n``-th may have been read before the writes.
    """

    def __init__(self, store: ClaimStore, n: int, meanwhile: Callable[[], None]) -> None:
        self._store, self._n, self._meanwhile = store, n, meanwhile
        self.read_first: list[str] = []

    def export_claims(self) -> Iterator[Any]:
        for index, backup in enumerate(self._store.export_claims()):
            if index == self._n:
                self._meanwhile()
            if index < self._n:
                self.read_first.append(backup.claim.claim_id)
            yield backup

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_an_export_made_while_another_thread_records_claims_names_those_it_holds_in_an_older_state(
    stores: Stores, tmp_path: Path
) -> None:
    clock = utc_now  # the store's clock and the export's are the same: the change times are compared
    service = gate(stores, clock)
    answers = [claim(service, key=f"SO-{index}", run=f"run-{index}") for index in range(40)]
    go, done = threading.Event(), threading.Event()

    def record_every_claim() -> None:
        writer = gate(stores, clock)
        go.wait()
        for answer in answers:
            record(writer, answer)
        done.set()

    def meanwhile() -> None:
        go.set()
        assert done.wait(timeout=60)

    thread = threading.Thread(target=record_every_claim)
    thread.start()
    paused = PausingExport(stores.open(), 20, meanwhile)
    report = backups.export(paused, tmp_path / "export.jsonl", now=clock)
    thread.join()

    in_file = {
        each["row"]["ClaimId"]: each["row"]["Status"]
        for each in export_format.records(tmp_path / "export.jsonl")
        if each["record"] == "claim"
    }
    # Every claim was recorded during the export: the report names exactly those the file holds as before.
    older = sorted(claim_id for claim_id, status in in_file.items() if status == "in_progress")
    assert sorted(report.changed_after_read) == older
    assert report.current == len(in_file) - len(older) == list(in_file.values()).count("succeeded")
    # The first claims were read before the writes, whatever the store reads at a time.
    assert set(paused.read_first) <= set(older)


def test_an_export_from_sqlite_imports_into_table_storage_and_back(
    tmp_path: Path, clock: FakeClock, table_store_factory: TableStoreFactory
) -> None:
    sqlite = Stores("sqlite", tmp_path, None)
    fill(sqlite, clock)
    before = stored(sqlite.open())
    to_tables = exported(sqlite.open(), tmp_path / "from-sqlite.jsonl", clock)

    backups.import_export(table_store_factory(), to_tables, forget_after=to_tables.started_at, now=clock)
    on_tables = stored(table_store_factory())
    back = exported(table_store_factory(), tmp_path / "from-tables.jsonl", clock)
    sqlite.wipe()
    backups.import_export(sqlite.open(), back, forget_after=back.started_at, now=clock)

    assert on_tables == before
    assert stored(sqlite.open()) == before
    for key in DONE:
        assert claim(gate(sqlite, clock), key=key, run="run-after").decision is Decision.DUPLICATE, key
    sqlite.close()


def test_the_export_holds_each_target_by_its_secrets_name_and_the_header_names_format_2(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    fill(stores, clock)

    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)

    lines = list(export_format.records(export_file.path))
    rows = [line["row"] for line in lines if line["record"] == "target"]
    assert export_file.header["formatVersion"] == 2
    assert export_file.end["counts"]["target"] == 2
    assert [(row["Name"], row["Auth"], row["AuthValue"]) for row in rows] == [
        ("erp", "secret", "X-Api-Key=oncegate-target-erp"),
        ("mail", "none", None),
    ]
    assert rows[0]["DeclaredAt"] == "2026-11-30T08:15:30.123456+00:00"
    # Targets go before the claims, with the flows: a restore cut short has them first. The scopes come last, with
    # the counts of the claims before them.
    kinds = [line["record"] for line in lines]
    places = [index for index, kind in enumerate(kinds) if kind == "target"]
    assert places == [kinds.index("target"), kinds.index("target") + 1]
    assert "flow" in kinds[: places[0]]
    assert places[-1] < kinds.index("claim")
    assert kinds.index("scope") > max(index for index, kind in enumerate(kinds) if kind == "claim")


def test_an_export_counts_each_scopes_claims_from_the_claims_it_holds(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    """The scope rows an export held were the store's, lagging behind its claims by what the serving instances had
    not merged: a drill's export said 0 claims for a scope of 24, and only the import counted them again."""
    service = gate(stores, clock)
    set_scope(service, scope="erp.create-order", retention_days=30)
    set_scope(service, scope="mail.send-invoice", retention_days=1)
    record(service, claim(service, key="INV-1", run="run-inv", scope="mail.send-invoice"))
    clock.advance(2 * DAY)
    assert service.retention.purge().deleted_total == 1  # its tombstone is no claim of the scope's
    for index in range(3):
        record(service, claim(service, key=f"SO-{index}", run=f"run-{index}"))
    claim(service, key="SO-held", run="run-held")
    record(service, claim(service, key="SO-down", run="run-down"), "failed", error="ERP down")
    lagging = {record.scope: dict(record.claims_by_status) for record in stores.open().list_scopes()}

    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)

    scopes = [
        export_format.restored(line) for line in export_format.records(export_file.path) if line["record"] == "scope"
    ]
    assert lagging == {"erp.create-order": {}, "mail.send-invoice": {}}
    assert {scope.scope: dict(scope.claims_by_status) for scope in scopes if isinstance(scope, ScopeRecord)} == {
        "erp.create-order": {ClaimStatus.SUCCEEDED: 3, ClaimStatus.IN_PROGRESS: 1, ClaimStatus.FAILED: 1},
        "mail.send-invoice": {},
    }
    assert [scope.retention_days for scope in scopes if isinstance(scope, ScopeRecord)] == [30, 1]


def test_an_export_of_format_1_from_an_earlier_release_imports_with_no_targets(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    export_file = backups.read_export(LEGACY_EXPORT)

    report = backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    restored = gate(stores, clock, ring=KeyRing(KeyHasher(LEGACY_SECRET)), pin=stores.pin(export_file.store_id))

    assert export_file.header["formatVersion"] == 1
    assert report.counts == {"secret": 1, "claim": 3}
    assert restored.store.list_targets() == []
    assert [claim(restored, key=key, run="run-after").decision for key in ("SO-1", "SO-2", "SO-3")] == [
        Decision.DUPLICATE,
        Decision.DUPLICATE,
        Decision.BLOCKED,
    ]
    assert restored.health().status == "ok"


def test_an_export_of_a_later_format_is_refused_naming_the_formats_this_release_reads(tmp_path: Path) -> None:
    lines = LEGACY_EXPORT.read_text(encoding="utf-8").splitlines()
    header = {**json.loads(lines[0]), "formatVersion": 3}
    later = tmp_path / "later.jsonl"
    later.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")

    with pytest.raises(InvalidRequest) as refused:
        backups.read_export(later)

    assert refused.value.message == f"{later} is an export of format 3; this release reads formats 1 and 2."


def test_an_import_into_a_store_with_a_target_declared_is_refused_naming_it(
    stores: Stores, clock: FakeClock, tmp_path: Path
) -> None:
    record(gate(stores, clock), claim(gate(stores, clock), key="SO-1"))
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    stores.open().save_target(TARGETS[1])

    with pytest.raises(InvalidRequest) as refused:
        backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    assert refused.value.message == "the store is not empty: it holds targets. Import into an empty store."


def test_an_export_never_replaces_a_file_that_is_there(stores: Stores, clock: FakeClock, tmp_path: Path) -> None:
    # The last good export, kept under the name the next one is taken with after the store was emptied by mistake.
    fill(stores, clock)
    path = tmp_path / "export.jsonl.gz"
    good = exported(stores.open(), path, clock)
    kept = path.read_bytes()
    stores.wipe()
    claim(gate(stores, clock), key="SO-new", run="run-new")  # the emptied store serves again, as a new store

    with pytest.raises(InvalidRequest, match=r"export\.jsonl\.gz already exists: an export never replaces a file"):
        backups.export(stores.open(), path, now=clock)

    assert path.read_bytes() == kept
    assert backups.read_export(path).store_id == good.store_id
    assert not (tmp_path / "export.partial.jsonl.gz").exists()
