"""Export a store to a file and import one into an empty store (issue 35).

An export is a point in time, its start: every claim done before it is in the file, and a store
restored from it forgets the keys done after (they are answered ``proceed`` again) until their
horizon has passed. So an import is refused unless the operator names that time, and the restored
store keeps a :class:`~oncegate.domain.backups.Restore` record that says so.

The export reads a store that goes on serving: each claim is one view of its partition, and the
claims the store wrote after the export began are reported, those the file holds in an older state
(or not at all) by id. The import writes through idempotent writes and records how far it got, so
an import cut short and run again goes on where it stopped. The store's marks go last, through
``mark_store``: until then the store is no store the app serves.

The export and the import are the two sides of one file's records and one store's marks: each checks
what the other wrote.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from oncegate.domain.backups import ClaimBackup, Restore
from oncegate.domain.copies import frozen
from oncegate.domain.limits import DEFAULT_HORIZON_DAYS, horizon_days
from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import Conflict, FlowRecord, KeySecretRecord, Overlap, ScopeRecord
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.store_id import STORE_ID, check_store_id
from oncegate.domain.targets import Target
from oncegate.errors import AlreadyExists, ConcurrentUpdate, InvalidRequest
from oncegate.stores import export_format
from oncegate.stores.paging import every_item, utc_text
from oncegate.stores.port import (
    BackupRecords,
    ClaimIndex,
    ConflictRecords,
    InventoryRecords,
    RestoreReads,
    StoreMarkRecords,
    TargetRecords,
    WritesTogether,
)

logger = logging.getLogger(__name__)

# How often progress is told and, on import, saved: every this many records.
PROGRESS_EVERY = 500
CONFLICT_PAGE = 200
# Table Storage's clock (an answer's Date) is in whole seconds: the export starts a second before it said.
CLOCK_GRAIN = timedelta(seconds=1)


def moment_text(at: datetime) -> str:
    """A time as the commands print it and ``--forget-after`` takes it: UTC, to the microsecond, with ``Z``."""
    return utc_text(at).replace("+00:00", "Z")


class BackupStore(
    BackupRecords,
    RestoreReads,
    ConflictRecords,
    InventoryRecords,
    StoreMarkRecords,
    TargetRecords,
    ClaimIndex,
    WritesTogether,
    Protocol,
):
    """The groups of the store port an export and an import use."""

    kind: str


Progress = Callable[[str, int], None]


@dataclass
class ExportReport:
    """What an export wrote: records by kind, its time, and the claims the store changed meanwhile.

    ``changed_after_read`` are the claims the store wrote after the export read them (or that it made
    after the export passed their place): the file holds them as they were before, or not at all.
    ``current`` counts the claims written during the export whose latest state the file holds.
    """

    store_id: str
    started_at: datetime
    finished_at: datetime
    counts: Counter[str]
    key_secret_ids: list[str]
    horizon_days: int
    changed_after_read: list[str] = field(default_factory=list)
    current: int = 0

    @property
    def expires_at(self) -> datetime:
        """When every claim the file holds would have been purged: the file is no use, and no one's to keep, after."""
        return self.finished_at + timedelta(days=self.horizon_days)

    def end_record(self) -> dict[str, Any]:
        return {
            "record": export_format.END,
            "finishedAt": utc_text(self.finished_at),
            "expiresAt": utc_text(self.expires_at),
            "counts": dict(self.counts),
            "keySecretIds": self.key_secret_ids,
            "changedDuringExport": {"changedAfterRead": self.changed_after_read, "current": self.current},
        }


