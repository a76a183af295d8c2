"""The SQLite store's claims made together (issue 36): a bulk call's new claims in one set-based write.

``create_claims`` is the port's put-if-absent for many claims at once. Inside one transaction (or, in a
bulk call's ``writing_together``, one savepoint of its transaction) it reads which of the claim ids are
taken with one query, then inserts the claims that are not and their first history lines with one
``executemany`` each. The writers' lock is held from the query to the end, so no other writer can make
one of those claims in between, and a process killed between the statements leaves all of them or none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from oncegate.domain.copies import replaced
from oncegate.domain.records import Claim, HistoryEvent
from oncegate.errors import TooLarge
from oncegate.stores import row_writing
from oncegate.stores.sqlite_rows import _claim_row, _first_version, _insert_sql, _sql_row

# Under SQLite's least limit of variables a statement takes (999 before 3.32).
IDS_A_QUERY = 500


class SqliteNewClaims:
    """``create_claims`` over the SQLite store's write (``SqliteStore._write``)."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def create_claims(self, new: Sequence[tuple[Claim, HistoryEvent]]) -> list[Claim | None]:
        """Each claim with its first event, where no claim has its id: the claim as written, or None (see the port)."""
        if not new:
            return []
        with self._write() as connection:
            taken = _taken(connection, [claim.claim_id for claim, _ in new])
            made: list[Claim | None] = []
            claims: dict[tuple[str, ...], list[list[Any]]] = {}
            events: dict[tuple[str, ...], list[list[Any]]] = {}
            for claim, event in new:
                if claim.claim_id in taken:
                    made.append(None)
                    continue
                taken.add(claim.claim_id)  # a second pair for one id in the same call is not written either
                version = _first_version()
                try:
                    row = _claim_row(claim)
                    line = _sql_row(row_writing.event_to_row(event))
                except TooLarge:
                    made.append(None)  # a row the store cannot hold: create_claim refuses that pair alone
                    continue
                row["Version"] = version
                claims.setdefault(tuple(row), []).append(list(row.values()))
                events.setdefault(tuple(line), []).append(list(line.values()))
                # What was written, at the version it was written with: no read back, as a single claim.
                made.append(replaced(claim, version=str(version)))
            # Rows of one shape share a statement: a value too long for one column spreads over more (its pieces).
            for names, values in claims.items():
                connection.executemany(_insert_sql("claims", names), values)
            for names, values in events.items():
                connection.executemany(_insert_sql("history", names), values)
        return made


def _taken(connection: sqlite3.Connection, claim_ids: list[str]) -> set[str]:
    """Which of these claim ids have a claim (a tombstone included), in one query per 500 ids."""
    taken: set[str] = set()
    for start in range(0, len(claim_ids), IDS_A_QUERY):
        chunk = claim_ids[start : start + IDS_A_QUERY]
        marks = ", ".join("?" * len(chunk))
        rows = connection.execute(f"SELECT ClaimId FROM claims WHERE ClaimId IN ({marks})", chunk)
        taken.update(row[0] for row in rows)
    return taken
