"""The Azure store's conflicts: one partition of their own table, each conflict twice, and the 0.1.0 upgrade.

Listing conflicts never scans claims and a page never reads the whole partition (issue 12). The
conflict row, keyed by the conflict id, guards its uniqueness (insert-if-absent) and serves point
reads; its listing row holds the same columns under a key of its status and its place in the list,
so a page, oldest first, is one RowKey range read ``top + 1`` rows at a time, however many conflicts
there are::

    RowKey                                                                 one row per
    0-open-2026-11-02T09:00:00.000000+00:00-elwaeic4o4xvp7turury6i6j       open conflict, oldest first
    0-resolved-2026-11-02T09:00:00.000000+00:00-ilfa4gtfkt2d3k55jw4acnei   resolved conflict, oldest first
    elwaeic4o4xvp7turury6i6j                                               conflict

Conflict ids are base32 and never hold a ``0``, so the Storage browser shows the listing rows first.
Both rows are written in one transaction and carry the same ``Version``, a column rather than the
ETag (the rows' ETags differ), so a conflict has one version whichever row it was read from.
Resolving a conflict replaces its row and moves its listing row (delete and insert) in one
transaction conditioned on the conflict row's ETag. Conflicts 0.1.0 wrote have no ``Version`` and
no listing row: a store opening the table adds them, once.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterator, Mapping
from contextlib import suppress
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TransactionOperation, UpdateMode

from oncegate.domain.records import Conflict, Page
from oncegate.domain.statuses import ConflictStatus
from oncegate.errors import AlreadyExists, ConcurrentUpdate, NotFound
from oncegate.stores import row_reading, row_writing
from oncegate.stores.paging import decode_cursor, encode_cursor, utc_text
from oncegate.stores.tables import batch
from oncegate.stores.tables.entities import (
    CONFLICT_PARTITION,
    EXISTS,
    MISSING,
    PARTITION_FILTER,
    STALE,
    _entity,
    _etag,
    _if_unchanged,
    _on_status,
    _translated,
)

logger = logging.getLogger(__name__)

# Filter clauses are fixed text; values only ever travel as query parameters.
# A listing row's RowKey: "0-<status>-<CreatedAt as fixed-width UTC text>-<conflict id>".
LISTING = "0-"
LISTING_FILTER = "PartitionKey eq @pk and RowKey gt @after and RowKey lt @end"
SCOPE_CLAUSE = " and Scope eq @scope"
VERSION = "Version"
FIRST_VERSION = 1
# The version of a row 0.1.0 wrote, which has no Version column (and no listing row).
LEGACY_VERSION = 0
# The marker rows of upgrades, read together when the store opens: this one says that every conflict 0.1.0 wrote
# has its listing row (the history's is beside it).
UPGRADE_PARTITION = "upgrade"
LISTING_ADDED = "conflict-listing-rows"


def _listing_key(status: ConflictStatus, place: tuple[str, str]) -> str:
    """The RowKey of the listing row at ``place`` (its fixed-width UTC time, its id): keys sort as places do."""
    created_at, conflict_id = place
    return f"{LISTING}{status.value}-{created_at}-{conflict_id}"


def _conflict_entities(conflict: Conflict, version: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The conflict row and its listing row: the same columns under two keys."""
    row = {**row_writing.conflict_to_row(conflict), VERSION: version}
    listing_key = _listing_key(conflict.status, _position(conflict))
    return _entity(CONFLICT_PARTITION, conflict.conflict_id, row), _entity(CONFLICT_PARTITION, listing_key, row)


def _conflict(entity: TableEntity) -> Conflict:
    return row_reading.conflict_from_row(row_reading.gather(entity), str(entity.get(VERSION, LEGACY_VERSION)))


def _position(conflict: Conflict) -> tuple[str, str]:
    return utc_text(conflict.created_at), conflict.conflict_id


