"""A bounded, thread-safe memory: what an instance keeps of its own last writes, least recently written
forgotten first. The claims it wrote last, the time it last stamped on each claim, the ETag of each
history line it last counted in: each is a starting point for the next write, never a fact to answer from.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """At most ``size`` entries; writing one makes it the most recent."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return self._entries.get(key)

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._put(key, value)

    def pop(self, key: K) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def swap(self, key: K, change: Callable[[V | None], V]) -> V:
        """Write ``change`` of the entry (None when there is none) and return it, with no writer in between."""
        with self._lock:
            value = change(self._entries.get(key))
            self._put(key, value)
            return value

    def _put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)
