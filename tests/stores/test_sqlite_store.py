"""The SQLite store: the contract, and a race between processes sharing one file."""

from __future__ import annotations

import multiprocessing
import stat
from collections.abc import Callable, Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from oncegate.errors import AlreadyExists
from oncegate.stores.sqlite import SqliteStore
from tests.stores.contract import StoreContract
from tests.support import records

PROCESSES = 4


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Iterator[Callable[[], SqliteStore]]:
        stores: list[SqliteStore] = []

        def make() -> SqliteStore:
            stores.append(SqliteStore(tmp_path / "oncegate.db"))
            return stores[-1]

        yield make
        for store in stores:
            store.close()


def _create_in_process(
    path: str, claim_id: str, run_id: str, barrier: Barrier, results: Queue[tuple[str, str]]
) -> None:
    store = SqliteStore(path)
    claim = records.claim(claim_id, run_id=run_id)
    barrier.wait(timeout=30)
    try:
        store.create_claim(claim, records.event(claim_id, run_id=run_id))
        results.put(("won", run_id))
    except AlreadyExists as exc:
        results.put(("lost", exc.existing.run_id))
    finally:
        store.close()


def test_processes_sharing_the_file_have_exactly_one_winner(tmp_path: Path) -> None:
    path = str(tmp_path / "oncegate.db")
    SqliteStore(path).close()  # the schema exists before the race, as in a deployed server
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    claim_id = records.new_id()
    processes = [
        context.Process(target=_create_in_process, args=(path, claim_id, f"run-{i}", barrier, results))
        for i in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=30)

    winners = [run_id for outcome, run_id in outcomes if outcome == "won"]
    assert len(winners) == 1
    assert sorted(outcomes) == sorted([("won", winners[0])] + [("lost", winners[0])] * (PROCESSES - 1))
    store = SqliteStore(path)
    assert [event.run_id for event in store.list_events(claim_id)] == winners
    store.close()


def test_a_new_database_and_its_journal_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    # Claims, history and conflicts are nobody else's to read (issue 9: the file was 0644).
    path = tmp_path / "data" / "claims.db"
    store = SqliteStore(path)
    made = records.claim()
    store.create_claim(made, records.event(made.claim_id))

    modes = {file.name: stat.S_IMODE(file.stat().st_mode) for file in path.parent.iterdir()}
    store.close()

    assert modes["claims.db"] == 0o600
    assert modes.get("claims.db-wal", 0o600) == 0o600