def export(
    store: BackupStore, path: Path, *, now: Callable[[], datetime], on_progress: Progress | None = None
) -> ExportReport:
    """Write every record the promise needs to ``path`` (through ``<stem>.partial<suffix>``, renamed once whole).

    An existing ``path`` is never replaced: it may be the last good export, and one taken of a store emptied by
    mistake under the same name would leave nothing to restore from.
    """
    _refuse_existing(path)
    marks = store.read_marks()
    if marks.store_id is None:
        raise InvalidRequest("the store has no id: it never served a claim, so there is nothing to export.")
    # A store the app refuses (a table of it lost its mark: emptied, dropped, replaced) is not exported: the import
    # would mark what is left whole, as the store it was, and the keys done before the loss would proceed again.
    check_store_id(marks, pinned=None, seen=None, fresh=marks.store_id, may_start=False)
    started_at = marks.clock - CLOCK_GRAIN if marks.clock else now()
    scopes = store.list_scopes()
    horizon = max([DEFAULT_HORIZON_DAYS, *(horizon_days(scope) for scope in scopes)])
    header = {
        "record": export_format.HEADER,
        "format": export_format.FORMAT,
        "formatVersion": export_format.FORMAT_VERSION,
        "storeId": marks.store_id,
        "exportId": secrets.token_hex(8),
        "storeKind": store.kind,
        "startedAt": utc_text(started_at),
        "horizonDays": horizon,
        "keySecretIds": [record.key_id for record in marks.secrets if record.retired_at is None],
    }
    partial = path.with_name(f"{path.stem}.partial{path.suffix}")
    counts: Counter[str] = Counter()
    needed: set[str] = set()
    read_after_change: dict[str, str] = {}
    with export_format.open_for_writing(partial) as out:
        export_format.write(out, header)

        def put(record: dict[str, Any]) -> None:
            export_format.write(out, record)
            kind = record["record"]
            counts[kind] += 1
            if on_progress and counts[kind] % PROGRESS_EVERY == 0:
                on_progress(kind, counts[kind])

        for secret in marks.secrets:
            put(export_format.secret_record(secret))
        _section(put, on_progress, counts, "flow", map(export_format.flow_record, store.list_flows()))
        _section(put, on_progress, counts, "overlap", map(export_format.overlap_record, store.list_overlaps()))
        _section(put, on_progress, counts, "target", map(export_format.target_record, store.list_targets()))
        conflicts = every_item(
            lambda cursor: store.list_conflicts(status=None, scope=None, limit=CONFLICT_PAGE, cursor=cursor)
        )
        _section(put, on_progress, counts, "conflict", map(export_format.conflict_record, conflicts))
        claims_by_scope: dict[str, Counter[ClaimStatus]] = {}
        for backup in store.export_claims():
            put(export_format.claim_record(backup))
            if backup.claim.purged_at is None:  # a tombstone is no claim of its scope's, as a recount counts
                claims_by_scope.setdefault(backup.claim.scope, Counter())[backup.claim.status] += 1
            if backup.claim.key_id:
                needed.add(backup.claim.key_id)
            if backup.changed_at >= started_at:
                read_after_change[backup.claim.claim_id] = str(backup.claim.version)
        if on_progress:
            on_progress("claim", counts["claim"])
        # The scopes after the claims, each counting the claims just written: a scope's row lags behind its claims by
        # what the serving instances had counted and not yet merged (oncegate.service.usage).
        recounted = (replace(scope, claims_by_status=dict(claims_by_scope.get(scope.scope, {}))) for scope in scopes)
        _section(put, on_progress, counts, "scope", map(export_format.scope_record, recounted))
        report = ExportReport(
            store_id=marks.store_id,
            started_at=started_at,
            finished_at=now(),
            counts=counts,
            key_secret_ids=sorted(needed),
            horizon_days=horizon,
        )
        for claim_id, version in store.claims_changed_since(started_at):
            if read_after_change.get(claim_id) == version:
                report.current += 1
            else:
                report.changed_after_read.append(claim_id)
        export_format.write(out, report.end_record())
    _refuse_existing(path)  # made while the export ran; the whole export stays in the partial file
    partial.replace(path)
    return report


def _refuse_existing(path: Path) -> None:
    if os.path.lexists(path):
        raise InvalidRequest(
            f"{path} already exists: an export never replaces a file, which may be the last good export. "
            "Name another file, or move that one away first.",
            target="FILE",
        )


def _section(
    put: Callable[[dict[str, Any]], None],
    on_progress: Progress | None,
    counts: Counter[str],
    kind: str,
    records: Iterator[dict[str, Any]],
) -> None:
    for record in records:
        put(record)
    if on_progress:
        on_progress(kind, counts[kind])


@frozen
class ExportFile:
    """An export's header and end, read through once to check that it is whole."""

    path: Path
    header: dict[str, Any]
    end: dict[str, Any]
    records: int

    @property
    def store_id(self) -> str:
        return str(self.header["storeId"])

    @property
    def export_id(self) -> str:
        return str(self.header["exportId"])

    @property
    def started_at(self) -> datetime:
        return datetime.fromisoformat(self.header["startedAt"])

    @property
    def horizon(self) -> timedelta:
        return timedelta(days=int(self.header["horizonDays"]))


def read_export(path: Path) -> ExportFile:
    """The export at ``path``, read through once; raises ``InvalidRequest`` for a file that is not a whole export."""
    lines = export_format.records(path)
    try:
        header = next(lines, None)
        if not header or header.get("format") != export_format.FORMAT:
            raise InvalidRequest(f"{path} is not an OnceGate export.", target="FILE")
        if header.get("formatVersion") not in export_format.READABLE_VERSIONS:
            readable = " and ".join(str(version) for version in export_format.READABLE_VERSIONS)
            raise InvalidRequest(
                f"{path} is an export of format {header.get('formatVersion')}; this release reads formats {readable}.",
                target="FILE",
            )
        counts: Counter[str] = Counter()
        end = None
        for record in lines:
            if end is not None:
                raise InvalidRequest(f"{path} has records after its end.", target="FILE")
            if record["record"] == export_format.END:
                end = record
            else:
                counts[record["record"]] += 1
    except (OSError, EOFError, ValueError, KeyError) as exc:
        raise InvalidRequest(f"{path} cannot be read as an export: {exc}", target="FILE") from exc
    if end is None:
        raise InvalidRequest(f"{path} has no end: the export was cut short. Export again.", target="FILE")
    if dict(counts) != end["counts"]:
        raise InvalidRequest(f"{path} holds {dict(counts)} but its end says {end['counts']}.", target="FILE")
    return ExportFile(path, header, end, sum(counts.values()))


