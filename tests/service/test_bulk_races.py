"""Bulk calls racing bulk calls and single calls for the same keys: every key proceeds once (issue 24).

Half the racers send the keys in two Check and claim many calls each (on SQLite their new keys
claimed together, issue 36), each in an order of its own; the other half send single Check and
claim calls. Racers are threads sharing a few service instances, and
processes with services of their own, on one SQLite file (100 keys) or one set of tables on Azurite (20).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from oncegate.bootstrap import Services, wire
from oncegate.domain.keys import KeyHasher
from oncegate.entrypoints import error_map
from oncegate.entrypoints.operations.bulk import claim_each
from oncegate.entrypoints.operations.claims import CHECK_AND_CLAIM
from oncegate.entrypoints.operations.table import Call
from oncegate.errors import OnceGateError
from oncegate.models import ClaimManyEntry, ClaimRequest, ClaimResponse
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from tests.conftest import KEY_SECRET, SQLITE_FILE
from tests.gate import Gate
from tests.support.processes import racing

# Every racer races every key either way; on Table Storage 20 keys, not 100: a key's race there is the same for
# each key (one create wins, the other calls read it back or find it taken), bulk calls still meet single calls
# on every key, and the store contract suite races creates on Azurite (one winner per id, claims made together
# against single creates). The 100 cost the two tests on Azurite 17.7 s of CPU, the emulator's included.
KEYS = {"sqlite": [f"SO-{n}" for n in range(100)], "tables": [f"SO-{n}" for n in range(20)]}
RACERS = 8
INSTANCES = 4
PROCESSES = 4
# Where a process finds the store: ("sqlite", path) or ("tables", connection string, table prefix).
Address = tuple[str, ...]


def racer(services: Services, keys: list[str], index: int) -> list[tuple[str, str]]:
    """Racer ``index`` asks for each of ``keys`` once: in two bulk calls when even, one call per key when odd.

    Each racer's own order, so bulk calls meet single calls and each other on every key. Answers
    as (key, decision or error code).
    """
    keys = random.Random(index).sample(keys, len(keys))
    chunk = len(keys) // 2
    requests = [
        ClaimRequest(scope="erp.create-order", key=key, run_id=f"run-{index}", fingerprint="v1") for key in keys
    ]
    if index % 2 == 0:
        # Check and claim many as the HTTP edge serves it: on SQLite its new keys are claimed together (issue 36).
        entries: list[ClaimManyEntry] = []
        for start in range(0, len(requests), chunk):
            items = [
                {"scope": request.scope, "key": request.key, "runId": request.run_id, "fingerprint": "v1"}
                for request in requests[start : start + chunk]
            ]
            made = claim_each(services, Call(body=None), items, CHECK_AND_CLAIM)
            entries += [ClaimManyEntry.model_validate(entry) for entry in made]
        return [
            (request.key, entry.decision.value if entry.decision else entry.error.code if entry.error else "")
            for request, entry in zip(requests, entries, strict=True)
        ]
    answers: list[ClaimResponse | OnceGateError] = [Gate.of(services).check_and_claim(request) for request in requests]
    return [
        (request.key, answer.decision.value if isinstance(answer, ClaimResponse) else error_map.code(answer))
        for request, answer in zip(requests, answers, strict=True)
    ]


def assert_each_key_proceeds_once(keys: list[str], answers: list[tuple[str, str]]) -> None:
    assert len(answers) == RACERS * len(keys)
    proceeds = Counter(key for key, decision in answers if decision == "proceed")
    assert proceeds == Counter(keys)
    assert Counter(decision for _, decision in answers) == {
        "proceed": len(keys),
        "in_progress": (RACERS - 1) * len(keys),
    }


@pytest.mark.slow
def test_bulk_and_single_calls_in_threads_proceed_once_per_key(
    new_service: Callable[[], Gate], store_kind: str
) -> None:
    instances = [new_service().services for _ in range(INSTANCES)]
    barrier = threading.Barrier(RACERS)
    keys = KEYS[store_kind]

    def run(index: int) -> list[tuple[str, str]]:
        barrier.wait(timeout=30)
        return racer(instances[index % INSTANCES], keys, index)

    with ThreadPoolExecutor(RACERS) as pool:
        answers = [answer for racer_answers in pool.map(run, range(RACERS)) for answer in racer_answers]

    assert_each_key_proceeds_once(keys, answers)
    for services in instances:
        services.bulk.close()


def _open(address: Address) -> ClaimStore:
    if address[0] == "sqlite":
        return SqliteStore(address[1])
    from oncegate.stores.tables.store import TableStore

    return TableStore.from_connection_string(address[1], prefix=address[2])


def _race_in_process(
    address: Address, indexes: list[int], barrier: Barrier, results: Queue[list[tuple[str, str]]]
) -> None:
    services = wire(_open(address), KeyHasher(KEY_SECRET))
    try:
        services.claims.health()  # the store's marks read before the race, as a started instance has
        barrier.wait(timeout=60)
        with ThreadPoolExecutor(len(indexes)) as pool:
            for answers in pool.map(lambda index: racer(services, KEYS[address[0]], index), indexes):
                results.put(answers)
    finally:
        services.close()


@pytest.fixture
def address(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Address:
    if store_kind == "sqlite":
        path = tmp_path / SQLITE_FILE
        SqliteStore(path).close()  # the schema exists before the race, as in a deployed server
        return ("sqlite", str(path))
    factory = request.getfixturevalue("table_store_factory")
    factory()  # the tables exist before the race, and the factory drops them after the test
    return ("tables", factory.connection_string, factory.prefix)


@pytest.mark.slow
def test_bulk_and_single_calls_in_processes_proceed_once_per_key(address: Address) -> None:
    context = racing(__name__)
    barrier = context.Barrier(PROCESSES)
    results: Queue[list[tuple[str, str]]] = context.Queue()
    per_process = RACERS // PROCESSES
    processes = [
        context.Process(
            target=_race_in_process,
            args=(address, list(range(first, first + per_process)), barrier, results),
        )
        for first in range(0, RACERS, per_process)
    ]
    for process in processes:
        process.start()
    answers = [answer for _ in range(RACERS) for answer in results.get(timeout=180)]
    for process in processes:
        process.join(timeout=30)

    assert_each_key_proceeds_once(KEYS[address[0]], answers)
    assert [process.exitcode for process in processes] == [0] * PROCESSES
