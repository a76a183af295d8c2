"""The Azure store's backups (issue 35): an export's reads of the claims and an import's writes.

A mixin of ``TableStore``: it reads and writes through the store's tables and its index, declared below.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TransactionOperation, UpdateMode

from oncegate.domain.backups import ClaimBackup, Restore, refuse_writing_over
from oncegate.errors import AlreadyExists, ConcurrentUpdate
from oncegate.stores import row_reading, row_writing
from oncegate.stores.tables import batch
from oncegate.stores.tables.entities import (
    CLAIM_ROW,
    CONFLICT_PARTITION,
    EXISTS,
    FINGERPRINT_PREFIX,
    HISTORY_PREFIX,
    KEY_PARTITION,
    MISSING,
    PARTITION_FILTER,
    REPAIR_PAGE_ROWS,
    RESTORE_PARTITION,
    RESTORE_ROW,
    STORE_PARTITION,
    TRANSACTION_LIMIT,
    _claim_entity,
    _claim_index,
    _claim_keys,
    _etag,
    _event_entity,
    _event_place,
    _fingerprint_entity,
    _on_status,
    _save,
    _tally_entity,
    _translated,
)
from oncegate.stores.tables.history import one_line_per_series

# Tries of a restore record's save whose ETag another run of the import moved meanwhile.
RESTORE_SAVES = 5
CLAIM_ROWS_FILTER = "RowKey eq @rk"
CHANGED_FILTER = "RowKey eq @rk and Timestamp ge @at"
# A partition query answers up to 1,000 rows a request: a claim whose rows take more is read again if it changed.
PARTITION_PAGE_ROWS = 1000
EXPORT_READS = 3
# Claim partitions an export reads at once: each is a request of its own.
EXPORT_READERS = 8
# The row of a claim's partition that a restore of more than one transaction needs there until its last one.
RESTORE_GUARD = "restoring"
# The claim's rows in each guarded transaction: the rest of it is the guard's operation.
GUARDED_ROWS = TRANSACTION_LIMIT - 1


def _read(future: Future[ClaimBackup | None]) -> Iterator[ClaimBackup]:
    backup = future.result()
    if backup is not None:
        yield backup


def _is_history(entity: TableEntity) -> bool:
    return str(entity["RowKey"]).startswith(HISTORY_PREFIX)


def _holds_any(table: TableClient, partition: str | None, *, besides: str | None = None) -> bool:
    """Whether the table (or one partition of it; or any partition but ``besides``) holds a row: one row asked for."""
    query = PARTITION_FILTER if partition else "PartitionKey ne @pk" if besides else "PartitionKey ge @pk"
    with _translated():
        rows = table.query_entities(
            query, parameters={"pk": partition or besides or ""}, select=["PartitionKey"], results_per_page=1
        )
        return next(iter(rows), None) is not None


class TableBackups:
    """``BackupRecords`` and ``RestoreReads`` over the store's tables."""

    # The store's own (store.TableStore) and the claims' (claims.TableClaims).
    _claims: TableClient
    _conflicts: TableClient
    _flows: TableClient
    _scopes: TableClient
    _overlaps: TableClient
    _keys: TableClient
    _targets: TableClient
    _to_index: Callable[[list[dict[str, Any]]], None]

    def export_claims(self) -> Iterator[ClaimBackup]:
        """Claim rows through the table (as the purge reads them), then each claim's partition in one query:
        its row, history and fingerprint records as one view. Index rows are left out: an import writes them.

        ``EXPORT_READERS`` partitions are read at once, in claim id order, never more ahead than that: the
        export holds a few claims at a time, however many the store has.
        """
        with _translated(), ThreadPoolExecutor(EXPORT_READERS, thread_name_prefix="oncegate-export") as pool:
            rows = self._claims.query_entities(
                CLAIM_ROWS_FILTER,
                parameters={"rk": CLAIM_ROW},
                select=["PartitionKey"],
                results_per_page=REPAIR_PAGE_ROWS,
            )
            reading: deque[Future[ClaimBackup | None]] = deque()
            for row in rows:
                reading.append(pool.submit(self._backup, row["PartitionKey"]))
                if len(reading) >= EXPORT_READERS:
                    yield from _read(reading.popleft())
            while reading:
                yield from _read(reading.popleft())

    def _backup(self, claim_id: str) -> ClaimBackup | None:
        """The claim's partition whole; None when the claim is gone (purged since it was listed).

        A partition of more than one answer's rows is not one view: it is read again while the claim's row
        changed in between (a claim that changes that often still counts in the export's report).
        """
        read = self._partition(claim_id)
        for _ in range(EXPORT_READS - 1):
            if read is None or len(read[1]) < PARTITION_PAGE_ROWS or self._still_at(claim_id, _etag(read[0].metadata)):
                break
            read = self._partition(claim_id)
        if read is None:
            return None
        claim_entity, entities = read
        events = (row_reading.event_from_row(row_reading.gather(e)) for e in entities if _is_history(e))
        history = tuple(sorted(one_line_per_series(events), key=_event_place))
        prints = tuple(
            row_reading.fingerprint_from_row(row_reading.gather(e), _etag(e.metadata))
            for e in entities
            if e["RowKey"].startswith(FINGERPRINT_PREFIX)
        )
        row, version = row_reading.gather(claim_entity), _etag(claim_entity.metadata)
        claim = row_reading.claim_from_row(row, version, lambda: list(history))
        changed_at = claim_entity.metadata["timestamp"]
        assert changed_at is not None, "Table Storage answered a row without its Timestamp"
        return ClaimBackup(claim, history, prints, changed_at)

    def _partition(self, claim_id: str) -> tuple[TableEntity, list[TableEntity]] | None:
        """The claim's row and every row of its partition; None when it has no claim row."""
        entities = list(self._claims.query_entities(PARTITION_FILTER, parameters={"pk": claim_id}))
        claim_entity = next((entity for entity in entities if entity["RowKey"] == CLAIM_ROW), None)
        return None if claim_entity is None else (claim_entity, entities)

    def _still_at(self, claim_id: str, etag: str) -> bool:
        try:
            return _etag(self._claims.get_entity(claim_id, CLAIM_ROW).metadata) == etag
        except ResourceNotFoundError:
            return False

    def claims_changed_since(self, at: datetime) -> Iterator[tuple[str, str]]:
        """Claim rows whose ``Timestamp`` (the service's own clock) is at or after ``at``: a read through the table."""
        with _translated():
            rows = self._claims.query_entities(
                CHANGED_FILTER, parameters={"rk": CLAIM_ROW, "at": at}, select=["PartitionKey"]
            )
            found = [(row["PartitionKey"], _etag(row.metadata)) for row in rows]
        return iter(found)

    def restore_claim(self, backup: ClaimBackup) -> None:
        """Upserts in the claim's partition, the claim's row in the last transaction; its index rows wait for
        ``flush_index``, as a new claim's do. Each series line gets its tally, where later answers count.

        A claim whose rows fit one transaction is written in one, its row created: nothing is written where it is.
        One whose rows take more is written under a guard row of its partition, which each transaction but the last
        needs there and the last deletes as it creates the claim's row. A run that found no claim row and then waited
        while another run wrote it whole (after which the app may have added to its history and tallies) finds the
        guard gone and writes nothing over them; a run cut short leaves the guard, which the next one takes over.
        """
        claim = backup.claim
        if self._has_claim_row(claim.claim_id):
            raise AlreadyExists(None)
        rows = [
            *(_event_entity(event) for event in backup.events),
            *(_tally_entity(event) for event in backup.events if event.count is not None),
            *(_fingerprint_entity(record) for record in backup.fingerprints),
        ]
        upserts = [(TransactionOperation.UPSERT, entity, {"mode": UpdateMode.REPLACE}) for entity in rows]
        create = (TransactionOperation.CREATE, _claim_entity(claim))
        if len(upserts) < TRANSACTION_LIMIT:
            with _translated(), _on_status(EXISTS, lambda: AlreadyExists(None)):
                batch.submit_transaction(self._claims, [create, *upserts])
        else:
            self._restore_guarded(claim.claim_id, create, upserts)
        self._to_index(_claim_index(claim))

    def _restore_guarded(self, claim_id: str, create: tuple[Any, ...], upserts: list[tuple[Any, ...]]) -> None:
        """The claim's rows in transactions that each need the guard row, which the last deletes: ``AlreadyExists``
        once another run wrote the claim (its row there, the guard gone), and nothing of this one is written over."""
        guard = _claim_keys(claim_id, RESTORE_GUARD)
        with _translated():
            self._claims.upsert_entity(guard, mode=UpdateMode.REPLACE)
        if self._has_claim_row(claim_id):
            # Written whole since the look above: this run's guard goes; no transaction of it was sent.
            with _translated(), suppress(ResourceNotFoundError):
                self._claims.delete_entity(claim_id, RESTORE_GUARD)
            raise AlreadyExists(None)
        # The guard needed (If-Match: *): a merge of nothing in each transaction but the last, which deletes it.
        needed = (TransactionOperation.UPDATE, guard, {"mode": UpdateMode.MERGE})
        *chunks, last = [upserts[start : start + GUARDED_ROWS] for start in range(0, len(upserts), GUARDED_ROWS)]
        transactions = [[needed, *chunk] for chunk in chunks]
        if len(last) == GUARDED_ROWS:
            transactions.append([needed, *last])
            last = []
        transactions.append([create, (TransactionOperation.DELETE, guard), *last])
        with _translated():
            for operations in transactions:
                with _on_status(EXISTS + MISSING, lambda: AlreadyExists(None)):
                    batch.submit_transaction(self._claims, operations)

    def _has_claim_row(self, claim_id: str) -> bool:
        with _translated():
            try:
                self._claims.get_entity(claim_id, CLAIM_ROW, select=["PartitionKey"])
            except ResourceNotFoundError:
                return False
        return True

    def stored_contents(self) -> list[str]:
        """One row read from each table (from each partition that counts), by the names an operator reads."""
        # The claims table's rows but its mark (issue 31), which is the store's id, never a claim.
        claims_besides = {"besides": STORE_PARTITION}
        looked_at: list[tuple[str, TableClient, str | None, dict[str, str]]] = [
            ("claims", self._claims, None, claims_besides),
            ("conflicts", self._conflicts, CONFLICT_PARTITION, {}),
            ("flows", self._flows, None, {}),
            ("scopes", self._scopes, None, {}),
            ("overlaps", self._overlaps, None, {}),
            ("targets", self._targets, None, {}),
            ("key secrets", self._keys, KEY_PARTITION, {}),
            ("store id", self._keys, STORE_PARTITION, {}),
            ("store id", self._claims, STORE_PARTITION, {}),
        ]
        found = [name for name, table, partition, besides in looked_at if _holds_any(table, partition, **besides)]
        return list(dict.fromkeys(found))

    def read_restore(self) -> Restore | None:
        with _translated():
            try:
                entity = self._keys.get_entity(RESTORE_PARTITION, RESTORE_ROW)
            except ResourceNotFoundError:
                return None
        return row_reading.restore_from_row(entity)

    def save_restore(self, restore: Restore) -> None:
        """Created, or written over at the ETag read: over another export's record or a completed one, never."""
        row = row_writing.restore_to_row(restore)
        for _ in range(RESTORE_SAVES):
            with _translated():
                try:
                    entity = self._keys.get_entity(RESTORE_PARTITION, RESTORE_ROW)
                except ResourceNotFoundError:
                    entity = None
            version = None
            if entity is not None:
                refuse_writing_over(row_reading.restore_from_row(entity), restore)
                version = _etag(entity.metadata)
            try:
                with _translated():
                    _save(self._keys, RESTORE_PARTITION, RESTORE_ROW, row, version)
                return
            except ConcurrentUpdate:
                continue  # another run of this import saved its progress meanwhile: read it again
        raise ConcurrentUpdate(f"the restore record changed {RESTORE_SAVES} times while this import saved it")
