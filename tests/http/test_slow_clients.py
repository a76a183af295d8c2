"""Slow clients against the local server (issue 31): a connection holds a handler thread only once its whole
request is in, so a thousand connections trickling their requests leave the threads to everyone else.

Each server is real, on a free port, with its default two handler threads. Every wait is bounded by a
socket's timeout; the only pause is the slow clients' own pace between two bytes.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import function_app
from oncegate.entrypoints import handler_pool
from oncegate.entrypoints.framing import make_server
from tests.http.test_server_framing import HEALTH, TIMEOUT, connected, read_answer
from tests.load.served import serving

SLOW = 1000
PROBES = 9
# Each health probe must be answered within this, while the slow clients trickle. Left to the threads it takes
# milliseconds; held behind the slow clients, as before issue 31, no probe was answered at all (9 of 9 unanswered
# at 5 s): a slow head never ends within the test, and the idle time that would end it is 30 s. So 5 s tells the
# two apart with room for a probe's thread waiting for one of two busy cores, which failed the test at 1 s.
PROBE_SECONDS = 5.0
# The slow clients' pace: one byte on every connection, then this pause, round after round.
PACE_SECONDS = 0.05
# Never complete: a head that goes on (a long header line) and a body far longer than the test lasts.
SLOW_HEAD = b"GET /api/health HTTP/1.1\r\nHost: test\r\nX-Slow: " + b"x" * 60_000
SLOW_BODY = b"POST /api/claims HTTP/1.1\r\nHost: test\r\nContent-Length: 60000\r\n\r\n"


def allow_descriptors(needed: int) -> None:
    """Raise this process's soft limit on open files to ``needed`` (both ends of every connection live here)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"{needed} open files are needed and the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


class Rounds:
    """The slow clients' rounds, each a byte on every connection: a probe waits for the next to be sent."""

    def __init__(self) -> None:
        self._done = 0
        self._changed = threading.Condition()

    def sent(self) -> None:
        with self._changed:
            self._done += 1
            self._changed.notify_all()

    def wait_next(self) -> None:
        with self._changed:
            target = self._done + 1
            assert self._changed.wait_for(lambda: self._done >= target, timeout=30), "the slow clients stopped"


@contextmanager
def trickling(address: tuple[str, int], request: bytes, *, count: int = SLOW) -> Iterator[Rounds]:
    """``count`` connections, each sending ``request`` (its head whole when it is a body that trickles) a byte per
    round, until the block ends; the connections are all open and have each sent a first byte when it begins."""
    stop = threading.Event()
    rounds = Rounds()
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.create_connection(address, timeout=5)) for _ in range(count)]
        whole, rest = (request, b"x" * 60_000) if request.endswith(b"\r\n\r\n") else (b"", request)
        for sock in sockets:
            sock.sendall(whole + rest[:1])

        def trickle() -> None:
            for offset in range(1, len(rest)):
                for sock in sockets:
                    with contextlib.suppress(OSError):
                        sock.send(rest[offset : offset + 1])
                rounds.sent()
                if stop.wait(PACE_SECONDS):  # the pace of the slow clients, not a wait for the server
                    return

        trickler = threading.Thread(target=trickle, name="slow-clients", daemon=True)
        trickler.start()
        try:
            yield rounds
        finally:
            stop.set()
            trickler.join(timeout=30)


def probe(address: tuple[str, int]) -> tuple[int | None, float]:
    """A health probe on a connection of its own: its status (None when unanswered within PROBE_SECONDS), its time."""
    began = time.monotonic()
    try:
        with connected(address) as (sock, reader):
            sock.settimeout(PROBE_SECONDS)
            sock.sendall(HEALTH)
            status: int | None = read_answer(reader).status
    except (TimeoutError, OSError):
        status = None
    return status, time.monotonic() - began


def probes_answered(address: tuple[str, int], rounds: Rounds) -> list[tuple[int | None, float]]:
    """PROBES probes, each after another round of bytes from the slow clients."""
    answered = []
    for _ in range(PROBES):
        rounds.wait_next()
        answered.append(probe(address))
    return answered


