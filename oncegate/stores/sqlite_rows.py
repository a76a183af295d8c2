"""How the SQLite store writes its rows: a claim's row, written new or over its version, a table's mark row, and what
its claims and its backups (``sqlite_backups``) both write with.

Apart from ``sqlite`` so that the backup adapter can share them without importing the store's module, and so that the
store's module keeps to its connections, transactions and queries.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import datetime
from functools import lru_cache
from typing import Any

from oncegate.domain.marks import TableMark
from oncegate.domain.records import Claim
from oncegate.stores import row_writing
from oncegate.stores.paging import utc_text
from oncegate.stores.row_writing import Row

# Files made by the first release declare ClaimToken NOT NULL; claims no longer keep a token, so "" says none.
NO_TOKEN = ""
# The mark row of a table that guards the promise (issue 31): in the table itself, so that `DELETE FROM claims` or
# `DROP TABLE claims` takes it too. Its id is no claim id (52 base32 letters) and no key id; its Status no status,
# so no list of claims reads it.
MARK_ROW = "store-mark"
MARK_STATUS = "mark"
# The guarded tables besides store_identity, by the column that keys their rows.
MARKED_TABLES = {"claims": "ClaimId", "key_ids": "KeyId"}


# The times already written as text for the rows of one write, by the time object itself (its id, and the object
# kept with its text so that the id is never another's): a claim's times and its first line's are mostly one object.
Written = dict[int, tuple[datetime, str]]


def _sql_row(row: Row, written: Written | None = None) -> Row:
    """``row`` (a new dict from ``columns``, changed in place) as SQLite takes it. ``written``: the times already
    written as text for the rows of the same write (a claim and its first line are mostly one moment)."""
    # SQLite would hold more, but the stores hold the same: a row Table Storage could not hold is refused here too.
    # Times as fixed-width UTC text, which sorts in time order (the lists' cursors rely on it), found by the size
    # check's own pass over the values (issue 36). A new claim's times are mostly one moment (first received, last
    # attempt, updated, its first line's): each is written once, found again by identity, not by the time's hash,
    # which works the time's offset out through its tzinfo (issue 36).
    written = {} if written is None else written
    for name in row_writing.checked_times(row):
        value = row[name]
        seen = written.get(id(value))
        if seen is None or seen[0] is not value:
            seen = written[id(value)] = (value, utc_text(value))
        row[name] = seen[1]
    return row


def _claim_row(claim: Claim, written: Written | None = None) -> Row:
    row = _sql_row(row_writing.claim_to_row(claim), written)
    row["ClaimToken"] = row["ClaimToken"] or NO_TOKEN
    return row


def _replace_claim(connection: sqlite3.Connection, claim: Claim, version: str | None) -> int:
    """Write ``claim`` over its row if the row is still at ``version``: the rows changed, 1 or 0."""
    row = _claim_row(claim)
    return connection.execute(
        _update_claim_sql(tuple(row)), [*row.values(), claim.claim_id, int(version or 0)]
    ).rowcount


@lru_cache(maxsize=8)
def _update_claim_sql(names: tuple[str, ...]) -> str:
    # Built once for the claim's columns: sqlite3 finds its prepared statement by the text.
    assignments = ", ".join(f"{name} = ?" for name in names)
    return f"UPDATE claims SET {assignments}, Version = Version + 1 WHERE ClaimId = ? AND Version = ?"


def _no_such_table(exc: sqlite3.OperationalError) -> bool:
    return str(exc).startswith("no such table")


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


def _table_mark(connection: sqlite3.Connection, table: str, key: str) -> TableMark:
    try:
        row = connection.execute(f"SELECT StoreId FROM {table} WHERE {key} = ?", (MARK_ROW,)).fetchone()
    except sqlite3.OperationalError as exc:
        if not _no_such_table(exc):
            raise
        return TableMark(table, None, missing=True)
    return TableMark(table, row["StoreId"] if row else None)


def _insert(table: str, row: Row) -> tuple[str, list[Any]]:
    return _insert_sql(table, tuple(row)), list(row.values())


@lru_cache(maxsize=64)
def _insert_sql(table: str, names: tuple[str, ...]) -> str:
    # The same text for the same columns, built once: sqlite3 finds its prepared statement by the text.
    return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"


@lru_cache(maxsize=8)
def _count_line_sql(names: tuple[str, ...]) -> str:
    """The statement that counts an answer in its history line (``SqliteStore.count_event``), built once for the
    line's columns, as :func:`_insert_sql` is: sqlite3 finds its prepared statement by the text."""
    return (
        f"INSERT INTO history ({', '.join(names)}) SELECT {', '.join('?' * len(names))}"
        " WHERE EXISTS (SELECT 1 FROM claims WHERE ClaimId = ?)"
        " ON CONFLICT (ClaimId, EventId) DO UPDATE SET Count = Count + excluded.Count,"
        " At = min(At, excluded.At), LastAt = max(LastAt, excluded.LastAt)"
    )


def _first_version() -> int:
    """A new claim's first version: random, so that after a claim is deleted and made again under the same
    id, a copy of the deleted one (kept by an instance to write from) can never match the new one's version."""
    # As ``secrets.randbits(62)`` reads it (``SystemRandom.getrandbits``: 8 bytes of ``os.urandom``, big-endian,
    # the top 62 bits), without the two calls around it (issue 36).
    return int.from_bytes(os.urandom(8), "big") >> 2


def _mark_row(table: str, key: str, store_id: str, when: str) -> Row:
    """A table's mark row: its key, the store's id, and what the table's NOT NULL columns need."""
    if table == "claims":
        filler: Row = {"Scope": "", "Status": MARK_STATUS, "Attempt": 0, "ClaimToken": NO_TOKEN, "RunId": ""}
        times = {"FirstReceivedAt": when, "LastAttemptAt": when, "UpdatedAt": when}
        return {key: MARK_ROW, **filler, **times, "StoreId": store_id, "Version": 1}
    return {key: MARK_ROW, "AddedAt": when, "StoreId": store_id, "Version": 1}
