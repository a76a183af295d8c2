"""The Azure store: claims and conflicts in Azure Table Storage.

Each claim is its own partition: the claim row (RowKey ``claim``) and its history rows
(``history-<event id>``) sit together, so a claim change and its event commit in one
entity-group transaction. Answers alike share one history row, ``history-series-<digest>``,
which counts them (``count_event``). Two runs of the same flow cannot both win::

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
Conflicts fill one partition of their own table, each twice, so listing them never scans claims
and a page never reads the whole partition (issue 12). The conflict row, keyed by the conflict id,
guards its uniqueness (insert-if-absent) and serves point reads; its listing row holds the same
columns under a key of its status and its place in the list, so a page, oldest first, is one RowKey
range read ``top + 1`` rows at a time, however many conflicts there are::

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
The inventory's flows, scopes and overlaps each fill one partition of a small table of their
own, and the key secrets and the store's id share a sixth (``SUFFIXES``: six tables in all); a
flow's RowKey is a digest of its name and environment, which may hold characters a RowKey forbids
(``/ \\ # ?``).

The entity helpers and the error translation are in ``table_entities``, the entity-group
transaction's wire format in ``table_batch``, the backups (issue 35) in ``tables_backups``.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from itertools import islice
from secrets import token_hex
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

from oncegate import telemetry
from oncegate.bounded import Bounded
from oncegate.domain.marks import StoreMarks, TableMark
from oncegate.domain.records import (
    Claim,
    ClaimFilter,
    Conflict,
    FingerprintRecord,
    FlowRecord,
    HistoryEvent,
    KeySecretRecord,
    Overlap,
    Page,
    ScopeRecord,
)
from oncegate.domain.statuses import ConflictStatus
from oncegate.domain.tombstones import buried_fingerprints
from oncegate.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    InvalidRequest,
    NotConfigured,
    NotFound,
)
from oncegate.stores import columns, large_values, table_batch
from oncegate.stores.columns import Row
from oncegate.stores.paging import decode_cursor, encode_cursor, page_of, utc_text
from oncegate.stores.table_entities import (
    CLAIM_ROW,
    CONFLICT_PARTITION,
    FINGERPRINT_PREFIX,
    HISTORY_PREFIX,
    KEY_PARTITION,
    PARTITION_FILTER,
    REPAIR_PAGE_ROWS,
    STORE_PARTITION,
    TRANSACTION_LIMIT,
    _claim_entity,
    _claim_index,
    _entity,
    _etag,
    _event_entity,
    _event_place,
    _fingerprint_entity,
    _index_entities,
    _index_partition,
    _index_place,
    _translated,
)
from oncegate.stores.table_targets import TARGETS_SUFFIX, TableTargets
from oncegate.stores.tables_backups import TableBackups

logger = logging.getLogger(__name__)
R = TypeVar("R")

# The first character after "-": every history row key sorts below it.
HISTORY_END = "history."
FLOW_PARTITION = "flow"
SCOPE_PARTITION = "scope"
OVERLAP_PARTITION = "overlap"

# Filter clauses are fixed text; values only ever travel as query parameters.
# A listing row's RowKey: "0-<status>-<CreatedAt as fixed-width UTC text>-<conflict id>".
LISTING = "0-"
LISTING_FILTER = "PartitionKey eq @pk and RowKey gt @after and RowKey lt @end"
SCOPE_CLAUSE = " and Scope eq @scope"
VERSION = "Version"
FIRST_VERSION = 1
# The version of a row 0.1.0 wrote, which has no Version column (and no listing row).
LEGACY_VERSION = 0
# The marker row saying that every conflict 0.1.0 wrote has its listing row.
UPGRADE_PARTITION = "upgrade"
LISTING_ADDED = "conflict-listing-rows"
EVENTS_FILTER = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
CLAIM_CLAUSES = {
    "rk": "RowKey eq @rk",
    "scope": "Scope eq @scope",
    "before": "UpdatedAt lt @before",
    "since": "FirstReceivedAt ge @since",
}
# A transaction holds at most 100 operations: a batch of history rows and the claim row's own.
HISTORY_BATCH = 99
# Lost races counting one answer in its series' line before it is kept as a line of its own.
SERIES_RACES = 4
# Series lines remembered at their ETags, least recently counted forgotten first: about 1 KB each.
SERIES_REMEMBERED = 4096
# The claim index (issue 16): partitions of the claims table keyed by a source system or a reference's digest.
INDEX_FILTER = "PartitionKey eq @pk and RowKey gt @after"
INDEX_REPAIR_FILTER = "RowKey eq @rk and FirstReceivedAt ge @since and ( Source gt @none or Reference gt @none )"

BAD_REQUEST = (400,)
EXISTS = (409,)
MISSING = (404,)
# 404: the row the caller read is gone, which for a conditional update is the same lost race.
STALE = (404, 412)
SUFFIXES = ("Claims", "Conflicts", "Flows", "Scopes", "Overlaps", "Keys")
# The store's id's row, beside the key secrets (in STORE_PARTITION), so that one read brings both.
STORE_ROW = "identity"
# The claims table's own mark (issue 31), in a partition no claim id (52 letters) or index partition has.
MARK_ROW = "mark"


def table_names(prefix: str) -> tuple[str, ...]:
    """The six tables for a prefix: claims, conflicts, flows, scopes, overlaps, and keys (key secrets, store id)."""
    return tuple(prefix + suffix for suffix in SUFFIXES)


def _fingerprint_operation(record: FingerprintRecord) -> tuple[Any, ...]:
    """Insert a new fingerprint record, or replace one at the ETag it was read with."""
    if record.version is None:
        return (TransactionOperation.CREATE, _fingerprint_entity(record))
    return (TransactionOperation.UPDATE, _fingerprint_entity(record), _if_unchanged(record.version))


def _listing_key(status: ConflictStatus, place: tuple[str, str]) -> str:
    """The RowKey of the listing row at ``place`` (its fixed-width UTC time, its id): keys sort as places do."""
    created_at, conflict_id = place
    return f"{LISTING}{status.value}-{created_at}-{conflict_id}"


def _conflict_entities(conflict: Conflict, version: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The conflict row and its listing row: the same columns under two keys."""
    row = {**columns.conflict_to_row(conflict), VERSION: version}
    listing_key = _listing_key(conflict.status, _position(conflict))
    return _entity(CONFLICT_PARTITION, conflict.conflict_id, row), _entity(CONFLICT_PARTITION, listing_key, row)