@pytest.mark.parametrize("request_sent", [SLOW_HEAD, SLOW_BODY], ids=["head", "body"])
def test_a_thousand_slow_clients_leave_the_handler_threads_to_health_probes(request_sent: bytes) -> None:
    """Issue 31: with two handler threads, 2 connections sending their headers a byte at a time left 4 of 9
    probes answered in 5 s, and 64 left none."""
    allow_descriptors(2 * SLOW + 256)
    with serving() as address, trickling(address, request_sent) as rounds:
        answered = probes_answered(address, rounds)

    assert [status for status, _ in answered] == [200] * PROBES, answered
    assert max(seconds for _, seconds in answered) < PROBE_SECONDS


@pytest.mark.parametrize("threads", [1, 0], ids=["one-thread", "a-thread-per-connection"])
def test_a_slow_client_is_answered_once_its_request_is_whole(threads: int) -> None:
    """Its request trickled in, a byte at a time between other callers' requests, it is answered as any other."""
    with serving(threads=threads) as address, connected(address) as (slow, reader):
        for byte in HEALTH[:-1]:
            slow.sendall(bytes([byte]))
            assert probe(address)[0] == 200
        slow.sendall(HEALTH[-1:])
        assert read_answer(reader).status == 200


@pytest.mark.parametrize("threads", [2, 0], ids=["two-threads", "a-thread-per-connection"])
def test_a_head_trickled_slower_than_the_idle_time_is_refused_as_a_whole(threads: int) -> None:
    """A byte every 0.1 s never lets the connection idle for the idle time (0.5 s here), yet its head as a whole
    may take no longer: 408, and the connection closes, as a body trickled that slowly is refused."""
    stop = threading.Event()
    with serving(threads=threads, idle_seconds=0.5) as address, connected(address) as (slow, reader):

        def trickle() -> None:
            with contextlib.suppress(OSError):
                for byte in SLOW_HEAD:
                    slow.send(bytes([byte]))
                    if stop.wait(0.1):  # the pace of the slow client, not a wait for the server
                        return

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        try:
            refused = read_answer(reader)
            closed = reader.read()
        finally:
            stop.set()
            trickler.join(timeout=5)

    assert (refused.status, refused.error["code"]) == (408, "request_timeout")
    assert closed == b""


@pytest.mark.parametrize("threads", [2, 0], ids=["two-threads", "a-thread-per-connection"])
def test_a_request_that_asks_to_close_is_answered_when_its_body_comes_after_its_head(threads: int) -> None:
    """Its head read (100 Continue says so), the body is still awaited though the connection closes after the
    answer: closed at the head, the connection ended without one (``urllib`` sends the two apart)."""
    head = b"POST /api/claims/lookup HTTP/1.1\r\nHost: test\r\nConnection: close\r\nExpect: 100-continue\r\n"
    body = b'{"scope": "erp.create-order", "key": "ORDER-1001"}'
    with serving(threads=threads) as address, connected(address) as (sock, reader):
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body))
        assert read_answer(reader).status == 100
        sock.sendall(body)
        answer = read_answer(reader)
        closed = reader.read()

    assert (answer.status, answer.error["code"]) == (404, "not_found")
    assert closed == b""


class _HungUp:
    """A connection whose client went away while its answer was being sent (a flow's action timed out)."""

    def __init__(self, failure: OSError) -> None:
        self.connection, self._client = socket.socketpair()
        self._client.sendall(b"GET")  # something to read: the pool takes the connection
        self.failure = failure
        self.finished = threading.Event()

    def receive(self) -> bool:
        return True

    def due(self) -> bool:
        return True

    def due_at(self) -> float:
        return time.monotonic()

    def handle_one_request(self) -> None:
        raise self.failure

    def over(self) -> bool:
        return True

    def sending(self) -> bool:
        return False

    def send(self) -> bool:
        return True

    def abandoned_at(self) -> float:
        return time.monotonic()

    def finish(self) -> None:
        self.finished.set()

    def close_client(self) -> None:
        self._client.close()


