"""What bounds the memory one worker of ``oncegate serve`` holds for its connections: their number, and their bodies.

A connection holds what its client sent of its next request until the request is whole and answered, however
slowly it arrives (within the idle time): a head of up to 64 KiB, then a body of up to its route's limit, 64 KiB,
or 6.5 MiB for a bulk call. The number of connections was bound only by the open files a process may have, raised
to its hard limit (often a million): 100 clients each sending most of a bulk body, and holding the rest, took
636 MiB of two workers (a thousand would have taken 6.5 GB), and 2,000 clients each holding a 60 KB head or body,
130 MiB more, without end but the open files.

So a worker holds at most :data:`MAX_CONNECTIONS` connections: one more is answered ``503 server_busy`` with
``Retry-After`` and closed at once, unread. And the bodies over a single action's limit share a budget per worker,
:data:`LARGE_BODIES_BYTES`: such a request takes its declared length from it at its head, before its body is read,
and gives it back once answered or its connection closed; one the budget cannot take is answered ``503
server_busy`` too, and a flow's retry policy sends it again. Bodies within a single action's limit take nothing
from it, so that slow bulk callers never keep a claim waiting. A worker's connections then hold at most about
MAX_CONNECTIONS times 128 KiB (a head or a small body, and the read that ends it), plus the large bodies' budget.
"""

from __future__ import annotations

import threading

from oncegate.entrypoints.parse import MAX_BODY_BYTES, MAX_BULK_BODY_BYTES

# Ten bulk bodies at their limit, about 63 MiB: more than a nightly import sends at once from a few flows.
LARGE_BODIES_BYTES = 10 * MAX_BULK_BODY_BYTES
# A large body held by a slow client is given back within the idle time (30 s) at most, most much sooner.
BUSY_RETRY_SECONDS = 5
# Four times the thousand slow clients the server is tested with: about 512 MiB of heads and small bodies at most.
MAX_CONNECTIONS = 4096


class BodyBudget:
    """The bytes of large bodies one worker's connections may hold at once; its handler threads share it."""

    def __init__(self, size: int = LARGE_BODIES_BYTES) -> None:
        self._left = size
        self._lock = threading.Lock()

    def take(self, length: int) -> int:
        """Take a declared body of ``length`` bytes: what was taken (0 for one within a single action's limit), or
        -1 when the budget cannot take it."""
        if length <= MAX_BODY_BYTES:
            return 0
        with self._lock:
            if length > self._left:
                return -1
            self._left -= length
        return length

    def give(self, taken: int) -> None:
        """Give back what :meth:`take` took."""
        if taken:
            with self._lock:
                self._left += taken


class ConnectionCount:
    """How many connections one worker holds, up to ``most``; its accepting thread and its handler threads share it."""

    def __init__(self, most: int) -> None:
        self._left = most
        self._lock = threading.Lock()

    def open(self) -> bool:
        """Count one more connection; False, counting nothing, when the worker holds ``most`` already."""
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
        return True

    def closed(self) -> None:
        """One connection :meth:`open` counted is closed."""
        with self._lock:
            self._left += 1
