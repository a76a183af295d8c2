"""The embedded default store: one SQLite file, safe for many threads and processes.

A claim is a row whose primary key is the claim id, so a second insert fails; every update
says ``WHERE Version = ?`` and bumps it, so a writer holding an old copy changes nothing.
Writes take the write lock up front (``BEGIN IMMEDIATE``) so a claim change and its history
event commit together, and WAL lets readers go on meanwhile.

The module runs past 400 lines on purpose: it adapts all three ports over one file, and they share
the schema, one connection per thread and the writers' locks; split by port, each part would need
all of them. Its backups (issue 35) are apart, in ``sqlite_backups``, and the rows both write in ``sqlite_rows``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from oncegate import telemetry
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
from oncegate.stores import columns
from oncegate.stores.columns import Row
from oncegate.stores.paging import decode_cursor, encode_cursor, utc_text
from oncegate.stores.sqlite_backups import SqliteBackups
from oncegate.stores.sqlite_rows import (
    MARK_ROW,
    MARK_STATUS,
    MARKED_TABLES,
    NO_TOKEN,
    _claim_row,
    _first_version,
    _insert,
    _no_such_table,
    _sql_row,
    _table_mark,
)

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows: no flock, the processes meet at SQLite's own lock
    fcntl = None

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
# Beside the database, as SQLite's own -wal and -shm: the lock every process's writers queue on.
WRITERS_SUFFIX = "-writers"
R = TypeVar("R")

SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    ClaimId TEXT PRIMARY KEY, Scope TEXT NOT NULL, Status TEXT NOT NULL, Attempt INTEGER NOT NULL,
    Fingerprint TEXT, ClaimToken TEXT NOT NULL, RunId TEXT NOT NULL, FlowName TEXT, FlowEnvironment TEXT,
    FirstReceivedAt TEXT NOT NULL, LastAttemptAt TEXT NOT NULL, UpdatedAt TEXT NOT NULL, LeaseExpiresAt TEXT,
    TargetRecordId TEXT, ResultData TEXT, CompletedAt TEXT, ErrorReason TEXT, Retryable INTEGER,
    Reviewer TEXT, Resolutions TEXT, Version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS key_ids (KeyId TEXT PRIMARY KEY, AddedAt TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS store_identity (StoreId TEXT PRIMARY KEY, CreatedAt TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fingerprints (
    ClaimId TEXT NOT NULL, Fingerprint TEXT NOT NULL, Resolved INTEGER NOT NULL, AliasGeneration INTEGER,
    ConflictId TEXT, Decision TEXT, Reviewer TEXT, Note TEXT, ResolvedAt TEXT, Version INTEGER NOT NULL,
    PRIMARY KEY (ClaimId, Fingerprint)
);
CREATE INDEX IF NOT EXISTS claims_by_change ON claims (UpdatedAt, ClaimId);
CREATE TABLE IF NOT EXISTS history (
    ClaimId TEXT NOT NULL, EventId TEXT NOT NULL, At TEXT NOT NULL, Kind TEXT NOT NULL, Outcome TEXT NOT NULL,
    Attempt INTEGER NOT NULL, RecognisedBy TEXT NOT NULL, RunId TEXT, FlowName TEXT, FlowEnvironment TEXT,
    Fingerprint TEXT, Details TEXT, PRIMARY KEY (ClaimId, EventId)
);
-- A claim's history lists by time, then event id: a page reads one range (issue 22).
CREATE INDEX IF NOT EXISTS history_by_time ON history (ClaimId, At, EventId);
CREATE TABLE IF NOT EXISTS conflicts (
    ConflictId TEXT PRIMARY KEY, ClaimId TEXT NOT NULL, Scope TEXT NOT NULL, Status TEXT NOT NULL,
    Source TEXT NOT NULL, Fingerprint TEXT, ClaimFingerprint TEXT, Reason TEXT NOT NULL, RunId TEXT NOT NULL,
    FlowName TEXT, FlowEnvironment TEXT, CreatedAt TEXT NOT NULL, Details TEXT, Decision TEXT, Reviewer TEXT,
    Note TEXT, ResolvedAt TEXT, Version INTEGER NOT NULL
);
-- One index per filter of the conflict list, each ending in its order, so a page reads one range (issue 12).
-- A file made before gets the ones it lacks when it is opened.
CREATE INDEX IF NOT EXISTS conflicts_by_status ON conflicts (Status, Scope, CreatedAt, ConflictId);
CREATE INDEX IF NOT EXISTS conflicts_by_time ON conflicts (CreatedAt, ConflictId);
CREATE INDEX IF NOT EXISTS conflicts_by_status_and_time ON conflicts (Status, CreatedAt, ConflictId);
CREATE INDEX IF NOT EXISTS conflicts_by_scope_and_time ON conflicts (Scope, CreatedAt, ConflictId);
CREATE TABLE IF NOT EXISTS flows (
    FlowId TEXT PRIMARY KEY, FlowName TEXT NOT NULL, FlowEnvironment TEXT NOT NULL, Owner TEXT,
    Enabled INTEGER NOT NULL, Notes TEXT, RegisteredAt TEXT, FirstSeenAt TEXT, LastSeenAt TEXT,
    Claims INTEGER NOT NULL, Duplicates INTEGER NOT NULL, Version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS scopes (
    Scope TEXT PRIMARY KEY, Owner TEXT, LeaseSeconds INTEGER, RetentionDays INTEGER, Description TEXT,
    RegisteredAt TEXT, FirstSeenAt TEXT, LastSeenAt TEXT, InProgressClaims INTEGER NOT NULL,
    SucceededClaims INTEGER NOT NULL, FailedClaims INTEGER NOT NULL, UnknownClaims INTEGER NOT NULL,
    ReleasedClaims INTEGER NOT NULL, Version INTEGER NOT NULL
);
-- The import that filled this store, if one did (issue 35): one row.
CREATE TABLE IF NOT EXISTS restores (
    RestoredFrom TEXT PRIMARY KEY, ExportId TEXT NOT NULL, ExportedAt TEXT NOT NULL, StartedAt TEXT NOT NULL,
    ForgottenUntil TEXT NOT NULL, RecordsDone INTEGER NOT NULL, CompletedAt TEXT
);
CREATE TABLE IF NOT EXISTS overlaps (
    OverlapId TEXT PRIMARY KEY, FlowName TEXT NOT NULL, FlowEnvironment TEXT NOT NULL, OtherFlowName TEXT NOT NULL,
    OtherFlowEnvironment TEXT NOT NULL, Count INTEGER NOT NULL, FirstSeenAt TEXT, LastSeenAt TEXT,
    ExampleClaimId TEXT, Version INTEGER NOT NULL
);
"""


