"""Imports of exports racing each other into one store (issue 35's restore, run twice at once), on both stores.

Two operators (or a pipeline retried while its first run still works) import at the same time, on threads of
their own through stores of their own. Two different exports of one store meeting in an empty store: one import
fills it and the other is refused, so the store is one export's, never a claim of the older export beside the
restore record of the newer (whose forgotten keys health names). The same export imported by two runs: the late
run leaves every claim the first wrote as it is, so a claim the app changed once the first run had marked the
store is not put back to what the export holds (a retried failure that succeeded since would proceed again).

And a store half imported is no store to serve or purge, however it is marked: one `oncegate store init` marked
before the import answered the keys not yet written ``proceed``, and a purge on it, reading none of the scopes
(the last records of an export), deleted tombstones a scope's own horizon still kept.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from oncegate.domain.backups import Restore
from oncegate.domain.statuses import AnswerStatus, Decision
from oncegate.errors import ConcurrentUpdate, InvalidRequest, NotConfigured
from oncegate.service import backups
from oncegate.service.key_secrets import KeySecrets
from oncegate.stores.port import ClaimStore
from oncegate.stores.tables import batch
from tests.conftest import FakeClock
from tests.service import test_backups
from tests.service.calls import claim, record, release, set_scope
from tests.service.test_backups import Interrupting, Stores, exported, gate

KEY = "SO-retried"
DAY = 24 * 3600


class MeetingAfterTheCheck:
    """A store whose import waits, once it found the store empty, until the other import found it empty too."""

    def __init__(self, store: ClaimStore, meeting: threading.Barrier) -> None:
        self._store, self._meeting = store, meeting

    def stored_contents(self) -> list[str]:
        found = self._store.stored_contents()
        self._meeting.wait(timeout=30)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class PausingAfterItsRecord:
    """A store whose import stops once it wrote its restore record, until ``go`` is set."""

    def __init__(self, store: ClaimStore) -> None:
        self._store = store
        self.paused, self.go = threading.Event(), threading.Event()

    def save_restore(self, restore: Restore) -> None:
        self._store.save_restore(restore)
        if not self.paused.is_set():
            self.paused.set()
            assert self.go.wait(timeout=30), "never let go on"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


# The backups tests' stores, one store or Table Storage's tables per test (an assignment, not an import: an imported
# fixture named as a test's parameter reads to ruff as a name redefined).
stores = test_backups.stores


@pytest.fixture
def two_exports(stores: Stores, clock: FakeClock, tmp_path: Path) -> list[backups.ExportFile]:
    """An export whose key failed (retryable), and one taken after its retry succeeded; the store then wiped."""
    service = gate(stores, clock)
    record(service, claim(service, key=KEY, run="run-1"), "failed", error="the ERP timed out", retryable=True)
    for index in range(6):
        record(service, claim(service, key=f"SO-{index}", run=f"run-{index}"))
    first = exported(stores.open(), tmp_path / "first.jsonl", clock)
    clock.advance(60)
    retried = claim(service, key=KEY, run="run-2")
    assert retried.decision == Decision.PROCEED
    record(service, retried, target_record_id="ERP-1")
    clock.advance(60)
    second = exported(stores.open(), tmp_path / "second.jsonl", clock)
    stores.wipe()
    return [first, second]


def test_two_exports_imported_at_once_fill_the_store_with_one_of_them_and_the_other_is_refused(
    stores: Stores, clock: FakeClock, two_exports: list[backups.ExportFile]
) -> None:
    meeting = threading.Barrier(2)

    def restore(export_file: backups.ExportFile) -> backups.ImportReport | InvalidRequest:
        try:
            store = MeetingAfterTheCheck(stores.open(), meeting)
            return backups.import_export(store, export_file, forget_after=export_file.started_at, now=clock)
        except InvalidRequest as exc:
            return exc

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(restore, two_exports))

    done = [
        (export_file, each)
        for export_file, each in zip(two_exports, outcomes, strict=True)
        if not isinstance(each, InvalidRequest)
    ]
    refused = [each for each in outcomes if isinstance(each, InvalidRequest)]
    assert len(done) == 1, f"both imports filled the store: {outcomes}"
    ((winner, _),) = done
    (loser,) = refused
    assert "import into an empty store" in loser.message
    store = stores.open()
    restored = store.read_restore()
    assert restored is not None
    assert (restored.export_id, restored.completed_at is not None) == (winner.export_id, True)
    # The store holds the winner's claims alone: the retried key as that export has it.
    service = gate(stores, clock)
    again = claim(service, key=KEY, run="run-3")
    expected = Decision.DUPLICATE if winner is two_exports[1] else Decision.PROCEED
    assert again.decision == expected


def test_an_import_run_again_while_the_first_still_runs_leaves_what_the_app_changed_since_the_first_ended(
    stores: Stores, clock: FakeClock, two_exports: list[backups.ExportFile]
) -> None:
    first, _ = two_exports
    late = PausingAfterItsRecord(stores.open())
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(backups.import_export, late, first, forget_after=first.started_at, now=clock)
        assert late.paused.wait(timeout=30)
        # The run that ends first: the store marked whole, the app started, the failed key retried and done.
        ended = backups.import_export(stores.open(), first, forget_after=first.started_at, now=clock)
        assert ended.restore.completed_at is not None
        service = gate(stores, clock)
        retried = claim(service, key=KEY, run="run-2")
        assert retried.decision == Decision.PROCEED
        record(service, retried, target_record_id="ERP-1")
        late.go.set()
        running.result(timeout=60)

    again = claim(gate(stores, clock), key=KEY, run="run-3")
    assert (again.decision, again.status) == (Decision.DUPLICATE, AnswerStatus.SUCCEEDED)
    restored = stores.open().read_restore()
    assert restored is not None
    assert restored.completed_at is not None


def test_a_store_marked_before_its_import_is_not_served_while_the_import_is_cut_short(
    stores: Stores, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runbook's store marked by `oncegate store init` (or a deployment) as the exported one, then imported: an
    app left running must not answer for a key the import has not written yet."""
    monkeypatch.setattr(backups, "PROGRESS_EVERY", 2)
    service = gate(stores, clock)
    keys = [f"SO-{index}" for index in range(8)]
    for key in keys:
        record(service, claim(service, key=key, run=f"run-{key}"))
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    pin = stores.pin(export_file.store_id)
    pin.keep(export_file.store_id)
    KeySecrets(stores.open(), clock=clock, pin=pin).start_store()
    with pytest.raises(KeyboardInterrupt):
        backups.import_export(
            Interrupting(stores.open(), 4), export_file, forget_after=export_file.started_at, now=clock
        )

    left_running = gate(stores, clock, pin=pin)
    answers: list[Decision | None] = []
    for key in keys:
        try:
            answers.append(claim(left_running, key=key, run=f"run-{key}-again").decision)
        except NotConfigured:
            answers.append(None)

    assert Decision.PROCEED not in answers, answers
    assert answers == [None] * len(keys)
    # Nor is it exported (a file of part of it, imported, would be whole), nor taken as whole by a redeployment.
    with pytest.raises(NotConfigured, match="being restored from an export"):
        backups.export(stores.open(), tmp_path / "half.jsonl", now=clock)
    with pytest.raises(NotConfigured, match="being restored from an export"):
        KeySecrets(stores.open(), clock=clock, pin=pin).start_store(new_only=True)
    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    served = gate(stores, clock, pin=pin)
    assert [claim(served, key=key, run=f"run-{key}-3").decision for key in keys] == [Decision.DUPLICATE] * len(keys)


