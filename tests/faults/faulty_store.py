"""A ClaimStore that fails on purpose: the Nth storage call after ``arm()`` raises ``StoreUnavailable``.

Two ways to fail, as a real store fails::

    Fault.BEFORE   the call never reaches the store: nothing was written (a refused connection)
    Fault.AFTER    the call runs to the end, then its answer is lost: the write landed, yet the
                   service sees StoreUnavailable (a timeout after the commit, the nastiest case)

Only calls made while armed are counted, so a test builds its starting state through the same
store without faults, arms it, and runs the one action under test. One fault fires per arming,
unless the arming lasts: then every counted call from the chosen one on fails (an outage) until
``disarm()``. An arming may count the calls of some methods only, the others passing uncounted,
and may give the store's own words for the failure. ``interleave`` fails nothing: it lets another
instance act between one call of the service and the next, as a race in production does.
(``lossy_proxy.LossyProxy`` does the same one level down, to the HTTP requests of Table Storage.)

A bulk call's ``writing_together`` block is counted as one call at its end, its commit: BEFORE
fails the commit, so the block's writes are undone (on SQLite, one transaction: all of them), and
AFTER lets it commit and loses its answer.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Iterator
from enum import StrEnum
from typing import Any, TypeVar

from oncegate.errors import StoreUnavailable
from oncegate.stores.port import ClaimStore

T = TypeVar("T")


class Fault(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class FaultyStore:
    """The ClaimStore port around a real store, failing at a chosen call (``kind`` and ``close`` pass through)."""

    def __init__(self, inner: ClaimStore, fault: Fault) -> None:
        self.inner = inner
        self.kind = inner.kind
        self.fault = fault
        self.calls: list[str] = []
        self.fired: str | None = None
        self._armed = False
        self._at = 0
        self._only: frozenset[str] = frozenset()
        self._lasting = False
        self._message: str | None = None
        self._between: Callable[[], object] | None = None
        # The service calls the store from several threads (the purge deletes in parallel).
        self._lock = threading.Lock()

    def arm(
        self, at: int, *, only: str | Collection[str] = (), lasting: bool = False, message: str | None = None
    ) -> None:
        """Fail the ``at``-th call from now (1-based).

        ``only`` counts the calls of those methods only; ``lasting`` fails every counted call from the
        ``at``-th on, until ``disarm()``; ``message`` is what the store says (by default, which call failed).
        """
        self._set(at, only, lasting=lasting, message=message, between=None)

    def interleave(self, at: int, only: str, action: Callable[[], object]) -> None:
        """Fail nothing: right after the ``at``-th call of ``only`` from now, run ``action``, then answer.

        ``action`` is another instance acting on the same data between this call and the next (its
        calls go to its own store); the service gets this call's answer as the store gave it.
        """
        self._set(at, only, lasting=False, message=None, between=action)

    def _set(
        self,
        at: int,
        only: str | Collection[str],
        *,
        lasting: bool,
        message: str | None,
        between: Callable[[], object] | None,
    ) -> None:
        with self._lock:
            self.calls, self.fired, self._armed, self._at = [], None, True, at
            self._only = frozenset({only} if isinstance(only, str) else only)
            self._lasting, self._message, self._between = lasting, message, between

    def disarm(self) -> list[str]:
        """Stop counting and failing; the calls made while armed, in order."""
        self._armed = False
        return self.calls

    def _call(self, name: str, operation: Callable[[], T]) -> T:
        with self._lock:
            # Decided under the lock, done outside it: the calls of several threads still overlap.
            counted = self._armed and (not self._only or name in self._only)
            if counted:
                self.calls.append(name)
            number = len(self.calls)
            chosen = counted and number >= self._at and (self.fired is None or self._lasting)
            if chosen:
                self.fired = self.fired or name
            between = self._between
        if not chosen:
            return operation()
        if between is not None:
            answer = operation()
            between()
            return answer
        if self.fault is Fault.AFTER:
            # Whatever the store answered (a record, a lost race, not found) never reaches the service.
            with contextlib.suppress(Exception):
                operation()
        raise StoreUnavailable(self._message or f"injected fault {self.fault.value} {name} (call {number})")

    @contextlib.contextmanager
    def writing_together(self) -> Iterator[None]:
        """The store's block, its commit a counted call: failing before it, the block's writes are undone."""
        with self.inner.writing_together():
            yield
            if self.fault is Fault.BEFORE:
                # Raised inside the store's block, which undoes its writes as a commit that failed loses them.
                self._call("writing_together", lambda: None)
        if self.fault is Fault.AFTER:
            self._call("writing_together", lambda: None)

    def __getattr__(self, name: str) -> Any:
        # Every public method of the store is a storage call, so a method the port gains later is swept too.
        attribute = getattr(self.inner, name)
        if name.startswith("_") or name == "close" or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, lambda: attribute(*args, **kwargs))

        return call


def cut_claims_mid_call(store: FaultyStore) -> None:
    """Cut the store's connections during a Check and claim many of new keys, its writes kept and unanswered
    (``Fault.AFTER``): on Table Storage the 21st claim and every one after it; on SQLite, whose new claims the
    call writes together in its one transaction (issue 36), the commit, made and its answer lost."""
    if store.kind == "sqlite":
        store.arm(1, only="writing_together")
    else:
        store.arm(21, only="create_claim", lasting=True)