# Columns added after the first release: a file made before gets them when it is opened.
ADDED_COLUMNS = {
    "claims": (
        "GrantId TEXT",
        "Generation INTEGER",
        "Reconciling TEXT",
        "ReleasedInDoubt INTEGER",
        "SchemaVersion INTEGER",
        "GrantedTo TEXT",
        "Source TEXT",
        "Reference TEXT",
        "KeyId TEXT",
        "RulesVersion INTEGER",
        "IdempotencyAttempt INTEGER",
        "PurgedAt TEXT",
        "Members TEXT",
        # Set on the table's mark row alone (MARK_ROW).
        "StoreId TEXT",
    ),
    # A secret's state (issue 22); rows made before have no Version.
    "key_ids": (
        "Announced INTEGER",
        "InUseFrom TEXT",
        "RetiredAt TEXT",
        "Version INTEGER NOT NULL DEFAULT 1",
        "StoreId TEXT",
    ),
    "store_identity": ("TablesMarked INTEGER",),
    "history": ("Source TEXT", "Count INTEGER", "LastAt TEXT"),
    "conflicts": ("SourceSystem TEXT", "Changed TEXT"),
    "flows": ("ClaimsBySource TEXT",),
    "scopes": ("ClaimsBySource TEXT", "KeyPattern TEXT", "HorizonDays INTEGER", "FingerprintRules TEXT"),
}
# Indexes on added columns, made once the columns are there: finding claims by source or reference (issue 16).
ADDED_INDEXES = """
CREATE INDEX IF NOT EXISTS claims_by_source ON claims (Source, UpdatedAt, ClaimId);
CREATE INDEX IF NOT EXISTS claims_by_reference ON claims (Reference, UpdatedAt, ClaimId);
"""


