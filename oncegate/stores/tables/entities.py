"""What every port of the Azure store (claims, history, conflicts, inventory, keys, backups) shares: the keys its
rows sit under, the rows made entities, writes at an ETag, and Table Storage's errors as the store's port names them.

Outages, throttling and a refused identity become ``StoreUnavailable``, a missing table ``NotConfigured``
(``_translated``); a status the caller expects becomes the error it names (``_on_status``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from azure.core import MatchConditions
from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.data.tables import TableClient, UpdateMode

from oncegate.domain.records import Claim, FingerprintRecord, HistoryEvent
from oncegate.domain.store_id import STORE_ID, TABLE_BEING_DELETED, missing_table
from oncegate.errors import ConcurrentUpdate, NotConfigured, StoreUnavailable
from oncegate.stores import row_writing
from oncegate.stores.paging import utc_text
from oncegate.stores.row_writing import Row

logger = logging.getLogger(__name__)

CLAIM_ROW = "claim"
FINGERPRINT_PREFIX = "fingerprint-"
HISTORY_PREFIX = "history-"
# A history row's time in its RowKey, as the service's event ids start: 20261102T090000123456Z.
KEY_TIME = "%Y%m%dT%H%M%S%fZ"
# A series line's tally (issue 36), found by the series id: the line itself is keyed by its time.
TALLY_PREFIX = "tally-"
CONFLICT_PARTITION = "conflict"
PARTITION_FILTER = "PartitionKey eq @pk"
TRANSACTION_LIMIT = 100
# The claim index (issue 16): partitions of the claims table keyed by a source system or a reference's digest.
# Claim partitions are base32 claim ids, which hold no "-", so the two never meet.
SOURCE_INDEX = "source-"
REFERENCE_INDEX = "reference-"
# The repair reads and writes this many claims at a time: the most a query answers in one page.
REPAIR_PAGE_ROWS = 1000
KEY_PARTITION = "key"
# The store's id: one row beside the key secrets, so that one read brings both.
STORE_PARTITION = "store"
# The import that filled this store (issue 35): one row beside the store's id, read with it.
RESTORE_PARTITION = "restore"
RESTORE_ROW = "restore"


def _entity(partition_key: str, row_key: str, row: Row) -> dict[str, Any]:
    """The entity of ``row`` under these keys; ``row`` itself is left as it is (a caller may key it twice)."""
    return _keyed(dict(row), partition_key, row_key)


def _keyed(row: Row, partition_key: str, row_key: str) -> dict[str, Any]:
    """A row made for this write, made its entity in place: the claim's path builds one dict, not a row and a copy."""
    # Table Storage has no nulls: a missing property reads back as None through row.get().
    for name in [name for name, value in row.items() if value is None]:
        del row[name]
    row["PartitionKey"] = partition_key
    row["RowKey"] = row_key
    # A value over 32K UTF-16 code units goes in numbered pieces; a row too big even so is refused unsent.
    return row_writing.spread(row)


def _claim_entity(claim: Claim) -> dict[str, Any]:
    return _keyed(row_writing.claim_to_row(claim), claim.claim_id, CLAIM_ROW)


def _history_key(at: datetime, event_id: str) -> str:
    """A history row's RowKey: its time first, as fixed-width UTC digits, so that keys sort as the history lists
    (issue 36). The service's event ids start with that time already, and are the key as they are."""
    written = at.astimezone(UTC).strftime(KEY_TIME)
    return HISTORY_PREFIX + (event_id if event_id.startswith(written + "-") else f"{written}-{event_id}")


def _event_entity(event: HistoryEvent) -> dict[str, Any]:
    return _keyed(row_writing.event_to_row(event), event.claim_id, _history_key(event.at, event.event_id))


def _tally_entity(line: HistoryEvent) -> dict[str, Any]:
    """A series line's tally: its twin outside the history, keyed by the series id, where answers are counted."""
    return _keyed(row_writing.event_to_row(line), line.claim_id, TALLY_PREFIX + line.event_id)


def _event_place(event: HistoryEvent) -> tuple[str, str]:
    """Where an event lists in its claim's history: its time as fixed-width UTC text, then its id."""
    return utc_text(event.at), event.event_id


def _fingerprint_entity(record: FingerprintRecord) -> dict[str, Any]:
    return _keyed(row_writing.fingerprint_to_row(record), record.claim_id, FINGERPRINT_PREFIX + record.fingerprint)


