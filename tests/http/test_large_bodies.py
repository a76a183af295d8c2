"""Slow clients hold a bounded amount of a worker's memory: their large bodies, and their connections.

Each connection held its body until it was whole, up to 6.5 MiB for a bulk call, and nothing bounded how many did:
100 clients each sending most of a bulk body and holding the rest took 636 MiB of ``oncegate serve --workers 2``
(a thousand, 6.5 GB). Now the bodies over a single action's limit share a budget per worker
(``holdings.LARGE_BODIES_BYTES``, ten bulk bodies at their limit), taken at the head: one more is answered
``503 server_busy`` with ``Retry-After`` before its body is read, while a claim's body is answered as ever, and what
a body took comes back once it is answered, however it ends.

The clients here only declare their bodies: the budget is taken by the declared length, so the test sends a few
bytes of each, once the worker invited them (``Expect: 100-continue``). Every wait is an answer read from a socket
with a timeout.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading

import pytest

from oncegate.entrypoints import framing, holdings
from oncegate.entrypoints.holdings import BUSY_RETRY_SECONDS, LARGE_BODIES_BYTES
from oncegate.entrypoints.incoming import Incoming
from oncegate.entrypoints.parse import MAX_BODY_BYTES, MAX_BULK_BODY_BYTES
from tests.http.test_server_framing import connected, read_answer, refused
from tests.load.served import serving

HELD = LARGE_BODIES_BYTES // MAX_BULK_BODY_BYTES
LOOKUP = b'{"scope": "erp.create-order", "key": "ORDER-1001"}'


def post(route: str, length: int, body: bytes = b"", *, expect: bool = False) -> bytes:
    head = f"POST /api/{route} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
    return head.encode() + (b"Expect: 100-continue\r\n" if expect else b"") + b"\r\n" + body


def bulk_over_a_single_limit() -> bytes:
    """A whole bulk body just over a single action's limit (spaces between its members): it takes from the budget."""
    item = {"scope": "erp.create-order", "key": "ORDER-1", "runId": "run-1", "fingerprint": "v1"}
    body = json.dumps({"items": [item]}).encode()
    return body[:-1] + b" " * (MAX_BODY_BYTES + 1 - len(body)) + b"}"


@pytest.mark.parametrize("threads", [2, 0], ids=["two-threads", "a-thread-per-connection"])
def test_large_bodies_held_by_slow_clients_are_bounded_and_a_claim_is_still_answered(threads: int) -> None:
    with serving(threads=threads) as address, contextlib.ExitStack() as stack:
        held = [stack.enter_context(connected(address)) for _ in range(HELD)]
        for sock, reader in held:
            # Invited once the worker took the body's share of the budget: then it is held, whatever the threads do.
            sock.sendall(post("claims/batch", MAX_BULK_BODY_BYTES, expect=True))
            assert read_answer(reader, head=True).status == 100
            sock.sendall(b'{"items": [')

        busy = refused(address, post("claims/batch", MAX_BULK_BODY_BYTES, b'{"items": ['))
        invited = refused(address, post("claims/results", MAX_BODY_BYTES + 1, expect=True))
        with connected(address) as (sock, reader):
            sock.sendall(post("claims/lookup", len(LOOKUP), LOOKUP))
            claim = read_answer(reader)

        # A client that gives up on its body (or runs out of time) gives back what the body took.
        sock, reader = held[0]
        sock.shutdown(socket.SHUT_WR)
        ended = read_answer(reader)
        with connected(address) as (sock, reader):
            sock.sendall(post("claims/batch", MAX_BODY_BYTES + 1, bulk_over_a_single_limit()))
            admitted = read_answer(reader)

    assert (busy.status, busy.error["code"]) == (503, "server_busy")
    assert busy.headers["retry-after"] == str(BUSY_RETRY_SECONDS)
    assert (invited.status, invited.error["code"]) == (503, "server_busy"), "no 100 Continue for a body refused"
    assert claim.status == 404, claim
    assert (ended.status, ended.error["details"][0]["target"]) == (400, "Content-Length")
    assert admitted.status == 200, admitted
    assert [item["decision"] for item in json.loads(admitted.body)["value"]] == ["proceed"]