FAILURES = [BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset"), TimeoutError("timed out")]


@pytest.mark.parametrize("failure", FAILURES, ids=["pipe", "reset", "not-reading"])
def test_a_client_gone_before_its_answer_is_logged_as_such_not_as_an_error(
    caplog: pytest.LogCaptureFixture, failure: OSError
) -> None:
    caplog.set_level(logging.INFO, logger="oncegate.entrypoints")
    connection = _HungUp(failure)
    pool = handler_pool.HandlerPool(1, 1.0)
    try:
        pool.add(connection)
        assert connection.finished.wait(10), "the pool did not close the connection"
    finally:
        pool.close(5)
        connection.close_client()

    assert [(record.levelno, "went away" in record.getMessage()) for record in caplog.records] == [(logging.INFO, True)]


@pytest.mark.parametrize("failure", FAILURES, ids=["pipe", "reset", "not-reading"])
def test_with_a_thread_per_connection_a_client_gone_is_logged_as_such(
    caplog: pytest.LogCaptureFixture, failure: OSError
) -> None:
    caplog.set_level(logging.INFO, logger="oncegate.entrypoints")
    server = make_server(function_app.app, "127.0.0.1", 0, threads=0)
    client, served = socket.socketpair()
    try:
        try:
            raise failure
        except OSError:
            server.handle_error(served, ("127.0.0.1", 1))
        try:
            raise ValueError("a defect")
        except ValueError:
            server.handle_error(served, ("127.0.0.1", 1))
    finally:
        server.server_close()
        client.close()
        served.close()

    assert [record.levelno for record in caplog.records] == [logging.INFO, logging.ERROR]


# A request whose answer is long and costs the app nothing: a 404 under /api/ names the path asked for, 120 KB of
# answer to 60 KB of request (one outside /api/ is answered in 272 bytes, which never backs up).
LONG_ANSWER = b"GET /api/" + b"x" * 60_000 + b" HTTP/1.1\r\nHost: test\r\n\r\n"
# Connections that never read their answers: more than the handler threads (one, in these tests).
NOT_READING = 3


def stop_reading(sock: socket.socket, quiet: float = 1.0) -> int:
    """Send LONG_ANSWER requests on ``sock`` and read none of their answers, until the server stops taking them
    (``quiet`` seconds without progress: its buffers and ours are full); returns how many were sent whole."""
    sock.settimeout(quiet)
    sent = 0
    with contextlib.suppress(TimeoutError):
        while True:
            sock.sendall(LONG_ANSWER)
            sent += 1
    return sent


def small_buffered(address: tuple[str, int], stack: contextlib.ExitStack) -> socket.socket:
    """A connection with small buffers on our side, so that the server's answers back up sooner."""
    sock = stack.enter_context(socket.socket())
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    sock.connect(address)
    return sock


def not_reading(address: tuple[str, int], stack: contextlib.ExitStack, count: int) -> None:
    """``count`` connections, each stopped reading with answers waiting for it (all at once)."""
    sockets = [small_buffered(address, stack) for _ in range(count)]
    senders = [threading.Thread(target=stop_reading, args=(sock,), daemon=True) for sock in sockets]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=60)


def test_clients_that_stop_reading_their_answers_leave_the_handler_thread_to_health_probes() -> None:
    """Before, each handler thread waited in a send to a client that did not read, for up to the idle time (30 s):
    with one thread and 2 such clients (a 3.3 MB list each), a probe was answered after 27 s."""
    with serving(threads=1) as address, contextlib.ExitStack() as stack:
        not_reading(address, stack, NOT_READING)
        answered = [probe(address) for _ in range(PROBES)]

    assert [status for status, _ in answered] == [200] * PROBES, answered
    assert max(seconds for _, seconds in answered) < PROBE_SECONDS


def test_a_client_that_reads_its_answers_late_gets_them_whole_and_its_connection_kept() -> None:
    """The rest of its answers waits for it without a thread; once they are read, the connection takes its next
    request, as after any answer."""
    count = 100  # 12 MB of answers: more than the buffers between the two ends hold
    with serving(threads=1) as address, connected(address) as (sock, reader):
        sock.settimeout(30)
        sender = threading.Thread(target=sock.sendall, args=(LONG_ANSWER * count + HEALTH,), daemon=True)
        sender.start()
        statuses = [read_answer(reader).status for _ in range(count)]
        health = read_answer(reader)
        sender.join(timeout=30)

    assert statuses == [404] * count
    assert health.status == 200


def test_an_answer_its_client_stops_reading_is_abandoned_after_the_idle_time() -> None:
    """No byte of it taken for the idle time (2 s here): the connection closes, with most of it unsent."""
    with serving(threads=1, idle_seconds=2.0) as address, contextlib.ExitStack() as stack:
        sock = small_buffered(address, stack)
        sent = stop_reading(sock, quiet=0.5)
        time.sleep(4.0)  # the client's own pace: it reads nothing for twice the idle time
        sock.settimeout(TIMEOUT)
        received = 0
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                received += len(chunk)

    assert 0 < received < sent * len(LONG_ANSWER)
