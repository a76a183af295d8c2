"""The connector's documents, and the Functions app served locally on a throwaway SQLite store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.connector.spec import CONNECTOR, DEFINITIONS, PROPERTIES, PUBLISHER, load
from tools.connector import build as generator


@pytest.fixture(scope="session")
def definition() -> dict[str, Any]:
    """The definition of the function key connection, the one most makers import."""
    document: dict[str, Any] = load(DEFINITIONS["key"])
    return document


@pytest.fixture(scope="session", params=sorted(DEFINITIONS))
def any_definition(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Each connection type's definition in turn: certification applies to both."""
    document: dict[str, Any] = load(DEFINITIONS[request.param])
    return document


@pytest.fixture(scope="session")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package for the gallery, written by ``python -m tools.connector --publisher ... --out ...``."""
    folder = tmp_path_factory.mktemp("package")
    publisher = folder / "publisher.json"
    publisher.write_text(json.dumps(PUBLISHER), encoding="utf-8")
    out = folder / "connector"
    assert generator.main(["--connector-dir", str(CONNECTOR), "--publisher", str(publisher), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session", params=sorted(DEFINITIONS))
def any_package(request: pytest.FixtureRequest, package: Path) -> dict[str, Any]:
    """Each connection type's definition as the package for the gallery has it."""
    document: dict[str, Any] = load(package / DEFINITIONS[request.param].relative_to(CONNECTOR))
    return document


@pytest.fixture(scope="session", params=sorted(PROPERTIES))
def any_properties(request: pytest.FixtureRequest) -> dict[str, Any]:
    document: dict[str, Any] = load(PROPERTIES[request.param])
    return document


@pytest.fixture(scope="package")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of the app that Azure runs (``function_app.app``), served on a free local port."""
    from tests.load.served import served_on_sqlite  # imports function_app, which reads the settings

    with served_on_sqlite(tmp_path_factory.mktemp("connector") / "oncegate.db", "s" * 40) as url:
        yield url
