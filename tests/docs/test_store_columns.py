"""docs/operations.md describes every column of a claim row and names every table of the SQLite store.

An operator reads the claim rows in the portal's Storage browser, or with ``sqlite3``, by the tables there.
Columns added by later releases (the key secret's ``KeyId``, the rules' ``RulesVersion``, the member digests,
the tombstone's ``PurgedAt``) had gone into the stores and not into the table; ``targets`` and
``store_identity`` had not reached the list of SQLite tables.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from oncegate import bootstrap
from oncegate.config import Settings
from oncegate.stores.row_writing import CLAIM_COLUMNS
from tests.docs.markdown import REPO

OPERATIONS = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
# What the SQLite section says of the columns all its tables share beside those of the claim row.
SQLITE_ONLY = {"Version", "StoreId"}


def _section(heading: str) -> str:
    start = OPERATIONS.index(heading)
    return OPERATIONS[start : OPERATIONS.index("\n#", start + len(heading))]


def _documented_columns() -> set[str]:
    """The columns the claim row's table names in its first cell (``RunId``, ``FlowName``, ``FlowEnvironment``)."""
    rows = re.findall(r"^\| (`[^|]+)\|", _section("### The claim row"), re.MULTILINE)
    return {name for row in rows for name in re.findall(r"`([A-Za-z]+)`", row)}


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite store as the app makes it."""
    path = tmp_path / "oncegate.db"
    monkeypatch.setenv("ONCEGATE_STORE", "sqlite")
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(path))
    monkeypatch.delenv("ONCEGATE_KEY_SECRET", raising=False)
    bootstrap.build_services(Settings.from_environment()).close()
    return path


def test_every_column_of_a_claim_row_is_described() -> None:
    assert [column for column in CLAIM_COLUMNS if column not in _documented_columns()] == []


def test_every_column_of_the_sqlite_claims_table_is_described(database: Path) -> None:
    with sqlite3.connect(database) as connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(claims)")]
    connection.close()

    assert [column for column in columns if column not in _documented_columns() | SQLITE_ONLY] == []
    assert all(f"`{column}`" in _section("## Local and development: the SQLite store") for column in SQLITE_ONLY)


def test_every_table_of_the_sqlite_store_is_named(database: Path) -> None:
    with sqlite3.connect(database) as connection:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    connection.close()
    named = _section("## Local and development: the SQLite store")

    assert [table for table in tables if f"`{table}`" not in named] == []


@pytest.mark.parametrize(
    ("table", "section", "keys"),
    [
        ("history", "### History rows", set()),
        ("conflicts", "### Conflict rows", set()),
        ("flows", "### Flow, scope and overlap rows", set()),
        ("scopes", "### Flow, scope and overlap rows", set()),
        ("overlaps", "### Flow, scope and overlap rows", set()),
        # Table Storage keeps the check value as the RowKey, which the section names.
        ("key_ids", "### Flow, scope and overlap rows", {"KeyId"}),
    ],
)
def test_every_column_of_the_other_rows_is_described(database: Path, table: str, section: str, keys: set[str]) -> None:
    with sqlite3.connect(database) as connection:
        columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
    connection.close()
    described = _section(section)

    assert [column for column in columns if f"`{column}`" not in described and column not in SQLITE_ONLY | keys] == []
