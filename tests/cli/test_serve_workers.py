"""``oncegate serve --workers N``: processes of their own answering on one port, one store between them.

Runs the real command in a subprocess, as a user does, and fires the same record at it many times at
once: whichever worker answers, exactly one run is told to proceed. The command runs this checkout's
code (PYTHONPATH), not whichever copy the environment installed, and stops as a terminal or a service
manager stops it: a signal to its whole process group.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
CALLERS = 24
FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}
# Claims sent before each stop: enough that both workers count some.
CLAIMS_PER_ROUND = 40
# Starts and stops on one store: the first merges each worker's counts into an empty store (its rows are made), the
# second into rows already there (a conditioned read-modify-write, both workers at once), and a last start reads
# the total. A third or fourth round repeats the second's path exactly; the moment a stop signal lands is what
# varies from round to round, and every such moment is tried deterministically by the test of a second stop signal.
ROUNDS = 2


def start(database: Path, *argv: str, cwd: Path) -> subprocess.Popen[str]:
    """``oncegate serve --port 0 ARGV...`` on the SQLite store ``database``, in a process group of its own."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    environment["ONCEGATE_SQLITE_PATH"] = str(database)
    environment["PYTHONPATH"] = str(REPO)
    return subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "serve", "--port", "0", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=cwd,
        start_new_session=True,
    )


def port_of(process: subprocess.Popen[str]) -> int:
    """The port from the banner the command prints once every worker serves."""
    assert process.stdout is not None
    banner = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api, 2 worker processes", banner)
    assert found, banner + (process.communicate(timeout=30)[1] if process.poll() is not None else "")
    return int(found.group(1))


def stop(process: subprocess.Popen[str], signal_name: str = "SIGTERM") -> tuple[int, str]:
    """Send the signal to the command's process group, as Ctrl+C or a service manager does; its status and stderr."""
    os.killpg(process.pid, getattr(signal, signal_name))
    _, err = process.communicate(timeout=60)
    return process.returncode, err


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    """``oncegate serve --workers 2`` on a free port and a fresh SQLite store; yields the port."""
    process = start(tmp_path / "oncegate.db", "--workers", "2", "--app-dir", str(REPO), cwd=tmp_path)
    try:
        yield port_of(process)
    finally:
        stop(process)


def request(port: int, method: str, path: str, body: object = None, ready: Barrier | None = None) -> Any:
    """One request on a connection of its own (so the kernel may hand it to either worker); the JSON answer."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.connect()
    if ready is not None:
        ready.wait(timeout=60)
    connection.request(method, path, None if body is None else json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 200, answer
    return answer


def claim(port: int, run: str, key: str = "SO-1001", ready: Barrier | None = None) -> dict[str, object]:
    body = {"scope": "erp.create-order", "key": key, "runId": run, "fingerprint": "v1", "flow": FLOW}
    answer: dict[str, object] = request(port, "POST", "/api/claims", body, ready)
    return answer


def test_the_same_record_fired_at_two_workers_at_once_proceeds_once(served: int) -> None:
    ready = Barrier(CALLERS)
    with ThreadPoolExecutor(CALLERS) as pool:
        answers = list(pool.map(lambda number: claim(served, f"run-{number}", ready=ready), range(CALLERS)))

    decisions = [answer["decision"] for answer in answers]
    assert decisions.count("proceed") == 1, decisions
    assert set(decisions) == {"proceed", "in_progress"}
    assert claim(served, "run-late")["decision"] == "in_progress"


def test_the_workers_share_one_key_secret_and_one_store(served: int) -> None:
    """Connections are shared out between the workers by the kernel: every one finds the claim the first made."""
    first = claim(served, "run-1")
    with ThreadPoolExecutor(8) as pool:
        claim_ids = set(pool.map(lambda number: str(claim(served, f"run-{number}")["claimId"]), range(2, 40)))

    assert claim_ids == {first["claimId"]}


def workers_of(pid: int) -> set[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return {int(child) for child in children.read_text().split()} if children.exists() else set()


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_the_workers_end_with_the_command(tmp_path: Path, signal_name: str) -> None:
    process = start(tmp_path / "oncegate.db", "--workers", "2", "--app-dir", str(REPO), cwd=tmp_path)
    port = port_of(process)
    claim(port, "run-1")
    workers = {pid for pid in workers_of(process.pid) if Path(f"/proc/{pid}/cmdline").read_bytes().find(b"spawn") > 0}
    assert len(workers) == 2, workers

    # To the command alone: it is the command that must stop its workers.
    process.send_signal(getattr(signal, signal_name))
    process.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]


def flow_claims(port: int) -> int:
    flows = request(port, "GET", "/api/flows")["value"]
    return sum(flow["claims"] for flow in flows if (flow["name"], flow["environment"]) == tuple(FLOW.values()))


@pytest.mark.slow
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_to_the_process_group_keeps_every_flow_count(tmp_path: Path, signal_name: str) -> None:
    """Issue 22: each worker flushes its counts once, uninterrupted by the signal the parent passes on."""
    database = tmp_path / "oncegate.db"
    counted, said = [], []
    for round_ in range(ROUNDS + 1):
        process = start(database, "--workers", "2", "--app-dir", str(REPO), cwd=tmp_path)
        port = port_of(process)
        counted.append(flow_claims(port))
        if round_ < ROUNDS:
            keys = [f"SO-{round_}-{number}" for number in range(CLAIMS_PER_ROUND)]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(functools.partial(claim, port, "run-1"), keys))
        code, err = stop(process, signal_name)
        said.append(err)

        assert (code, "Traceback" in err) == (0, False), err

    assert counted == [CLAIMS_PER_ROUND * round_ for round_ in range(ROUNDS + 1)], said


# Runs the stop handlers of a worker and of the command in a process of its own, with the second stop signal (the
# command passing on the one the whole group got) arriving after each C call the first signal's handler makes in
# turn, every moment at which Python could run the second handler nested in the first.
SECOND_SIGNAL_EVERYWHERE = """
import faulthandler, signal, sys, threading
from oncegate.entrypoints import server as serving

