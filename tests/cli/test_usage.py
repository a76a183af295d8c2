"""How ``oncegate`` is used from a terminal: interrupts and closed pipes, settings, arguments, groups, not found.

Issue 27: each is what a person at a shell met first, before any answer of the service.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oncegate.cli import commands, extra, layout, main
from tests.cli.conftest import FUNCTION_KEY, Oncegate, Seen
from tests.cli.test_commands import UNKNOWN_CLAIM, claimed
from tests.http.client import ServerApi

REPO = Path(__file__).resolve().parents[2]


def oncegate_process(*argv: str, stdout: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command's way in (``python -m oncegate.cli``), as a separate process."""
    environ = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "oncegate.cli", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )


def closed_pipe() -> int:
    """The writing end of a pipe whose reader has gone, as ``| head -3`` leaves it once head has its lines."""
    reader, writer = os.pipe()
    os.close(reader)
    return writer


# -- Ctrl+C and closed pipes ---------------------------------------------------------------------------


def test_ctrl_c_while_the_answer_is_rendered_is_exit_130_without_a_traceback(
    oncegate: Oncegate, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(layout, "show", interrupted)

    run = oncegate("health")  # the fixture fails on any traceback

    assert run.code == commands.INTERRUPTED_EXIT


class StoppedWhileLoading(importlib.abc.MetaPathFinder):
    """Ctrl+C as it lands while ``module`` is being imported: a command loads what it runs when it is chosen."""

    def __init__(self, module: str) -> None:
        self.module = module

    def find_spec(self, name: str, *args: object) -> None:
        if name == self.module:
            raise KeyboardInterrupt


NOTHING_DONE = "interrupted; it changed nothing: run it again."


def test_ctrl_c_while_a_command_loads_what_it_needs_says_it_changed_nothing(
    oncegate: Oncegate, seen: list[Seen], monkeypatch: pytest.MonkeyPatch
) -> None:
    def stopped() -> None:
        raise KeyboardInterrupt  # as while rich, the cli extra, is imported (some 50 ms of a command's start)

    monkeypatch.setattr(extra, "require", stopped)

    run = oncegate("--json", "drill")

    said = f"oncegate drill: {NOTHING_DONE}"
    assert (run.code, run.err) == (commands.INTERRUPTED_EXIT, said + "\n")
    assert json.loads(run.out) == {"error": {"code": "interrupted", "message": said, "details": []}}
    assert seen == []


def test_ctrl_c_while_a_store_command_is_imported_says_it_changed_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "oncegate.db"))
    monkeypatch.delitem(sys.modules, "oncegate.cli.targets_commands", raising=False)
    monkeypatch.setattr(sys, "meta_path", [StoppedWhileLoading("oncegate.cli.targets_commands"), *sys.meta_path])

    code = main(["targets", "list", "--json"])

    out, err = capsys.readouterr()
    said = f"oncegate targets list: {NOTHING_DONE}"
    assert (code, err) == (commands.INTERRUPTED_EXIT, said + "\n")
    assert json.loads(out)["error"]["message"] == said


@pytest.mark.parametrize("argv", [["--help"], ["--json", "claims", "show", "CLAIM"], ["claims", "show", "CLAIM"]])
def test_a_closed_pipe_is_exit_141_without_a_traceback(argv: list[str], api: ServerApi, url: str) -> None:
    claim_id = claimed(api)["claimId"]
    writer = closed_pipe()
    try:
        done = oncegate_process(
            *["--url", url, "--key", FUNCTION_KEY],
            *(claim_id if word == "CLAIM" else word for word in argv),
            stdout=writer,
        )
    finally:
        os.close(writer)

    # argparse's --help has printed and exits 0 before the pipe's state is known: it keeps its 0.
    assert (done.returncode, done.stderr) == (0 if argv == ["--help"] else 141, "")


# -- settings and arguments, checked before anything is done -----------------------------------


def test_a_port_setting_that_is_no_port_is_exit_2_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PORT", "abc")

    code = main(["health"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("PORT is 'abc' in the environment: give the port oncegate serve listens on")
    assert "Cannot reach" not in err


def test_serve_refuses_a_port_setting_that_is_no_port_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PORT", "abc")

    code = main(["serve", "--app-dir", str(REPO)])

    assert code == 2
    assert capsys.readouterr().err.startswith("oncegate serve: PORT is 'abc' in the environment")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["claims", "list", "--since", "yesterday"], "argument --since: give a date and time with its zone, such as "),
        (["claims", "list", "--source", "shop eu"], "argument --source: give 1 to 64 letters, digits, dots, colons"),
        (["drill", "--scope", "bad scope"], "argument --scope: give 1 to 64 letters, digits, dots, underscores or "),
        (["scopes", "set", "bad scope"], "argument SCOPE: give 1 to 64 letters, digits, dots, underscores or "),
        (["conflicts", "resolve", "C", "--decision", "keep_original"], "--reviewer is required: who decided, such as"),
    ],
)
def test_arguments_are_checked_before_any_request_in_plain_words_with_an_example(
    argv: list[str], said: str, oncegate: Oncegate, seen: list[Seen], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        oncegate(*argv)

    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert said in err
    assert not re.search(r"Input should|String should|match pattern", err)
    assert seen == []


def test_with_entra_the_reviewer_may_be_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    # Refused for the sign-in settings it lacks (exit 2, no request), not for the reviewer.
    code = main(["--entra", "--tenant", "contoso", "conflicts", "resolve", "C", "--decision", "dismiss"])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("--entra needs --client-id")


# -- groups and global options ---------------------------------------------------------------------


@pytest.mark.parametrize("group", ["flows", "scopes", "conflicts"])
def test_a_group_alone_lists(group: str, api: ServerApi, oncegate: Oncegate) -> None:
    claimed(api)

    alone = oncegate(group)

    assert alone.code == 0, alone.err
    assert alone == oncegate(group, "list")


@pytest.mark.parametrize("group", [[], ["claims"]])
def test_a_group_without_a_list_of_its_own_shows_its_help(group: list[str], oncegate: Oncegate) -> None:
    run = oncegate(*group)

    assert run.code == 0
    assert run.out.startswith(f"usage: oncegate {' '.join(group)}".rstrip())
    assert "show" in run.out


def test_the_deployments_options_go_before_the_command_or_after_it(
    url: str, api: ServerApi, capsys: pytest.CaptureFixture[str]
) -> None:
    claim_id = claimed(api)["claimId"]
    answers = []
    for argv in (
        ["--url", url, "--key", FUNCTION_KEY, "--json", "claims", "show", claim_id],
        ["claims", "show", claim_id, "--url", url, "--key", FUNCTION_KEY, "--json"],
        ["--url", url, "claims", "show", "--json", claim_id, "--function-key", FUNCTION_KEY],
    ):
        assert main(argv) == 0
        answers.append(capsys.readouterr().out)

    assert answers[0].startswith("{")
    assert answers == [answers[0]] * 3


# -- not found ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["nope", UNKNOWN_CLAIM, "../../health"])
def test_a_claim_not_found_is_one_message_with_the_id_as_typed(typed: str, oncegate: Oncegate) -> None:
    run = oncegate("claims", "show", typed)

    assert run.code == 2
    assert run.err == f"not_found: No claim has the id {typed!r}.\n"


@pytest.mark.parametrize("typed", ["nope", "b" * 24])
def test_a_conflict_not_found_is_one_message_with_the_id_as_typed(typed: str, oncegate: Oncegate) -> None:
    run = oncegate("conflicts", "show", typed)

    assert run.code == 2
    assert run.err == f"not_found: No conflict has the id {typed!r}.\n"
