"""The Azure store's declared targets (issue 34): one partition of a ``Targets`` table of their own, a row per name.

The table sits beside the six others, declared with them in infra/main.bicep and made with them at start; a row is
keyed by the target's name (lower-case letters, digits and hyphens, which a RowKey holds as they are). A replace is
conditioned on the ETag read.
"""

from __future__ import annotations

from dataclasses import replace

from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient

from oncegate.domain.targets import Target
from oncegate.errors import NotFound
from oncegate.stores import row_reading
from oncegate.stores.tables.entities import PARTITION_FILTER, _etag, _save, _translated
from oncegate.stores.target_rows import target_from_row, target_to_row

TARGETS_SUFFIX = "Targets"
TARGET_PARTITION = "target"


class TableTargets:
    """``TargetRecords`` over the ``Targets`` table."""

    # The store's own (store.TableStore).
    _targets: TableClient

    def list_targets(self) -> list[Target]:
        """Every declared target: one partition query, in RowKey (name) order."""
        with _translated():
            entities = list(self._targets.query_entities(PARTITION_FILTER, parameters={"pk": TARGET_PARTITION}))
        return [target_from_row(row_reading.gather(entity), _etag(entity.metadata)) for entity in entities]

    def get_target(self, name: str) -> Target:
        try:
            with _translated():
                entity = self._targets.get_entity(TARGET_PARTITION, name)
        except ResourceNotFoundError as exc:
            raise NotFound(f"No target is declared as {name}.", record="target") from exc
        return target_from_row(row_reading.gather(entity), _etag(entity.metadata))

    def save_target(self, target: Target) -> Target:
        row = target_to_row(target)
        return replace(target, version=_save(self._targets, TARGET_PARTITION, target.name, row, target.version))

    def delete_target(self, name: str) -> bool:
        """Read, then delete whatever is there: whether there was a target (a delete of none answers no error)."""
        try:
            with _translated():
                self._targets.get_entity(TARGET_PARTITION, name, select=["RowKey"])
                self._targets.delete_entity(TARGET_PARTITION, name)
        except ResourceNotFoundError:
            return False
        return True
