"""What a store says about itself: who it is, the marks of its tables, its key secrets, its clock (issues 22, 31).

Read in one round trip by the store (``StoreMarkRecords.read_marks``) and judged by the pure checks
of :mod:`oncegate.domain.safeguard`.
"""

from __future__ import annotations

from datetime import datetime

from oncegate.domain.copies import frozen
from oncegate.domain.records import KeySecretRecord


@frozen
class TableMark:
    """What a table that guards the promise says about itself: the store its own mark row names (issue 31).

    The mark lives in the table it guards, so that emptying, dropping or replacing the table takes the
    mark with it: ``store_id`` None is a table without its mark, ``missing`` a table that is not there.
    """

    table: str
    store_id: str | None
    missing: bool = False


@frozen
class StoreMarks:
    """What a store says about itself, read in one round trip: who it is, its key secrets, its clock.

    ``store_id`` is written once, when the store is first used (or by ``oncegate store init``): a
    store that lost it was wiped or replaced. ``tables`` are the marks of the tables that guard the
    promise besides the one that holds the id (the claims table above all): each names the store it
    belongs to. ``tables_marked`` says that the id was written with those marks; an id without it
    was written by an earlier release, whose tables had none. ``holds_claims`` says whether the
    claims table holds any claim or tombstone; it is read only when a mark is missing (False
    otherwise). ``clock`` is the store's own time as its answer said (Table Storage's ``Date``),
    None where the store shares this machine's clock (SQLite). ``restoring`` says that an import into the
    store is under way or was cut short (its restore record not completed): the store lacks what the import has
    not written yet, however it is marked (issue 35).
    """

    store_id: str | None
    secrets: tuple[KeySecretRecord, ...]
    tables: tuple[TableMark, ...] = ()
    tables_marked: bool = False
    holds_claims: bool = False
    clock: datetime | None = None
    restoring: bool = False
    # When the question was asked and the answer came, on this instance's clock: the store's time lies between.
    asked_at: datetime | None = None
    answered_at: datetime | None = None
