"""The local server's bounded handler threads (issue 27): connections outnumber threads, and all are answered.

Each server here is real, on a free port, over raw sockets; every wait is bounded by a socket's
timeout, never by a sleep.
"""

from __future__ import annotations

import selectors
import threading
from contextlib import ExitStack

import pytest

from oncegate.entrypoints import handler_pool
from tests.http.test_server_framing import HEALTH, connected, read_answer
from tests.load.served import serving

CONNECTIONS = 8


@pytest.fixture(autouse=True, params=["platform", "select"])
def selector(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """This platform's selector, and select() as on Windows, where a parked connection must wake the leader."""
    if request.param == "select":
        monkeypatch.setattr(handler_pool, "SELECTOR", selectors.SelectSelector)


def test_kept_alive_connections_add_no_threads() -> None:
    """Before, every connection had a thread for its whole life: 8 callers, 8 more threads."""
    with serving(threads=2) as address, ExitStack() as stack:
        before = threading.active_count()
        sockets = [stack.enter_context(connected(address)) for _ in range(CONNECTIONS)]
        for sock, reader in sockets:
            sock.sendall(HEALTH)
            assert read_answer(reader).status == 200
        # Every connection is still open and kept alive, and none holds a thread.
        assert threading.active_count() == before


def test_one_thread_takes_turns_between_kept_alive_connections() -> None:
    with serving(threads=1) as address, connected(address) as first, connected(address) as second:
        for sock, reader in (first, second, first, second):
            sock.sendall(HEALTH)
            assert read_answer(reader).status == 200


def test_requests_sent_one_behind_the_other_are_all_answered() -> None:
    # Pipelined: the second request is already in the first's read buffer, and no new byte will come for it.
    with serving(threads=1) as address, connected(address) as (sock, reader):
        sock.sendall(HEALTH * 3)
        assert [read_answer(reader).status for _ in range(3)] == [200, 200, 200]


def test_a_kept_alive_connection_idle_too_long_is_closed() -> None:
    with serving(threads=1, idle_seconds=0.2) as address, connected(address) as (sock, reader):
        sock.sendall(HEALTH)
        assert read_answer(reader).status == 200
        # Bounded by the socket's own timeout: the server closes well before it.
        assert reader.read() == b""


def test_closing_the_server_closes_its_kept_alive_connections() -> None:
    server = serving(threads=2)
    address = server.__enter__()
    with connected(address) as (sock, reader):
        sock.sendall(HEALTH)
        assert read_answer(reader).status == 200
        server.__exit__(None, None, None)
        assert reader.read() == b""
