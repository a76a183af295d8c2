"""The SQLite store's declared targets (issue 34): one row per target in a table of their own.

A mixin of ``SqliteStore``: it reads and writes through the store's connection and its ``_save``, declared below.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from oncegate.errors import NotFound

if TYPE_CHECKING:
    from oncegate.domain.targets import Target
    from oncegate.stores.target_rows import Row

TARGETS_SCHEMA = """
CREATE TABLE IF NOT EXISTS targets (
    Name TEXT PRIMARY KEY, RowsVersion INTEGER NOT NULL, BaseUrl TEXT NOT NULL, TimeoutSeconds INTEGER NOT NULL,
    LookupPath TEXT, Auth TEXT NOT NULL, AuthValue TEXT, AllowCidrs TEXT, HonoursIdempotencyKey INTEGER NOT NULL,
    SuccessStatuses TEXT, RetryableStatuses TEXT, RecordPointer TEXT, KeptHeaders TEXT, KeptPointers TEXT,
    DeclaredBy TEXT, DeclaredAt TEXT, Version INTEGER NOT NULL
);
"""


class SqliteTargets:
    """``TargetRecords`` over the store's ``targets`` table."""

    # The store's own, which it defines (sqlite.SqliteStore).
    _list: Callable[[str, Callable[[Row, str], Any]], list[Any]]
    _save: Callable[[str, str, Row, str | None], str]
    _select_one: Callable[[str, tuple[Any, ...]], sqlite3.Row | None]
    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

    # The targets' rows are read and written only by Perform once and the targets' own commands: their module (and
    # the targets' records) is imported at the first of those, not with the store a claim opens (issue 36).

    def list_targets(self) -> list[Target]:
        from oncegate.stores.target_rows import target_from_row

        return sorted(self._list("targets", target_from_row), key=lambda target: target.name)

    def get_target(self, name: str) -> Target:
        from oncegate.stores.target_rows import target_from_row

        row = self._select_one("SELECT * FROM targets WHERE Name = ?", (name,))
        if row is None:
            raise NotFound(f"No target is declared as {name}.", record="target")
        return target_from_row(dict(row), str(row["Version"]))

    def save_target(self, target: Target) -> Target:
        from oncegate.stores.target_rows import target_to_row

        return replace(target, version=self._save("targets", "Name", target_to_row(target), target.version))

    def delete_target(self, name: str) -> bool:
        with self._write() as connection:
            return int(connection.execute("DELETE FROM targets WHERE Name = ?", (name,)).rowcount) == 1