@dataclass
class ImportReport:
    """What an import wrote: records by kind, where it began this run, and the restore it leaves."""

    restore: Restore
    counts: Counter[str]
    resumed_after: int = 0
    already_done: bool = False


def check_forget_after(export_file: ExportFile, forget_after: datetime) -> None:
    """Refuse (``InvalidRequest``) an import whose ``forget_after`` is not the export's time."""
    if forget_after != export_file.started_at:
        raise InvalidRequest(
            f"--forget-after must be the export's time, {moment_text(export_file.started_at)}: keys done after it "
            "are not in the export, and the restored store answers them proceed again.",
            target="--forget-after",
        )


def import_export(
    store: BackupStore,
    export_file: ExportFile,
    *,
    forget_after: datetime,
    now: Callable[[], datetime],
    on_progress: Progress | None = None,
    pinned: str | None = None,
) -> ImportReport:
    """Fill an empty store from the export, or go on with an import of it cut short; mark the store last.

    Refused (``InvalidRequest``) unless ``forget_after`` is the export's time, for a store that holds
    anything but what an earlier run of this import wrote, and when the id the settings pin (``pinned``:
    ``ONCEGATE_STORE_ID``, or the SQLite store-id file) is another store's, which the app would refuse.
    """
    check_forget_after(export_file, forget_after)
    if pinned is not None and pinned != export_file.store_id:
        raise InvalidRequest(
            f"ONCEGATE_STORE_ID (or the store-id file beside a SQLite database) names store {pinned}, while the "
            f"export is of store {export_file.store_id}: the app would refuse the restored store. Import the export "
            f"of store {pinned}, or point the setting at store {export_file.store_id}.",
            target=STORE_ID,
        )
    restore = _restore_to_go_on(store, export_file, now())
    report = ImportReport(restore, Counter(), resumed_after=restore.records_done)
    if restore.completed_at is not None:
        report.already_done = True
        return report
    done = restore.records_done
    counted, unlisted = _claims_by_scope(export_file)
    try:
        for chunk in _chunks(_records_after(export_file, done), PROGRESS_EVERY):
            # SQLite commits a chunk and the progress saved with it in one transaction; Table Storage writes each.
            with store.writing_together():
                for record in chunk:
                    _write(store, _counted(export_format.restored(record), counted))
                    report.counts[record["record"]] += 1
                store.flush_index()
                done += len(chunk)
                restore = replace(restore, records_done=done)
                store.save_restore(restore)
            if on_progress:
                on_progress(chunk[-1]["record"], done)
        for scope in unlisted:
            _write(store, ScopeRecord(scope, claims_by_status=counted[scope]))
        store.flush_index()
        mark(store, export_file.store_id, at=now())
        report.restore = replace(restore, records_done=done, completed_at=now())
        store.save_restore(report.restore)
    except ConcurrentUpdate:
        # Another run of this import ended meanwhile (its record says completed): the store is whole and may serve.
        return _ended_by_another_run(store, report)
    return report


def _ended_by_another_run(store: BackupStore, report: ImportReport) -> ImportReport:
    ended = store.read_restore()
    if ended is None or ended.completed_at is None:
        raise ConcurrentUpdate("the restore record changed while this import saved it")
    report.restore, report.already_done = ended, True
    return report


STATUSES = {status.value for status in ClaimStatus}  # a claim's; a tombstone's is "purged"


def _claims_by_scope(export_file: ExportFile) -> tuple[dict[str, dict[ClaimStatus, int]], list[str]]:
    """Each scope's claims by status as the export holds them (tombstones not counted, as a recount does not), and
    the scopes among them the export has no row of.

    The restored store's counts are those of the claims it holds: a scope row's counts lag behind its claims by what
    the serving instances had counted and not yet merged when the export read it (``oncegate.service.usage``)."""
    counted: dict[str, Counter[ClaimStatus]] = {}
    listed: set[str] = set()
    for record in export_format.records(export_file.path):
        if record["record"] == "scope":
            listed.add(record["row"]["Scope"])
        elif record["record"] == "claim" and record["row"]["Status"] in STATUSES:
            counted.setdefault(record["row"]["Scope"], Counter())[ClaimStatus(record["row"]["Status"])] += 1
    return {scope: dict(counts) for scope, counts in counted.items()}, sorted(counted.keys() - listed)


