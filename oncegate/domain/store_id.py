"""Which store this is: its id, and the marks of the tables that guard the promise (issues 22, 31).

A pure check of what the store says about itself (:class:`oncegate.domain.marks.StoreMarks`) against
the id the settings pin and the one this process read before; the service
(``oncegate.service.safeguard``) reads, calls and writes. Each refusal is a store that would
otherwise be read as "no claim yet" and answer ``proceed`` for every key done before: wiped,
restored empty, replaced, a table of it lost behind its id, or a new store no one marked.
"""

from __future__ import annotations

from oncegate.domain.marks import StoreMarks, TableMark
from oncegate.errors import NotConfigured

STORE_ID = "ONCEGATE_STORE_ID"


def check_store_id(
    marks: StoreMarks, *, pinned: str | None, seen: str | None, fresh: str, may_start: bool = True
) -> str | None:
    """Refuse a store that is not the one this instance, or its settings, knew; the id to mark it with.

    ``pinned`` is the id the settings name (``ONCEGATE_STORE_ID``, or the SQLite store's ``store-id``
    file); ``seen`` the one this process read before. The id is kept beside the key secrets, and each
    table that guards the promise carries a mark naming it (issue 31): a table that lost its mark was
    emptied, dropped or replaced behind an intact id, and only ``oncegate store init`` marks it again.

    A store without an id or marks is new, unless the pin or this process says it is not (then it was
    wiped, restored empty or replaced), or unless new stores are marked only on purpose (``may_start``
    False: Table Storage, whose new store looks exactly like a wiped one). An id an earlier release
    wrote, without the tables' marks, has them written while its claims table holds claims; with none,
    it may have lost them, and ``store init`` decides. Returns the id whose marks are to be written
    where they are missing (the stored one, the tables' own, else ``fresh``), or None when the store
    is whole.
    """
    if marks.restoring:
        # A store marked before its import (`oncegate store init`, a deployment) is marked while half imported.
        raise NotConfigured(RESTORING, target=STORE_ID)
    stored = marks.store_id
    if stored is None:
        if seen is not None:
            raise NotConfigured(
                f"The store lost its identity ({seen}) while this instance ran{_missing(marks)}: it was wiped, "
                "restored empty or replaced, and every key done before would be answered proceed again. Nothing is "
                "claimed. Restore the store; to start a new one on purpose, run `oncegate store init` and restart.",
                target=STORE_ID,
            )
        return _unnamed_store(marks, pinned=pinned, fresh=fresh, may_start=may_start)
    if pinned is not None and stored != pinned:
        raise NotConfigured(
            f"This store is store {stored}, not store {pinned} that ONCEGATE_STORE_ID (or the store-id file beside a "
            "SQLite database) names: its claims are not the ones this app made. Either the store settings point at "
            f"another store (fix them), or store {pinned} was wiped and an instance without the setting started it "
            f"anew as {stored}: then every key done before would be answered proceed again. Restore store {pinned}; "
            f"only if its claims are truly lost, set ONCEGATE_STORE_ID to {stored}.",
            target=STORE_ID,
        )
    if seen is not None and stored != seen:
        raise NotConfigured(
            f"The store was replaced while this instance ran (store {seen} before, {stored} now). Restart the app "
            "if that was meant.",
            target=STORE_ID,
        )
    _refuse_foreign_tables(marks, stored)
    lost = [mark for mark in marks.tables if mark.store_id is None]
    if lost and (marks.tables_marked or not marks.holds_claims or any(mark.missing for mark in lost)):
        raise NotConfigured(_lost_tables(lost, stored), target=STORE_ID)
    # An id an earlier release wrote, over a claims table that holds claims: its tables get their marks now.
    return None if marks.tables_marked and not lost else stored


