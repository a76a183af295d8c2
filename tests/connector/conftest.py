"""The connector's documents, and the Functions app served locally on a throwaway SQLite store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.entrypoints.server import make_server
from oncegate.stores.sqlite import SqliteStore
from tests.connector.spec import DEFINITIONS, PROPERTIES, load
from tests.gate import Gate


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


@pytest.fixture(scope="session", params=sorted(PROPERTIES))
def any_properties(request: pytest.FixtureRequest) -> dict[str, Any]:
    document: dict[str, Any] = load(PROPERTIES[request.param])
    return document


@pytest.fixture(scope="package")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The address of the app that Azure runs (``function_app.app``), served on a free local port."""
    import function_app  # reads the settings at import, so only once a test needs the app

    store = SqliteStore(tmp_path_factory.mktemp("connector") / "oncegate.db")
    bootstrap.use_services(Gate(store, KeyHasher("s" * 40)).services)
    server = make_server(function_app.app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, name="connector-test-server", daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        bootstrap.use_services(None)
        store.close()
