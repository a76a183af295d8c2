"""Usage counts of the flow inventory and the scope catalogue, merged into the store.

Writing a count on every claim would add a storage round trip to each (a new claim costs one),
so each process adds up what it answers — flows seen, claims and duplicates per flow, claims
by status per scope, overlapping pairs of flows — in memory (the inventory's tallies,
:class:`oncegate.service.inventory.Tally`), and :meth:`Usage.flush` merges them into the store as *deltas*
at most once per interval (it runs on the request that finds the interval over), and on demand: before
an inventory list is answered, and at close. A first sighting of a flow or scope needs no write of its
own either: the flush creates the row.

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
from collections.abc import Callable, Hashable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Generic, NamedTuple, TypeVar

from oncegate.domain.copies import frozen
from oncegate.domain.records import FingerprintRules, Flow, FlowRecord, Overlap, ScopeRecord
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


def _added(counts: Mapping[str, int], delta: Mapping[str, int]) -> dict[str, int]:
    total = Counter(counts)
    total.update(delta)
    return {name: count for name, count in total.items() if count}


def _seen(record: FlowRecord | ScopeRecord | Overlap, delta: FlowRecord | ScopeRecord | Overlap) -> dict[str, Any]:
    """The seen times of ``record`` widened by those of ``delta``."""
    return {
        "first_seen_at": _earliest(record.first_seen_at, delta.first_seen_at),
        "last_seen_at": _latest(record.last_seen_at, delta.last_seen_at),
    }


def _add_flow(record: FlowRecord, delta: FlowRecord) -> FlowRecord:
    return replace(
        record,
        **_seen(record, delta),
        claims=record.claims + delta.claims,
        duplicates=record.duplicates + delta.duplicates,
        claims_by_source=_added(record.claims_by_source, delta.claims_by_source),
    )


def _add_scope(record: ScopeRecord, delta: ScopeRecord) -> ScopeRecord:
    by_status = Counter(record.claims_by_status)
    by_status.update(delta.claims_by_status)
    return replace(
        record,
        **_seen(record, delta),
        claims_by_status={status: count for status, count in by_status.items() if count},
        claims_by_source=_added(record.claims_by_source, delta.claims_by_source),
        fingerprint_rules=_matched(record, delta.fingerprint_rules),
    )


def _matched(record: ScopeRecord, delta: tuple[FingerprintRules, ...]) -> tuple[FingerprintRules, ...]:
    """The record's rules with the include pointers a delta saw matched, version by version (issue 33).

    A delta's rules hold only the pointers matched. Added to another delta (which has no registration), they
    are kept whole; added to a stored scope, a version it no longer keeps is left out.
    """
    seen = {rules.version: rules.matched for rules in delta}
    kept = tuple(
        replace(rules, matched=tuple(sorted({*rules.matched, *seen.pop(rules.version, ())})))
        for rules in record.fingerprint_rules
    )
    if record.registered_at is not None or record.version is not None:
        return kept
    return (*kept, *(FingerprintRules(version, matched=matched) for version, matched in seen.items()))


def _add_overlap(record: Overlap, delta: Overlap) -> Overlap:
    return replace(
        record,
        **_seen(record, delta),
        count=record.count + delta.count,
        example_claim_id=record.example_claim_id or delta.example_claim_id,
    )


class Counted(NamedTuple):
    """What a process counted since its last flush, as deltas: taken whole from the inventory by the flush."""

    flows: list[FlowRecord]
    scopes: list[ScopeRecord]
    overlaps: list[Overlap]


@frozen
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


class _Pending(Generic[K, R]):
    """One kind's deltas a flush could not merge: they wait for the next, added to what is counted meanwhile."""

    def __init__(self, kind: _Kind[K, R]) -> None:
        self.kind = kind
        self._unmerged: dict[K, R] = {}

    def take(self, counted: list[R]) -> dict[K, R]:
        """Every delta waiting, with those ``counted`` since, by key; they leave this object."""
        deltas, self._unmerged = self._unmerged, {}
        for delta in counted:
            self.kind.keep(deltas, delta)
        return deltas

    def put_back(self, deltas: dict[K, R]) -> None:
        """Deltas a flush did not merge: they wait for the next, added to what is counted meanwhile."""
        for delta in deltas.values():
            self.kind.keep(self._unmerged, delta)


class Usage:
    """Merges the counts the inventory took in memory into the store, by :meth:`flush`."""

    def __init__(
        self,
        store: InventoryRecords,
        *,
        clock: Callable[[], datetime],
        interval: timedelta,
        take: Callable[[], Counted],
        also: Callable[[], None],
    ) -> None:
        self._clock = clock
        self._interval = interval
        self._take = take
        self._flushing = threading.Lock()
        # When the interval since the last flush began is over: the inventory finds it over by this time, without a
        # call here nor a difference of two times made per answer (issue 36).
        self.due_at = clock() + interval
        self._also = also
        # The store's methods are looked up at each call, as every other caller of the store does.
        self._flows = _Pending(
            _Kind(
                lambda r: r.flow,
                FlowRecord,
                _add_flow,
                lambda: store.list_flows(),
                lambda r: store.save_flow(r),
            )
        )
        self._scopes = _Pending(
            _Kind(
                lambda r: r.scope,
                ScopeRecord,
                _add_scope,
                lambda: store.list_scopes(),
                lambda r: store.save_scope(r),
            )
        )
        self._overlaps = _Pending(
            _Kind(
                lambda r: pair(*r.flows),
                Overlap,
                _add_overlap,
                lambda: store.list_overlaps(),
                lambda r: store.save_overlap(r),
            )
        )

    def flush_if_due(self) -> None:
        """Flush when the interval is over; a failure is logged and the deltas wait for the next flush."""
        if self._clock() < self.due_at or not self._flushing.acquire(blocking=False):
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
        # Under the flushing lock: the deltas not merged are this object's alone.
        self.due_at = self._clock() + self._interval
        counted = self._take()
        taken: list[tuple[_Pending[Any, Any], dict[Any, Any]]] = [
            (self._flows, self._flows.take(counted.flows)),
            (self._scopes, self._scopes.take(counted.scopes)),
            (self._overlaps, self._overlaps.take(counted.overlaps)),
        ]
        try:
            for pending, deltas in taken:
                pending.kind.merge(deltas)
            self._also()
        finally:
            # What did not reach the store waits for the next flush, added to what was counted meanwhile.
            for pending, deltas in taken:
                pending.put_back(deltas)
