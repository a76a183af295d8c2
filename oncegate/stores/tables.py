"""The Azure store: claims and conflicts in Azure Table Storage.

Each claim is its own partition: the claim row (RowKey ``claim``) and its history rows
(``history-<event id>``) sit together, so a claim change and its event commit in one
entity-group transaction. Two runs of the same flow cannot both win::

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
Conflicts live in one partition of their own table, so listing them never scans claims.
The inventory's flows, scopes and overlaps each fill one partition of a small table of their
own; a flow's RowKey is a digest of its name and environment, which may hold characters a
RowKey forbids (``/ \\ # ?``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from azure.core import MatchConditions
from azure.core.credentials import TokenCredential
from azure.core.exceptions import (
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.data.tables import TableClient, TableEntity, TableServiceClient, TransactionOperation, UpdateMode

from oncegate.domain.records import (
    Claim,
    Conflict,
    FingerprintRecord,
    FlowRecord,
    HistoryEvent,
    Overlap,
    Page,
    ScopeRecord,
)
from oncegate.domain.statuses import ClaimStatus, ConflictStatus
from oncegate.errors import AlreadyExists, ConcurrentUpdate, InvalidRequest, NotFound, StoreUnavailable
from oncegate.stores import columns, large_values
from oncegate.stores.columns import Row
from oncegate.stores.paging import decode_cursor, encode_cursor, utc_text

logger = logging.getLogger(__name__)
R = TypeVar("R")

CLAIM_ROW = "claim"
FINGERPRINT_PREFIX = "fingerprint-"
HISTORY_PREFIX = "history-"
# The first character after "-": every history row key sorts below it.
HISTORY_END = "history."
CONFLICT_PARTITION = "conflict"
FLOW_PARTITION = "flow"
SCOPE_PARTITION = "scope"
OVERLAP_PARTITION = "overlap"
PARTITION_FILTER = "PartitionKey eq @pk"

# Filter clauses are fixed text; values only ever travel as query parameters.
CONFLICT_CLAUSES = {"pk": "PartitionKey eq @pk", "status": "Status eq @status", "scope": "Scope eq @scope"}
EVENTS_FILTER = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
CLAIM_CLAUSES = {"rk": "RowKey eq @rk", "scope": "Scope eq @scope", "before": "UpdatedAt lt @before"}
# A transaction holds at most 100 operations: a batch of history rows and the claim row's own.
HISTORY_BATCH = 99

BAD_REQUEST = (400,)
EXISTS = (409,)
MISSING = (404,)
# 404: the row the caller read is gone, which for a conditional update is the same lost race.
STALE = (404, 412)
SUFFIXES = ("Claims", "Conflicts", "Flows", "Scopes", "Overlaps", "Keys")
KEY_PARTITION = "key"


def table_names(prefix: str) -> tuple[str, ...]:
    """The claims, conflicts, flows, scopes and overlaps tables for a prefix."""
    return tuple(prefix + suffix for suffix in SUFFIXES)


def _entity(partition_key: str, row_key: str, row: Row) -> dict[str, Any]:
    # Table Storage has no nulls: a missing property reads back as None through row.get().
    entity = {"PartitionKey": partition_key, "RowKey": row_key, **{k: v for k, v in row.items() if v is not None}}
    # A value over 32K UTF-16 code units goes in numbered pieces; a row too big even so is refused unsent.
    return large_values.spread(entity)


def _claim_entity(claim: Claim) -> dict[str, Any]:
    return _entity(claim.claim_id, CLAIM_ROW, columns.claim_to_row(claim))


def _event_entity(event: HistoryEvent) -> dict[str, Any]:
    return _entity(event.claim_id, HISTORY_PREFIX + event.event_id, columns.event_to_row(event))


def _fingerprint_entity(record: FingerprintRecord) -> dict[str, Any]:
    return _entity(record.claim_id, FINGERPRINT_PREFIX + record.fingerprint, columns.fingerprint_to_row(record))


def _fingerprint_operation(record: FingerprintRecord) -> tuple[Any, ...]:
    """Insert a new fingerprint record, or replace one at the ETag it was read with."""
    if record.version is None:
        return (TransactionOperation.CREATE, _fingerprint_entity(record))
    return (TransactionOperation.UPDATE, _fingerprint_entity(record), _if_unchanged(record.version))


def _conflict_entity(conflict: Conflict) -> dict[str, Any]:
    return _entity(CONFLICT_PARTITION, conflict.conflict_id, columns.conflict_to_row(conflict))


def _claim(entity: TableEntity) -> Claim:
    return columns.claim_from_row(large_values.gather(entity), _etag(entity.metadata))


def _conflict(entity: TableEntity) -> Conflict:
    return columns.conflict_from_row(large_values.gather(entity), _etag(entity.metadata))


def _etag(metadata: Mapping[str, Any]) -> str:
    # Reads and writes alike answer with the entity's ETag, so a write needs no re-read.
    etag = metadata.get("etag")
    assert etag, "Table Storage answered without an ETag"
    return str(etag)


def _position(conflict: Conflict) -> tuple[str, str]:
    return utc_text(conflict.created_at), conflict.conflict_id


def _if_unchanged(version: str | None, mode: UpdateMode = UpdateMode.REPLACE) -> dict[str, Any]:
    return {"mode": mode, "etag": version, "match_condition": MatchConditions.IfNotModified}


def _claim_keys(claim_id: str, row_key: str = CLAIM_ROW) -> dict[str, str]:
    return {"PartitionKey": claim_id, "RowKey": row_key}


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


def _unavailable(exc: Exception) -> StoreUnavailable:
    logger.warning("Table Storage unavailable: %s", exc)
    return StoreUnavailable(f"Table Storage is unavailable: {type(exc).__name__}")


@contextmanager
def _translated() -> Iterator[None]:
    """Outages and throttling become ``StoreUnavailable``; every other error passes through."""
    try:
        yield
    except (ServiceRequestError, ServiceResponseError) as exc:
        raise _unavailable(exc) from exc
    except HttpResponseError as exc:
        if exc.status_code is not None and (exc.status_code >= 500 or exc.status_code == 429):
            raise _unavailable(exc) from exc
        raise


@contextmanager
def _on_status(statuses: tuple[int, ...], error: Callable[[], Exception]) -> Iterator[None]:
    """Like ``_translated``, and a response with one of ``statuses`` raises ``error()``.

    A failed transaction is a ``TableTransactionError`` carrying the failed operation's status;
    a failed single call is ``ResourceExistsError`` (409), ``ResourceModifiedError`` (412) or
    ``ResourceNotFoundError`` (404). The status code reads the same in both.
    """
    try:
        with _translated():
            yield
    except HttpResponseError as exc:
        if exc.status_code in statuses:
            raise error() from exc
        raise


class TableStore:
    """Claims, their history and conflicts, and the flow inventory in five Azure tables."""

    kind = "tables"

    def __init__(self, service: TableServiceClient, *, prefix: str = "OnceGate") -> None:
        self._service = service
        names = table_names(prefix)
        with _translated():
            self._claims, self._conflicts, self._flows, self._scopes, self._overlaps, self._keys = (
                service.create_table_if_not_exists(name) for name in names
            )
        logger.info("Table Storage store ready: %s", ", ".join(names))

    @classmethod
    def from_connection_string(cls, conn_str: str, *, prefix: str = "OnceGate") -> TableStore:
        """A store on a storage account's connection string (Azurite in development)."""
        return cls(TableServiceClient.from_connection_string(conn_str), prefix=prefix)

    @classmethod
    def from_endpoint(cls, endpoint: str, credential: TokenCredential, *, prefix: str = "OnceGate") -> TableStore:
        """A store on an account endpoint with an Entra ID credential (a managed identity in Azure)."""
        return cls(TableServiceClient(endpoint=endpoint, credential=credential), prefix=prefix)

    def create_claim(self, claim: Claim, event: HistoryEvent) -> Claim:
        """Insert the claim and its first event in one transaction; ``AlreadyExists`` if the claim exists."""
        with _on_status(EXISTS, lambda: AlreadyExists(self.get_claim(claim.claim_id))):
            result = self._claims.submit_transaction(
                [
                    (TransactionOperation.CREATE, _claim_entity(claim)),
                    (TransactionOperation.CREATE, _event_entity(event)),
                ]
            )
        return columns.claim_from_row(columns.claim_to_row(claim), _etag(result[0]))

    def get_claim(self, claim_id: str) -> Claim:
        """The stored claim; raises ``NotFound``."""
        with _on_status(MISSING, lambda: NotFound(f"no claim has the id {claim_id}.", target="claimId")):
            entity = self._claims.get_entity(claim_id, CLAIM_ROW)
        return _claim(entity)

    def update_claim(
        self, claim: Claim, event: HistoryEvent | None, *, fingerprint: FingerprintRecord | None = None
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
                metadata = self._claims.submit_transaction(operations)[0]
        return columns.claim_from_row(columns.claim_to_row(claim), _etag(metadata))

    def get_fingerprints(self, claim_id: str, fingerprints: Collection[str]) -> list[FingerprintRecord]:
        """The claim's fingerprint records: point reads, one per fingerprint (there are at most two forms)."""
        found = []
        for fingerprint in dict.fromkeys(fingerprints):
            with suppress(ResourceNotFoundError), _translated():
                entity = self._claims.get_entity(claim_id, FINGERPRINT_PREFIX + fingerprint)
                found.append(columns.fingerprint_from_row(large_values.gather(entity), _etag(entity.metadata)))
        return found

    def list_claims(
        self,
        *,
        statuses: Collection[ClaimStatus],
        scope: str | None = None,
        changed_before: datetime | None = None,
        limit: int,
        cursor: str | None = None,
    ) -> Page[Claim]:
        """Claim rows by status, scope and age, in claim id order; the cursor carries the SDK's continuation token.

        The filter is not on a key, so Table Storage reads through the table to answer it, page by page.
        """
        wanted: dict[str, Any] = {"rk": CLAIM_ROW, "scope": scope, "before": changed_before}
        parameters = {name: value for name, value in wanted.items() if value is not None}
        query = " and ".join([*(CLAIM_CLAUSES[name] for name in parameters), _status_clause(len(statuses))])
        parameters.update({f"status{index}": status.value for index, status in enumerate(statuses)})
        refused = BAD_REQUEST if cursor else ()
        with _on_status(refused, lambda: InvalidRequest("cursor is not one this service handed out.", target="cursor")):
            # The SDK types the token as str; for entities it is the dict it hands out itself.
            pages: Any = self._claims.query_entities(query, parameters=parameters, results_per_page=limit).by_page(
                continuation_token=_continuation(cursor)  # type: ignore[arg-type]
            )
            entities = list(next(pages))
            token = pages.continuation_token
        return Page([_claim(entity) for entity in entities], _cursor(token))

    def delete_claim(self, claim: Claim) -> None:
        """Delete the claim's history, then its row, in transactions conditioned on the claim's ETag.

        Every transaction carries the claim row: each but the last touches it (a merge of nothing, which
        changes its ETag), the last deletes it. A claim that changes meanwhile fails the next transaction
        and keeps what is left; only a history of more than 99 rows needs more than one transaction.
        """
        stale = f"claim {claim.claim_id} changed since {claim.version}, or is gone"
        with _on_status(STALE, lambda: ConcurrentUpdate(stale)):
            rows = list(
                self._claims.query_entities(PARTITION_FILTER, parameters={"pk": claim.claim_id}, select=["RowKey"])
            )
            if next((_etag(row.metadata) for row in rows if row["RowKey"] == CLAIM_ROW), None) != claim.version:
                raise ConcurrentUpdate(stale)
            history = [
                (TransactionOperation.DELETE, _claim_keys(claim.claim_id, row["RowKey"]))
                for row in rows
                if row["RowKey"] != CLAIM_ROW
            ]
            etag = claim.version
            while len(history) > HISTORY_BATCH:
                batch, history = history[:HISTORY_BATCH], history[HISTORY_BATCH:]
                touch = (
                    TransactionOperation.UPDATE,
                    _claim_keys(claim.claim_id),
                    _if_unchanged(etag, UpdateMode.MERGE),
                )
                etag = _etag(self._claims.submit_transaction([touch, *batch])[0])
            delete = {"etag": etag, "match_condition": MatchConditions.IfNotModified}
            self._claims.submit_transaction(
                [(TransactionOperation.DELETE, _claim_keys(claim.claim_id), delete), *history]
            )

    def add_event(self, event: HistoryEvent) -> None:
        """Append a history event to its claim's partition."""
        # Event ids are unique, so a row already there is this very event: the SDK retried an insert whose
        # first answer was lost (a 500 "operation timed out" may come after the write landed).
        with suppress(ResourceExistsError), _translated():
            self._claims.create_entity(_event_entity(event))

    def list_events(self, claim_id: str) -> list[HistoryEvent]:
        """The claim's history, oldest first: a partition reads in RowKey order and event ids sort by time."""
        parameters = {"pk": claim_id, "lo": HISTORY_PREFIX, "hi": HISTORY_END}
        with _translated():
            entities = list(self._claims.query_entities(EVENTS_FILTER, parameters=parameters))
        return [columns.event_from_row(large_values.gather(entity)) for entity in entities]

    def create_conflict(self, conflict: Conflict) -> Conflict:
        """Insert the conflict if its id is new; raises ``AlreadyExists`` carrying the stored one."""
        with _on_status(EXISTS, lambda: AlreadyExists(self.get_conflict(conflict.conflict_id))):
            metadata = self._conflicts.create_entity(_conflict_entity(conflict))
        return columns.conflict_from_row(columns.conflict_to_row(conflict), _etag(metadata))

    def get_conflict(self, conflict_id: str) -> Conflict:
        """The stored conflict; raises ``NotFound``."""
        with _on_status(MISSING, lambda: NotFound(f"no conflict has the id {conflict_id}.", target="conflictId")):
            return _conflict(self._conflicts.get_entity(CONFLICT_PARTITION, conflict_id))

    def update_conflict(self, conflict: Conflict) -> Conflict:
        """Replace the conflict if its ETag is current; raises ``ConcurrentUpdate``."""
        stale = f"conflict {conflict.conflict_id} changed since {conflict.version}"
        with _on_status(STALE, lambda: ConcurrentUpdate(stale)):
            metadata = self._conflicts.update_entity(_conflict_entity(conflict), **_if_unchanged(conflict.version))
        return columns.conflict_from_row(columns.conflict_to_row(conflict), _etag(metadata))

    def list_conflicts(
        self, *, status: ConflictStatus | None, scope: str | None, limit: int, cursor: str | None
    ) -> Page[Conflict]:
        """Conflicts oldest first, filtered by status and scope, a page at a time."""
        after = decode_cursor(cursor) if cursor else ("", "")
        wanted = {"pk": CONFLICT_PARTITION, "status": status.value if status else None, "scope": scope}
        parameters = {name: value for name, value in wanted.items() if value is not None}
        with _translated():
            entities = self._conflicts.query_entities(
                " and ".join(CONFLICT_CLAUSES[name] for name in parameters), parameters=parameters
            )
            # The partition comes back in RowKey (conflict id) order, not time order. Conflicts are
            # few, so sorting the filtered partition here beats keeping a second, time-keyed copy.
            ordered = sorted(map(_conflict, entities), key=_position)
        rest = [conflict for conflict in ordered if _position(conflict) > after]
        next_cursor = encode_cursor(*_position(rest[limit - 1])) if len(rest) > limit else None
        return Page(rest[:limit], next_cursor)

    def conflicts_after(self, created_at: datetime, conflict_id: str = "") -> str:
        return encode_cursor(utc_text(created_at), conflict_id)

    def list_flows(self) -> list[FlowRecord]:
        """Every flow in the inventory: one partition query."""
        return self._list(self._flows, FLOW_PARTITION, columns.flow_from_row)

    def save_flow(self, record: FlowRecord) -> FlowRecord:
        """Insert the flow (no version) or replace it if its ETag is current; raises ``ConcurrentUpdate``."""
        row = columns.flow_to_row(record)
        return replace(record, version=self._save(self._flows, FLOW_PARTITION, row["FlowId"], row, record.version))

    def list_scopes(self) -> list[ScopeRecord]:
        """Every scope in the catalogue: one partition query."""
        return self._list(self._scopes, SCOPE_PARTITION, columns.scope_from_row)

    def save_scope(self, record: ScopeRecord) -> ScopeRecord:
        """Insert the scope (no version) or replace it if its ETag is current; raises ``ConcurrentUpdate``."""
        row = columns.scope_to_row(record)
        return replace(record, version=self._save(self._scopes, SCOPE_PARTITION, record.scope, row, record.version))

    def list_overlaps(self) -> list[Overlap]:
        """Every pair of overlapping flows: one partition query."""
        return self._list(self._overlaps, OVERLAP_PARTITION, columns.overlap_from_row)

    def save_overlap(self, record: Overlap) -> Overlap:
        """Insert the overlap (no version) or replace it if its ETag is current; raises ``ConcurrentUpdate``."""
        row = columns.overlap_to_row(record)
        version = self._save(self._overlaps, OVERLAP_PARTITION, row["OverlapId"], row, record.version)
        return replace(record, version=version)

    @staticmethod
    def _list(table: TableClient, partition: str, from_row: Callable[[Row, str], R]) -> list[R]:
        with _translated():
            entities = list(table.query_entities(PARTITION_FILTER, parameters={"pk": partition}))
        return [from_row(large_values.gather(entity), _etag(entity.metadata)) for entity in entities]

    @staticmethod
    def _save(table: TableClient, partition: str, row_key: str, row: Row, version: str | None) -> str:
        """Create the entity (no version) or replace it at that ETag; the new ETag."""
        stale = f"{table.table_name} row {row_key} exists already or changed since {version}"
        metadata: Mapping[str, Any]
        with _on_status(EXISTS + STALE, lambda: ConcurrentUpdate(stale)):
            if version is None:
                metadata = table.create_entity(_entity(partition, row_key, row))
            else:
                metadata = table.update_entity(_entity(partition, row_key, row), **_if_unchanged(version))
        return _etag(metadata)

    def key_ids(self) -> set[str]:
        """The key ids: one partition of their own table."""
        with _translated():
            entities = self._keys.query_entities(PARTITION_FILTER, parameters={"pk": KEY_PARTITION}, select=["RowKey"])
            return {entity["RowKey"] for entity in entities}

    def add_key_id(self, key_id: str) -> None:
        """Insert the key id's row; one already there (another instance, a retried insert) is the same fact."""
        with suppress(ResourceExistsError), _translated():
            self._keys.create_entity({"PartitionKey": KEY_PARTITION, "RowKey": key_id, "AddedAt": datetime.now(UTC)})

    def ping(self) -> None:
        """One small query on the claims table; raises ``StoreUnavailable`` if it cannot be reached."""
        with _translated():
            next(self._claims.list_entities(results_per_page=1, select="PartitionKey").by_page())

    def close(self) -> None:
        """Close the HTTP connections."""
        self._service.close()
