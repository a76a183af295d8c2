"""The Azure store's claims: a claim's row and its fingerprint records, written with its history in one transaction.

Each claim is its own partition: the claim row (RowKey ``claim``), its history rows (``history``) and its
fingerprint records sit together, so a claim change and its event commit in one entity-group transaction.
Two runs of the same flow cannot both win::

    run A                                Table Storage                 run B
    create claim + event       ------>   no row: both inserted, ETag e1
                                         row exists: 409, nothing   <------  create claim + event
                                         written; B reads A's claim          (AlreadyExists)
    read claim (e1)                                                          read claim (e1)
    replace If-Match e1 + event ------>  e1 current: both written, e2
                                         e2 != e1: 412, nothing     <------  replace If-Match e1 + event
                                         written                             (ConcurrentUpdate)

The insert fails if the row exists and the replace fails unless the ETag is unchanged, and the
event rides in the same transaction, so the loser leaves no trace. Deleting a claim (retention)
removes its history and then, last, the claim row, every transaction conditioned on the claim's
ETag: a claim that changed meanwhile is left alone, and a delete cut short leaves a claim the next
purge finds again, never history without its claim.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager, nullcontext, suppress
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError, ServiceRequestError, ServiceResponseError
from azure.data.tables import TableClient, TableEntity, TransactionOperation, UpdateMode

from oncegate.domain.copies import replaced
from oncegate.domain.records import Claim, ClaimFilter, FingerprintRecord, HistoryEvent, Page
from oncegate.domain.tombstones import buried_fingerprints
from oncegate.errors import AlreadyExists, ConcurrentUpdate, InvalidRequest, NotFound
from oncegate.stores import row_reading
from oncegate.stores.paging import decode_cursor, encode_cursor
from oncegate.stores.tables import batch
from oncegate.stores.tables.entities import (
    BAD_REQUEST,
    CLAIM_ROW,
    EXISTS,
    FINGERPRINT_PREFIX,
    MISSING,
    PARTITION_FILTER,
    STALE,
    _claim_entity,
    _claim_index,
    _claim_keys,
    _etag,
    _event_entity,
    _fingerprint_entity,
    _if_unchanged,
    _on_status,
    _translated,
)

CLAIM_CLAUSES = {
    "rk": "RowKey eq @rk",
    "scope": "Scope eq @scope",
    "before": "UpdatedAt lt @before",
    "since": "FirstReceivedAt ge @since",
}
# A transaction holds at most 100 operations: a batch of history rows and the claim row's own.
HISTORY_BATCH = 99


def _fingerprint_operation(record: FingerprintRecord) -> tuple[Any, ...]:
    """Insert a new fingerprint record, or replace one at the ETag it was read with."""
    if record.version is None:
        return (TransactionOperation.CREATE, _fingerprint_entity(record))
    return (TransactionOperation.UPDATE, _fingerprint_entity(record), _if_unchanged(record.version))


def _status_clause(count: int) -> str:
    # The SDK substitutes parameters word by word: a parenthesis must not touch a parameter's name.
    return "( " + " or ".join(f"Status eq @status{index}" for index in range(count)) + " )"


def _continuation(cursor: str | None) -> dict[str, str | None] | None:
    """The SDK's continuation token kept in a cursor: the next partition and row key, opaque to us."""
    if cursor is None:
        return None
    partition, row = decode_cursor(cursor)
    return {"PartitionKey": partition or None, "RowKey": row or None}


def _cursor(token: Mapping[str, str | None] | None) -> str | None:
    return encode_cursor(token.get("PartitionKey") or "", token.get("RowKey") or "") if token else None


