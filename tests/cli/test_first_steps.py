"""A maker's first steps on a new store, as the README and operations.md give them, against the real server.

``make run`` (``oncegate serve``) and then a store command in the same folder: the server makes its database at
its first request, so a command run before that finds none, and must say what to do rather than send the maker
looking for another folder.
"""

from __future__ import annotations

import http.client
import json
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


def start(folder: Path, **settings: str) -> subprocess.Popen[str]:
    """``oncegate serve`` on a free port in ``folder``, as ``make run`` starts it, with these settings and no other."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    return subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "serve", "--port", "0", "--app-dir", str(REPO)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment | settings | {"PYTHONPATH": str(REPO)},
        cwd=folder,
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """``oncegate serve`` in a folder of its own, on its default store; yields its address."""
    process = start(tmp_path)
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


def test_a_sqlite_folder_where_no_file_can_be_made_is_503_naming_the_setting_not_a_500(tmp_path: Path) -> None:
    """The key-secret file beside the database could not be made, and every request was a 500 internal_error.

    /proc is a folder in which no process, root included, makes a file (a folder of another owner does as much,
    but not to root, who runs the suite).
    """
    process = start(tmp_path, ONCEGATE_SQLITE_PATH="/proc/oncegate.db")
    try:
        assert process.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)/api", process.stdout.readline())
        assert found, process.communicate(timeout=30)[1]
        connection = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=60)
        connection.request("POST", "/api/claims", json.dumps({"scope": "a", "key": "k", "runId": "r"}))
        response = connection.getresponse()
        body = json.loads(response.read())
        connection.close()
    finally:
        process.terminate()
        _, log = process.communicate(timeout=60)

    assert (response.status, body["error"]["code"]) == (503, "not_configured"), body
    assert [detail["target"] for detail in body["error"]["details"]] == ["ONCEGATE_SQLITE_PATH"]
    assert "cannot make the key-secret file /proc/key-secret" in body["error"]["message"]
    assert "Traceback" not in log
