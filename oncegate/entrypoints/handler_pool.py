"""A bounded number of handler threads per worker of ``oncegate serve``, however many connections are open.

The stdlib's threading server gives every connection a thread for its whole life: 8 callers on
kept-alive connections are 8 threads taking turns at one interpreter lock, and on 2 cores they
cost 1.32 times the CPU per claim of one caller (issue 27). Here a fixed pool answers requests,
one at a time per connection, and a connection between two requests (or not yet sending its
first) waits in a selector instead of in a thread.

The threads take turns as leader and followers: the one leading waits on the selector, reads what
each connection sends without waiting for more (``Connection.receive``), and answers the first
connection whose request is whole itself, handing the lead to the next free thread, so that no
request waits for one thread to pass it to another. A connection holds a thread only once its
request is whole (issue 31: reading the rest of a request once its first byte came, 2 clients
sending a byte at a time held both threads, and health probes went unanswered). A step that is
late (a connection idle too long, a request that did not arrive within the idle time) is given to
a thread at its time, to be refused or closed.

A request that holds its thread long does not hold the others behind it: while every thread of the pool answers,
one of them for ``STALL_SECONDS`` already (a Perform once waiting on a slow target, say), a spare thread starts to
lead, up to ``MAX_THREADS`` in all, and a spare ends once another thread is free to lead. Before, 4 Perform once
calls to a target taking 15 s to answer held both threads of both workers, and a health probe waited 14 s (with 8
such calls, 59 s).

Nor does a connection hold a thread while its client is slow to take its answer: what a handler cannot send at
once waits in the selector for the socket to drain, and the leader sends it as it does (``Connection.send``),
then the connection awaits its next request, as after any answer. An answer whose client takes none of it for the
idle time is abandoned and its connection closed (before, each thread waited in a blocking send for a client that
did not read: with one thread and 2 such clients, a health probe waited 27 s).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import selectors
import socket
import threading
import time
from typing import Protocol

logger = logging.getLogger(__name__)

# Handler threads per worker process (``oncegate serve --threads``, ONCEGATE_SERVE_THREADS): measured by
# `make bench` against a thread per connection (docs/performance.md). 0 gives each connection a thread.
DEFAULT_THREADS = 2
PER_CONNECTION = 0
# How often, at most, the leader looks for connections whose step is late.
SWEEP_SECONDS = 1.0
# The platform's best: epoll (Linux), kqueue (macOS), select() (Windows).
SELECTOR: type[selectors.BaseSelector] = selectors.DefaultSelector
# A request answered this long while no thread is free to lead starts a spare thread (see the module's docstring),
# up to this many threads a pool: the most ``--threads`` takes. Claims take milliseconds; a target may take 90 s.
STALL_SECONDS = 0.5
MAX_THREADS = 64
# How often the watch looks: a spare at most this often, so that requests queued behind held ones wait little.
WATCH_SECONDS = 0.1
# These see a socket registered while they wait, so that a connection is parked without waking the
# leader; select() and poll() see only those registered before they were called.
SEE_LATE_REGISTRATIONS = ("EpollSelector", "KqueueSelector")


class Connection(Protocol):
    """What the pool asks of a request handler set up on one connection (``framing._Handler``)."""

    connection: socket.socket

    def receive(self) -> bool:
        """Take what the client has sent, without waiting; whether the next step is due (a whole request, say)."""
        ...

    def due(self) -> bool:
        """Whether the next step is due with what is already in (a request sent behind the one answered)."""
        ...

    def due_at(self) -> float:
        """The ``time.monotonic()`` at which the next step is taken even though it is not due: it is late."""
        ...

    def handle_one_request(self) -> None:
        """Take the next step, due or late: answer a request, refuse a late one, close an idle connection."""
        ...

    def over(self) -> bool:
        """Whether the connection ends now, once the step is taken."""
        ...

    def sending(self) -> bool:
        """Whether part of the step's answer waits for the client to take it."""
        ...

    def send(self) -> bool:
        """Send what the client takes of it now, without waiting; whether all is sent (raises ``OSError``)."""
        ...

    def abandoned_at(self) -> float:
        """The ``time.monotonic()`` at which what is left of the answer is abandoned, none of it taken meanwhile."""
        ...

    def finish(self) -> None: ...