class _WritersQueue:
    """A lock that writers of this process take in the order they asked for it.

    ``threading.Lock`` lets whichever thread runs next take it, so with many callers one could wait
    behind dozens that came after it: the p99 of a claim with 64 callers halved in first-come order.
    Each waiter waits on a lock of its own, which the holder releases when it hands over.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def __enter__(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()

    def __exit__(self, *_: object) -> None:
        with self._guard:
            if self._waiters:
                # Handed over: the next waiter holds it now, and it stays held.
                self._waiters.popleft().release()
            else:
                self._held = False


class _WritersFile:
    """An exclusive lock on a file beside the database, held by one writer of all processes at a time.

    ``flock`` blocks in the kernel until the holder lets go. Where there is none (Windows), the
    processes fall back to SQLite's own lock.
    """

    def __init__(self, path: Path) -> None:
        self._descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600) if fcntl else None

    def __enter__(self) -> None:
        if fcntl and self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_EX)

    def __exit__(self, *_: object) -> None:
        if fcntl and self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


def _private_file(path: Path) -> None:
    """Create the database file readable by its owner only; SQLite gives its -wal and -shm files the same mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        # Windows has no group and other bits to clear: its st_mode says 0o666 of every writable file.
        if os.name == "posix" and path.stat().st_mode & 0o077:
            # Files made by earlier releases were 0644: claims, history and conflicts are nobody else's to read.
            logger.warning("Making %s readable by its owner only (it was %o)", path, path.stat().st_mode & 0o777)
            with suppress(OSError):  # a file of another owner: SQLite still opens it, as before
                path.chmod(0o600)


def _add_columns(connection: sqlite3.Connection) -> None:
    for table, added in ADDED_COLUMNS.items():
        present = {row["name"] for row in connection.execute(f"PRAGMA table_info({table})")}
        for column in added:
            if column.split()[0] not in present:
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def _replace_claim(connection: sqlite3.Connection, claim: Claim, version: str | None) -> int:
    """Write ``claim`` over its row if the row is still at ``version``: the rows changed, 1 or 0."""
    row = _claim_row(claim)
    assignments = ", ".join(f"{name} = ?" for name in row)
    return connection.execute(
        f"UPDATE claims SET {assignments}, Version = Version + 1 WHERE ClaimId = ? AND Version = ?",
        [*row.values(), claim.claim_id, int(version or 0)],
    ).rowcount


def _missing_as_none(
    connection: sqlite3.Connection, sql: str, parameters: tuple[Any, ...] = (), *, every: bool = False
) -> Any:
    """The query's first row (``every``: all rows); None when its table was dropped under this open store."""
    try:
        cursor = connection.execute(sql, parameters)
    except sqlite3.OperationalError as exc:
        if not _no_such_table(exc):
            raise
        return None
    return cursor.fetchall() if every else cursor.fetchone()


def _mark_row(table: str, key: str, store_id: str, when: str) -> Row:
    """A table's mark row: its key, the store's id, and what the table's NOT NULL columns need."""
    if table == "claims":
        filler: Row = {"Scope": "", "Status": MARK_STATUS, "Attempt": 0, "ClaimToken": NO_TOKEN, "RunId": ""}
        times = {"FirstReceivedAt": when, "LastAttemptAt": when, "UpdatedAt": when}
        return {key: MARK_ROW, **filler, **times, "StoreId": store_id, "Version": 1}
    return {key: MARK_ROW, "AddedAt": when, "StoreId": store_id, "Version": 1}


def _page(rows: list[sqlite3.Row], limit: int, from_row: Callable[[Row, str], R], place: tuple[str, str]) -> Page[R]:
    """A keyset page from ``limit + 1`` rows: the extra row only says that more follow the last one kept."""
    items = [from_row(dict(row), str(row["Version"])) for row in rows[:limit]]
    last = rows[limit - 1] if len(rows) > limit else None
    return Page(items, encode_cursor(last[place[0]], last[place[1]]) if last else None)


