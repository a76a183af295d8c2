"""A store command stopped by SIGTERM, as ``timeout``, ``kill`` or a job's stop send it, ends as Ctrl+C ends it.

SIGTERM killed the process where it stood: ``purge`` had deleted claims whose scope counts it keeps in memory
until it closes, and the catalogue (``oncegate scopes``) went on counting the deleted claims until someone
ran ``store recount``. Now SIGTERM interrupts the command as Ctrl+C does: it closes what it opened, the
counts are written, exit 130.

The command runs as a separate process, its stderr a pipe of one page that this test stops reading after
the first progress line: the purge blocks on its next lines, so SIGTERM reaches it mid-way, every time.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

import pytest

from oncegate.cli import main, store_commands
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus
from oncegate.local_secret import local_key_secret
from oncegate.stores.sqlite import SqliteStore
from tests.cli.test_governance import STORE_SETTINGS
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import succeeded

REPO = Path(__file__).resolve().parents[2]
CLAIMS = 300
# The smallest pipe Linux makes: a page, some 150 progress lines, fewer than the purge's 300 pages.
PIPE_BYTES = 4096
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A SQLite store of claims made 400 days ago, past their retention, counted in the scope catalogue."""
    path = tmp_path / "store" / "oncegate.db"
    clock = FakeClock()
    clock.now = datetime.now(UTC) - timedelta(days=400)
    service = Gate(SqliteStore(path), KeyHasher(local_key_secret(path)), clock=clock)
    for index in range(CLAIMS):
        succeeded(service, key=f"订单-{index}", run=f"run-{index}")
    service.close()
    return path


def counts(path: Path) -> tuple[int, int]:
    """The succeeded claims the scope catalogue counts, and those the store holds."""
    store = SqliteStore(path)
    try:
        (scope,) = store.list_scopes()
        held = Counter(claim.status for claim in store.list_claims(ClaimFilter(tuple(ClaimStatus)), limit=1000).items)
    finally:
        store.close()
    return scope.claims_by_status.get(ClaimStatus.SUCCEEDED, 0), held[ClaimStatus.SUCCEEDED]


@contextmanager
def purge_stopped_after_its_first_page(
    database: Path, *options: str, stdout: int
) -> Iterator[tuple[subprocess.Popen[str], TextIO]]:
    """``oncegate purge --page-size 1 OPTIONS`` on ``database``, its stderr a pipe of one page, sent SIGTERM once it
    said it purged its first page: the process, and its stderr still open to read the rest."""
    environment = {name: value for name, value in os.environ.items() if name not in STORE_SETTINGS}
    reading, writing = os.pipe()
    fcntl.fcntl(writing, F_SETPIPE_SZ, PIPE_BYTES)
    process = subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "purge", "--page-size", "1", *options],
        cwd=REPO,
        env={**environment, "ONCEGATE_SQLITE_PATH": str(database)},
        stdout=stdout,
        stderr=writing,
        text=True,
    )
    os.close(writing)
    with os.fdopen(reading, encoding="utf-8") as stderr:
        assert stderr.readline().startswith("Purging on sqlite at ")
        assert stderr.readline().startswith("page 1: ")
        process.send_signal(signal.SIGTERM)
        yield process, stderr


@pytest.mark.skipif(sys.platform != "linux", reason="a pipe of one page is Linux's F_SETPIPE_SZ")
def test_a_purge_stopped_by_sigterm_writes_the_counts_of_what_it_deleted(database: Path) -> None:
    assert counts(database) == (CLAIMS, CLAIMS)
    with purge_stopped_after_its_first_page(database, stdout=subprocess.DEVNULL) as (process, stderr):
        rest = stderr.read()
    code = process.wait(timeout=60)

    assert code == 130, rest
    assert rest.splitlines()[-1] == (
        "oncegate purge: interrupted; what it deleted stays deleted, its counts kept: run it again to go on."
    )
    assert "Traceback" not in rest
    counted, held = counts(database)
    assert 0 < held < CLAIMS, "the purge ended mid-way"
    assert counted == held


def interrupted_at(monkeypatch: pytest.MonkeyPatch, line: str) -> None:
    """Ctrl+C as the command says ``line`` on stderr: the progress of an export or an import under way."""

    def progress(said: str) -> None:
        if line in said:
            raise KeyboardInterrupt
        print(said, file=sys.stderr)

    monkeypatch.setattr(store_commands, "progress", progress)


