"""A maker's first steps on a new store, as the README and operations.md give them, against the real server.

``make run`` (``oncegate serve``) and then a store command in the same folder: the server makes its database at
its first request, so a command run before that finds none, and must say what to do rather than send the maker
looking for another folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncegate.cli import main
from tests.cli.test_governance import STORE_SETTINGS

REPO = Path(__file__).resolve().parents[2]
COMMANDS = [["targets", "list"], ["keys"]]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``oncegate serve`` on a free port in a folder of its own, as ``make run`` starts it; yields its address."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "serve", "--port", "0", "--app-dir", str(REPO)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment | {"PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        found = re.search(r"(http://127\.0\.0\.1:\d+)/api", banner)
        assert found, banner + (process.communicate(timeout=30)[1] if process.poll() is not None else "")
        yield found.group(1)
    finally:
        process.terminate()
        process.communicate(timeout=60)


def test_a_store_command_before_the_first_request_says_to_ask_the_server_once(
    served: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in (*STORE_SETTINGS, "ONCEGATE_SQLITE_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)

    for command in COMMANDS:
        assert main(command) == 2
        refused = capsys.readouterr().err
        assert "no database at" in refused
        # The advice, followed word for word below, is what makes the command work.
        assert "on a new store, ask it once (oncegate health) first" in refused
    assert main(["--url", served, "health"]) == 0
    capsys.readouterr()
    for command in COMMANDS:
        assert main(command) == 0
        assert capsys.readouterr().err == ""