faulthandler.dump_traceback_later(20, exit=True)  # a handler that hangs shows where, and fails the test


class Server:
    stops = 0

    def shutdown(self):
        self.stops += 1


def run_with_a_second_signal(handler, point):
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "c_return":
            calls += 1
            if calls == point:
                signal.raise_signal(signal.SIGTERM)

    sys.setprofile(profile)
    handler(signal.SIGINT, None)
    sys.setprofile(None)
    return calls >= point


points = 0
while True:
    points += 1
    server = Server()
    serving._stop_serving_on_signal(server)
    reached = run_with_a_second_signal(signal.getsignal(signal.SIGINT), points)
    for thread in threading.enumerate():
        if thread.name == "oncegate-stop":
            thread.join(10)
    assert server.stops == 1, ("worker", points, server.stops)
    with serving._StopSignals() as asked:
        reached = run_with_a_second_signal(signal.getsignal(signal.SIGINT), points) or reached
        assert asked.wake.recv_bytes() == b"!" and not asked.wake.poll(), ("command", points)
    if not reached:
        break
print(points - 1)
"""


def test_a_second_stop_signal_while_the_first_is_handled_stops_the_worker_once_and_never_hangs() -> None:
    """The group's SIGINT, then the command's SIGTERM while the worker's handler still ran: its main thread
    deadlocked in the handler (a threading.Event's lock), and the worker was killed 30 s later, its counts lost."""
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", SECOND_SIGNAL_EVERYWHERE], capture_output=True, text=True, env=environment, timeout=60
    )

    assert (run.returncode, run.stderr) == (0, ""), run.stderr
    assert int(run.stdout) > 5, run.stdout  # the moments tried: the handlers make C calls, each one a moment


def test_serve_outside_the_project_without_app_dir_says_what_to_pass(tmp_path: Path) -> None:
    process = start(tmp_path / "oncegate.db", "--workers", "2", cwd=tmp_path)
    out, err = process.communicate(timeout=60)

    assert (process.returncode, out) == (2, "")
    assert err == (
        f"oncegate serve: no function_app.py in {tmp_path.resolve()}: pass --app-dir with the folder that holds it "
        "(the project's root), or run oncegate serve from that folder.\n"
    )


def test_workers_that_cannot_load_the_app_stop_the_command_with_a_failure(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text("raise ImportError('a package the app needs is not installed')\n")
    process = start(tmp_path / "oncegate.db", "--workers", "2", cwd=tmp_path)
    out, err = process.communicate(timeout=60)

    assert (process.returncode, out) == (3, ""), err
    assert re.fullmatch(
        r"oncegate serve: oncegate-worker-\d stopped with exit status 1, so every worker was stopped; "
        r"its error is above\.",
        err.splitlines()[-1],
    ), err


def scope_claims(port: int) -> dict[str, int]:
    (scope,) = [view for view in request(port, "GET", "/api/scopes")["value"] if view["scope"] == "erp.create-order"]
    return {status: count for status, count in scope["claims"].items() if count}


def test_counts_a_kill_lost_are_put_right_by_store_recount(tmp_path: Path) -> None:
    """Issue 33: kill -9 loses the counts the workers had not merged; ``oncegate store recount`` counts them again."""
    database = tmp_path / "oncegate.db"
    process = start(database, "--workers", "2", "--app-dir", str(REPO), cwd=tmp_path)
    keys = [f"SO-{number}" for number in range(CLAIMS_PER_ROUND)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(functools.partial(claim, port_of(process), "run-1"), keys))
    stop(process, "SIGKILL")
    process = start(database, "--workers", "2", "--app-dir", str(REPO), cwd=tmp_path)
    try:
        port = port_of(process)
        lost = request(port, "GET", "/api/scopes")["value"]
        environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
        recount = subprocess.run(
            [sys.executable, "-m", "oncegate.cli", "store", "recount"],
            capture_output=True,
            text=True,
            env={**environment, "ONCEGATE_SQLITE_PATH": str(database), "PYTHONPATH": str(REPO)},
            cwd=tmp_path,
            timeout=120,
        )
        counted = scope_claims(port)
    finally:
        stop(process)

    assert lost == []  # nothing was merged before the kill: the scope was never even written
    assert recount.returncode == 0, recount.stderr
    assert re.search(r"erp\.create-order\s+in_progress 40", recount.stdout), recount.stdout
    assert counted == {"inProgress": CLAIMS_PER_ROUND}
