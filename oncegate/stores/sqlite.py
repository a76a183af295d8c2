"""The embedded default store: one SQLite file, safe for many threads and processes.

A claim is a row whose primary key is the claim id, so a second insert fails; every update
says ``WHERE Version = ?`` and bumps it, so a writer holding an old copy changes nothing.
Writes take the write lock up front (``BEGIN IMMEDIATE``) so a claim change and its history
event commit together, and WAL lets readers go on meanwhile.

This module adapts the ports over one connection per thread; the file's tables are in
``sqlite_schema``, the writers' locks in ``sqlite_locks``, its backups (issue 35) in
``sqlite_backups``, and the rows both write in ``sqlite_rows``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from oncegate import telemetry
from oncegate.domain.copies import replaced
from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import (
    Claim,
    ClaimFilter,
    Conflict,
    FingerprintRecord,
    FlowRecord,
    HistoryEvent,
    KeySecretRecord,
    Overlap,
    Page,
    ScopeRecord,
)
from oncegate.domain.statuses import ConflictStatus
from oncegate.domain.store_id import STORE_ID, missing_table
from oncegate.domain.tombstones import buried_fingerprints
from oncegate.errors import AlreadyExists, ConcurrentUpdate, NotConfigured, NotFound, StoreUnavailable
from oncegate.stores import row_reading, row_writing, sqlite_targets
from oncegate.stores.paging import decode_cursor, encode_cursor, utc_text
from oncegate.stores.row_writing import Row
from oncegate.stores.sqlite_backups import SqliteBackups
from oncegate.stores.sqlite_batch import SqliteNewClaims
from oncegate.stores.sqlite_locks import WRITERS_SUFFIX, WritersFile, WritersQueue
from oncegate.stores.sqlite_rows import (
    MARK_ROW,
    MARKED_TABLES,
    Written,
    _claim_row,
    _count_line_sql,
    _first_version,
    _insert,
    _mark_row,
    _missing_as_none,
    _no_such_table,
    _replace_claim,
    _sql_row,
    _table_mark,
)
from oncegate.stores.sqlite_schema import ADDED_INDEXES, SCHEMA, add_columns, made, private_file, up_to_date

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
# Pages the WAL holds before a write copies them into the database (SQLite's default: 1,000). Nearly every claim
# writes the same hot pages again (each index's last leaf, the tables' inner pages), and each checkpoint copies
# them once more, with the file system's work behind it: rarer checkpoints copy them fewer times (issue 36: serve's
# CPU a claim 513 to 464 µs and 470 to 403 µs side by side, in process 188 to 172 µs). The WAL file grows to
# 32 MiB at 4 KiB pages.
WAL_AUTOCHECKPOINT_PAGES = 8000
R = TypeVar("R")


def _file_of(path: str) -> tuple[int, int] | None:
    """The file at ``path`` (its device and inode; zeros for none), None for an in-memory database."""
    if path == ":memory:":
        return None
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return (0, 0)
    return (found.st_dev, found.st_ino)


def _translation(exc: sqlite3.OperationalError) -> NotConfigured | StoreUnavailable:
    """What a failed statement is to the caller: a table dropped under this open store, or a store that does not
    answer."""
    if _no_such_table(exc):
        # A table dropped under this open store: never "no claim yet", and no retry brings it back.
        logger.error("A OnceGate table is missing: %s", exc)
        return NotConfigured(missing_table(str(exc).rsplit(":", 1)[-1].strip()), target=STORE_ID)
    logger.warning("SQLite store unavailable: %s", exc)
    return StoreUnavailable(f"the SQLite store is unavailable: {exc}")


def _page(rows: list[sqlite3.Row], limit: int, from_row: Callable[[Row, str], R], place: tuple[str, str]) -> Page[R]:
    """A keyset page from ``limit + 1`` rows: the extra row only says that more follow the last one kept."""
    items = [from_row(dict(row), str(row["Version"])) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(items, encode_cursor(last[place[0]], last[place[1]]) if last else None)


class _Slot:
    """A thread's connection, held by that thread's local storage only: it is dropped when the thread ends."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection


class _ThreadState(threading.local):
    """What each thread has of the store: its connection (None until its first statement), and whether its writes go
    in one transaction (``writing_together``). Read as attributes with these defaults: ``getattr`` with a default
    raised and caught an ``AttributeError`` on every write of a thread outside ``writing_together`` (issue 36)."""

    slot: _Slot | None = None
    together: bool = False


class _Transaction:
    """A write's own transaction: the writers' locks (those of ``SqliteStore._alone``), ``BEGIN IMMEDIATE``, and
    ``COMMIT``, or ``ROLLBACK`` when the block raises; SQLite's operational errors translated, the block's too.

    BEGIN IMMEDIATE still guards against a writer that takes neither lock (another release, a tool). A class, not a
    generator under ``contextmanager``: every write goes through it, and the generator's way cost three calls more
    and a frame resumed twice (issue 36).
    """

    __slots__ = ("_connection", "_store")

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        store._writer.__enter__()
        try:
            if store._writers_file is not None:
                store._writers_file.__enter__()
            try:
                connection = self._connection = store._checked_connection()
                try:
                    connection.execute("BEGIN IMMEDIATE")
                except BaseException:
                    # Begun, then a stop (Ctrl+C, SIGTERM) as it returned: SQLite's lock is not kept for good.
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            except BaseException:
                if store._writers_file is not None:
                    store._writers_file.__exit__()
                raise
        except BaseException as exc:
            store._writer.__exit__()
            if isinstance(exc, sqlite3.OperationalError):
                raise _translation(exc) from exc
            raise
        return connection

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _: object) -> None:
        store = self._store
        connection = self._connection
        try:
            connection.execute("COMMIT" if kind is None else "ROLLBACK")
        except sqlite3.OperationalError as exc:
            if connection.in_transaction:  # a COMMIT refused may leave it open, and SQLite's lock held
                with suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            raise _translation(exc) from exc
        finally:
            try:
                if store._writers_file is not None:
                    store._writers_file.__exit__()
            finally:  # as a with statement of both would: the queue let go even if a stop lands in the unlock
                store._writer.__exit__()
        if isinstance(error, sqlite3.OperationalError):
            raise _translation(error) from error