class HandlerPool:
    """``threads`` threads answering the requests of every connection given to :meth:`add`.

    A late step is taken at most ``sweep_seconds`` (or ``SWEEP_SECONDS``, if less) after its time.

    :meth:`close` lets each thread end the request it is answering, then closes every connection.
    """

    def __init__(self, threads: int, sweep_seconds: float, *, name: str = "oncegate-handler") -> None:
        self._sweep_seconds = min(sweep_seconds, SWEEP_SECONDS)
        self._selector = SELECTOR()
        self._wake_to_register = type(self._selector).__name__ not in SEE_LATE_REGISTRATIONS
        # Guards the selector's registrations and ``_parked``: parked by any thread, taken by the leader.
        self._registry = threading.Lock()
        self._lead = threading.Lock()
        self._parked: set[Connection] = set()
        # Connections whose answer waits for its client to take it (registered for writing).
        self._sending: set[Connection] = set()
        self._swept = time.monotonic()
        self._ready: collections.deque[Connection] = collections.deque()
        self._wakes, self._waker = socket.socketpair()
        for end in (self._wakes, self._waker):
            end.setblocking(False)
        self._selector.register(self._wakes, selectors.EVENT_READ)
        self._closing = False
        self._name = name
        # Guards the threads and when each busy one took its request (by thread id): the watch reads them.
        self._counts = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._busy: dict[int, float] = {}
        self._closed = threading.Event()
        with self._counts:
            for _ in range(threads):
                self._start(spare=False)
        threading.Thread(target=self._watch, name=f"{name}-watch", daemon=True).start()

    def _start(self, *, spare: bool) -> None:
        """One more thread (``self._counts`` held)."""
        thread = threading.Thread(
            target=self._run, args=(spare,), name=f"{self._name}-{len(self._threads) + 1}", daemon=True
        )
        thread.start()  # counted once started: one the system refuses is never counted free to lead, nor joined
        self._threads.append(thread)

    def add(self, connection: Connection) -> None:
        """Answer ``connection``'s requests, each as soon as it is whole and a thread is free."""
        self._park(connection)

    def _run(self, spare: bool) -> None:
        me = threading.get_ident()
        while (connection := self._next(spare)) is not None:
            with self._counts:
                self._busy[me] = time.monotonic()
            try:
                self._answer(connection)
            finally:
                with self._counts:
                    del self._busy[me]
        with self._counts:
            if threading.current_thread() in self._threads:
                self._threads.remove(threading.current_thread())

    def _watch(self) -> None:
        """Start a spare thread while every thread answers, one of them for STALL_SECONDS already."""
        while not self._closed.wait(WATCH_SECONDS):
            with self._counts:
                stalled = bool(self._busy) and len(self._busy) == len(self._threads) < MAX_THREADS
                if stalled and min(self._busy.values()) <= time.monotonic() - STALL_SECONDS:
                    logger.info("every handler thread is busy, one for %s s: a spare thread starts", STALL_SECONDS)
                    try:
                        self._start(spare=True)
                    except RuntimeError as exc:  # the process is at its limit of threads: tried again next time
                        logger.warning("a spare handler thread could not start (%s): tried again", exc)

    def _leaves(self) -> bool:
        """Whether this spare thread ends, another being free to lead; counted out at once if so, so that two spares
        free together never both end on the other's account."""
        with self._counts:
            if len(self._threads) - len(self._busy) > 1:
                self._threads.remove(threading.current_thread())
                return True
            return False

    def _next(self, spare: bool = False) -> Connection | None:
        """As leader, wait for a connection whose next step is due or late; None once the pool closes, or when a
        ``spare`` thread would lead while another is free to."""
        if not self._take_lead(spare):
            return None
        try:
            while not self._closing:
                if spare and self._leaves():
                    return None
                if self._ready:
                    return self._ready.popleft()
                for key, _ in self._selector.select(timeout=self._sweep_seconds):
                    if key.fileobj is self._wakes:
                        with contextlib.suppress(OSError):
                            self._wakes.recv(4096)
                    elif key.events == selectors.EVENT_WRITE:
                        self._send(key.data)
                    elif key.data.receive():
                        self._take(key.data)
                self._sweep()
            return None
        finally:
            self._lead.release()

    def _take_lead(self, spare: bool) -> bool:
        """Wait for the lead; a ``spare`` thread gives up waiting (False) once another is free to lead, or the pool
        closes, rather than waiting parked until a request hands the lead on."""
        if not spare:
            self._lead.acquire()
            return True
        while not self._lead.acquire(timeout=self._sweep_seconds):
            if self._closing or self._leaves():
                return False
        return True

    def _answer(self, connection: Connection) -> None:
        # A request already whole behind the one answered (pipelined) raises no event: it is answered here, in turn.
        while True:
            try:
                connection.handle_one_request()
                over = connection.over()
            except (ConnectionError, TimeoutError) as exc:
                # The client hung up, or stopped reading, before its answer was sent: its to know, not a failure.
                logger.info("a client of the local server went away before its answer was sent: %r", exc)
                close(connection)
                return
            except Exception:
                logger.exception("a request failed in the local server")
                close(connection)
                return
            if (over and not connection.sending()) or self._closing:
                close(connection)
                return
            if connection.sending():
                self._park(connection, selectors.EVENT_WRITE)
                return
            if not connection.due():
                self._park(connection)
                return

    def _send(self, connection: Connection) -> None:
        """Send what the client takes of a connection's answer (the leader's only); once all is, what follows it."""
        try:
            if not connection.send():
                return
        except OSError as exc:
            logger.info("a client of the local server went away before its answer was sent: %r", exc)
            self._forget(connection)
            close(connection)
            return
        if connection.over():
            self._forget(connection)
            close(connection)
        elif connection.due():
            self._take(connection)
        else:
            with self._registry:
                self._selector.modify(connection.connection, selectors.EVENT_READ, connection)
                self._sending.discard(connection)
                self._parked.add(connection)

    def _park(self, connection: Connection, events: int = selectors.EVENT_READ) -> None:
        """Gather the connection's next bytes (or send the rest of its answer: EVENT_WRITE) without a thread."""
        with self._registry:
            try:
                if self._closing:
                    raise ValueError("the pool is closing")
                self._selector.register(connection.connection, events, connection)
            except (OSError, ValueError):  # closed meanwhile, by its client or with the pool
                close(connection)
                return
            (self._sending if events == selectors.EVENT_WRITE else self._parked).add(connection)
        if self._wake_to_register:
            self._wake()

    def _take(self, connection: Connection) -> None:
        """Out of the selector and into the queue of steps to take (the leader's only)."""
        self._forget(connection)
        self._ready.append(connection)

    def _forget(self, connection: Connection) -> None:
        """Out of the selector (the leader's only)."""
        with self._registry:
            self._selector.unregister(connection.connection)
            self._parked.discard(connection)
            self._sending.discard(connection)

    def _wake(self) -> None:
        # A full buffer means a wake-up is already waiting to be read.
        with contextlib.suppress(OSError):
            self._waker.send(b"\0")

    def _sweep(self) -> None:
        """Queue the connections whose step is late, looking at most every ``_sweep_seconds``."""
        now = time.monotonic()
        if now - self._swept < self._sweep_seconds:
            return
        self._swept = now
        with self._registry:
            late = [connection for connection in self._parked if connection.due_at() <= now]
            abandoned = [connection for connection in self._sending if connection.abandoned_at() <= now]
        for connection in late:
            self._take(connection)
        for connection in abandoned:
            logger.info("a client of the local server took none of its answer for the idle time: its connection closes")
            self._forget(connection)
            close(connection)

    def close(self, timeout: float) -> None:
        with self._registry:
            self._closing = True
        self._closed.set()
        self._wake()
        deadline = time.monotonic() + timeout
        with self._counts:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
        with self._registry:
            left = [*self._parked, *self._sending, *self._ready]
            self._parked.clear()
            self._sending.clear()
            self._ready.clear()
        for connection in left:
            close(connection)
        self._selector.close()
        self._wakes.close()
        self._waker.close()


def close(connection: Connection) -> None:
    """Flush what is left to send, then shut the connection down (as ``socketserver`` ends a request)."""
    with contextlib.suppress(OSError):
        connection.finish()
    with contextlib.suppress(OSError):
        connection.connection.shutdown(socket.SHUT_WR)
    connection.connection.close()
