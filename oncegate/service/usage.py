"""Usage counts of the flow inventory and the scope catalogue, kept in memory and merged into the store.

Writing a count on every claim would add a storage round trip to each (a new claim costs one),
so each process adds up what it answers — flows seen, claims and duplicates per flow, claims
by status per scope, overlapping pairs of flows — as *deltas*, and :meth:`Usage.flush` merges
them into the store at most once per interval (it runs on the request that finds the interval
over), and on demand: before an inventory list is answered, and at close. A first sighting of
a flow or scope needs no write of its own either: the flush creates the row.

A merge is a read-modify-write of each record, conditioned on the version read (the ETag in
Table Storage) and redone when another instance merged first, so the deltas of every
instance add up. Counts therefore lag by up to one interval, a process that dies loses the
deltas of at most one interval, and a delta whose write landed but whose answer was lost may
be counted twice: these are operating figures, not a ledger.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from oncegate.domain.records import Flow, FlowRecord, Overlap, ScopeRecord
from oncegate.domain.statuses import ClaimStatus
from oncegate.errors import ConcurrentUpdate, OnceGateError, StoreUnavailable
from oncegate.stores.port import InventoryRecords

logger = logging.getLogger(__name__)

# Each lost race means another instance merged its counts, so a handful of rounds always settles.
MERGE_ROUNDS = 8
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


def pair(one: Flow, other: Flow) -> tuple[Flow, Flow]:
    """An unordered pair of flows in its one spelling."""
    first, second = sorted((one, other))
    return first, second


def _earliest(first: datetime | None, second: datetime | None) -> datetime | None:
    return min(first, second) if first and second else first or second


def _latest(first: datetime | None, second: datetime | None) -> datetime | None:
    return max(first, second) if first and second else first or second


# A delta is a record of its kind holding only counts and times; adding one to a stored record (or to
# another delta) adds the counts, widens the seen times and leaves everything else as it was.


def _add_flow(record: FlowRecord, delta: FlowRecord) -> FlowRecord:
    return replace(
        record,
        first_seen_at=_earliest(record.first_seen_at, delta.first_seen_at),
        last_seen_at=_latest(record.last_seen_at, delta.last_seen_at),
        claims=record.claims + delta.claims,
        duplicates=record.duplicates + delta.duplicates,
    )


def _add_scope(record: ScopeRecord, delta: ScopeRecord) -> ScopeRecord:
    by_status = Counter(record.claims_by_status)
    by_status.update(delta.claims_by_status)
    return replace(
        record,
        first_seen_at=_earliest(record.first_seen_at, delta.first_seen_at),
        last_seen_at=_latest(record.last_seen_at, delta.last_seen_at),
        claims_by_status={status: count for status, count in by_status.items() if count},
    )


def _add_overlap(record: Overlap, delta: Overlap) -> Overlap:
    return replace(
        record,
        first_seen_at=_earliest(record.first_seen_at, delta.first_seen_at),
        last_seen_at=_latest(record.last_seen_at, delta.last_seen_at),
        count=record.count + delta.count,
        example_claim_id=record.example_claim_id or delta.example_claim_id,
    )


@dataclass(frozen=True)
class _Kind(Generic[K, R]):
    """One kind of inventory record: how it is keyed, made afresh, added to, listed and saved."""

    key: Callable[[R], K]
    blank: Callable[[K], R]
    add: Callable[[R, R], R]
    list: Callable[[], list[R]]
    save: Callable[[R], R]

    def merge(self, deltas: dict[K, R]) -> None:
        """Add each delta to its stored record, read afresh after a lost race; merged deltas leave ``deltas``."""
        for _ in range(MERGE_ROUNDS):
            if not deltas:
                return
            stored = {self.key(record): record for record in self.list()}
            for key in list(deltas):
                try:
                    self.save(self.add(stored.get(key) or self.blank(key), deltas[key]))
                except ConcurrentUpdate:
                    continue
                del deltas[key]
        raise StoreUnavailable("the inventory kept changing under the merge of its counts; it is retried later.")

    def keep(self, pending: dict[K, R], delta: R) -> None:
        key = self.key(delta)
        waiting = pending.get(key)
        pending[key] = delta if waiting is None else self.add(waiting, delta)


class Usage:
    """Deltas of the inventory's counts in this process, merged into the store by :meth:`flush`."""

    def __init__(self, store: InventoryRecords, *, clock: Callable[[], datetime], interval: timedelta) -> None:
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._flushed_at = clock()
        self._flows: dict[Flow, FlowRecord] = {}
        self._scopes: dict[str, ScopeRecord] = {}
        self._overlaps: dict[tuple[Flow, Flow], Overlap] = {}
        # The store's methods are looked up at each call, as every other caller of the store does.
        self._flow_kind = _Kind(
            lambda r: r.flow, FlowRecord, _add_flow, lambda: store.list_flows(), lambda r: store.save_flow(r)
        )
        self._scope_kind = _Kind(
            lambda r: r.scope, ScopeRecord, _add_scope, lambda: store.list_scopes(), lambda r: store.save_scope(r)
        )
        self._overlap_kind = _Kind(
            lambda r: pair(*r.flows),
            Overlap,
            _add_overlap,
            lambda: store.list_overlaps(),
            lambda r: store.save_overlap(r),
        )

    # -- counting, in memory only --------------------------------------------------------------

    def flow_seen(self, flow: Flow, at: datetime, *, duplicate: bool) -> None:
        """The flow asked Check and claim (and was answered duplicate)."""
        delta = FlowRecord(flow, first_seen_at=at, last_seen_at=at, claims=1, duplicates=int(duplicate))
        with self._lock:
            self._flow_kind.keep(self._flows, delta)

    def scope_seen(self, scope: str, at: datetime) -> None:
        with self._lock:
            self._scope_kind.keep(self._scopes, ScopeRecord(scope, first_seen_at=at, last_seen_at=at))

    def status_changed(self, scope: str, before: ClaimStatus | None, after: ClaimStatus | None) -> None:
        """A claim of ``scope`` went from ``before`` (None: it is new) to ``after`` (None: it was deleted)."""
        if before is after:
            return
        by_status = {status: delta for status, delta in ((after, 1), (before, -1)) if status is not None}
        with self._lock:
            self._scope_kind.keep(self._scopes, ScopeRecord(scope, claims_by_status=by_status))

    def overlap_seen(self, holder: Flow, caller: Flow, claim_id: str, at: datetime) -> None:
        """``caller`` met a claim that ``holder`` made."""
        delta = Overlap(pair(holder, caller), count=1, first_seen_at=at, last_seen_at=at, example_claim_id=claim_id)
        with self._lock:
            self._overlap_kind.keep(self._overlaps, delta)

    # -- merging into the store ----------------------------------------------------------------

    def flush_if_due(self) -> None:
        """Flush when the interval is over; a failure is logged and the deltas wait for the next flush."""
        if self._clock() - self._flushed_at < self._interval or not self._flushing.acquire(blocking=False):
            return
        try:
            self._flush()
        except OnceGateError as exc:
            logger.warning("Inventory counts kept for the next flush: %s", exc.message)
        finally:
            self._flushing.release()

    def flush(self) -> None:
        """Merge every delta into the store now; raises ``StoreUnavailable`` (the deltas are kept)."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            self._flushed_at = self._clock()
            flows, self._flows = self._flows, {}
            scopes, self._scopes = self._scopes, {}
            overlaps, self._overlaps = self._overlaps, {}
        try:
            self._flow_kind.merge(flows)
            self._scope_kind.merge(scopes)
            self._overlap_kind.merge(overlaps)
        finally:
            # What did not reach the store waits for the next flush, added to what was counted meanwhile.
            with self._lock:
                for flow in flows.values():
                    self._flow_kind.keep(self._flows, flow)
                for scope in scopes.values():
                    self._scope_kind.keep(self._scopes, scope)
                for overlap in overlaps.values():
                    self._overlap_kind.keep(self._overlaps, overlap)
