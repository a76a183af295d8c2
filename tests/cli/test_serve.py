"""``oncegate serve`` and the options every command shares: one clear line when it cannot start, the store
named when it does, PORT followed, and help that explains each option."""

from __future__ import annotations

import argparse
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import oncegate.cli.parser
from oncegate.cli import main
from oncegate.cli.parser import build_parser
from oncegate.entrypoints import framing
from tests.cli.conftest import Oncegate, Run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ONCEGATE_* setting of the developer's shell, no PORT, and the SQLite store in this test's folder."""
    for name in os.environ:
        if name.startswith("ONCEGATE_") or name == "PORT":
            monkeypatch.delenv(name)
    database = tmp_path / "store" / "oncegate.db"
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(database))
    return database


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


@pytest.fixture
def stops_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server starts, then stops as at Ctrl+C, so that ``serve`` returns."""

    def interrupted(self: object, poll_interval: float = 0.5) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(framing.AppServer, "serve_forever", interrupted)


def serve(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    code = main(["serve", "--app-dir", str(REPO), *argv])
    out, err = capsys.readouterr()
    return Run(code, out, err)


def test_a_taken_port_is_one_line_naming_it_and_how_to_choose_another(
    busy_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run = serve(capsys, "--port", str(busy_port))

    assert (run.code, run.out) == (2, "")
    assert run.err == (
        f"oncegate serve: port {busy_port} on 127.0.0.1 is taken, by another oncegate serve or another program. "
        "Choose another with --port N or PORT=N (the other commands follow PORT too).\n"
    )


def test_a_malformed_connection_string_stops_serve_naming_the_setting_and_never_its_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONCEGATE_STORE", "tables")
    monkeypatch.setenv("ONCEGATE_KEY_SECRET", "s" * 40)
    monkeypatch.setenv("ONCEGATE_TABLES_CONNECTION_STRING", "garbage;AccountKey=c2VjcmV0")

    run = serve(capsys, "--port", "0")

    assert (run.code, run.out) == (2, "")
    assert run.err.startswith("oncegate serve: ONCEGATE_TABLES_CONNECTION_STRING: is not a storage account ")
    assert len(run.err.splitlines()) == 1
    assert "c2VjcmV0" not in run.err


@pytest.mark.usefixtures("stops_at_once")
def test_the_banner_names_the_store(settings: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = serve(capsys, "--port", "0")

    assert run.code == 0, run.err
    banner, store = run.out.splitlines()
    assert re.fullmatch(
        r"OnceGate \S+ serving on http://127\.0\.0\.1:\d+/api, 2 handler threads \(Ctrl\+C to stop\)", banner
    )
    assert store == f"Store: sqlite at {settings}"


@pytest.mark.usefixtures("stops_at_once")
@pytest.mark.parametrize(
    ("argv", "setting", "said"),
    [
        ((), "5", "5 handler threads"),
        (("--threads", "3"), "5", "3 handler threads"),
        (("--threads", "0"), None, "a thread per connection"),
    ],
)
def test_the_handler_threads_follow_the_option_then_the_setting(
    argv: tuple[str, ...],
    setting: str | None,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 27: the help advertised --threads, which serve did not take."""
    made: list[int] = []
    make_server = framing.make_server

    def recording(*args: Any, threads: int, **options: Any) -> Any:
        made.append(threads)
        return make_server(*args, threads=threads, **options)

    monkeypatch.setattr(framing, "make_server", recording)
    if setting is not None:
        monkeypatch.setenv("ONCEGATE_SERVE_THREADS", setting)

    run = serve(capsys, "--port", "0", *argv)

    assert run.code == 0, run.err
    assert f"/api, {said} (Ctrl+C" in run.out
    assert made == [int(said.split()[0]) if said[0].isdigit() else 0]


def test_threads_that_are_no_count_stop_serve_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONCEGATE_SERVE_THREADS", "many")

    run = serve(capsys, "--port", "0")

    assert (run.code, run.out) == (2, "")
    assert run.err.startswith("oncegate serve: ONCEGATE_SERVE_THREADS is 'many' in the environment: give ")


@pytest.mark.usefixtures("stops_at_once")
def test_the_port_follows_port_from_the_environment(
    busy_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PORT", str(busy_port))

    run = serve(capsys)

    assert run.code == 2
    assert f"port {busy_port} on 127.0.0.1 is taken" in run.err


def test_the_cli_calls_the_port_serve_listens_on(
    busy_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PORT", "1")

    code = main(["health"])

    assert code == 3
    assert capsys.readouterr().err.startswith("Cannot reach http://127.0.0.1:1: ")


def test_the_old_scope_before_the_command_is_an_error_that_says_what_it_became(
    oncegate: Oncegate, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        oncegate("--scope", "mail.send-invoice", "conflicts", "list")

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--scope before the command is gone: it was the Entra ID API scope, now --api-scope." in err
    assert "oncegate conflicts list --scope erp.create-order" in err


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_option_is_explained_in_plain_text() -> None:
    for parser in _parsers(build_parser()):
        assert "``" not in parser.format_help(), parser.prog
        unexplained = [
            action.dest
            for action in parser._actions
            if action.help is None and not isinstance(action, argparse._SubParsersAction)
        ]
        assert unexplained == [], parser.prog


def _synopsis(command: str) -> str:
    """The synopsis of ``command`` (``claims review``) in ``oncegate --help``, its continued lines with it."""
    lines = (oncegate.cli.parser.__doc__ or "").splitlines()
    [start] = [i for i, line in enumerate(lines) if re.match(rf"\s+(oncegate )?{re.escape(command)}( |$)", line)]
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while lines[end].startswith(" " * (indent + 1)) and not lines[end].lstrip().startswith(("oncegate ", command)):
        end += 1
    return " ".join(lines[start:end])


def test_the_synopsis_of_help_names_every_option_of_each_command() -> None:
    """`claims review --data` and `store init --new-only` were missing from `oncegate --help`, which docs use."""
    top = build_parser()
    connection = {option for action in top._actions for option in action.option_strings} | {"--function-key"}
    for parser in _parsers(top):
        command = parser.prog.removeprefix("oncegate").strip()
        if not command or any(isinstance(action, argparse._SubParsersAction) for action in parser._actions):
            continue
        options = {option for action in parser._actions for option in action.option_strings} - connection
        synopsis = _synopsis(command)
        assert [option for option in sorted(options) if option.startswith("--") and option not in synopsis] == [], (
            synopsis
        )


def test_help_gives_the_ranges(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["scopes", "set", "--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert "15 to 86400 seconds" in text
    assert "1 to 3650 days" in text
