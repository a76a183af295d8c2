"""The Azure store's key secrets and its id (issue 31): rows of the keys table, and the claims table's mark.

The store's id sits beside the key secrets, so that one read brings both; the claims table holds a
mark naming the same id, so that a store's tables are known to belong together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TableServiceClient, UpdateMode

from oncegate.domain.marks import StoreMarks, TableMark
from oncegate.domain.records import KeySecretRecord
from oncegate.errors import ConcurrentUpdate, NotConfigured
from oncegate.stores import row_reading, row_writing
from oncegate.stores.tables.entities import (
    KEY_PARTITION,
    RESTORE_PARTITION,
    STORE_PARTITION,
    _etag,
    _if_unchanged,
    _save,
    _translated,
)

# The store's id's row, beside the key secrets (in STORE_PARTITION), so that one read brings both.
STORE_ROW = "identity"
# The claims table's own mark (issue 31), in a partition no claim id (52 letters) or index partition has.
MARK_ROW = "mark"


def _date(header: str) -> datetime | None:
    """An HTTP ``Date`` (RFC 9110: GMT, whole seconds); None when absent or unreadable."""
    try:
        moment = parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    # "-0000" reads as a naive time; HTTP dates are UTC all the same.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class TableKeys:
    """``StoreMarkRecords`` over the keys table and the claims table's mark."""

    # The store's own (store.TableStore).
    _service: TableServiceClient
    _claims: TableClient
    _keys: TableClient

    def read_marks(self) -> StoreMarks:
        """The store's id and key secrets (their own table, a few rows), the claims table's mark (one point read),
        and the time the service answered at; whether the claims table holds anything, when a mark is missing."""
        answered: list[str] = []

        def keep_date(response: Any) -> None:
            answered.append(response.http_response.headers.get("Date", ""))

        for again in (False, True):
            # The id before the mark: the mark is written first, so an id read here has its mark in the read after.
            entities = self._marks_of(self._keys, keep_date)
            claims = self._claims_mark()
            identity = next((e for e in entities or () if e["PartitionKey"] == STORE_PARTITION), None)
            marked = bool(identity and identity.get("TablesMarked"))
            holds_claims = not (marked and claims.store_id) and not claims.missing and self._holds_claims()
            if again or identity is not None or not holds_claims or entities is None:
                break
            # The mark, then the id, then claims: a store another instance marked and claimed in between the reads
            # above shows claims and, as read, no id. Both are read again, after the claims (issue 31): the id alone
            # read again beside a mark read before it showed the new store as one whose claims table lost its mark.
        secrets = tuple(
            row_reading.secret_from_row({**entity, "KeyId": entity["RowKey"]}, _etag(entity.metadata))
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
            # The restore's row is in the keys table, read above whole: an import under way costs no read more.
            restoring=any(
                e["PartitionKey"] == RESTORE_PARTITION and e.get("CompletedAt") is None for e in entities or ()
            ),
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
        row = row_writing.secret_to_row(record)
        del row["KeyId"]  # the RowKey
        return replace(record, version=_save(self._keys, KEY_PARTITION, record.key_id, row, record.version))

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