class _Slot:
    """A thread's connection, held by that thread's local storage only: it is dropped when the thread ends."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection


class SqliteStore(SqliteBackups):
    """Claims in one SQLite file; a connection per thread."""

    kind = "sqlite"
    # One writer at a time: a bulk call's items go one after another, in one transaction (writing_together).
    parallel_writes = False

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        if self._path != ":memory:":
            try:
                _private_file(Path(self._path))
            except OSError as exc:
                # A path under a file, or where nobody may write: refused like a store that does not answer.
                raise StoreUnavailable(f"cannot create the SQLite database at {self._path}: {exc.strerror}") from exc
        self._local = threading.local()
        self._closers: list[weakref.finalize[Any, Any]] = []
        self._lock = threading.Lock()
        self._writer = _WritersQueue()
        self._writers_file = _WritersFile(Path(self._path + WRITERS_SUFFIX)) if self._path != ":memory:" else None
        with self._alone() as connection:
            # WAL is a setting of the file, made once and kept: a connection that set it again while another
            # process wrote was answered "database is locked", busy timeout or not. So were the script's
            # statements, which is why the store is opened by one process's writer at a time.
            connection.execute("PRAGMA journal_mode = WAL")
            connection.executescript(SCHEMA)
        with self._write() as connection:
            _add_columns(connection)
        with self._alone() as connection:
            connection.executescript(ADDED_INDEXES)
            # Held open for the store's life. Connections come and go with the local server's request
            # threads, and the last one of a process to close checkpoints and deletes the WAL under an
            # exclusive lock: another process opening the file meanwhile was answered "database is locked".
            self._keeper = sqlite3.connect(self._path, check_same_thread=False) if self._path != ":memory:" else None

    def _connection(self) -> sqlite3.Connection:
        slot: _Slot | None = getattr(self._local, "slot", None)
        if slot is None:
            connection = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            connection.row_factory = sqlite3.Row
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA synchronous = NORMAL")
            if telemetry.enabled():  # each statement counts for the answer; a traced one costs its SQL expanded
                connection.set_trace_callback(telemetry.round_trip)
            slot = self._local.slot = _Slot(connection)
            # The local server runs each request on a new thread: a connection must end with its thread,
            # or every request would keep two file handles open until the store closes.
            with self._lock:
                self._closers = [closer for closer in self._closers if closer.alive]
                self._closers.append(weakref.finalize(slot, connection.close))
        return slot.connection

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if _no_such_table(exc):
                # A table dropped under this open store: never "no claim yet", and no retry brings it back.
                logger.error("A OnceGate table is missing: %s", exc)
                raise NotConfigured(missing_table(str(exc).rsplit(":", 1)[-1].strip()), target=STORE_ID) from exc
            logger.warning("SQLite store unavailable: %s", exc)
            raise StoreUnavailable(f"the SQLite store is unavailable: {exc}") from exc

    @contextmanager
    def _alone(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection, while no other writer of any process using the file writes.

        Writers queue on locks that wake the next one when released: a queue in this process, then one
        on a file beside the database for every process using it (oncegate serve --workers, or Core
        Tools' worker processes). SQLite's own file lock is only polled: its busy handler sleeps 1 to
        100 ms between tries, which was the tail under load.
        """
        with self._writer, self._writers_file or nullcontext(), self._translated():
            yield self._connection()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if getattr(self._local, "together", False):
            with self._savepoint() as connection:
                yield connection
            return
        # BEGIN IMMEDIATE still guards against a writer that takes neither lock (another release, a tool).
        with self._alone() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

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
        if getattr(self._local, "together", False):
            yield
            return
        with self._alone() as connection:
            connection.execute("BEGIN IMMEDIATE")
            self._local.together = True
            try:
                yield
            except BaseException:
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
        try:
            with self._write() as connection:
                connection.execute(*_insert("claims", {**_claim_row(claim), "Version": version}))
                connection.execute(*_insert("history", _sql_row(columns.event_to_row(event))))
        except sqlite3.IntegrityError as exc:
            raise AlreadyExists(self.get_claim(claim.claim_id)) from exc
        # What was written, at the version it was written with: no read back, as on Table Storage.
        return columns.claim_from_row(columns.claim_to_row(claim), str(version))

    def get_claim(self, claim_id: str) -> Claim:
        row = self._select_one("SELECT * FROM claims WHERE ClaimId = ?", (claim_id,))
        if row is None:
            raise NotFound(f"no claim has the id {claim_id}.", record="claim")
        return columns.claim_from_row(dict(row), str(row["Version"]), lambda: self.list_events(claim_id))

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
                connection.execute(*_insert("history", _sql_row(columns.event_to_row(event))))
            if fingerprint is not None:
                self._save_fingerprint(connection, fingerprint)
        return columns.claim_from_row(columns.claim_to_row(claim), str(int(claim.version or 0) + 1))

    @staticmethod
    def _save_fingerprint(connection: sqlite3.Connection, record: FingerprintRecord) -> None:
        values = _sql_row(columns.fingerprint_to_row(record))
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
        return [columns.fingerprint_from_row(dict(row), str(row["Version"])) for row in rows]

    def list_claims(self, matching: ClaimFilter, *, limit: int, cursor: str | None = None) -> Page[Claim]:
        after = decode_cursor(cursor) if cursor else ("", "")
        wanted = {f"status{index}": status for index, status in enumerate(columns.stored_statuses(matching))}
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
        return columns.claim_from_row(row, version, lambda: self.list_events(row["ClaimId"]))

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
        stored = [columns.fingerprint_from_row(dict(row), str(row["Version"])) for row in rows]
        return buried_fingerprints(tombstone, stored)

    def add_event(self, event: HistoryEvent) -> None:
        # Event ids are unique, so a row already there is this very event sent again: the same as on Tables.
        with contextlib.suppress(sqlite3.IntegrityError), self._write() as connection:
            connection.execute(*_insert("history", _sql_row(columns.event_to_row(event))))

    def count_event(self, event: HistoryEvent) -> None:
        # One statement: the series' first answer inserts its line, every later one counts in it.
        insert, values = _insert("history", _sql_row(columns.event_to_row(event)))
        with self._write() as connection:
            connection.execute(
                f"{insert} ON CONFLICT (ClaimId, EventId) DO UPDATE SET Count = Count + excluded.Count,"
                " At = min(At, excluded.At), LastAt = max(LastAt, excluded.LastAt)",
                values,
            )

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
        return [columns.event_from_row(dict(row)) for row in rows]

    def create_conflict(self, conflict: Conflict) -> Conflict:
        try:
            with self._write() as connection:
                row = {**_sql_row(columns.conflict_to_row(conflict)), "Version": 1}
                connection.execute(*_insert("conflicts", row))
        except sqlite3.IntegrityError as exc:
            raise AlreadyExists(self.get_conflict(conflict.conflict_id)) from exc
        return self.get_conflict(conflict.conflict_id)

    def get_conflict(self, conflict_id: str) -> Conflict:
        row = self._select_one("SELECT * FROM conflicts WHERE ConflictId = ?", (conflict_id,))
        if row is None:
            raise NotFound(f"no conflict has the id {conflict_id}.", record="conflict")
        return columns.conflict_from_row(dict(row), str(row["Version"]))

    def update_conflict(self, conflict: Conflict) -> Conflict:
        row = _sql_row(columns.conflict_to_row(conflict))
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
        return _page(rows, limit, columns.conflict_from_row, ("CreatedAt", "ConflictId"))

    def conflicts_after(self, created_at: datetime, conflict_id: str = "") -> str:
        return encode_cursor(utc_text(created_at), conflict_id)

    def list_flows(self) -> list[FlowRecord]:
        return self._list("flows", columns.flow_from_row)

    def save_flow(self, record: FlowRecord) -> FlowRecord:
        return replace(record, version=self._save("flows", "FlowId", columns.flow_to_row(record), record.version))

    def list_scopes(self) -> list[ScopeRecord]:
        return self._list("scopes", columns.scope_from_row)

    def save_scope(self, record: ScopeRecord) -> ScopeRecord:
        return replace(record, version=self._save("scopes", "Scope", columns.scope_to_row(record), record.version))

    def list_overlaps(self) -> list[Overlap]:
        return self._list("overlaps", columns.overlap_from_row)

    def save_overlap(self, record: Overlap) -> Overlap:
        row = columns.overlap_to_row(record)
        return replace(record, version=self._save("overlaps", "OverlapId", row, record.version))

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
        together = getattr(self._local, "together", False)
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
            finally:
                if not together:
                    connection.execute("COMMIT")
        return StoreMarks(
            store_id=identity["StoreId"] if identity else None,
            secrets=tuple(columns.secret_from_row(dict(row), str(row["Version"])) for row in rows or ()),
            tables=tables,
            tables_marked=bool(identity and identity["TablesMarked"]),
            holds_claims=bool(holds),
        )

    def save_secret(self, record: KeySecretRecord) -> KeySecretRecord:
        version = self._save("key_ids", "KeyId", columns.secret_to_row(record), record.version)
        return replace(record, version=version)

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
        self._local = threading.local()
        if self._keeper is not None:
            self._keeper.close()
            self._keeper = None
        if self._writers_file is not None:
            with self._writer:
                self._writers_file.close()