class TableClaims:
    """``ClaimReads``, ``ClaimWrites``, ``ClaimListing`` and ``WritesTogether`` over the claims table."""

    # The store's own (store.TableStore), the history's (history.TableHistory) and the index's (index.TableClaimIndex).
    _claims: TableClient
    list_events: Callable[[str], list[HistoryEvent]]
    _unindexed: dict[tuple[str, str], dict[str, Any]]
    _index_lock: threading.Lock
    _indexed_claims: Callable[..., Page[Claim]]

    def create_claim(self, claim: Claim, event: HistoryEvent) -> Claim:
        """Insert the claim and its first event in one transaction; ``AlreadyExists`` if the claim exists."""
        with _on_status(EXISTS, lambda: AlreadyExists(self.get_claim(claim.claim_id))):
            result = batch.submit_transaction(
                self._claims,
                [
                    (TransactionOperation.CREATE, _claim_entity(claim)),
                    (TransactionOperation.CREATE, _event_entity(event)),
                ],
            )
        self._to_index(_claim_index(claim))
        # What was written, at the ETag it was written with: the claim it was given, not one read back from its row.
        return replaced(claim, version=_etag(result[0]))

    def _to_index(self, entities: list[dict[str, Any]]) -> None:
        """Keep a claim's index rows for the next flush (``TableClaimIndex.flush_index``), off the claim's path."""
        if not entities:
            return
        with self._index_lock:
            for entity in entities:
                self._unindexed[(entity["PartitionKey"], entity["RowKey"])] = entity

    def _claim_of(self, entity: TableEntity) -> Claim:
        """The claim of its entity; a row of schema 1 reads its history for what it kept there (rare)."""
        row, version = row_reading.gather(entity), _etag(entity.metadata)
        return row_reading.claim_from_row(row, version, lambda: self.list_events(entity["PartitionKey"]))

    def get_claim(self, claim_id: str) -> Claim:
        """The stored claim; raises ``NotFound``."""
        with _on_status(MISSING, lambda: NotFound(f"no claim has the id {claim_id}.", record="claim")):
            entity = self._claims.get_entity(claim_id, CLAIM_ROW)
        return self._claim_of(entity)

    def update_claim(
        self,
        claim: Claim,
        event: HistoryEvent | None,
        *,
        fingerprint: FingerprintRecord | None = None,
        relabelled: bool = False,
    ) -> Claim:
        """Replace the claim if its ETag is current, with its event and fingerprint record in the same transaction.

        A fingerprint record inserted by another writer meanwhile fails the transaction with 409, one
        replaced meanwhile with 412: both are the same lost race as a changed claim.
        """
        entity = _claim_entity(claim)
        metadata: Mapping[str, Any]
        stale = f"claim {claim.claim_id} or its fingerprint record changed since {claim.version}"
        with _on_status(STALE + EXISTS, lambda: ConcurrentUpdate(stale)):
            if event is None and fingerprint is None:
                metadata = self._claims.update_entity(entity, **_if_unchanged(claim.version))
            else:
                operations: list[Any] = [(TransactionOperation.UPDATE, entity, _if_unchanged(claim.version))]
                if event is not None:
                    operations.append((TransactionOperation.CREATE, _event_entity(event)))
                if fingerprint is not None:
                    operations.append(_fingerprint_operation(fingerprint))
                metadata = batch.submit_transaction(self._claims, operations)[0]
        if relabelled:
            self._to_index(_claim_index(claim))
        return replaced(claim, version=_etag(metadata))

    def get_fingerprints(self, claim_id: str, fingerprints: Collection[str]) -> list[FingerprintRecord]:
        """The claim's fingerprint records: point reads, one per fingerprint (there are at most two forms)."""
        found = []
        for fingerprint in dict.fromkeys(fingerprints):
            with suppress(ResourceNotFoundError), _translated():
                entity = self._claims.get_entity(claim_id, FINGERPRINT_PREFIX + fingerprint)
                found.append(row_reading.fingerprint_from_row(row_reading.gather(entity), _etag(entity.metadata)))
        return found

    def list_claims(self, matching: ClaimFilter, *, limit: int, cursor: str | None = None) -> Page[Claim]:
        """Claim rows by status, scope, age and first received, in claim id order; the cursor carries the SDK's
        continuation token. By source system or reference, through the claim index (see ``_indexed_claims``).

        Without one the filter is not on a key, so Table Storage reads through the table to answer it, page by page.
        """
        if matching.source is not None or matching.reference is not None:
            return self._indexed_claims(matching, limit=limit, cursor=cursor)
        wanted: dict[str, Any] = {
            "rk": CLAIM_ROW,
            "scope": matching.scope,
            "before": matching.changed_before,
            "since": matching.received_since,
        }
        parameters = {name: value for name, value in wanted.items() if value is not None}
        statuses = row_reading.stored_statuses(matching)
        query = " and ".join([*(CLAIM_CLAUSES[name] for name in parameters), _status_clause(len(statuses))])
        parameters.update({f"status{index}": status for index, status in enumerate(statuses)})
        refused = BAD_REQUEST if cursor else ()
        with _on_status(refused, lambda: InvalidRequest("cursor is not one this service handed out.", target="cursor")):
            # The SDK types the token as str; for entities it is the dict it hands out itself.
            pages: Any = self._claims.query_entities(query, parameters=parameters, results_per_page=limit).by_page(
                continuation_token=_continuation(cursor)  # type: ignore[arg-type]
            )
            entities = list(next(pages))
            token = pages.continuation_token
        return Page([self._claim_of(entity) for entity in entities], _cursor(token))

    def writing_together(self) -> AbstractContextManager[None]:
        """Nothing to hold together: each write is kept as it is made (one partition per claim, issue 24)."""
        return nullcontext()

    def delete_claim(self, claim: Claim, *, tombstone: Claim | None = None) -> None:
        """Delete the claim's history, then its row (or replace it with ``tombstone``), in transactions
        conditioned on the claim's ETag.

        Every transaction carries the claim row: each but the last touches it (a merge of nothing, which
        changes its ETag), the last deletes or replaces it. A claim that changes meanwhile fails the next
        transaction and keeps what is left; only a history of more than 99 rows needs more than one transaction.
        A tombstone keeps the fingerprint records :func:`~oncegate.domain.tombstones.buried_fingerprints` names,
        rewritten in its own transaction; the others go with the history. A claim deleted whole has its partition
        listed once more after: a duplicate's line written meanwhile (``count_event``) goes too.
        """
        stale = f"claim {claim.claim_id} changed since {claim.version}, or is gone"
        with _on_status(STALE, lambda: ConcurrentUpdate(stale)):
            rows = list(
                self._claims.query_entities(PARTITION_FILTER, parameters={"pk": claim.claim_id}, select=["RowKey"])
            )
            if next((_etag(row.metadata) for row in rows if row["RowKey"] == CLAIM_ROW), None) != claim.version:
                raise ConcurrentUpdate(stale)
            kept = self._buried_fingerprints(tombstone, rows) if tombstone is not None else []
            staying = {CLAIM_ROW, *(FINGERPRINT_PREFIX + record.fingerprint for record in kept)}
            history = [
                (TransactionOperation.DELETE, _claim_keys(claim.claim_id, row["RowKey"]))
                for row in rows
                if row["RowKey"] not in staying
            ]
            # Last, so that they go in the transaction that writes the tombstone (there are fewer than a batch).
            history += [_fingerprint_operation(record) for record in kept]
            etag = claim.version
            while len(history) > HISTORY_BATCH:
                chunk, history = history[:HISTORY_BATCH], history[HISTORY_BATCH:]
                touch = (
                    TransactionOperation.UPDATE,
                    _claim_keys(claim.claim_id),
                    _if_unchanged(etag, UpdateMode.MERGE),
                )
                etag = _etag(batch.submit_transaction(self._claims, [touch, *chunk])[0])
            if tombstone is None:
                delete = {"etag": etag, "match_condition": MatchConditions.IfNotModified}
                last = (TransactionOperation.DELETE, _claim_keys(claim.claim_id), delete)
            else:
                last = (TransactionOperation.UPDATE, _claim_entity(tombstone), _if_unchanged(etag, UpdateMode.REPLACE))
            batch.submit_transaction(self._claims, [last, *history])
        if tombstone is None:
            with suppress(HttpResponseError, ServiceRequestError, ServiceResponseError):
                self._delete_left_over(claim.claim_id)
        # The claim is gone; its index rows go after it. One left behind (a failure here) names a claim that
        # no longer exists, which the index's reader passes over.
        for entity in _claim_index(claim):
            with suppress(HttpResponseError, ServiceRequestError, ServiceResponseError):
                self._claims.delete_entity(entity["PartitionKey"], entity["RowKey"])

    def _delete_left_over(self, claim_id: str) -> None:
        """Delete the rows a series' first answer wrote in the claim's partition after the delete listed it (no
        transaction reads the claim): while no claim is made there again, every row left is the deleted claim's."""
        rows = list(self._claims.query_entities(PARTITION_FILTER, parameters={"pk": claim_id}, select=["RowKey"]))
        if any(row["RowKey"] == CLAIM_ROW for row in rows):
            return
        for row in rows:
            with suppress(HttpResponseError):  # gone already, or counted in since: a change of its own
                self._claims.delete_entity(
                    claim_id, row["RowKey"], etag=_etag(row.metadata), match_condition=MatchConditions.IfNotModified
                )

    def _buried_fingerprints(self, tombstone: Claim, rows: list[Any]) -> list[FingerprintRecord]:
        """The claim's fingerprint records its tombstone keeps (issue 31): read only when the claim has any, as
        only a claim whose conflicts were resolved does; each written back at the ETag it was read with."""
        keys = [row["RowKey"] for row in rows]
        names = [key.removeprefix(FINGERPRINT_PREFIX) for key in keys if key.startswith(FINGERPRINT_PREFIX)]
        return buried_fingerprints(tombstone, self.get_fingerprints(tombstone.claim_id, names)) if names else []
