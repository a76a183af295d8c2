"""``--json`` prints JSON on stdout when the command fails too: the error, in the service's error body's shape.

A script piping ``oncegate --json claims lookup ...`` into ``jq`` got nothing on stdout when the key was not
found, the service was down or the sign-in failed: ``jq -r .status`` printed nothing and the script went on
with an empty value. Now stdout holds ``{"error": {"code", "message", "details"}}`` whoever refused: the
service (its code, and ``status``), or the command itself (``invalid_usage``, ``unreachable``,
``signin_failed``); stderr says it for people as before, and the exit status is unchanged.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from oncegate.cli import main
from oncegate.cli.extra import MISSING
from tests.cli.conftest import Oncegate
from tests.cli.test_cli_extra import without_rich
from tests.cli.test_governance import STORE_SETTINGS

SCOPE = "erp.create-order"


def a_closed_port() -> int:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port: int = bound.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("argv", "code", "status", "exit_code"),
    [
        (("claims", "lookup", "--scope", SCOPE, "--key", "订单-404"), "not_found", 404, 2),
        (("claims", "show", "a" * 52), "not_found", 404, 2),
        (("scopes", "set", SCOPE, "--key-pattern", "[x"), "invalid_request", 400, 2),
        (("claims", "list"), "invalid_usage", None, 2),
        (("claims", "review", "a" * 52, "--reviewer", "ana", "--data", "{not json"), "invalid_usage", None, 2),
        (("--url", "http://127.0.0.1:{closed}", "health"), "unreachable", None, 3),
        (
            ("--entra", "--tenant", "con toso", "--client-id", "c", "--api-scope", "api://x/y", "health"),
            "signin_failed",
            None,
            2,
        ),
    ],
    ids=["lookup not found", "show not found", "refused value", "usage", "data not JSON", "unreachable", "sign-in"],
)
def test_a_failure_with_json_is_a_json_error_on_stdout(
    oncegate: Oncegate, argv: tuple[str, ...], code: str, status: int | None, exit_code: int
) -> None:
    closed = str(a_closed_port())

    run = oncegate("--json", *(word.replace("{closed}", closed) for word in argv))

    assert run.code == exit_code
    error = json.loads(run.out)["error"]
    assert (error["code"], error.get("status")) == (code, status)
    assert error["message"] in run.err
    assert isinstance(error["details"], list)


def test_the_details_keep_the_services_field_names(oncegate: Oncegate) -> None:
    run = oncegate("--json", "flows", "register", "--name", "x" * 300, "--environment", "y" * 300)

    details = json.loads(run.out)["error"]["details"]
    assert [detail["target"] for detail in details] == ["name", "environment"]


def test_a_failure_without_json_prints_nothing_on_stdout(oncegate: Oncegate) -> None:
    run = oncegate("claims", "show", "a" * 52)

    assert (run.code, run.out) == (2, "")


@pytest.mark.parametrize(
    "argv",
    [("purge", "--json"), ("keys", "--json"), ("store", "export", "{folder}/export.jsonl.gz", "--json")],
    ids=["purge", "keys", "export"],
)
def test_a_store_commands_refusal_with_json_is_a_json_error_on_stdout(
    argv: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "nowhere" / "oncegate.db"))

    code = main([word.replace("{folder}", str(tmp_path)) for word in argv])

    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert (code, error["code"]) == (2, "invalid_usage")
    assert error["message"] == err.strip()
    assert "no database at " in error["message"]
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (("--json", "conflicts", "list", "--top", "0"), "argument --top: give a whole number from 1 to 200"),
        (("claims", "review", "a" * 52, "--json"), "--reviewer is required"),
        (("--json", "claims", "nothing"), "invalid choice: 'nothing'"),
    ],
    ids=["bad value", "missing option", "no such command"],
)
def test_arguments_refused_with_json_are_a_json_error_on_stdout(
    argv: tuple[str, ...], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))

    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert (exited.value.code, error["code"]) == (2, "invalid_usage")
    assert said in error["message"]
    assert error["message"] in err


def test_arguments_refused_without_json_print_nothing_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["conflicts", "list", "--top", "0"])

    assert capsys.readouterr().out == ""


def test_a_command_without_the_extra_with_json_is_a_json_error_naming_it() -> None:
    done = without_rich("--json", "health", env=dict(os.environ))

    error = json.loads(done.stdout)["error"]
    assert (done.returncode, error["code"], error["message"]) == (2, "invalid_usage", MISSING)
