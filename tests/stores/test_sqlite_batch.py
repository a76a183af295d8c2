"""A process killed inside the SQLite store's write of claims made together keeps all of them or none (issue 36)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from oncegate.errors import NotFound
from oncegate.stores.sqlite import SqliteStore
from tests.support import records
from tests.support.processes import racing

CLAIMS = 30


def _killed_at(path: str, statement: str, claim_ids: list[str]) -> None:
    """Write the claims together, the process killed as SQLite starts ``statement``: no commit, no clean-up."""
    store = SqliteStore(path)
    store.ping()  # this thread's connection exists, to trace

    def trace(sql: str) -> None:
        if sql.startswith(statement):
            os._exit(9)

    store._connection().set_trace_callback(trace)
    store.create_claims([(records.claim(claim_id), records.event(claim_id)) for claim_id in claim_ids])
    os._exit(0)  # the kill never came


@pytest.mark.parametrize("statement", ["INSERT INTO history", "COMMIT"])
def test_a_process_killed_between_the_statements_keeps_none_of_the_claims(tmp_path: Path, statement: str) -> None:
    path = str(tmp_path / "oncegate.db")
    SqliteStore(path).close()
    claim_ids = [records.new_id() for _ in range(CLAIMS)]
    process = racing(__name__).Process(target=_killed_at, args=(path, statement, claim_ids))
    process.start()
    process.join(timeout=60)
    assert process.exitcode == 9

    store = SqliteStore(path)
    for claim_id in claim_ids:
        with pytest.raises(NotFound):
            store.get_claim(claim_id)
        assert store.list_events(claim_id) == []
    # The claims written after it are written whole.
    made = store.create_claims([(records.claim(claim_id), records.event(claim_id)) for claim_id in claim_ids])
    assert all(claim is not None for claim in made)
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM history").fetchone()[0] == CLAIMS
    store.close()