def _counted(record: export_format.Restored, counted: dict[str, dict[ClaimStatus, int]]) -> export_format.Restored:
    """A scope record with the counts of the claims the export holds, any other record as it is."""
    if isinstance(record, ScopeRecord):
        return replace(record, claims_by_status=counted.get(record.scope, {}))
    return record


def _records_after(export_file: ExportFile, done: int) -> Iterator[dict[str, Any]]:
    """The export's records after the first ``done``, header and end left out."""
    lines = export_format.records(export_file.path)
    next(lines)  # the header
    for index, record in enumerate(lines):
        if record["record"] == export_format.END:
            return
        if index >= done:
            yield record


def _chunks(records: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _restore_to_go_on(store: BackupStore, export_file: ExportFile, now: datetime) -> Restore:
    """The restore record of this export's import cut short, or a new one for an empty store."""
    restore = store.read_restore()
    if restore is not None:
        if restore.export_id == export_file.export_id:
            return restore
        raise InvalidRequest(
            f"the store was restored from another export (of store {restore.restored_from}, taken at "
            f"{moment_text(restore.exported_at)}): import into an empty store.",
            target="store",
        )
    found = store.stored_contents()
    # A store marked as the exported one and holding nothing else (`store init`, a deployment): accepted. Its
    # id and each table's mark must name it; a marking cut short leaves some out, which the import finishes.
    if found == ["store id"] and _marked_as(store.read_marks()) == {export_file.store_id}:
        found = []
    if found:
        raise InvalidRequest(
            f"the store is not empty: it holds {', '.join(found)}. Import into an empty store.", target="store"
        )
    restore = Restore(
        restored_from=export_file.store_id,
        export_id=export_file.export_id,
        exported_at=export_file.started_at,
        started_at=now,
        forgotten_until=now + export_file.horizon,
    )
    # Two imports may find the store empty at once: the record each saves is kept only over its own export's, so
    # the store is filled from one export, never from two.
    try:
        store.save_restore(restore)
    except AlreadyExists as exc:
        other: Restore = exc.existing
        raise InvalidRequest(
            f"the store is being restored from another export (of store {other.restored_from}, taken at "
            f"{moment_text(other.exported_at)}) by an import that began at {moment_text(other.started_at)}: "
            "import into an empty store.",
            target="store",
        ) from None
    except ConcurrentUpdate:
        ended = store.read_restore()  # another run of this import began and ended meanwhile
        assert ended is not None
        return ended
    return restore


def _write(store: BackupStore, record: export_format.Restored) -> None:
    """Write one record as the export holds it; one written already by an earlier run is left as it is."""
    try:
        if isinstance(record, ClaimBackup):
            store.restore_claim(record)
        elif isinstance(record, Conflict):
            store.create_conflict(record)
        elif isinstance(record, KeySecretRecord):
            store.save_secret(replace(record, version=None))
        elif isinstance(record, ScopeRecord):
            store.save_scope(replace(record, version=None))
        elif isinstance(record, FlowRecord):
            store.save_flow(replace(record, version=None))
        elif isinstance(record, Overlap):
            store.save_overlap(replace(record, version=None))
        elif isinstance(record, Target):
            store.save_target(replace(record, version=None))
    except (AlreadyExists, ConcurrentUpdate):
        logger.info("Import: %s was written by an earlier run", type(record).__name__)


def mark(store: BackupStore, store_id: str, *, at: datetime) -> None:
    """Give the restored store the exported store's mark: the one write that makes it a store the app serves.

    Through ``mark_store`` alone, so that the store's rules of what a mark is stay the store's own. A store
    marked already as this one (a run cut short after its mark, a deployment that marked it) is left as it is.
    """
    try:
        store.mark_store(store_id, at=at)
    except ConcurrentUpdate:
        found = _marked_as(store.read_marks()) - {store_id}
        if found:
            others = " and store ".join(sorted(found))
            raise InvalidRequest(f"the store is marked as store {others}, not {store_id}.", target="store") from None


def _marked_as(marks: StoreMarks) -> set[str]:
    """Every store the store's id and its tables' marks name (issue 31): one for a store marked whole."""
    return {each for each in (marks.store_id, *(mark.store_id for mark in marks.tables)) if each is not None}


def restore_notice(store: RestoreReads, now: datetime) -> Restore | None:
    """The restore the store's health tells of: one under way, or one whose forgotten keys' horizon is to come."""
    restore = store.read_restore()
    if restore is None or (restore.completed_at is not None and not restore.forgetting(now)):
        return None
    return restore