class TableConflicts:
    """``ConflictRecords`` over the conflicts table."""

    # The store's own (store.TableStore).
    _conflicts: TableClient

    def create_conflict(self, conflict: Conflict) -> Conflict:
        """Insert the conflict and its listing row in one transaction if its id is new.

        Raises ``AlreadyExists`` carrying the stored one: the conflict row, keyed by the id, is the guard.
        """
        operations = [(TransactionOperation.CREATE, entity) for entity in _conflict_entities(conflict, FIRST_VERSION)]
        with _on_status(EXISTS, lambda: AlreadyExists(self.get_conflict(conflict.conflict_id))):
            batch.submit_transaction(self._conflicts, operations)
        return row_reading.conflict_from_row(row_writing.conflict_to_row(conflict), str(FIRST_VERSION))

    def get_conflict(self, conflict_id: str) -> Conflict:
        """The stored conflict; raises ``NotFound``."""
        with _on_status(MISSING, lambda: NotFound(f"no conflict has the id {conflict_id}.", record="conflict")):
            return _conflict(self._conflicts.get_entity(CONFLICT_PARTITION, conflict_id))

    def update_conflict(self, conflict: Conflict) -> Conflict:
        """Replace the conflict and move its listing row in one transaction, if its version is current.

        The conflict row is read first: its ``Version`` is the one to match, its ETag conditions the
        transaction (a writer in between fails it) and its status names the listing row to move.
        Raises ``ConcurrentUpdate``.
        """
        stale = f"conflict {conflict.conflict_id} changed since version {conflict.version}"
        with _on_status(STALE, lambda: ConcurrentUpdate(stale)):
            stored = self._conflicts.get_entity(CONFLICT_PARTITION, conflict.conflict_id)
            before = _conflict(stored)
            if before.version != conflict.version:
                raise ConcurrentUpdate(stale)
            version = int(stored.get(VERSION, LEGACY_VERSION)) + 1
            conflict_row, listing_row = _conflict_entities(conflict, version)
            operations: list[tuple[Any, ...]] = [
                (TransactionOperation.UPDATE, conflict_row, _if_unchanged(_etag(stored.metadata)))
            ]
            listed_at = _listing_key(before.status, _position(before))
            if VERSION in stored and listed_at != listing_row["RowKey"]:
                operations.append(
                    (TransactionOperation.DELETE, {"PartitionKey": CONFLICT_PARTITION, "RowKey": listed_at})
                )
            # Replace, never merge: a listing row may hold a long value in pieces (row_writing.spread).
            operations.append((TransactionOperation.UPSERT, listing_row, {"mode": UpdateMode.REPLACE}))
            batch.submit_transaction(self._conflicts, operations)
        return row_reading.conflict_from_row(row_writing.conflict_to_row(conflict), str(version))

    def list_conflicts(
        self, *, status: ConflictStatus | None, scope: str | None, limit: int, cursor: str | None
    ) -> Page[Conflict]:
        """Conflicts oldest first: the listing rows after the cursor's place, ``limit + 1`` of them.

        A page is one request of ``limit + 1`` rows (one per status, merged, when listing all), however
        many conflicts there are. The scope is a filter within the range, not a key: Table Storage reads
        past other scopes' rows on the way (up to 1,000 a request), so a page of one scope costs as many
        more rows as other scopes' conflicts lie between its own.
        """
        after = decode_cursor(cursor) if cursor else ("", "")
        statuses = [status] if status else list(ConflictStatus)
        ranges = [self._listed(each, after, scope, limit + 1) for each in statuses]
        with _translated():
            found = list(islice(heapq.merge(*ranges, key=_position), limit + 1))
        return Page(found[:limit], encode_cursor(*_position(found[limit - 1])) if len(found) > limit else None)

    def _listed(
        self, status: ConflictStatus, after: tuple[str, str], scope: str | None, top: int
    ) -> Iterator[Conflict]:
        """The conflicts of ``status`` after the place ``after``, oldest first, read ``top`` at a time as consumed."""
        prefix = f"{LISTING}{status.value}"
        # "." follows "-": every listing row key of the status sorts below it.
        parameters = {"pk": CONFLICT_PARTITION, "after": _listing_key(status, after), "end": prefix + "."}
        query = LISTING_FILTER
        if scope is not None:
            query, parameters["scope"] = query + SCOPE_CLAUSE, scope
        return map(_conflict, self._conflicts.query_entities(query, parameters=parameters, results_per_page=top))

    def _upgrade_markers(self) -> dict[str, TableEntity]:
        """The upgrade marker rows by RowKey, in one request; none when the conflicts table is not there (yet)."""
        with _translated(), suppress(ResourceNotFoundError):
            rows = self._conflicts.query_entities(PARTITION_FILTER, parameters={"pk": UPGRADE_PARTITION})
            return {row["RowKey"]: row for row in rows}
        return {}

    def _add_missing_listing_rows(self, markers: Mapping[str, TableEntity]) -> None:
        """Give every conflict 0.1.0 wrote (no ``Version``, no listing row) its listing row, once per table.

        A marker row says it is done, so a later start finds it among ``markers`` (``_upgrade_markers``) and reads
        nothing more. Each conflict gets its ``Version`` and its listing row in a transaction of its own,
        conditioned on its ETag: one changed meanwhile was written by this release, listing row and all. So a
        repair cut short, or run by two instances at once, leaves every conflict whole, and the next start goes
        on: the conflicts already repaired have their ``Version`` and are passed over.
        """
        if LISTING_ADDED in markers:
            return
        with _translated():
            rows = self._conflicts.query_entities(PARTITION_FILTER, parameters={"pk": CONFLICT_PARTITION})
            added = sum(self._add_listing_row(entity) for entity in rows if VERSION not in entity)
            marker = {"PartitionKey": UPGRADE_PARTITION, "RowKey": LISTING_ADDED, "Added": added}
            self._conflicts.upsert_entity({**marker, "CompletedAt": datetime.now(UTC)})
        logger.info("Conflict listing rows: %d conflicts written by 0.1.0 got theirs", added)

    def _add_listing_row(self, entity: TableEntity) -> bool:
        """Give a conflict 0.1.0 wrote its ``Version`` and listing row; False if it changed since read."""
        conflict = _conflict(entity)
        _, listing_row = _conflict_entities(conflict, FIRST_VERSION)
        versioned = {"PartitionKey": CONFLICT_PARTITION, "RowKey": conflict.conflict_id, VERSION: FIRST_VERSION}
        operations = [
            (TransactionOperation.UPDATE, versioned, _if_unchanged(_etag(entity.metadata), UpdateMode.MERGE)),
            (TransactionOperation.UPSERT, listing_row, {"mode": UpdateMode.REPLACE}),
        ]
        try:
            batch.submit_transaction(self._conflicts, operations)
        except HttpResponseError as exc:
            if exc.status_code not in STALE:
                raise
            return False
        return True

    def conflicts_after(self, created_at: datetime, conflict_id: str = "") -> str:
        return encode_cursor(utc_text(created_at), conflict_id)
