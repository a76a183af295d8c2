"""``oncegate serve --workers N``: processes of their own answering on one port, one store between them.

Runs the real command in a subprocess, as a user does, and fires the same record at it many times at
once: whichever worker answers, exactly one run is told to proceed.
"""

from __future__ import annotations

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

import pytest

REPO = Path(__file__).resolve().parents[2]
CALLERS = 24


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    """``oncegate serve --workers 2`` on a free port and a fresh SQLite store; yields the port."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    environment["ONCEGATE_SQLITE_PATH"] = str(tmp_path / "oncegate.db")
    process = subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "serve", "--port", "0", "--workers", "2", "--app-dir", str(REPO)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=tmp_path,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/api, 2 worker processes", banner)
    assert found, banner + (process.stderr.read() if process.poll() is not None and process.stderr else "")
    try:
        yield int(found.group(1))
    finally:
        process.terminate()
        process.wait(timeout=30)


def claim(port: int, run: str, start: Barrier | None = None) -> dict[str, object]:
    body = json.dumps({"scope": "erp.create-order", "key": "SO-1001", "runId": run, "fingerprint": "v1"})
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.connect()
    if start is not None:
        start.wait(timeout=60)
    connection.request("POST", "/api/claims", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer: dict[str, object] = json.loads(response.read())
    connection.close()
    assert response.status == 200, answer
    return answer


def test_the_same_record_fired_at_two_workers_at_once_proceeds_once(served: int) -> None:
    start = Barrier(CALLERS)
    with ThreadPoolExecutor(CALLERS) as pool:
        answers = list(pool.map(lambda number: claim(served, f"run-{number}", start), range(CALLERS)))

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


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_the_workers_end_with_the_command(tmp_path: Path, signal_name: str) -> None:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    environment["ONCEGATE_SQLITE_PATH"] = str(tmp_path / "oncegate.db")
    process = subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "serve", "--port", "0", "--workers", "2", "--app-dir", str(REPO)],
        stdout=subprocess.PIPE,
        env=environment,
        text=True,
    )
    assert process.stdout is not None
    port = int(re.findall(r":(\d+)/api", process.stdout.readline())[0])
    claim(port, "run-1")
    workers = {pid for pid in workers_of(process.pid) if Path(f"/proc/{pid}/cmdline").read_bytes().find(b"spawn") > 0}
    assert len(workers) == 2, workers

    process.send_signal(getattr(signal, signal_name))
    process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)

    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]