def _index_partition(*, source: str | None, reference: str | None) -> str:
    """The index partition of a source system, else of a reference (free text: only its digest is a valid key)."""
    if source is not None:
        return SOURCE_INDEX + source
    assert reference is not None, "an index partition is of a source or a reference"
    return REFERENCE_INDEX + hashlib.sha256(reference.encode()).hexdigest()[:32]


def _index_place(claim_id: str, first_received_at: datetime) -> str:
    """An index row's key: the claim's first received time as fixed-width UTC text, then its id."""
    return f"{utc_text(first_received_at)}-{claim_id}"


def _index_entities(
    claim_id: str, first_received_at: datetime, *, source: str | None, reference: str | None
) -> list[dict[str, Any]]:
    """A claim's index rows: one under its source system, one under its reference, keyed by first received."""
    if not source and not reference:
        return []  # most claims name neither
    place = _index_place(claim_id, first_received_at)
    partitions = [
        *([_index_partition(source=source, reference=None)] if source else []),
        *([_index_partition(source=None, reference=reference)] if reference else []),
    ]
    return [{"PartitionKey": partition, "RowKey": place, "ClaimId": claim_id} for partition in partitions]


def _claim_index(claim: Claim) -> list[dict[str, Any]]:
    return _index_entities(claim.claim_id, claim.first_received_at, source=claim.source, reference=claim.reference)


def _etag(metadata: Mapping[str, Any]) -> str:
    # Reads and writes alike answer with the entity's ETag, so a write needs no re-read.
    etag = metadata.get("etag")
    assert etag, "Table Storage answered without an ETag"
    return str(etag)


def _if_unchanged(version: str | None, mode: UpdateMode = UpdateMode.REPLACE) -> dict[str, Any]:
    return {"mode": mode, "etag": version, "match_condition": MatchConditions.IfNotModified}


def _claim_keys(claim_id: str, row_key: str = CLAIM_ROW) -> dict[str, str]:
    return {"PartitionKey": claim_id, "RowKey": row_key}


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


# -- Table Storage's errors, as the store's port names them ---------------------------------------------

BAD_REQUEST = (400,)
EXISTS = (409,)
MISSING = (404,)
# 404: the row the caller read is gone, which for a conditional update is the same lost race.
STALE = (404, 412)


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
    except ClientAuthenticationError as exc:
        # The identity got no token (a managed identity endpoint that did not answer, no identity assigned, an
        # expired sign-in) or the service refused the one it sent (401): the store cannot be reached, nothing
        # failed in the service, and a token may come on the next try.
        logger.error("Table Storage sign-in failed: %s", exc)
        raise StoreUnavailable(
            "Table Storage could not be signed in to: this app's identity got no token for it (check that the app "
            "has a managed identity, or that the signed-in account is current)."
        ) from exc
    except HttpResponseError as exc:
        if exc.status_code is not None and (exc.status_code >= 500 or exc.status_code == 429):
            raise _unavailable(exc) from exc
        if exc.status_code == 403:
            # The identity has no data role on the tables, or was just given one: a role takes minutes to apply.
            logger.error("Table Storage refused access: %s", exc)
            raise StoreUnavailable(
                f"Table Storage refused access ({getattr(exc, 'error_code', None) or 403}): this identity has no data "
                "role on the tables yet (a role assignment takes a few minutes to apply)."
            ) from exc
        if exc.status_code == 409 and getattr(exc, "error_code", None) == "TableBeingDeleted":
            raise StoreUnavailable(TABLE_BEING_DELETED) from exc
        if exc.status_code == 404 and _table_missing(exc):
            # Never read as "no such claim": that would be answered proceed for every key (issue 22). Not an
            # outage either: no retry brings it back (issue 31).
            logger.error("A OnceGate table is missing: %s", exc)
            raise NotConfigured(missing_table(_table_of(exc)), target=STORE_ID) from exc
        raise


def _table_of(exc: HttpResponseError) -> str:
    """The table a failed request addressed, read from its URL (``…/OnceGateClaims(PartitionKey=…)``)."""
    request = getattr(exc.response, "request", None)
    path = urlsplit(str(getattr(request, "url", ""))).path
    name = path.rstrip("/").rsplit("/", 1)[-1].split("(", 1)[0]
    return name or "(unknown)"


def _table_missing(exc: HttpResponseError) -> bool:
    code = getattr(exc, "error_code", None) or ""
    return code == "TableNotFound" or "TableNotFound" in str(exc)


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
