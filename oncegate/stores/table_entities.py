"""The Azure store's entities and its error translation: what its claims and its backups (``tables_backups``) share.

Apart from ``tables`` only so that the backup adapter can share them without importing the store's module.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

from oncegate.domain.records import Claim, FingerprintRecord, HistoryEvent
from oncegate.domain.store_id import STORE_ID, TABLE_BEING_DELETED, missing_table
from oncegate.errors import NotConfigured, StoreUnavailable
from oncegate.stores import columns, large_values
from oncegate.stores.columns import Row
from oncegate.stores.paging import utc_text

# The store's logger, as before these helpers left its module.
logger = logging.getLogger("oncegate.stores.tables")

CLAIM_ROW = "claim"
FINGERPRINT_PREFIX = "fingerprint-"
HISTORY_PREFIX = "history-"
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


def _entity(partition_key: str, row_key: str, row: Row) -> dict[str, Any]:
    # Table Storage has no nulls: a missing property reads back as None through row.get().
    entity = {"PartitionKey": partition_key, "RowKey": row_key, **{k: v for k, v in row.items() if v is not None}}
    # A value over 32K UTF-16 code units goes in numbered pieces; a row too big even so is refused unsent.
    return large_values.spread(entity)


def _claim_entity(claim: Claim) -> dict[str, Any]:
    return _entity(claim.claim_id, CLAIM_ROW, columns.claim_to_row(claim))


def _event_entity(event: HistoryEvent) -> dict[str, Any]:
    return _entity(event.claim_id, HISTORY_PREFIX + event.event_id, columns.event_to_row(event))


def _event_place(event: HistoryEvent) -> tuple[str, str]:
    """Where an event lists in its claim's history: its time as fixed-width UTC text, then its id."""
    return utc_text(event.at), event.event_id


def _fingerprint_entity(record: FingerprintRecord) -> dict[str, Any]:
    return _entity(record.claim_id, FINGERPRINT_PREFIX + record.fingerprint, columns.fingerprint_to_row(record))


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