def _unnamed_store(marks: StoreMarks, *, pinned: str | None, fresh: str, may_start: bool) -> str:
    """The id to mark a store without one with: its tables' own, the pinned one or ``fresh``; or the refusal."""
    named = sorted({mark.store_id for mark in marks.tables if mark.store_id is not None})
    if named:
        # Tables marked, the id not yet written: a marking cut short (the tables are marked first), or the id's
        # own table lost. With no claim in the store nothing can be answered twice: the marking is finished.
        if len(named) > 1 or (pinned is not None and pinned != named[0]):
            raise NotConfigured(
                f"The store's tables belong to store {' and store '.join(named)}, while ONCEGATE_STORE_ID (or the "
                f"store-id file beside a SQLite database) names store {pinned or '(none)'}: they were mixed from "
                "different stores. Nothing is claimed. Point the store settings at one store, or restore it.",
                target=STORE_ID,
            )
        if marks.holds_claims:
            raise NotConfigured(
                f"The store's identity (kept beside its key secrets) is gone while its claims table, of store "
                f"{named[0]}, holds claims: the key secrets' records were lost with it, and a wrong secret would no "
                "longer be refused. Nothing is claimed. Restore the table of key secrets; to mark the store again "
                "on purpose, run `oncegate store init`.",
                target=STORE_ID,
            )
        return named[0]
    if pinned is not None:
        raise NotConfigured(
            f"The store carries no identity{_missing(marks)}, while ONCEGATE_STORE_ID (or the store-id file beside a "
            f"SQLite database) names store {pinned}: it was wiped, restored empty or replaced, and every key done "
            "before would be answered proceed again. Nothing is claimed. Restore the store, or point the setting at "
            "it; to start a new store on purpose, run `oncegate store init`.",
            target=STORE_ID,
        )
    if not may_start:
        raise NotConfigured(UNMARKED, target=STORE_ID)
    # A new store (SQLite's own new file), or one an earlier release wrote before stores had ids.
    return fresh


# An import under way, or cut short: what it has not written yet would be answered as never done.
RESTORING = (
    "The store is being restored from an export: an import into it is under way or was cut short, and every key "
    "it has not written yet would be answered proceed again. Nothing is claimed, exported or purged until it ends: "
    "run the same `oncegate store import` again (docs/operations.md, 'Restoring, step by step')."
)


# Table Storage's first deployment, or any store that cannot tell new from wiped: the one command that marks it.
UNMARKED = (
    "This store carries no mark of the store the app serves: it is new, or it was wiped, restored empty or replaced "
    "(the two look the same), and every key done before a wipe would be answered proceed again. Nothing is claimed "
    "until it is marked on purpose: run `oncegate store init` with the app's store settings (an azd deployment "
    "runs it itself), then set ONCEGATE_STORE_ID to the id it prints. See docs/operations.md, 'A store that lost "
    "its claims'."
)


def _missing(marks: StoreMarks) -> str:
    missing = [mark.table for mark in marks.tables if mark.missing]
    return f" (the table {', '.join(missing)} does not exist)" if missing else ""


def missing_table(table: str) -> str:
    """Why an action on a table that is not there is refused: a table missing is never read as an empty one."""
    return (
        f"The table {table} does not exist: the store was deleted, wiped or not provisioned, and every key done "
        "before would be answered proceed again. Nothing is claimed until it is restored (docs/operations.md, 'A "
        "store that lost its claims'); only if its claims are truly lost, run `oncegate store init`."
    )


# Making a table of a name just deleted: Table Storage keeps the name for a minute or so (a restore's step 2).
TABLE_BEING_DELETED = (
    "A table of the store was deleted moments ago, and Table Storage refuses to make one of its name for a minute or "
    "so: nothing was written. Try again in a minute."
)


def _refuse_foreign_tables(marks: StoreMarks, stored: str) -> None:
    foreign = [mark for mark in marks.tables if mark.store_id not in (None, stored)]
    if foreign:
        tables = ", ".join(f"{mark.table} (store {mark.store_id})" for mark in foreign)
        raise NotConfigured(
            f"This store is store {stored}, but its table {tables} belongs to another store: it was restored or "
            "copied from elsewhere, and its claims are not this store's. Nothing is claimed. Restore the table of "
            f"store {stored}.",
            target=STORE_ID,
        )


def _lost_tables(lost: list[TableMark], stored: str) -> str:
    """Why a store whose id is intact is refused: tables of it that lost their marks, or are not there."""
    missing = [mark.table for mark in lost if mark.missing]
    unmarked = [mark.table for mark in lost if not mark.missing]
    what = " and ".join(
        [
            *([f"the table {', '.join(missing)} is missing"] if missing else []),
            *([f"the table {', '.join(unmarked)} lost its mark"] if unmarked else []),
        ]
    )
    return (
        f"This store is store {stored}, but {what}: it was deleted, emptied or replaced behind the store's id, and "
        "every key done before would be answered proceed again. Nothing is claimed. Restore it (docs/operations.md, "
        "'A store that lost its claims'); only if its claims are truly lost, run `oncegate store init` to mark it "
        "again on purpose."
    )
