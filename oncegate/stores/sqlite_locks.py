"""The locks the SQLite store's writers queue on: one in each process, in the order writers asked, then one on
a file beside the database for every process using it.

SQLite's own file lock is only polled: its busy handler sleeps 1 to 100 ms between tries, which was the tail
of a claim under load. These wake the next writer when released.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from types import ModuleType

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows: no flock, the processes meet at SQLite's own lock
    fcntl = None

# Beside the database, as SQLite's own -wal and -shm: the lock every process's writers queue on.
WRITERS_SUFFIX = "-writers"


class WritersQueue:
    """A lock that writers of this process take in the order they asked for it.

    ``threading.Lock`` lets whichever thread runs next take it, so with many callers one could wait
    behind dozens that came after it: the p99 of a claim with 64 callers halved in first-come order.
    Each waiter waits on a lock of its own, which the holder releases when it hands over.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._waiters: deque[threading.Lock] = deque()
        self._held = False

    def __enter__(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()

    def __exit__(self, *_: object) -> None:
        with self._guard:
            if self._waiters:
                # Handed over: the next waiter holds it now, and it stays held.
                self._waiters.popleft().release()
            else:
                self._held = False


class WritersFile:
    """An exclusive lock on a file beside the database, held by one writer of all processes at a time.

    ``flock`` blocks in the kernel until the holder lets go. Where there is none (Windows), the
    processes fall back to SQLite's own lock.
    """

    def __init__(self, path: Path) -> None:
        self._descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600) if fcntl else None

    def __enter__(self) -> None:
        if fcntl and self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_EX)

    def __exit__(self, *_: object) -> None:
        if fcntl and self._descriptor is not None:
            fcntl.flock(self._descriptor, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None
