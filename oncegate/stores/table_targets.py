"""The Azure store's declared targets (issue 34): one partition of a table of their own, a row per name.

A mixin of ``TableStore``: the ``Targets`` table beside the others, made with them; each row keyed by the
target's name (letters, digits and hyphens, which a RowKey holds as they are). Its reads and writes go
through the store's ``_list`` and ``_save``, declared below, so a replace is conditioned on the ETag read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient

from oncegate.domain.targets import Target
from oncegate.errors import NotFound
from oncegate.stores import large_values
from oncegate.stores.table_entities import _etag, _translated
from oncegate.stores.target_rows import Row, target_from_row, target_to_row

TARGETS_SUFFIX = "Targets"
TARGET_PARTITION = "target"


class TableTargets:
    """``TargetRecords`` over the store's ``Targets`` table."""

    # The store's own, which it defines (tables.TableStore).
    _targets: TableClient
    _list: Callable[[TableClient, str, Callable[[Row, str], Any]], list[Any]]
    _save: Callable[[TableClient, str, str, Row, str | None], str]

    def list_targets(self) -> list[Target]:
        """Every declared target: one partition query, in RowKey (name) order."""
        return self._list(self._targets, TARGET_PARTITION, target_from_row)

    def get_target(self, name: str) -> Target:
        try:
            with _translated():
                entity = self._targets.get_entity(TARGET_PARTITION, name)
        except ResourceNotFoundError as exc:
            raise NotFound(f"No target is declared as {name}.", record="target") from exc
        return target_from_row(large_values.gather(entity), _etag(entity.metadata))

    def save_target(self, target: Target) -> Target:
        row = target_to_row(target)
        return replace(target, version=self._save(self._targets, TARGET_PARTITION, target.name, row, target.version))

    def delete_target(self, name: str) -> bool:
        """Read, then delete whatever is there: whether there was a target (a delete of none answers no error)."""
        try:
            with _translated():
                self._targets.get_entity(TARGET_PARTITION, name, select=["RowKey"])
                self._targets.delete_entity(TARGET_PARTITION, name)
        except ResourceNotFoundError:
            return False
        return True
