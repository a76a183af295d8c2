"""The Azure store's inventory: flows, scopes and overlaps, each in one partition of a small table of its own.

A flow's RowKey is a digest of its name and environment, which may hold characters a RowKey forbids
(``/ \\ # ?``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from azure.data.tables import TableClient

from oncegate.domain.records import FlowRecord, Overlap, ScopeRecord
from oncegate.stores import row_reading, row_writing
from oncegate.stores.row_writing import Row
from oncegate.stores.tables.entities import PARTITION_FILTER, _etag, _save, _translated

R = TypeVar("R")

FLOW_PARTITION = "flow"
SCOPE_PARTITION = "scope"
OVERLAP_PARTITION = "overlap"


class TableInventory:
    """``InventoryRecords`` over the flows, scopes and overlaps tables."""

    # The store's own (store.TableStore).
    _flows: TableClient
    _scopes: TableClient
    _overlaps: TableClient

    def list_flows(self) -> list[FlowRecord]:
        """Every flow in the inventory: one partition query."""
        return self._list(self._flows, FLOW_PARTITION, row_reading.flow_from_row)

    def save_flow(self, record: FlowRecord) -> FlowRecord:
        """Insert the flow (no version) or replace it if its ETag is current; raises ``ConcurrentUpdate``."""
        row = row_writing.flow_to_row(record)
        return replace(record, version=_save(self._flows, FLOW_PARTITION, row["FlowId"], row, record.version))

    def list_scopes(self) -> list[ScopeRecord]:
        """Every scope in the catalogue: one partition query."""
        return self._list(self._scopes, SCOPE_PARTITION, row_reading.scope_from_row)

    def save_scope(self, record: ScopeRecord) -> ScopeRecord:
        """Insert the scope (no version) or replace it if its ETag is current; raises ``ConcurrentUpdate``."""
        row = row_writing.scope_to_row(record)
        return replace(record, version=_save(self._scopes, SCOPE_PARTITION, record.scope, row, record.version))

    def list_overlaps(self) -> list[Overlap]:
        """Every pair of overlapping flows: one partition query."""
        return self._list(self._overlaps, OVERLAP_PARTITION, row_reading.overlap_from_row)

    def save_overlap(self, record: Overlap) -> Overlap:
        """Insert the overlap (no version) or replace it if its ETag is current; raises ``ConcurrentUpdate``."""
        row = row_writing.overlap_to_row(record)
        version = _save(self._overlaps, OVERLAP_PARTITION, row["OverlapId"], row, record.version)
        return replace(record, version=version)

    @staticmethod
    def _list(table: TableClient, partition: str, from_row: Callable[[Row, str], R]) -> list[R]:
        with _translated():
            entities = list(table.query_entities(PARTITION_FILTER, parameters={"pk": partition}))
        return [from_row(row_reading.gather(entity), _etag(entity.metadata)) for entity in entities]
