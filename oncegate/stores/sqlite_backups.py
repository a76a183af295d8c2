"""The SQLite store's backups (issue 35): an export's reads of the claims and an import's writes.

A mixin of ``SqliteStore``: it reads and writes through the store's connection and transactions, declared below.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from oncegate.domain.records import FingerprintRecord, HistoryEvent
from oncegate.stores import row_reading, row_writing
from oncegate.stores.paging import utc_text
from oncegate.stores.sqlite_rows import (
    MARK_ROW,
    MARKED_TABLES,
    _claim_row,
    _first_version,
    _insert,
    _sql_row,
    _table_mark,
)

if TYPE_CHECKING:
    from oncegate.domain.backups import ClaimBackup, Restore

# What an export reads of the claims at a time, each page in one read transaction (issue 35).
EXPORT_PAGE = 200
# The tables an import refuses to fill when they hold anything, by the names an operator reads (issue 35): a claim's
# history and fingerprint records are its own, as they are in its partition on Table Storage.
CONTENTS = {
    "claims": "claims",
    "history": "claims",
    "fingerprints": "claims",
    "conflicts": "conflicts",
    "flows": "flows",
    "scopes": "scopes",
    "overlaps": "overlaps",
    "targets": "targets",
    "key_ids": "key secrets",
    "store_identity": "store id",
}


def _holds_rows(connection: sqlite3.Connection, table: str) -> bool:
    """Whether the table holds a row besides its mark row (issue 35: an import fills only an empty store)."""
    key = MARKED_TABLES.get(table)
    besides = f" WHERE {key} != ?" if key else ""
    row = connection.execute(f"SELECT 1 FROM {table}{besides} LIMIT 1", (MARK_ROW,) if key else ()).fetchone()
    return row is not None


def _backups(rows: list[sqlite3.Row], events: list[sqlite3.Row], prints: list[sqlite3.Row]) -> Iterator[ClaimBackup]:
    """Each claim row with its history and fingerprint rows (both sorted by claim id, as the rows are)."""
    # An export's record, made by the command line's export alone: a store answering claims never imports it.
    from oncegate.domain.backups import ClaimBackup

    history: dict[str, list[HistoryEvent]] = {}
    for row in events:
        history.setdefault(row["ClaimId"], []).append(row_reading.event_from_row(dict(row)))
    records: dict[str, list[FingerprintRecord]] = {}
    for row in prints:
        records.setdefault(row["ClaimId"], []).append(row_reading.fingerprint_from_row(dict(row), str(row["Version"])))
    for row in rows:
        claim_id = row["ClaimId"]
        events_of = history.get(claim_id, [])
        claim = row_reading.claim_from_row(dict(row), str(row["Version"]), partial(list, events_of))
        yield ClaimBackup(
            claim, tuple(events_of), tuple(records.get(claim_id, [])), datetime.fromisoformat(row["UpdatedAt"])
        )


class SqliteBackups:
    """``BackupRecords`` and ``RestoreReads`` over the store's file."""

    # The store's own, which it defines (sqlite.SqliteStore).
    _translated: Callable[[], AbstractContextManager[None]]
    _connection: Callable[[], sqlite3.Connection]
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _select_one: Callable[[str, tuple[Any, ...]], sqlite3.Row | None]

    def export_claims(self) -> Iterator[ClaimBackup]:
        """Claims in claim id order, a page at a time: each page's claims, history and fingerprint records are
        read in one read transaction, one view of the file, however long the export runs."""
        after = ""
        while True:
            with self._translated():
                connection = self._connection()
                connection.execute("BEGIN")
                try:
                    rows = connection.execute(
                        "SELECT * FROM claims WHERE ClaimId > ? AND ClaimId != ? ORDER BY ClaimId LIMIT ?",
                        (after, MARK_ROW, EXPORT_PAGE),
                    ).fetchall()
                    ids = [row["ClaimId"] for row in rows]
                    marks = ", ".join("?" for _ in ids)
                    events = connection.execute(
                        f"SELECT * FROM history WHERE ClaimId IN ({marks}) ORDER BY ClaimId, At, EventId", ids
                    ).fetchall()
                    prints = connection.execute(
                        f"SELECT * FROM fingerprints WHERE ClaimId IN ({marks})", ids
                    ).fetchall()
                finally:
                    connection.execute("COMMIT")
            yield from _backups(rows, events, prints)
            if len(rows) < EXPORT_PAGE:
                return
            after = ids[-1]

    def claims_changed_since(self, at: datetime) -> Iterator[tuple[str, str]]:
        with self._translated():
            rows = (
                self._connection()
                .execute(
                    "SELECT ClaimId, Version FROM claims WHERE UpdatedAt >= ? AND ClaimId != ? ORDER BY ClaimId",
                    (utc_text(at), MARK_ROW),
                )
                .fetchall()
            )
        return iter([(row["ClaimId"], str(row["Version"])) for row in rows])

    def restore_claim(self, backup: ClaimBackup) -> None:
        """The claim, its history and its fingerprint records in one transaction; ``AlreadyExists`` when the claim
        is there (one transaction wrote it whole: an earlier run of the import, or one running beside this one)."""
        from oncegate.errors import AlreadyExists

        claim = backup.claim
        with self._write() as connection:
            if connection.execute("SELECT 1 FROM claims WHERE ClaimId = ?", (claim.claim_id,)).fetchone():
                raise AlreadyExists(None)
            connection.execute("DELETE FROM history WHERE ClaimId = ?", (claim.claim_id,))
            connection.execute("DELETE FROM fingerprints WHERE ClaimId = ?", (claim.claim_id,))
            for event in backup.events:
                connection.execute(*_insert("history", _sql_row(row_writing.event_to_row(event))))
            for record in backup.fingerprints:
                connection.execute(
                    *_insert("fingerprints", {**_sql_row(row_writing.fingerprint_to_row(record)), "Version": 1})
                )
            connection.execute(*_insert("claims", {**_claim_row(claim), "Version": _first_version()}))

    def stored_contents(self) -> list[str]:
        """What the tables hold; the mark rows of ``claims`` and ``key_ids`` count as the store's id."""
        with self._translated():
            connection = self._connection()
            found = [name for table, name in CONTENTS.items() if _holds_rows(connection, table)]
            if any(_table_mark(connection, table, key).store_id for table, key in MARKED_TABLES.items()):
                found.append("store id")
        return list(dict.fromkeys(found))

    def read_restore(self) -> Restore | None:
        row = self._select_one("SELECT * FROM restores", ())
        return None if row is None else row_reading.restore_from_row(dict(row))

    def save_restore(self, restore: Restore) -> None:
        from oncegate.domain.backups import refuse_writing_over

        row = _sql_row(row_writing.restore_to_row(restore))
        with self._write() as connection:
            stored = connection.execute("SELECT * FROM restores").fetchone()
            if stored is not None:
                refuse_writing_over(row_reading.restore_from_row(dict(stored)), restore)
            connection.execute("DELETE FROM restores")
            connection.execute(*_insert("restores", row))
