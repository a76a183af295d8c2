"""The SQLite store's file: its tables, the columns and indexes later releases added, and how a file is made.

``SCHEMA`` is what a new file gets; a file made by an earlier release gets the columns (``ADDED_COLUMNS``)
and indexes (``ADDED_INDEXES``) it lacks when it is opened (:func:`add_columns`). A file that has them all
them already, unchanged since they were made, is found so in one read of its header (:func:`up_to_date`), and none
of that runs.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import zlib
from contextlib import suppress
from pathlib import Path

logger = logging.getLogger(__name__)

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
# Partial: a claim that names no source (or no reference), as most do, is in neither index, so its write updates
# two B-trees of eight fewer (issue 36: a new claim's CPU 170 µs in process from 189, serve's 448 µs a claim from 463,
# side by side). A list by source or reference still reads its index: ``Source = ?`` holds only where Source is not
# null. Files made before hold full indexes under the old names, dropped once the partial ones are made (a scan of
# the claims table at the first open: about a second for 300,000 claims).
ADDED_INDEXES = """
CREATE INDEX IF NOT EXISTS claims_with_source ON claims (Source, UpdatedAt, ClaimId) WHERE Source IS NOT NULL;
CREATE INDEX IF NOT EXISTS claims_with_reference ON claims (Reference, UpdatedAt, ClaimId) WHERE Reference IS NOT NULL;
DROP INDEX IF EXISTS claims_by_source;
DROP INDEX IF EXISTS claims_by_reference;
"""


def private_file(path: Path) -> None:
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


def add_columns(connection: sqlite3.Connection) -> None:
    for table, added in ADDED_COLUMNS.items():
        present = {row["name"] for row in connection.execute(f"PRAGMA table_info({table})")}
        for column in added:
            if column.split()[0] not in present:
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


def up_to_date(connection: sqlite3.Connection, script: str) -> bool:
    """Whether the file holds what ``script`` (``SCHEMA`` and the tables of other modules), :func:`add_columns` and
    ``ADDED_INDEXES`` make, unchanged since they ran on it: running them again would change nothing.

    SQLite counts every change of a file's schema (its ``schema_version``); once they have run, :func:`made` keeps
    which scripts ran (as a checksum, the header's ``application_id``) and that count (``user_version``). Equal, no
    table, column or index was added, dropped or altered since, by any release or tool: three numbers of the header
    read instead of the scripts' 28 statements, which were half of the store's first open (issue 36's cold start).
    """
    # Each on its own: a table-valued pragma has SQLite read the whole schema, which these do not.
    marked, counted, count = (connection.execute(f"PRAGMA {name}").fetchone()[0] for name in _HEADER)
    return bool(marked == _checksum(script) and counted == count)


def made(connection: sqlite3.Connection, script: str) -> None:
    """Marks the file as holding what ``script``, :func:`add_columns` and ``ADDED_INDEXES`` make, as they have just
    made it (see :func:`up_to_date`); in one transaction, so that no other change of the schema comes between."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        (count,) = connection.execute("PRAGMA schema_version").fetchone()
        connection.execute(f"PRAGMA application_id = {_checksum(script)}")
        connection.execute(f"PRAGMA user_version = {count}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


_HEADER = ("application_id", "user_version", "schema_version")


def _checksum(script: str) -> int:
    """The scripts an open runs, as a number the header keeps (``application_id`` is a signed 32-bit integer)."""
    return zlib.crc32(f"{script}{ADDED_COLUMNS}{ADDED_INDEXES}".encode()) & 0x7FFFFFFF
