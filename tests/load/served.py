"""The local server (``oncegate serve``'s) on a free port, answering from a given service."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import function_app
from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.entrypoints.framing import make_server
from oncegate.stores.sqlite import SqliteStore
from tests.gate import Gate


@contextmanager
def serving(**options: Any) -> Iterator[tuple[str, int]]:
    """The Functions app served over HTTP on 127.0.0.1, a free port (``options`` as ``make_server`` takes them);
    yields (host, port)."""
    server = make_server(function_app.app, "127.0.0.1", 0, **options)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield str(host), int(port)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextmanager
def served(service: Gate) -> Iterator[tuple[str, int]]:
    """Serve the Functions app over HTTP on 127.0.0.1 with ``service`` wired in; yields (host, port)."""
    bootstrap.use_services(service.services)
    try:
        with serving() as address:
            yield address
    finally:
        bootstrap.use_services(None)


@contextmanager
def served_on_sqlite(path: Path, secret: str) -> Iterator[str]:
    """The app served over a SQLite store at ``path`` with this key secret; yields its base URL."""
    store = SqliteStore(path)
    try:
        with served(Gate(store, KeyHasher(secret))) as (host, port):
            yield f"http://{host}:{port}"
    finally:
        store.close()
