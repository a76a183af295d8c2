"""The files under ``infra/``, read once per session; the app in this process, as a workflow's connector calls it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncegate import bootstrap
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.infra.bicep import BicepFile, read_all
from tests.infra.wdl import Call

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def bicep_files() -> list[BicepFile]:
    files = read_all(ROOT / "infra")
    assert files, "no Bicep under infra/"
    return files


@pytest.fixture(scope="session")
def main_bicep(bicep_files: list[BicepFile]) -> BicepFile:
    (main,) = [file for file in bicep_files if file.path == ROOT / "infra" / "main.bicep"]
    return main


@pytest.fixture(scope="session")
def bicep(bicep_files: list[BicepFile]) -> dict[str, BicepFile]:
    """Files by their path under infra/, such as ``app/api.bicep``."""
    return {file.path.relative_to(ROOT / "infra").as_posix(): file for file in bicep_files}


@pytest.fixture
def call_app(service: Gate, clock: FakeClock) -> Iterator[Call]:
    """A connector action sent to the function its method and path name, as the Functions host routes it.

    A ``202`` with ``Location`` is followed as the engine follows it (the asynchronous pattern, issue 25):
    after ``Retry-After`` seconds (the test's clock moves on), GET ``Location``, until the answer is not 202.
    """
    import function_app  # reads the settings at import, so only once a test needs the app
    from oncegate.entrypoints.framing import dispatch
    from oncegate.entrypoints.routes import function_routes

    routes = function_routes(function_app.app)

    def call(method: str, path: str, body: Any) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        response = dispatch(routes, method.upper(), f"http://localhost{path}", headers, json.dumps(body).encode())
        while response.status_code == 202 and "Location" in response.headers:
            clock.advance(int(response.headers["Retry-After"]))
            response = dispatch(routes, "GET", response.headers["Location"], {}, b"")
        raw = response.get_body()
        return response.status_code, json.loads(raw) if raw else None

    bootstrap.use_services(service.services)
    yield call
    bootstrap.use_services(None)
