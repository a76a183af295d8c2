"""A bounded number of handler threads per worker of ``oncegate serve``, however many connections are open.

The stdlib's threading server gives every connection a thread for its whole life: 8 callers on
kept-alive connections are 8 threads taking turns at one interpreter lock, and on 2 cores they
cost 1.32 times the CPU per claim of one caller (issue 27). Here a fixed pool answers requests,
one at a time per connection, and a connection between two requests (or not yet sending its
first) waits in a selector instead of in a thread.

The threads take turns as leader and followers: the one leading waits on the selector and answers
the first connection with a request in itself, handing the lead to the next free thread, so that
no request waits for one thread to pass it to another. A connection idle longer than the server's
idle time is closed. A thread reads a whole request once its first byte is in, so a client that
stops half-way holds one of the threads until the idle time ends it.
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
# How often the leader looks for connections idle too long, when nothing else wakes it.
SWEEP_SECONDS = 1.0
# The platform's best: epoll (Linux), kqueue (macOS), select() (Windows).
SELECTOR: type[selectors.BaseSelector] = selectors.DefaultSelector
# These see a socket registered while they wait, so that a connection is parked without waking the
# leader; select() and poll() see only those registered before they were called.
SEE_LATE_REGISTRATIONS = ("EpollSelector", "KqueueSelector")


class Connection(Protocol):
    """What the pool asks of a request handler set up on one connection (``server._Handler``)."""

    connection: socket.socket
    close_connection: bool

    def handle_one_request(self) -> None: ...

    def finish(self) -> None: ...

    def buffered(self) -> bool:
        """Whether the next request's first bytes have already been read into the handler's buffer."""
        ...


class HandlerPool:
    """``threads`` threads answering the requests of every connection given to :meth:`add`.

    :meth:`close` lets each thread end the request it is answering, then closes every connection.
    """

    def __init__(self, threads: int, idle_seconds: float, *, name: str = "oncegate-handler") -> None:
        self._idle_seconds = idle_seconds
        self._selector = SELECTOR()
        self._wake_to_register = type(self._selector).__name__ not in SEE_LATE_REGISTRATIONS
        # Guards the selector's registrations and ``_since``: parked by any thread, taken by the leader.
        self._registry = threading.Lock()
        self._lead = threading.Lock()
        self._since: dict[Connection, float] = {}
        self._ready: collections.deque[Connection] = collections.deque()
        self._wakes, self._waker = socket.socketpair()
        for end in (self._wakes, self._waker):
            end.setblocking(False)
        self._selector.register(self._wakes, selectors.EVENT_READ)
        self._closing = False
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{number}", daemon=True) for number in range(1, threads + 1)
        ]
        for thread in self._threads:
            thread.start()

    def add(self, connection: Connection) -> None:
        """Answer ``connection``'s requests, the first as soon as it has arrived and a thread is free."""
        self._park(connection)

    def _run(self) -> None:
        while (connection := self._next()) is not None:
            self._answer(connection)

    def _next(self) -> Connection | None:
        """As leader, wait for a connection with a request in; None once the pool closes."""
        with self._lead:
            while not self._closing:
                if self._ready:
                    return self._ready.popleft()
                for key, _ in self._selector.select(timeout=min(self._idle_seconds, SWEEP_SECONDS)):
                    if key.fileobj is self._wakes:
                        with contextlib.suppress(OSError):
                            self._wakes.recv(4096)
                        continue
                    with self._registry:
                        self._selector.unregister(key.fileobj)
                        self._since.pop(key.data, None)
                    self._ready.append(key.data)
                self._close_expired()
        return None

    def _answer(self, connection: Connection) -> None:
        # Requests already in the buffer (pipelined) raise no event: they are answered here, in turn.
        while True:
            try:
                connection.handle_one_request()
            except Exception:
                logger.exception("a request failed in the local server")
                connection.close_connection = True
            if connection.close_connection or self._closing:
                close(connection)
                return
            if not connection.buffered():
                self._park(connection)
                return

    def _park(self, connection: Connection) -> None:
        """Wait without a thread for the connection's next bytes."""
        with self._registry:
            try:
                if self._closing:
                    raise ValueError("the pool is closing")
                self._selector.register(connection.connection, selectors.EVENT_READ, connection)
            except (OSError, ValueError):  # closed meanwhile, by its client or with the pool
                close(connection)
                return
            self._since[connection] = time.monotonic()
        if self._wake_to_register:
            self._wake()

    def _wake(self) -> None:
        # A full buffer means a wake-up is already waiting to be read.
        with contextlib.suppress(OSError):
            self._waker.send(b"\0")

    def _close_expired(self) -> None:
        now = time.monotonic()
        with self._registry:
            expired = [connection for connection, since in self._since.items() if now - since > self._idle_seconds]
            for connection in expired:
                self._selector.unregister(connection.connection)
                del self._since[connection]
        for connection in expired:
            close(connection)

    def close(self, timeout: float) -> None:
        with self._registry:
            self._closing = True
        self._wake()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        with self._registry:
            left = [*self._since, *self._ready]
            self._since.clear()
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
