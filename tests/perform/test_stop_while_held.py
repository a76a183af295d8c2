"""``oncegate serve --workers 2`` stopped while a slow target holds a Perform once: the worker keeps its counts.

A worker waited for its busy handler threads as long as the command waits for the worker (30 s): a call held longer
had the worker killed and its inventory counts lost ("did not stop within 30 seconds"). It now stops waiting for the
calls at the wait the command hands it (``server.calls_wait_seconds``: the grace less the flush's share), and exits on
its own; the held call's connection is closed (its claim was recorded before the call left, so a retry looks the
record up). The counts it gathered before the stop are written while the call is still held, not once the wait is
over: a flush slower than the share the grace had left then lost them all. The stand-in holds its answer until
released, so the call outlasts every wait with no sleep in the test. The command here runs with a grace of 10 s
instead of 30, so that the test waits 6 s, not 20: the worker's wait is the command's, handed to it, whatever the grace.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.cli.test_serve_workers import REPO, claim, flow_claims, port_of, stop
from tests.perform.calls import perform_body
from tests.perform.test_processes import oncegate, perform, serve
from tests.support.target_server import Answer, StandInTarget

CLAIMS = 12
# The command's grace and the flush's share of it, shortened; the worker waits for held calls for the rest.
GRACE, FLUSH = 10.0, 4.0
SHORT_GRACE = (
    "import sys; from oncegate.entrypoints import server; "
    f"server.STOP_GRACE_SECONDS, server.FLUSH_SECONDS = {GRACE}, {FLUSH}; "
    "from oncegate.cli import main; sys.exit(main())"
)


def serve_with_short_grace(database: Path) -> tuple[subprocess.Popen[str], int]:
    """``oncegate serve --workers 2`` as ``oncegate`` runs it, with the command's grace of ``GRACE`` seconds."""
    process = oncegate(
        database, "serve", "--port", "0", "--workers", "2", "--app-dir", str(REPO), command=("-c", SHORT_GRACE)
    )
    return process, port_of(process)


@pytest.fixture
def stand_in() -> Iterator[StandInTarget]:
    with StandInTarget() as target:
        yield target


def declared_slow(path: Path, stand_in: StandInTarget) -> None:
    """A SQLite store whose target ``erp`` may take 60 s, longer than the command's grace."""
    made = oncegate(path, "store", "init")
    assert made.wait(timeout=60) == 0, made.communicate()[1]
    declared = oncegate(path, "targets", "set", "erp", "--base-url", stand_in.base_url, "--timeout-seconds", "60")
    _, err = declared.communicate(timeout=60)
    assert declared.returncode == 0, err


def counted_by_then(database: Path, deadline: float) -> int:
    """The flow claims the store counts once it counts ``CLAIMS`` of them, or at ``deadline`` (monotonic)."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)) as store:
        while True:
            (counted,) = store.execute("SELECT COALESCE(SUM(Claims), 0) FROM flows").fetchone()
            if counted >= CLAIMS or time.monotonic() >= deadline:
                return int(counted)
            time.sleep(0.05)  # the store is polled: no event of the worker's process reaches this one


@pytest.mark.slow
def test_a_call_held_past_the_grace_leaves_the_worker_to_flush_its_counts_and_exit(
    tmp_path: Path, stand_in: StandInTarget
) -> None:
    database = tmp_path / "oncegate.db"
    declared_slow(database, stand_in)
    stand_in.script(Answer(late=True))
    process, port = serve_with_short_grace(database)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(functools.partial(claim, port, "run-1"), [f"SO-{number}" for number in range(CLAIMS)]))
            held = pool.submit(perform, port, perform_body("SO-held"))
            stand_in.wait_for(1)
            started = time.monotonic()
            os.killpg(process.pid, signal.SIGTERM)
            # The counts of the claims answered before the stop are in the store while the call is still held, a
            # second before the worker stops waiting for it (they were written only once it had stopped waiting).
            written_while_held = counted_by_then(database, started + GRACE - FLUSH - 1)
            _, err = process.communicate(timeout=60)
            code, took = process.returncode, time.monotonic() - started
            with pytest.raises((ConnectionError, http.client.HTTPException)):
                held.result(timeout=60)
    finally:
        stand_in.release()
        if process.poll() is None:
            stop(process)

    assert "did not stop" not in err, err
    assert (code, "Traceback" in err) == (0, False), err
    assert written_while_held >= CLAIMS, err
    assert GRACE - FLUSH <= took < GRACE, err

    process, port = serve(database)
    try:
        counted = flow_claims(port)
    finally:
        stop(process)
    # Every claim answered, and the held call's own: none went with a killed worker.
    assert counted == CLAIMS + 1