@pytest.mark.parametrize("threads", [2, 0], ids=["two-threads", "a-thread-per-connection"])
def test_a_connection_past_the_most_a_worker_holds_is_turned_away_until_one_closes(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection may hold a head or a small body of up to 64 KiB: 2,000 slow ones held 130 MiB more of two
    workers, bound only by the open files. Here a worker holds at most 3."""
    monkeypatch.setattr(holdings, "MAX_CONNECTIONS", 3)
    with serving(threads=threads) as address, contextlib.ExitStack() as stack:
        held = [stack.enter_context(connected(address)) for _ in range(3)]
        for sock, _ in held:
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: test\r\nX-Slow: ")
        with connected(address) as (_, reader):
            busy = read_answer(reader)
            closed = reader.read()

        # One of them ends: its slot is free once it is closed, which its client sees.
        sock, reader = held[0]
        sock.sendall(b"1\r\nConnection: close\r\n\r\n")
        ended = read_answer(reader)
        assert reader.read() == b""
        with connected(address) as (sock, reader):
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: test\r\n\r\n")
            admitted = read_answer(reader)

    assert (busy.status, busy.error["code"]) == (503, "server_busy")
    assert busy.headers["retry-after"] == str(BUSY_RETRY_SECONDS)
    assert busy.headers["connection"] == "close"
    assert closed == b""
    assert (ended.status, admitted.status) == (200, 200)


@pytest.mark.parametrize("threads", [2, 0], ids=["two-threads", "a-thread-per-connection"])
def test_a_connection_whose_handler_fails_to_set_up_gives_its_count_back(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker counts a connection as it accepts it, and its handler's finish counted it back; a handler whose
    setup fails (here, the first three) is never finished, so each such connection was counted for good: a worker
    that holds at most 3 turned every later client away as busy, holding none."""
    monkeypatch.setattr(holdings, "MAX_CONNECTIONS", 3)
    made = iter(range(1_000_000))

    def failing_at_first(idle_seconds: float) -> Incoming:
        if next(made) < 3:
            raise OSError("the connection failed while its handler was set up")
        return Incoming(idle_seconds)

    monkeypatch.setattr(framing, "Incoming", failing_at_first)
    with serving(threads=threads) as address:
        for _ in range(3):
            with connected(address) as (_, reader):
                assert reader.read() == b"", "a connection whose handler failed was answered"
        with connected(address) as (sock, reader):
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: test\r\n\r\n")
            admitted = read_answer(reader)

    assert admitted.status == 200, admitted


def test_a_connection_whose_thread_cannot_start_gives_its_count_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a thread per connection, the worker counts a connection as it accepts it and its thread's handler counts it
    back; a thread the system refuses to start (the process at its limit of threads, as under a burst) never runs
    that handler, and the server only closes the socket: each such connection was counted for good, and a worker that
    holds at most 3 turned every later client away as busy, holding none."""
    monkeypatch.setattr(holdings, "MAX_CONNECTIONS", 3)
    refused_starts = iter(range(1_000_000))
    start = threading.Thread.start

    def refused_at_first(thread: threading.Thread) -> None:
        target = getattr(thread, "_target", None)
        if getattr(target, "__name__", "") == "process_request_thread" and next(refused_starts) < 3:
            raise RuntimeError("can't start new thread")
        start(thread)

    with serving(threads=0) as address:
        monkeypatch.setattr(threading.Thread, "start", refused_at_first)
        for _ in range(3):
            with connected(address) as (_, reader):
                assert reader.read() == b"", "a connection whose thread never started was answered"
        with connected(address) as (sock, reader):
            sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: test\r\n\r\n")
            admitted = read_answer(reader)
        monkeypatch.undo()

    assert admitted.status == 200, admitted
