"""What bounds the memory of the request bodies one worker of ``oncegate serve`` holds while they arrive.

A connection holds its request's body until the body is whole and answered, however slowly it arrives (within
the idle time): at most its route's limit, 64 KiB, or 6.5 MiB for a bulk call. The number of connections is bound
only by the open files a process may have, raised to its hard limit (often a million): 100 clients each sending
most of a bulk body, and holding the rest, took 636 MiB of two workers, and a thousand would have taken 6.5 GB.

So the bodies over a single action's limit share a budget per worker, :data:`LARGE_BODIES_BYTES`: such a request
takes its declared length from it at its head, before its body is read, and gives it back once answered or its
connection closed. One the budget cannot take is answered ``503 server_busy`` with ``Retry-After``; a flow's
retry policy sends it again. Bodies within a single action's limit take nothing from it, so that slow bulk
callers never keep a claim waiting: each of those is bound, as a head is, by its connection.
"""

from __future__ import annotations

import threading

from oncegate.entrypoints.parse import MAX_BODY_BYTES, MAX_BULK_BODY_BYTES

# Ten bulk bodies at their limit, about 65 MiB: more than a nightly import sends at once from a few flows.
LARGE_BODIES_BYTES = 10 * MAX_BULK_BODY_BYTES
# A large body held by a slow client is given back within the idle time (30 s) at most, most much sooner.
BUSY_RETRY_SECONDS = 5


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