def _conflict(entity: TableEntity) -> Conflict:
    return columns.conflict_from_row(large_values.gather(entity), str(entity.get(VERSION, LEGACY_VERSION)))


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


def _date(header: str) -> datetime | None:
    """An HTTP ``Date`` (RFC 9110: GMT, whole seconds); None when absent or unreadable."""
    try:
        moment = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    # "-0000" reads as a naive time; HTTP dates are UTC all the same.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


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


class TableStore(TableBackups, TableTargets):
    """Claims, their history and conflicts, the flow inventory, the key secrets and the store id in six Azure tables."""

    kind = "tables"
    # Each claim is a partition and each write a request of its own: a bulk call sends its items' writes at once.
    parallel_writes = True

    def __init__(self, service: TableServiceClient, *, prefix: str = "OnceGate", read_only: bool = False) -> None:
        self._service = service
        names = table_names(prefix)
        self._claims, self._conflicts, self._flows, self._scopes, self._overlaps, self._keys = (
            service.get_table_client(name) for name in names
        )
        self._targets = service.get_table_client(prefix + TARGETS_SUFFIX)
        # Claims and keys tables are made only for a store with no id (issue 31); an export (read only) writes nothing.
        if not read_only:
            guarded = (self._claims, self._keys) if self._identity() is None else ()
            with _translated():
                for table in (*guarded, self._conflicts, self._flows, self._scopes, self._overlaps, self._targets):
                    service.create_table_if_not_exists(table.table_name)
            self._add_missing_listing_rows()
        # Index rows of the claims this instance made, written off the claim path by flush_index (issue 16).
        self._unindexed: dict[tuple[str, str], dict[str, Any]] = {}
        self._index_lock = threading.Lock()
        # The series lines this instance wrote last, at their ETags: the next count merges without a read.
        self._series: Bounded[tuple[str, str], tuple[str, HistoryEvent]] = Bounded(SERIES_REMEMBERED)
        logger.info("Table Storage store ready: %s", ", ".join(names))

    @classmethod
    def from_connection_string(cls, conn_str: str, **options: Any) -> TableStore:
        """A store on a storage account's connection string (Azurite in development); ``prefix``, ``read_only``."""
        service = TableServiceClient.from_connection_string(conn_str, raw_request_hook=telemetry.round_trip)
        return cls(service, **options)

    @classmethod
    def from_endpoint(cls, endpoint: str, credential: TokenCredential, **options: Any) -> TableStore:
        """A store on an account endpoint with an Entra ID credential (a managed identity in Azure)."""
        # Each request the SDK sends, retries included, counts for the answer's telemetry.
        service = TableServiceClient(endpoint=endpoint, credential=credential, raw_request_hook=telemetry.round_trip)
        return cls(service, **options)

    def create_claim(self, claim: Claim, event: HistoryEvent) -> Claim:
        """Insert the claim and its first event in one transaction; ``AlreadyExists`` if the claim exists."""
        with _on_status(EXISTS, lambda: AlreadyExists(self.get_claim(claim.claim_id))):
            result = table_batch.submit_transaction(
                self._claims,
                [
                    (TransactionOperation.CREATE, _claim_entity(claim)),
                    (TransactionOperation.CREATE, _event_entity(event)),
                ],
            )
        self._to_index(_claim_index(claim))
        return columns.claim_from_row(columns.claim_to_row(claim), _etag(result[0]))

    def _claim_of(self, entity: TableEntity) -> Claim:
        """The claim of its entity; a row of schema 1 reads its history for what it kept there (rare)."""
        row, version = large_values.gather(entity), _etag(entity.metadata)
        return columns.claim_from_row(row, version, lambda: self.list_events(entity["PartitionKey"]))

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
                metadata = table_batch.submit_transaction(self._claims, operations)[0]
        if relabelled:
            self._to_index(_claim_index(claim))
        return columns.claim_from_row(columns.claim_to_row(claim), _etag(metadata))

    def get_fingerprints(self, claim_id: str, fingerprints: Collection[str]) -> list[FingerprintRecord]:
        """The claim's fingerprint records: point reads, one per fingerprint (there are at most two forms)."""
        found = []
        for fingerprint in dict.fromkeys(fingerprints):
            with suppress(ResourceNotFoundError), _translated():
                entity = self._claims.get_entity(claim_id, FINGERPRINT_PREFIX + fingerprint)
                found.append(columns.fingerprint_from_row(large_values.gather(entity), _etag(entity.metadata)))
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
        statuses = columns.stored_statuses(matching)
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

    def writing_together(self) -> AbstractContextManager[None]:
        """Nothing to hold together: each write is kept as it is made (one partition per claim, issue 24)."""
        return nullcontext()

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
                    batch = entities[start : start + TRANSACTION_LIMIT]
                    upserts = [(TransactionOperation.UPSERT, entity, {"mode": UpdateMode.REPLACE}) for entity in batch]
                    with _translated():
                        table_batch.submit_transaction(self._claims, upserts)
                    for entity in batch:
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

    def _to_index(self, entities: list[dict[str, Any]]) -> None:
        with self._index_lock:
            for entity in entities:
                self._unindexed[(entity["PartitionKey"], entity["RowKey"])] = entity

    def delete_claim(self, claim: Claim, *, tombstone: Claim | None = None) -> None:
        """Delete the claim's history, then its row (or replace it with ``tombstone``), in transactions
        conditioned on the claim's ETag.

        Every transaction carries the claim row: each but the last touches it (a merge of nothing, which
        changes its ETag), the last deletes or replaces it. A claim that changes meanwhile fails the next
        transaction and keeps what is left; only a history of more than 99 rows needs more than one transaction.
        A tombstone keeps the fingerprint records :func:`~oncegate.domain.tombstones.buried_fingerprints` names,
        rewritten in its own transaction; the others go with the history.
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
                batch, history = history[:HISTORY_BATCH], history[HISTORY_BATCH:]
                touch = (
                    TransactionOperation.UPDATE,
                    _claim_keys(claim.claim_id),
                    _if_unchanged(etag, UpdateMode.MERGE),
                )
                etag = _etag(table_batch.submit_transaction(self._claims, [touch, *batch])[0])
            if tombstone is None:
                delete = {"etag": etag, "match_condition": MatchConditions.IfNotModified}
                last = (TransactionOperation.DELETE, _claim_keys(claim.claim_id), delete)
            else:
                last = (TransactionOperation.UPDATE, _claim_entity(tombstone), _if_unchanged(etag, UpdateMode.REPLACE))
            table_batch.submit_transaction(self._claims, [last, *history])
        # The claim is gone; its index rows go after it. One left behind (a failure here) names a claim that
        # no longer exists, which the index's reader passes over.
        for entity in _claim_index(claim):
            with suppress(HttpResponseError, ServiceRequestError, ServiceResponseError):
                self._claims.delete_entity(entity["PartitionKey"], entity["RowKey"])

    def _buried_fingerprints(self, tombstone: Claim, rows: list[Any]) -> list[FingerprintRecord]:
        """The claim's fingerprint records its tombstone keeps (issue 31): read only when the claim has any, as
        only a claim whose conflicts were resolved does; each written back at the ETag it was read with."""
        keys = [row["RowKey"] for row in rows]
        names = [key.removeprefix(FINGERPRINT_PREFIX) for key in keys if key.startswith(FINGERPRINT_PREFIX)]
        return buried_fingerprints(tombstone, self.get_fingerprints(tombstone.claim_id, names)) if names else []

    def add_event(self, event: HistoryEvent) -> None:
        """Append a history event to its claim's partition."""
        # Event ids are unique, so a row already there is this very event: the SDK retried an insert whose
        # first answer was lost (a 500 "operation timed out" may come after the write landed).
        with suppress(ResourceExistsError), _translated():
            self._claims.create_entity(_event_entity(event))

    def count_event(self, event: HistoryEvent) -> None:
        """Count the answer in its series' line: write first, on the ETag this instance last wrote it with.

        The first answer of a series inserts its line, one request as ``add_event``. A later one merges the
        line's count and times, conditioned on the ETag this instance remembers from its own last write of
        the line: one request while no other instance counts in it. Only when the line is unknown here, or
        another writer changed it since (412), is it read, and the merge conditioned on the ETag read. After
        ``SERIES_RACES`` lost races the answer is kept as a line of its own.
        """
        entity = _event_entity(event)
        key = (event.claim_id, entity["RowKey"])
        with _translated():
            known = self._series.get(key)
            failed = self._counted_in(key, known, event) if known else MISSING[0]
            if failed is None:
                return
            if failed in MISSING:  # unknown here, or gone (the claim was deleted and made again)
                try:
                    self._series.put(key, (_etag(self._claims.create_entity(entity)), event))
                    return
                except ResourceExistsError:
                    pass
            for _ in range(SERIES_RACES):
                try:
                    stored = self._claims.get_entity(*key)
                except ResourceNotFoundError:
                    return  # the claim and its history were deleted meanwhile (retention): nothing to count in
                read = (_etag(stored.metadata), columns.event_from_row(large_values.gather(stored)))
                if self._counted_in(key, read, event) is None:
                    return
            self._claims.create_entity(_event_entity(replace(event, event_id=f"{event.event_id}-{token_hex(4)}")))

    def _counted_in(self, key: tuple[str, str], known: tuple[str, HistoryEvent], event: HistoryEvent) -> int | None:
        """Count ``event`` in the series line known at an ETag: None when counted, else the status that refused
        it (412: another writer changed the line since, 404: it is gone)."""
        etag, series = known
        counted = replace(
            series,
            count=(series.count or 1) + 1,
            at=min(series.at, event.at),
            last_at=max(series.last_at or series.at, event.last_at or event.at),
        )
        merged = {**_claim_keys(*key), "Count": counted.count, "At": counted.at, "LastAt": counted.last_at}
        try:
            metadata = self._claims.update_entity(merged, **_if_unchanged(etag, UpdateMode.MERGE))
        except HttpResponseError as exc:
            if exc.status_code not in STALE:
                raise
            self._series.pop(key)
            return exc.status_code
        self._series.put(key, (_etag(metadata), counted))
        return None

    def list_events(self, claim_id: str) -> list[HistoryEvent]:
        """The claim's history by time: its rows, one range of the partition, sorted here.

        RowKeys do not sort by time (a series line's id is no time), so the whole range is read; counting
        repeated answers in one line each keeps it to the claim's changes and the kinds of answer it had.
        """
        parameters = {"pk": claim_id, "lo": HISTORY_PREFIX, "hi": HISTORY_END}
        with _translated():
            entities = list(self._claims.query_entities(EVENTS_FILTER, parameters=parameters))
        return sorted((columns.event_from_row(large_values.gather(entity)) for entity in entities), key=_event_place)

    def list_history(self, claim_id: str, *, limit: int, cursor: str | None = None) -> Page[HistoryEvent]:
        """One page of ``list_events``: the page after the cursor's place."""
        events, after = page_of(self.list_events(claim_id), _event_place, top=limit, cursor=cursor)
        return Page(events, after)

    def create_conflict(self, conflict: Conflict) -> Conflict:
        """Insert the conflict and its listing row in one transaction if its id is new.

        Raises ``AlreadyExists`` carrying the stored one: the conflict row, keyed by the id, is the guard.
        """
        operations = [(TransactionOperation.CREATE, entity) for entity in _conflict_entities(conflict, FIRST_VERSION)]
        with _on_status(EXISTS, lambda: AlreadyExists(self.get_conflict(conflict.conflict_id))):
            table_batch.submit_transaction(self._conflicts, operations)
        return columns.conflict_from_row(columns.conflict_to_row(conflict), str(FIRST_VERSION))

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
            # Replace, never merge: a listing row may hold a long value in pieces (large_values).
            operations.append((TransactionOperation.UPSERT, listing_row, {"mode": UpdateMode.REPLACE}))
            table_batch.submit_transaction(self._conflicts, operations)
        return columns.conflict_from_row(columns.conflict_to_row(conflict), str(version))

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

    def _add_missing_listing_rows(self) -> None:
        """Give every conflict 0.1.0 wrote (no ``Version``, no listing row) its listing row, once per table.

        A marker row says it is done, so a later start reads that one row. Each conflict gets its
        ``Version`` and its listing row in a transaction of its own, conditioned on its ETag: one changed
        meanwhile was written by this release, listing row and all. So a repair cut short, or run by two
        instances at once, leaves every conflict whole, and the next start goes on: the conflicts already
        repaired have their ``Version`` and are passed over.
        """
        with _translated():
            with suppress(ResourceNotFoundError):
                self._conflicts.get_entity(UPGRADE_PARTITION, LISTING_ADDED)
                return
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
            table_batch.submit_transaction(self._conflicts, operations)
        except HttpResponseError as exc:
            if exc.status_code not in STALE:
                raise
            return False
        return True

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

    def read_marks(self) -> StoreMarks:
        """The store's id and key secrets (their own table, a few rows), the claims table's mark (one point read),
        and the time the service answered at; whether the claims table holds anything, when a mark is missing."""
        answered: list[str] = []

        def keep_date(response: Any) -> None:
            answered.append(response.http_response.headers.get("Date", ""))

        entities = self._marks_of(self._keys, keep_date)
        claims = self._claims_mark()
        for again in (False, True):
            identity = next((e for e in entities or () if e["PartitionKey"] == STORE_PARTITION), None)
            marked = bool(identity and identity.get("TablesMarked"))
            holds_claims = not (marked and claims.store_id) and not claims.missing and self._holds_claims()
            if again or identity is not None or not holds_claims or entities is None:
                break
            # The id is written before any claim: a store another instance marked between the reads above shows
            # claims and no id. Read the id again, after the claims (issue 31).
            entities = self._marks_of(self._keys, keep_date)
        secrets = tuple(
            columns.secret_from_row({**entity, "KeyId": entity["RowKey"]}, _etag(entity.metadata))
            for entity in entities or ()
            if entity["PartitionKey"] == KEY_PARTITION
        )
        return StoreMarks(
            store_id=identity["StoreId"] if identity else None,
            secrets=secrets,
            # The keys table's mark is the id's own row: a missing keys table is named as missing all the same.
            tables=(claims, *([TableMark(self._keys.table_name, None, missing=True)] if entities is None else [])),
            tables_marked=marked,
            holds_claims=holds_claims,
            clock=_date(answered[-1] if answered else ""),
        )

    @staticmethod
    def _marks_of(table: TableClient, hook: Callable[[Any], None]) -> list[TableEntity] | None:
        """Every row of the keys table; None when the table is missing."""
        try:
            with _translated():
                return list(table.list_entities(raw_response_hook=hook))
        except NotConfigured:
            return None

    def _claims_mark(self) -> TableMark:
        try:
            with _translated():
                entity = self._claims.get_entity(STORE_PARTITION, MARK_ROW)
        except NotConfigured:
            return TableMark(self._claims.table_name, None, missing=True)
        except ResourceNotFoundError:
            return TableMark(self._claims.table_name, None)
        return TableMark(self._claims.table_name, entity["StoreId"])

    def _holds_claims(self) -> bool:
        """Whether any row besides the mark is in the claims table: a claim, a tombstone, an index row."""
        with _translated():
            rows = self._claims.list_entities(results_per_page=2, select=["PartitionKey", "RowKey"])
            return any(row["PartitionKey"] != STORE_PARTITION for row in rows)

    def _identity(self) -> TableEntity | None:
        """The row of the store's id; None when the store has none (or no keys table: a new store, not an error)."""
        with _translated():
            try:
                return self._keys.get_entity(STORE_PARTITION, STORE_ROW)
            except ResourceNotFoundError:
                return None

    def save_secret(self, record: KeySecretRecord) -> KeySecretRecord:
        row = columns.secret_to_row(record)
        del row["KeyId"]  # the RowKey
        return replace(record, version=self._save(self._keys, KEY_PARTITION, record.key_id, row, record.version))

    def mark_store(self, store_id: str, *, at: datetime) -> None:
        """The claims table's mark, then the id beside the key secrets (no transaction spans two tables)."""
        with _translated():
            for table in (self._claims, self._keys):
                self._service.create_table_if_not_exists(table.table_name)
        self._mark_row(self._claims, MARK_ROW, store_id, at)
        self._mark_row(self._keys, STORE_ROW, store_id, at)

    @staticmethod
    def _mark_row(table: TableClient, row_key: str, store_id: str, at: datetime) -> None:
        """Insert the mark naming ``store_id``; one already there must name it too (the id's own row gets the
        flag saying that its tables are marked)."""
        entity = {"PartitionKey": STORE_PARTITION, "RowKey": row_key, "StoreId": store_id, "CreatedAt": at}
        if row_key == STORE_ROW:
            entity["TablesMarked"] = True
        with _translated():
            try:
                table.create_entity(entity)
                return
            except ResourceExistsError:
                stored = table.get_entity(STORE_PARTITION, row_key)
            if stored["StoreId"] != store_id:
                raise ConcurrentUpdate(f"{table.table_name} is marked as store {stored['StoreId']}")
            if row_key == STORE_ROW and not stored.get("TablesMarked"):
                marked = {"PartitionKey": STORE_PARTITION, "RowKey": row_key, "TablesMarked": True}
                table.update_entity(marked, **_if_unchanged(_etag(stored.metadata), UpdateMode.MERGE))

    def ping(self) -> None:
        """One small query on the claims table; raises ``StoreUnavailable`` if it cannot be reached."""
        with _translated():
            next(self._claims.list_entities(results_per_page=1, select="PartitionKey").by_page())

    def close(self) -> None:
        """Close the HTTP connections."""
        self._service.close()
