"""A ClaimStore that fails on purpose: the Nth storage call after ``arm()`` raises ``StoreUnavailable``.

Two ways to fail, as a real store fails::

    Fault.BEFORE   the call never reaches the store: nothing was written (a refused connection)
    Fault.AFTER    the call runs to the end, then its answer is lost: the write landed, yet the
                   service sees StoreUnavailable (a timeout after the commit, the nastiest case)

Only calls made while armed are counted, so a test builds its starting state through the same
store without faults, arms it, and runs the one action under test. One fault fires per arming.
(``lossy_proxy.LossyProxy`` does the same one level down, to the HTTP requests of Table Storage.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

from oncegate.errors import StoreUnavailable
from oncegate.stores.port import ClaimStore

T = TypeVar("T")


class Fault(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class FaultyStore:
    """The ClaimStore port around a real store, failing at one chosen call (``kind`` and ``close`` pass through)."""

    def __init__(self, inner: ClaimStore, fault: Fault) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.fault = fault
        self.calls: list[str] = []
        self.fired: str | None = None
        self._armed = False
        self._at = 0

    def arm(self, at: int) -> None:
        """Fail the ``at``-th call from now (1-based)."""
        self.calls, self.fired, self._armed, self._at = [], None, True, at

    def disarm(self) -> list[str]:
        """Stop counting and failing; the calls made while armed, in order."""
        self._armed = False
        return self.calls

    def _call(self, name: str, operation: Callable[[], T]) -> T:
        if not self._armed:
            return operation()
        self.calls.append(name)
        if self.fired is not None or self._at != len(self.calls):
            return operation()
        self.fired = name
        if self.fault is Fault.AFTER:
            # Whatever the store answered (a record, a lost race, not found) never reaches the service.
            with contextlib.suppress(Exception):
                operation()
        raise StoreUnavailable(f"injected fault {self.fault.value} {name} (call {len(self.calls)})")

    def __getattr__(self, name: str) -> Any:
        # Every public method of the store is a storage call, so a method the port gains later is swept too.
        attribute = getattr(self.inner, name)
        if name.startswith("_") or name == "close" or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, lambda: attribute(*args, **kwargs))

        return call
