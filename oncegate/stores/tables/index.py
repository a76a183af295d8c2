"""The Azure store's claim index (issue 16): claims listed by source system or reference.

Index rows sit in partitions of the claims table keyed by a source system or a reference's digest, one row
per claim keyed by its first received time. A claim's rows are written off the claim path, by this
instance's next flush (``flush_index``) or the daily repair (``repair_index``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from itertools import islice
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TransactionOperation, UpdateMode

from oncegate.domain.records import Claim, ClaimFilter, Page
from oncegate.errors import InvalidRequest
from oncegate.stores.paging import decode_cursor, encode_cursor, utc_text
from oncegate.stores.tables import batch
from oncegate.stores.tables.entities import (
    CLAIM_ROW,
    REPAIR_PAGE_ROWS,
    TRANSACTION_LIMIT,
    _index_entities,
    _index_partition,
    _index_place,
    _translated,
)

INDEX_FILTER = "PartitionKey eq @pk and RowKey gt @after"
INDEX_REPAIR_FILTER = "RowKey eq @rk and FirstReceivedAt ge @since and ( Source gt @none or Reference gt @none )"


class TableClaimIndex:
    """``ClaimIndex`` over the claims table, and the listing of ``ClaimListing`` by source or reference."""

    # The store's own (store.TableStore) and the claims' (claims.TableClaims, which keeps a claim's rows for the
    # next flush with ``_to_index``).
    _claims: TableClient
    _unindexed: dict[tuple[str, str], dict[str, Any]]
    _index_lock: threading.Lock
    _claim_of: Callable[[TableEntity], Claim]
    _to_index: Callable[[list[dict[str, Any]]], None]

    def _indexed_claims(self, matching: ClaimFilter, *, limit: int, cursor: str | None) -> Page[Claim]:
        """Claims of a source system (else a reference), first received first: ``limit + 1`` rows of one index
        partition, then a point read of each claim, which must still be the one indexed and match every filter.

        This instance's unwritten index rows are written first, so its own claims are found at once; another
        instance's are found once it wrote them (its inventory flush, or the daily repair).
        """
        self.flush_index()
        partition = _index_partition(source=matching.source, reference=matching.reference)
        since = matching.received_since
        after = utc_text(since) if since else ""
        if cursor:
            cursor_partition, after = decode_cursor(cursor)
            if cursor_partition != partition:
                raise InvalidRequest("cursor is not one this service handed out.", target="cursor")
        parameters = {"pk": partition, "after": after}
        with _translated():
            rows = list(
                islice(
                    self._claims.query_entities(INDEX_FILTER, parameters=parameters, results_per_page=limit + 1),
                    limit + 1,
                )
            )
            claims = [self._indexed_claim(row) for row in rows[:limit]]
        # The index answers for one filter: each claim must still pass them all.
        wanted = [claim for claim in claims if claim is not None and matching.matches(claim)]
        return Page(wanted, encode_cursor(partition, rows[limit - 1]["RowKey"]) if len(rows) > limit else None)

    def _indexed_claim(self, row: TableEntity) -> Claim | None:
        """The claim an index row names, if it is still the claim indexed (not purged, nor made again since)."""
        try:
            claim = self._claim_of(self._claims.get_entity(row["ClaimId"], CLAIM_ROW))
        except ResourceNotFoundError:
            return None
        return claim if row["RowKey"] == _index_place(claim.claim_id, claim.first_received_at) else None

    def flush_index(self) -> None:
        """Write the index rows of the claims this instance made since the last flush, a transaction per 100 rows
        of a partition; upserts, so a row written twice (a retry, the repair) is the same row. Rows not written
        wait for the next flush; raises ``StoreUnavailable``.
        """
        with self._index_lock:
            taken, self._unindexed = self._unindexed, {}
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for entity in taken.values():
            by_partition.setdefault(entity["PartitionKey"], []).append(entity)
        try:
            for entities in by_partition.values():
                for start in range(0, len(entities), TRANSACTION_LIMIT):
                    chunk = entities[start : start + TRANSACTION_LIMIT]
                    upserts = [(TransactionOperation.UPSERT, entity, {"mode": UpdateMode.REPLACE}) for entity in chunk]
                    with _translated():
                        batch.submit_transaction(self._claims, upserts)
                    for entity in chunk:
                        del taken[(entity["PartitionKey"], entity["RowKey"])]
        finally:
            with self._index_lock:
                self._unindexed = {**taken, **self._unindexed}

    def repair_index(self, *, received_since: datetime, page_rows: int = REPAIR_PAGE_ROWS) -> int:
        """Write the index rows of every claim first received since ``received_since`` that names a source or a
        reference: those an instance stopped before its flush left out. Reads through the claims table (as
        the purge does); idempotent. How many claims it indexed.

        It holds one page of ``page_rows`` claims at a time and writes its rows before reading the next, so a
        busy day's claims never sit in memory at once, and a repair cut short keeps what it wrote.
        """
        parameters = {"rk": CLAIM_ROW, "since": received_since, "none": ""}
        columns_read = ["ClaimId", "FirstReceivedAt", "Source", "Reference"]
        repaired = 0
        with _translated():
            query = self._claims.query_entities(
                INDEX_REPAIR_FILTER, parameters=parameters, select=columns_read, results_per_page=page_rows
            )
            for page in query.by_page():
                for row in page:
                    source, reference = row.get("Source"), row.get("Reference")
                    self._to_index(
                        _index_entities(row["ClaimId"], row["FirstReceivedAt"], source=source, reference=reference)
                    )
                    repaired += 1
                self.flush_index()
        return repaired