class SqliteStore(SqliteBackups, SqliteNewClaims, sqlite_targets.SqliteTargets):
    """Claims in one SQLite file; a connection per thread."""

    kind = "sqlite"
    # One writer at a time: a bulk call's items go one after another, in one transaction (writing_together).
    parallel_writes = False

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        if self._path != ":memory:":
            try:
                private_file(Path(self._path))
            except OSError as exc:
                # A path under a file, or where nobody may write: refused like a store that does not answer.
                raise StoreUnavailable(f"cannot create the SQLite database at {self._path}: {exc.strerror}") from exc
        self._local = _ThreadState()
        self._closers: list[weakref.finalize[Any, Any]] = []
        self._lock = threading.Lock()
        self._opened: tuple[int, int] | None = None
        self._writer = WritersQueue()
        self._writers_file = WritersFile(Path(self._path + WRITERS_SUFFIX)) if self._path != ":memory:" else None
        script = SCHEMA + sqlite_targets.TARGETS_SCHEMA
        with self._alone() as connection:
            # WAL is a setting of the file, made once and kept: a connection that set it again while another
            # process wrote was answered "database is locked", busy timeout or not. So were the script's
            # statements, which is why the store is opened by one process's writer at a time.
            connection.execute("PRAGMA journal_mode = WAL")
            # A file this release opened before, its schema unchanged since, has every table, column and index:
            # the scripts and add_columns would change nothing, and cost half of a first open (issue 36).
            ready = up_to_date(connection, script)
            if not ready:
                connection.executescript(script)
        self._opened = _file_of(self._path)
        if not ready:
            with self._write() as connection:
                add_columns(connection)
        with self._alone() as connection:
            if not ready:
                connection.executescript(ADDED_INDEXES)
                made(connection, script)
            # Held open for the store's life. Connections come and go with the local server's request
            # threads, and the last one of a process to close checkpoints and deletes the WAL under an
            # exclusive lock: another process opening the file meanwhile was answered "database is locked".
            self._keeper = sqlite3.connect(self._path, check_same_thread=False) if self._path != ":memory:" else None

    def _connection(self) -> sqlite3.Connection:
        slot = self._local.slot
        if slot is None:
            self._still_opened()  # a new connection would open (or make) whatever file is at the path now
            connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            connection.row_factory = sqlite3.Row
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            if telemetry.enabled():  # each statement counts for the answer; a traced one costs its SQL expanded
                connection.set_trace_callback(telemetry.round_trip)
            slot = self._local.slot = _Slot(connection)
            # The local server runs each request on a new thread: a connection must end with its thread,
            # or every request would keep two file handles open until the store closes.
            with self._lock:
                self._closers = [closer for closer in self._closers if closer.alive]
                self._closers.append(weakref.finalize(slot, connection.close))
        return slot.connection

    def _checked_connection(self) -> sqlite3.Connection:
        """This thread's connection, once the file at the store's path is still the one it opened: one stat a
        write, the one :meth:`_connection` makes before it opens a thread's first connection or this one."""
        slot = self._local.slot
        if slot is None:
            return self._connection()
        self._still_opened()
        return slot.connection

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            raise _translation(exc) from exc

    @contextmanager
    def _alone(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, while no other writer of any process using the file writes.

        Writers queue on locks that wake the next one when released: a queue in this process, then one
        on a file beside the database for every process using it (oncegate serve --workers, or Core
        Tools' worker processes). SQLite's own file lock is only polled: its busy handler sleeps 1 to
        100 ms between tries, which was the tail under load.
        """
        with self._writer, self._writers_file or nullcontext(), self._translated():
            yield self._checked_connection()

    def _write(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write: a savepoint of the transaction ``writing_together`` holds, or a transaction of its own."""
        return self._savepoint() if self._local.together else _Transaction(self)

    def _still_opened(self) -> None:
        """Refuse (``NotConfigured``) once the database at the store's path is not the file this store opened.

        Moved aside (the restore runbook's step 2), deleted or replaced by another file while an instance ran:
        its open connections would go on writing to the file that left, and every claim made there would be
        lost with it (its key answered proceed again once the app serves the file now at the path).
        """
        if self._opened is not None and _file_of(self._path) != self._opened:
            logger.error("The SQLite database at %s was moved or replaced while this store had it open", self._path)
            raise NotConfigured(
                f"The SQLite database at {self._path} was moved, deleted or replaced while this instance ran: what it "
                "would write would be lost with the file it opened. Nothing is claimed. Restart the app to serve the "
                "database now at that path.",
                target=STORE_ID,
            )

    @contextmanager
    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        """One write inside ``writing_together``: undone alone when it raises, as its own transaction would be."""
        with self._translated():
            connection = self._connection()
            connection.execute("SAVEPOINT write")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK TO write")
                connection.execute("RELEASE write")
                raise
            connection.execute("RELEASE write")

    @contextmanager
    def writing_together(self) -> Iterator[None]:
        """This thread's writes in the block commit in one transaction (see the port): a bulk call's 100 items
        cost one take of the writers' locks and one commit instead of one each (issue 24)."""
        if self._local.together:
            yield
            return
        with self._alone() as connection:
            try:
                connection.execute("BEGIN IMMEDIATE")
                self._local.together = True
                yield
            except BaseException:
                if connection.in_transaction:  # not begun, or begun and stopped (Ctrl+C) as BEGIN returned
                    connection.execute("ROLLBACK")
                raise
            finally:
                self._local.together = False
            try:
                connection.execute("COMMIT")
            except sqlite3.OperationalError:
                # A commit that failed may leave the transaction open; the writes are lost either way.
                with suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                raise

    def _select_one(self, sql: str, parameters: tuple[Any, ...]) -> sqlite3.Row | None:
        with self._translated():
            row: sqlite3.Row | None = self._connection().execute(sql, parameters).fetchone()
            return row

    def create_claim(self, claim: Claim, event: HistoryEvent) -> Claim:
        version = _first_version()
        # The rows are made (and a row too large refused) before the writers' locks are taken: nothing in them
        # reads the file, and every other writer waits while they are held.
        written: Written = {}  # the claim's first line was written at its first moment: one text
        row = _claim_row(claim, written)
        row["Version"] = version
        claim_insert = _insert("claims", row)
        event_insert = _insert("history", _sql_row(row_writing.event_to_row(event), written))
        try:
            with self._write() as connection:
                connection.execute(*claim_insert)
                connection.execute(*event_insert)
        except sqlite3.IntegrityError as exc:
            raise AlreadyExists(self.get_claim(claim.claim_id)) from exc
        # What was written, at the version it was written with: no read back, as on Table Storage.
        return replaced(claim, version=str(version))

    def get_claim(self, claim_id: str) -> Claim:
        row = self._select_one("SELECT * FROM claims WHERE ClaimId = ?", (claim_id,))
        if row is None:
            raise NotFound(f"no claim has the id {claim_id}.", record="claim")
        return row_reading.claim_from_row(dict(row), str(row["Version"]), lambda: self.list_events(claim_id))

    def update_claim(
        self,
        claim: Claim,
        event: HistoryEvent | None,
        *,
        fingerprint: FingerprintRecord | None = None,
        relabelled: bool = False,
    ) -> Claim:
        with self._write() as connection:
            changed = _replace_claim(connection, claim, claim.version)
            if changed != 1:
                raise ConcurrentUpdate(f"claim {claim.claim_id} changed since version {claim.version}")
            if event is not None:
                connection.execute(*_insert("history", _sql_row(row_writing.event_to_row(event))))
            if fingerprint is not None:
                self._save_fingerprint(connection, fingerprint)
        return row_reading.claim_from_row(row_writing.claim_to_row(claim), str(int(claim.version or 0) + 1))

    @staticmethod
    def _save_fingerprint(connection: sqlite3.Connection, record: FingerprintRecord) -> None:
        values = _sql_row(row_writing.fingerprint_to_row(record))
        if record.version is None:
            try:
                connection.execute(*_insert("fingerprints", {**values, "Version": 1}))
            except sqlite3.IntegrityError as exc:
                raise ConcurrentUpdate(f"fingerprint {record.fingerprint} of claim {record.claim_id} exists") from exc
            return
        assignments = ", ".join(f"{name} = ?" for name in values)
        changed = connection.execute(
            f"UPDATE fingerprints SET {assignments}, Version = Version + 1"
            " WHERE ClaimId = ? AND Fingerprint = ? AND Version = ?",
            [*values.values(), record.claim_id, record.fingerprint, int(record.version)],
        ).rowcount
        if changed != 1:
            raise ConcurrentUpdate(f"fingerprint {record.fingerprint} of claim {record.claim_id} changed")

    def get_fingerprints(self, claim_id: str, fingerprints: Collection[str]) -> list[FingerprintRecord]:
        wanted = list(dict.fromkeys(fingerprints))
        if not wanted:
            return []
        marks = ", ".join("?" for _ in wanted)
        with self._translated():
            rows = (
                self._connection()
                .execute(
                    f"SELECT * FROM fingerprints WHERE ClaimId = ? AND Fingerprint IN ({marks})", [claim_id, *wanted]
                )
                .fetchall()
            )
        return [row_reading.fingerprint_from_row(dict(row), str(row["Version"])) for row in rows]

    def list_claims(self, matching: ClaimFilter, *, limit: int, cursor: str | None = None) -> Page[Claim]:
        after = decode_cursor(cursor) if cursor else ("", "")
        wanted = {f"status{index}": status for index, status in enumerate(row_reading.stored_statuses(matching))}
        before, since = matching.changed_before, matching.received_since
        # Only the filters given are in the query, so SQLite can use the index of source or reference.
        filters = {
            "Scope = :scope": matching.scope,
            "UpdatedAt < :before": utc_text(before) if before else None,
            "Source = :source": matching.source,
            "Reference = :reference": matching.reference,
            "FirstReceivedAt >= :since": utc_text(since) if since else None,
        }
        given = {clause: value for clause, value in filters.items() if value is not None}
        names = {clause.rsplit(":", 1)[1]: value for clause, value in given.items()}
        with self._translated():
            rows = (
                self._connection()
                .execute(
                    f"SELECT * FROM claims WHERE Status IN ({', '.join(':' + name for name in wanted)})"
                    + "".join(f" AND {clause}" for clause in given)
                    + " AND (UpdatedAt, ClaimId) > (:at, :id) ORDER BY UpdatedAt, ClaimId LIMIT :limit",
                    {**wanted, **names, "at": after[0], "id": after[1], "limit": limit + 1},
                )
                .fetchall()
            )
        return _page(rows, limit, self._claim, ("UpdatedAt", "ClaimId"))

    def _claim(self, row: Row, version: str) -> Claim:
        return row_reading.claim_from_row(row, version, lambda: self.list_events(row["ClaimId"]))

    def flush_index(self) -> None:
        """Nothing to write: the claims table's own indexes find claims by source or reference."""

    def repair_index(self, *, received_since: datetime) -> int:
        """Nothing to repair: the indexes are written with each claim."""
        return 0

    def delete_claim(self, claim: Claim, *, tombstone: Claim | None = None) -> None:
        # One transaction: the claim (or all but its tombstone) and its history go together, or not at all.
        with self._write() as connection:
            if tombstone is None:
                changed = connection.execute(
                    "DELETE FROM claims WHERE ClaimId = ? AND Version = ?", (claim.claim_id, int(claim.version or 0))
                ).rowcount
            else:
                changed = _replace_claim(connection, tombstone, claim.version)
            if changed != 1:
                raise ConcurrentUpdate(f"claim {claim.claim_id} changed since version {claim.version}, or is gone")
            connection.execute("DELETE FROM history WHERE ClaimId = ?", (claim.claim_id,))
            kept = self._buried_fingerprints(connection, tombstone) if tombstone is not None else []
            marks = ", ".join("?" for _ in kept)
            connection.execute(
                f"DELETE FROM fingerprints WHERE ClaimId = ? AND Fingerprint NOT IN ({marks})",
                [claim.claim_id, *(record.fingerprint for record in kept)],
            )
            for record in kept:
                self._save_fingerprint(connection, record)

    @staticmethod
    def _buried_fingerprints(connection: sqlite3.Connection, tombstone: Claim) -> list[FingerprintRecord]:
        """The claim's fingerprint records its tombstone keeps, as they are to be written (issue 31)."""
        rows = connection.execute("SELECT * FROM fingerprints WHERE ClaimId = ?", (tombstone.claim_id,)).fetchall()
        stored = [row_reading.fingerprint_from_row(dict(row), str(row["Version"])) for row in rows]
        return buried_fingerprints(tombstone, stored)

    def add_event(self, event: HistoryEvent) -> None:
        # Event ids are unique, so a row already there is this very event sent again: the same as on Tables.
        with contextlib.suppress(sqlite3.IntegrityError), self._write() as connection:
            connection.execute(*_insert("history", _sql_row(row_writing.event_to_row(event))))

    def count_event(self, event: HistoryEvent) -> None:
        # One statement: the series' first answer inserts its line, every later one counts in it; nothing while
        # its claim is gone (deleted by retention since the answer read it): no history without its claim.
        row = _sql_row(row_writing.event_to_row(event))
        with self._write() as connection:
            connection.execute(_count_line_sql(tuple(row)), [*row.values(), event.claim_id])

    def list_events(self, claim_id: str) -> list[HistoryEvent]:
        return self._events(claim_id, after=("", ""), limit=-1)

    def list_history(self, claim_id: str, *, limit: int, cursor: str | None = None) -> Page[HistoryEvent]:
        events = self._events(claim_id, after=decode_cursor(cursor) if cursor else ("", ""), limit=limit + 1)
        last = events[limit - 1] if len(events) > limit else None
        return Page(events[:limit], encode_cursor(utc_text(last.at), last.event_id) if last else None)

    def _events(self, claim_id: str, *, after: tuple[str, str], limit: int) -> list[HistoryEvent]:
        """The claim's history after the place ``after`` (time as fixed-width UTC text, event id); -1: no limit."""
        with self._translated():
            rows = (
                self._connection()
                .execute(
                    "SELECT * FROM history WHERE ClaimId = ? AND (At, EventId) > (?, ?) ORDER BY At, EventId LIMIT ?",
                    (claim_id, *after, limit),
                )
                .fetchall()
            )
        return [row_reading.event_from_row(dict(row)) for row in rows]

    def create_conflict(self, conflict: Conflict) -> Conflict:
        try:
            with self._write() as connection:
                row = {**_sql_row(row_writing.conflict_to_row(conflict)), "Version": 1}
                connection.execute(*_insert("conflicts", row))
        except sqlite3.IntegrityError as exc:
            raise AlreadyExists(self.get_conflict(conflict.conflict_id)) from exc
        return self.get_conflict(conflict.conflict_id)

    def get_conflict(self, conflict_id: str) -> Conflict:
        row = self._select_one("SELECT * FROM conflicts WHERE ConflictId = ?", (conflict_id,))
        if row is None:
            raise NotFound(f"no conflict has the id {conflict_id}.", record="conflict")
        return row_reading.conflict_from_row(dict(row), str(row["Version"]))

    def update_conflict(self, conflict: Conflict) -> Conflict:
        row = _sql_row(row_writing.conflict_to_row(conflict))
        assignments = ", ".join(f"{name} = ?" for name in row)
        with self._write() as connection:
            changed = connection.execute(
                f"UPDATE conflicts SET {assignments}, Version = Version + 1 WHERE ConflictId = ? AND Version = ?",
                [*row.values(), conflict.conflict_id, int(conflict.version or 0)],
            ).rowcount
            if changed != 1:
                raise ConcurrentUpdate(f"conflict {conflict.conflict_id} changed since version {conflict.version}")
        return self.get_conflict(conflict.conflict_id)

    def list_conflicts(
        self, *, status: ConflictStatus | None, scope: str | None, limit: int, cursor: str | None
    ) -> Page[Conflict]:
        """Conflicts oldest first: ``limit + 1`` rows of one index range, however many conflicts there are.

        Each filter (none, status, scope, both) has an index that ends in (CreatedAt, ConflictId), so
        only the filters given are in the query: ``:status IS NULL OR ...`` would keep SQLite off them.
        """
        after = decode_cursor(cursor) if cursor else ("", "")
        wanted = {"Status": status.value if status else None, "Scope": scope}
        given = {name: value for name, value in wanted.items() if value is not None}
        filters = "".join(f"{name} = :{name} AND " for name in given)
        with self._translated():
            rows = (
                self._connection()
                .execute(
                    f"SELECT * FROM conflicts WHERE {filters}(CreatedAt, ConflictId) > (:at, :id)"
                    " ORDER BY CreatedAt, ConflictId LIMIT :limit",
                    {**given, "at": after[0], "id": after[1], "limit": limit + 1},
                )
                .fetchall()
            )
        return _page(rows, limit, row_reading.conflict_from_row, ("CreatedAt", "ConflictId"))

    def conflicts_after(self, created_at: datetime, conflict_id: str = "") -> str:
        return encode_cursor(utc_text(created_at), conflict_id)

    def list_flows(self) -> list[FlowRecord]:
        return self._list("flows", row_reading.flow_from_row)

    def save_flow(self, record: FlowRecord) -> FlowRecord:
        return replaced(record, version=self._save("flows", "FlowId", row_writing.flow_to_row(record), record.version))

    def list_scopes(self) -> list[ScopeRecord]:
        return self._list("scopes", row_reading.scope_from_row)

    def save_scope(self, record: ScopeRecord) -> ScopeRecord:
        return replaced(record, version=self._save("scopes", "Scope", row_writing.scope_to_row(record), record.version))

    def list_overlaps(self) -> list[Overlap]:
        return self._list("overlaps", row_reading.overlap_from_row)

    def save_overlap(self, record: Overlap) -> Overlap:
        row = row_writing.overlap_to_row(record)
        return replaced(record, version=self._save("overlaps", "OverlapId", row, record.version))

    def _list(self, table: str, from_row: Callable[[Row, str], R]) -> list[R]:
        with self._translated():
            rows = self._connection().execute(f"SELECT * FROM {table}").fetchall()
        return [from_row(dict(row), str(row["Version"])) for row in rows]

    def _save(self, table: str, key: str, row: Row, version: str | None) -> str:
        """Insert the row (no version) or replace it at that version; the row's new version."""
        values = _sql_row(row)
        try:
            with self._write() as connection:
                if version is None:
                    connection.execute(*_insert(table, {**values, "Version": 1}))
                    return "1"
                assignments = ", ".join(f"{name} = ?" for name in values)
                changed = connection.execute(
                    f"UPDATE {table} SET {assignments}, Version = Version + 1 WHERE {key} = ? AND Version = ?",
                    [*values.values(), row[key], int(version)],
                ).rowcount
                if changed != 1:
                    raise ConcurrentUpdate(f"{table} row {row[key]} changed since version {version}")
                return str(int(version) + 1)
        except sqlite3.IntegrityError as exc:
            raise ConcurrentUpdate(f"{table} row {row[key]} exists already") from exc

    def read_marks(self) -> StoreMarks:
        """The store's id, its key secrets and its tables' marks, in one read transaction; no clock of its own:
        SQLite shares this machine's."""
        # One snapshot for every read (a bulk call's writes may already hold this thread's transaction open).
        together = self._local.together
        with self._translated():
            connection = self._connection()
            if not together:
                connection.execute("BEGIN")
            try:
                identity = _missing_as_none(connection, "SELECT StoreId, TablesMarked FROM store_identity")
                rows = _missing_as_none(connection, "SELECT * FROM key_ids WHERE KeyId != ?", (MARK_ROW,), every=True)
                tables = tuple(_table_mark(connection, table, key) for table, key in MARKED_TABLES.items())
                whole = identity is not None and identity["TablesMarked"] and all(mark.store_id for mark in tables)
                holds = not whole and _missing_as_none(
                    connection, "SELECT 1 FROM claims WHERE ClaimId != ? LIMIT 1", (MARK_ROW,)
                )
                restoring = _missing_as_none(connection, "SELECT 1 FROM restores WHERE CompletedAt IS NULL")
            finally:
                if not together:
                    connection.execute("COMMIT")
        return StoreMarks(
            store_id=identity["StoreId"] if identity else None,
            secrets=tuple(row_reading.secret_from_row(dict(row), str(row["Version"])) for row in rows or ()),
            tables=tables,
            tables_marked=bool(identity and identity["TablesMarked"]),
            holds_claims=bool(holds),
            restoring=bool(restoring),
        )

    def save_secret(self, record: KeySecretRecord) -> KeySecretRecord:
        version = self._save("key_ids", "KeyId", row_writing.secret_to_row(record), record.version)
        return replaced(record, version=version)

    def mark_store(self, store_id: str, *, at: datetime) -> None:
        """The marks and the id in one transaction: no reader ever sees one without the other."""
        when = utc_text(at)
        with self._write() as connection:
            identity = connection.execute("SELECT StoreId FROM store_identity").fetchone()
            if identity is not None and identity["StoreId"] != store_id:
                raise ConcurrentUpdate(f"the store is store {identity['StoreId']} already")
            for table, key in MARKED_TABLES.items():
                marked = connection.execute(f"SELECT StoreId FROM {table} WHERE {key} = ?", (MARK_ROW,)).fetchone()
                if marked is not None and marked["StoreId"] != store_id:
                    raise ConcurrentUpdate(f"the table {table} is marked as store {marked['StoreId']}")
                if marked is None:
                    connection.execute(*_insert(table, _mark_row(table, key, store_id, when)))
            if identity is None:
                row = {"StoreId": store_id, "CreatedAt": when, "TablesMarked": 1}
                connection.execute(*_insert("store_identity", row))
            else:
                connection.execute("UPDATE store_identity SET TablesMarked = 1")

    def ping(self) -> None:
        self._select_one("SELECT 1", ())

    def close(self) -> None:
        with self._lock:
            for closer in self._closers:
                closer()
            self._closers.clear()
        self._local = _ThreadState()
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        if self._writers_file is not None:
            with self._writer:
                self._writers_file.close()
