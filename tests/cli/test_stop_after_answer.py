"""A stop (SIGTERM, Ctrl+C) landing just after a ``--json`` command wrote its answer leaves one JSON document on stdout.

The command printed its answer, and the stop, landing as it closed what it opened, had it print
``{"error": {"code": "interrupted", ...}}`` after it: two documents, which no JSON reader takes. Now the answer is
the command's one document, and the exit status is 130, as for any stop.

SIGTERM raises KeyboardInterrupt in the command wherever it stands (``oncegate.cli._stopped_as_by_ctrl_c``); here
stdout raises it as the answer's last line is written, so that the stop lands at that point every time.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from oncegate.cli import main
from tests.cli.test_governance import STORE_SETTINGS


class StoppedAfterTheAnswer(io.StringIO):
    """A stdout that stops the command (KeyboardInterrupt) once the first line ending a whole JSON document is in."""

    stopped = False

    def write(self, text: str) -> int:
        written = super().write(text)
        if not self.stopped and text.endswith("\n") and whole_json(self.getvalue()):
            self.stopped = True
            raise KeyboardInterrupt
        return written


def whole_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def run(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, StoppedAfterTheAnswer]:
    """The command's exit status, and its stdout (set here: the capture of the test's output sets its own before)."""
    stdout = StoppedAfterTheAnswer()
    with monkeypatch.context() as patched:
        patched.setattr(sys, "stdout", stdout)
        return main(argv), stdout


@pytest.fixture
def sqlite_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "oncegate.db"))


@pytest.mark.usefixtures("sqlite_store")
@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (("keys", "--json"), "keySecrets"),
        (("store", "init", "--new-only", "--json"), "storeId"),
        (("targets", "list", "--json"), "value"),
        (("purge", "--json"), "finished"),
    ],
    ids=["keys", "store-init", "targets-list", "purge"],
)
def test_a_store_command_stopped_after_its_answer_prints_that_answer_alone(
    argv: tuple[str, ...], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["store", "init"]) == 0

    code, stdout = run(list(argv), monkeypatch)

    assert stdout.stopped
    answer = json.loads(stdout.getvalue())
    assert field in answer, answer
    assert code == 130


def test_a_command_to_a_deployment_stopped_after_its_answer_prints_that_answer_alone(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, stdout = run(["--url", url, "--key", "k", "--json", "flows", "list"], monkeypatch)

    assert stdout.stopped
    answer = json.loads(stdout.getvalue())
    assert "value" in answer, answer
    assert code == 130
