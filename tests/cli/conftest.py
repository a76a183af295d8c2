"""The CLI suite: ``oncegate`` against ``oncegate serve``'s server over real HTTP, on a SQLite store per test.

The server, its wiring to this test's service and the SQLite-only store come from the HTTP suite.
``seen`` records every request the server receives, so a test can check what the CLI sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from oncegate.cli import main
from oncegate.entrypoints import framing
from oncegate.entrypoints.routes import FunctionRoute
from tests.http.client import ServerApi
from tests.http.conftest import local_server, store_kind, wired

__all__ = ["local_server", "store_kind", "wired"]

FUNCTION_KEY = "test-function-key"
SETTINGS = (
    "ONCEGATE_URL",
    "ONCEGATE_FUNCTION_KEY",
    "ONCEGATE_TENANT_ID",
    "ONCEGATE_CLIENT_ID",
    "ONCEGATE_API_SCOPE",
    "ONCEGATE_CLIENT_SECRET",
)


@dataclass(frozen=True)
class Run:
    """One run of the command: its exit status and what it printed."""

    code: int
    out: str
    err: str


Oncegate = Callable[..., Run]


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    method: str
    url: str
    headers: dict[str, str]


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting of the developer's shell reaches the command, and no token cache outside this test."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_TOKEN_CACHE", str(tmp_path / "msal-cache.json"))


@pytest.fixture
def api(local_server: tuple[str, int]) -> ServerApi:
    return ServerApi(local_server)


@pytest.fixture
def url(local_server: tuple[str, int]) -> str:
    host, port = local_server
    return f"http://{host}:{port}"


@pytest.fixture
def oncegate(url: str, capsys: pytest.CaptureFixture[str]) -> Oncegate:
    """Runs ``oncegate --url <the local server> --key <a function key> ARGS...`` here; no key with ``--entra``."""

    def run(*argv: str, **options: Any) -> Run:
        credentials = [] if "--entra" in argv else ["--key", FUNCTION_KEY]
        code = main(["--url", url, *credentials, *argv], **options)
        out, err = capsys.readouterr()
        assert "Traceback" not in err, err
        return Run(code, out, err)

    return run


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[Seen]:
    """Every request the local server dispatches from now on."""
    requests: list[Seen] = []
    dispatch = framing.dispatch

    def recording(routes: Sequence[FunctionRoute], method: str, url: str, headers: dict[str, str], body: bytes) -> Any:
        requests.append(Seen(method, url, {name.lower(): value for name, value in headers.items()}))
        return dispatch(routes, method, url, headers, body)

    monkeypatch.setattr(framing, "dispatch", recording)
    return requests