def test_an_export_and_an_import_interrupted_say_what_they_left_and_a_rerun_finishes(
    database: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(database))
    exported = tmp_path / "备份 目录" / "export.jsonl.gz"
    exported.parent.mkdir()
    with monkeypatch.context() as interrupting:
        interrupted_at(interrupting, "claim: ")
        assert main(["store", "export", str(exported)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"oncegate store export: interrupted; nothing was written to {exported} (export.jsonl.partial.gz, if left, "
        "is no export): take it again."
    )
    assert not exported.exists()
    assert main(["store", "export", str(exported)]) == 0
    forget_after = re.search(r"--forget-after (\S+)", capsys.readouterr().out)
    assert forget_after is not None
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "restored" / "oncegate.db"))
    importing = ["store", "import", str(exported), "--forget-after", forget_after[1]]

    with monkeypatch.context() as interrupting:
        interrupted_at(interrupting, "records written")
        assert main(importing) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        "oncegate store import: interrupted; the app refuses the store until it ends: run the same import again, "
        "which goes on where this one stopped."
    )
    assert main(importing) == 0

    assert "going on after record " in capsys.readouterr().out
    assert counts(tmp_path / "restored" / "oncegate.db") == (CLAIMS, CLAIMS)


@pytest.mark.skipif(sys.platform != "linux", reason="a pipe of one page is Linux's F_SETPIPE_SZ")
def test_a_json_purge_stopped_by_sigterm_prints_its_error_as_json_on_stdout(database: Path) -> None:
    """Every other failure of a --json command is {"error": {...}} on stdout: an interrupted one printed nothing."""
    with purge_stopped_after_its_first_page(database, "--json", stdout=subprocess.PIPE) as (process, stderr):
        out, _ = process.communicate(timeout=60)
        said = stderr.read().splitlines()[-1]

    assert process.returncode == 130
    assert json.loads(out) == {"error": {"code": "interrupted", "message": said, "details": []}}
    assert said == "oncegate purge: interrupted; what it deleted stays deleted, its counts kept: run it again to go on."


def stopped_while_waiting(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``oncegate ARGV`` against a deployment that takes the request and never answers, stopped by SIGTERM."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        silent.settimeout(60)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        process = subprocess.Popen(
            [sys.executable, "-m", "oncegate.cli", "--url", url, "--key", "k", *argv],
            cwd=REPO,
            env={name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        connection, _ = silent.accept()  # the request is on its way: the command waits for the answer
        with connection:
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
    assert "Traceback" not in err
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


LOOKUP = ["claims", "lookup", "--scope", "erp.create-order", "--key", "SO-1"]
RESOLVE = ["conflicts", "resolve", "CONFLICT-1", "--decision", "dismiss", "--reviewer", "ana@contoso.com"]


def test_a_json_command_to_a_deployment_stopped_by_sigterm_prints_its_error_as_json_on_stdout() -> None:
    """A read stopped while it waits for its answer changed nothing: stderr and the JSON on stdout say so (the JSON
    said a change it sent may have been made, and stderr said nothing, where operations.md has the JSON say the line
    stderr says)."""
    stopped = stopped_while_waiting(["--json", *LOOKUP])

    said = "oncegate claims lookup: interrupted; it changed nothing: run it again."
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.splitlines() == [said]
    assert json.loads(stopped.stdout) == {"error": {"code": "interrupted", "message": said, "details": []}}


def test_a_change_stopped_while_it_waits_for_the_deployment_says_it_may_be_done_on_stderr() -> None:
    """Without --json too: a command to a deployment stopped by SIGTERM or Ctrl+C ended with 130 in silence, as the
    store commands no longer do; a change sent may have been made whatever the command saw of it."""
    stopped = stopped_while_waiting(RESOLVE)

    assert (stopped.returncode, stopped.stdout) == (130, ""), stopped.stderr
    assert stopped.stderr.splitlines() == [
        "oncegate conflicts resolve: interrupted; what it sent may have been done, answered or not: look "
        "(oncegate claims show, oncegate conflicts show) before running it again."
    ]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["keys", "--json"], "oncegate keys: interrupted; it changed nothing: run it again."),
        (["targets", "list", "--json"], "oncegate targets list: interrupted; `oncegate targets list` shows what is "),
    ],
)
def test_a_json_store_command_interrupted_says_so_on_stderr_and_as_json_on_stdout(
    database: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """`keys` and `targets` ended with exit 130 and said nothing at all, on stderr or (with --json) on stdout."""
    from oncegate.service.key_secrets import KeySecrets
    from oncegate.service.targets import Targets

    def stopped(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(database))
    monkeypatch.setattr(KeySecrets, "marks", stopped)
    monkeypatch.setattr(Targets, "list", stopped)

    assert main(argv) == 130
    out, err = capsys.readouterr()
    assert err.splitlines()[-1].startswith(said)
    assert json.loads(out) == {"error": {"code": "interrupted", "message": err.splitlines()[-1], "details": []}}