def test_a_purge_on_a_store_whose_import_was_cut_short_deletes_nothing_and_the_import_restores_every_key(
    stores: Stores, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scopes come last in an export: a purge on a store half imported (by hand, or the timer of an instance
    left running) read no scope, and deleted the tombstones past the default horizon of a scope that keeps its
    own, longer one; the import run again then restored their keys to nothing."""
    monkeypatch.setattr(backups, "PROGRESS_EVERY", 2)  # SQLite commits what it wrote a chunk at a time
    service = gate(stores, clock)
    set_scope(service, retention_days=30, horizon_days=730)
    keys = [f"SO-{index}" for index in range(4)]
    for key in keys:
        record(service, claim(service, key=key, run=f"run-{key}"))
    clock.advance(31 * DAY)
    assert service.retention.purge().deleted_total == len(keys)  # down to their tombstones
    clock.advance(370 * DAY)  # past the default horizon, within the scope's
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    with pytest.raises(KeyboardInterrupt):
        backups.import_export(
            Interrupting(stores.open(), len(keys)), export_file, forget_after=export_file.started_at, now=clock
        )

    purger = gate(stores, clock, pin=stores.pin(export_file.store_id))
    try:
        report = purger.retention.purge()
        deleted = sum(report.tombstones_deleted.values())
    except NotConfigured:
        deleted = 0
    backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    assert deleted == 0
    served = gate(stores, clock, pin=stores.pin(export_file.store_id))
    assert [claim(served, key=key, run=f"run-{key}-late").decision for key in keys] == [Decision.DUPLICATE] * len(keys)


class PausingOnItsClaim:
    """A Table Storage store whose import of ``claim_id`` waits until ``go`` is set: once it found no row of the claim
    (``look``), or before its first transaction of the claim's rows is sent (``write``)."""

    def __init__(self, store: ClaimStore, claim_id: str, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self._store = store
        self.paused, self.go = threading.Event(), threading.Event()
        looked, sent = store._has_claim_row, batch.submit_transaction  # type: ignore[attr-defined]

        def pause() -> None:
            if not self.paused.is_set():
                self.paused.set()
                assert self.go.wait(timeout=60), "never let go on"

        def has_claim_row(asked: str) -> bool:
            found: bool = looked(asked)
            if where == "look" and asked == claim_id and not found:
                pause()
            return found

        def submit_transaction(table: Any, operations: list[tuple[Any, ...]]) -> Any:
            if where == "write" and table is store._claims and operations[0][1]["PartitionKey"] == claim_id:  # type: ignore[attr-defined]
                pause()
            return sent(table, operations)

        store._has_claim_row = has_claim_row  # type: ignore[attr-defined]
        monkeypatch.setattr(batch, "submit_transaction", submit_transaction)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize("store_kind", ["tables"], indirect=True)
@pytest.mark.parametrize("where", ["look", "write"])
def test_a_late_import_leaves_a_long_history_the_app_added_to_once_the_first_run_ended(
    stores: Stores, clock: FakeClock, tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim whose rows take more than one transaction is written in several: measured on main deee47c, a second
    run of the import that found no claim row (or was about to send its first transaction of the claim's rows), then
    waited while the first run ended and the app answered the key's repeats, wrote the export's tally over the app's
    (the repeats' count went back from 3 to 1) before its claim row was refused. SQLite writes a claim in one
    transaction: Table Storage only."""
    service = gate(stores, clock)
    for attempt in range(48):  # 99 lines of history with the last run's: with its tally, a transaction of rows
        release(service, claim(service, key=KEY, run=f"run-{attempt}"))
    done = claim(service, key=KEY, run="run-done")
    record(service, done, target_record_id="ERP-1")
    assert claim(service, key=KEY, run="run-again").decision == Decision.DUPLICATE
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()

    late = PausingOnItsClaim(stores.open(), done.claim_id, where, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(backups.import_export, late, export_file, forget_after=export_file.started_at, now=clock)
        assert late.paused.wait(timeout=60)
        ended = backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
        assert ended.restore.completed_at is not None
        served = gate(stores, clock)
        for _ in range(2):
            assert claim(served, key=KEY, run="run-again").decision == Decision.DUPLICATE
        before = stores.open().list_events(done.claim_id)
        late.go.set()
        with contextlib.suppress(InvalidRequest, ConcurrentUpdate):
            running.result(timeout=120)

    after = stores.open().list_events(done.claim_id)
    assert (len(after), after[-1].count) == (99, 3)
    assert after == before
    # The guard of the run that wrote the claim went with its last transaction; the late run's, too.
    assert [
        row["RowKey"]
        for row in stores.open()._claims.query_entities(  # type: ignore[attr-defined]
            "PartitionKey eq @pk and RowKey eq 'restoring'", parameters={"pk": done.claim_id}
        )
    ] == []


@pytest.mark.parametrize("store_kind", ["tables"], indirect=True)
def test_an_import_cut_short_inside_a_long_history_is_finished_by_the_next_run(
    stores: Stores, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run cut short between a long claim's transactions leaves its rows and its guard, no claim row: the next
    run takes the guard over, writes the claim whole, and leaves no guard behind."""
    service = gate(stores, clock)
    for attempt in range(60):
        release(service, claim(service, key=KEY, run=f"run-{attempt}"))
    record(service, claim(service, key=KEY, run="run-done"), target_record_id="ERP-1")
    claim_id = claim(service, key=KEY, run="run-again").claim_id
    written = stores.open().list_events(claim_id)
    export_file = exported(stores.open(), tmp_path / "export.jsonl", clock)
    stores.wipe()
    sent = batch.submit_transaction

    def cut_before_the_claim_row(table: Any, operations: list[tuple[Any, ...]]) -> Any:
        if operations[0][1]["PartitionKey"] == claim_id and operations[0][1]["RowKey"] == "claim":
            raise KeyboardInterrupt
        return sent(table, operations)

    with monkeypatch.context() as cut:
        cut.setattr(batch, "submit_transaction", cut_before_the_claim_row)
        with pytest.raises(KeyboardInterrupt):
            backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)
    left = [
        row["RowKey"]
        for row in stores.open()._claims.query_entities(  # type: ignore[attr-defined]
            "PartitionKey eq @pk", parameters={"pk": claim_id}, select=["RowKey"]
        )
    ]
    again = backups.import_export(stores.open(), export_file, forget_after=export_file.started_at, now=clock)

    assert "restoring" in left
    assert "claim" not in left
    assert again.restore.completed_at is not None
    assert stores.open().list_events(claim_id) == written
    rows = [
        row["RowKey"]
        for row in stores.open()._claims.query_entities(  # type: ignore[attr-defined]
            "PartitionKey eq @pk", parameters={"pk": claim_id}, select=["RowKey"]
        )
    ]
    assert "restoring" not in rows
    assert claim(gate(stores, clock), key=KEY, run="run-last").decision == Decision.DUPLICATE
