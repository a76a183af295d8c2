"""Perform once served by ``oncegate serve --workers 2``: processes racing, and a service killed mid-call (issue 34).

The command runs in a process group of its own on a SQLite store, its target declared with ``oncegate targets
set`` as an operator does; the stand-in target runs in this process and counts what reaches it. The service's
clock is the machine's, which a test moves on by writing the seconds to add to a file the command reads
(``tests/support/shifted_clock``), as ``FakeClock`` moves an in-process service's.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier
from typing import Any

import pytest

from tests.cli.test_serve_workers import REPO, port_of, stop
from tests.perform.calls import perform_body
from tests.support.target_server import Answer, StandInTarget

SHIFTED_CLOCK = Path(__file__).resolve().parents[1] / "support" / "shifted_clock"

RACERS = 8
KEYS = 100
# A lease is the target's time (1 s) and 30 s: a run killed mid-call holds its claim that long.
LEASE_SECONDS = 31


def environment(database: Path) -> dict[str, str]:
    kept = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    return {
        **kept,
        "ONCEGATE_SQLITE_PATH": str(database),
        "ONCEGATE_TARGETS_ALLOW_LOOPBACK": "true",
        "ONCEGATE_TEST_CLOCK_SHIFT": str(clock_shift(database)),
        "PYTHONPATH": os.pathsep.join((str(SHIFTED_CLOCK), str(REPO))),
    }


def clock_shift(database: Path) -> Path:
    """The file whose seconds the commands on ``database`` add to the machine's time (none: nothing added)."""
    return database.parent / "clock-shift"


def oncegate(database: Path, *argv: str, command: tuple[str, ...] = ("-m", "oncegate.cli")) -> subprocess.Popen[str]:
    """``oncegate`` with ``argv`` on the SQLite store ``database``; ``command``: how Python is asked to run it."""
    return subprocess.Popen(
        [sys.executable, *command, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(database),
        cwd=database.parent,
        start_new_session=True,
    )


def serve(database: Path) -> tuple[subprocess.Popen[str], int]:
    process = oncegate(database, "serve", "--port", "0", "--workers", "2", "--app-dir", str(REPO))
    return process, port_of(process)


@pytest.fixture
def stand_in() -> Iterator[StandInTarget]:
    with StandInTarget() as target:
        yield target


@pytest.fixture
def database(tmp_path: Path, stand_in: StandInTarget) -> Path:
    """A SQLite store with the target ``erp`` declared on the stand-in, as an operator declares it."""
    path = tmp_path / "oncegate.db"
    made = oncegate(path, "store", "init")
    assert made.wait(timeout=60) == 0, made.communicate()[1]
    declared = oncegate(
        path,
        "targets",
        "set",
        "erp",
        "--base-url",
        stand_in.base_url,
        "--timeout-seconds",
        "1",
        "--lookup-path",
        "/orders?reference={reference}",
        "--record-pointer",
        "/id",
        "--keep-pointer",
        "/id",
    )
    _, err = declared.communicate(timeout=60)
    assert declared.returncode == 0, err
    return path


def perform(port: int, body: dict[str, Any], ready: Barrier | None = None) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.connect()
        if ready is not None:
            ready.wait(timeout=60)
        connection.request("POST", "/api/perform", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer: dict[str, Any] = json.loads(response.read())
        assert response.status == 200, answer
        return answer
    finally:
        connection.close()


@pytest.mark.slow
def test_eight_racers_on_a_hundred_keys_at_two_worker_processes_make_one_call_each(
    database: Path, stand_in: StandInTarget
) -> None:
    process, port = serve(database)
    keys = [f"SO-{number}" for number in range(KEYS)]
    ready = Barrier(RACERS)

    def race(racer: int) -> list[str]:
        decisions = []
        for index, key in enumerate(random.Random(racer).sample(keys, len(keys))):
            answer = perform(port, perform_body(key, run=f"run-{racer}"), ready if index == 0 else None)
            decisions.append(answer["decision"])
        return decisions

    try:
        with ThreadPoolExecutor(RACERS) as pool:
            decisions = Counter(decision for answers in pool.map(race, range(RACERS)) for decision in answers)
    finally:
        stop(process)

    assert len(stand_in.writes()) == KEYS
    assert Counter(record.reference for record in stand_in.records).most_common(1)[0][1] == 1
    assert decisions["performed"] == KEYS
    assert set(decisions) <= {"performed", "duplicate", "in_progress"}


@pytest.mark.slow
def test_a_service_killed_between_the_call_and_its_recording_never_calls_again(
    database: Path, stand_in: StandInTarget
) -> None:
    """kill -9 while the target holds its answer: the call was recorded before it left, so after the lease the next
    run looks the record up instead of sending it again."""
    stand_in.script(Answer(late=True))
    process, port = serve(database)
    with ThreadPoolExecutor(1) as pool:
        cut = pool.submit(perform, port, perform_body(run="run-1"))
        stand_in.wait_for(1)
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            cut.result(timeout=60)
    stand_in.release()

    process, port = serve(database)
    try:
        held = perform(port, perform_body(run="run-2"))
        # The killed run's lease runs out on the service's own clock: moved on past it, as a flow asking later finds it.
        clock_shift(database).write_text(str(LEASE_SECONDS + 1))
        answer = perform(port, perform_body(run="run-3"))
    finally:
        stop(process)

    assert held["decision"] == "in_progress"
    assert (answer["decision"], answer.get("targetRecordId")) == ("duplicate", "order-1")
    assert answer["lookedUp"] is True
    assert len(stand_in.writes()) == 1
