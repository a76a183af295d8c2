"""A SQLite store opening a file that this release's scripts made, its schema unchanged since, finds so in one read of
its header and runs none of them (issue 36's cold start); a file whose schema changed since in any way (a table, a
column or an index gone, an index this release drops made again), or that other scripts made, still gets what the
scripts and ``add_columns`` make."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncegate.stores.sqlite import SqliteStore
from tests.support import records


def _catalogue(path: Path) -> tuple[set[tuple[str, str]], set[str]]:
    with contextlib.closing(sqlite3.connect(path)) as reading:
        columns = {
            (table, column)
            for (table,) in reading.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            for column in (row[1] for row in reading.execute(f"PRAGMA table_info({table})"))
        }
        indexes = {row[0] for row in reading.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    return columns, indexes


@contextlib.contextmanager
def _statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements of every connection the store opens meanwhile."""
    run: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.set_trace_callback(run.append)
        return connection

    with monkeypatch.context() as patched:
        patched.setattr(sqlite3, "connect", traced)
        yield run


def test_a_file_already_up_to_date_is_opened_without_the_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "oncegate.db"
    with _statements(monkeypatch) as made:
        SqliteStore(path).close()
    assert any(sql.lstrip().startswith("CREATE TABLE") for sql in made)  # a new file gets them

    with _statements(monkeypatch) as reopened:
        store = SqliteStore(path)
    assert [sql for sql in reopened if sql.split()[0] in ("CREATE", "ALTER", "DROP", "BEGIN")] == []
    assert not [sql for sql in reopened if "table_info(" in sql and "pragma_table_info" not in sql]
    claim = records.claim()
    store.create_claim(claim, records.event(claim.claim_id))
    assert store.get_claim(claim.claim_id).claim_id == claim.claim_id
    store.close()


@pytest.mark.parametrize(
    "change",
    [
        "DROP TABLE overlaps",
        "DROP INDEX conflicts_by_time",
        "ALTER TABLE claims DROP COLUMN Members",
        "ALTER TABLE scopes DROP COLUMN FingerprintRules",
        "CREATE INDEX claims_by_source ON claims (Source, UpdatedAt, ClaimId)",
    ],
)
def test_a_file_lacking_anything_of_this_release_gets_it_at_its_open(tmp_path: Path, change: str) -> None:
    path = tmp_path / "oncegate.db"
    SqliteStore(path).close()
    whole = _catalogue(path)
    with contextlib.closing(sqlite3.connect(path)) as older:
        older.execute(change)
    assert _catalogue(path) != whole

    SqliteStore(path).close()
    assert _catalogue(path) == whole


def test_a_file_other_scripts_made_gets_this_release_s_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another release's scripts (or this one's before a change to them) made it: its schema unchanged since says
    # nothing of what this release needs.
    path = tmp_path / "oncegate.db"
    SqliteStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as other:
        other.execute("PRAGMA application_id = 1")

    with _statements(monkeypatch) as reopened:
        SqliteStore(path).close()
    assert any(sql.lstrip().startswith("CREATE TABLE IF NOT EXISTS claims") for sql in reopened)
    assert "PRAGMA table_info(claims)" in reopened
    with _statements(monkeypatch) as again:
        SqliteStore(path).close()
    assert [sql for sql in again if sql.split()[0] in ("CREATE", "ALTER", "DROP", "BEGIN")] == []
