"""The flow inventory and the side-effect catalogue: which flows claim, for which scopes, how often.

A person registers a flow (owner, enabled, notes) and sets up a scope (owner, default lease,
retention, description, key pattern); the service records every flow and scope it sees, with counts. The
claim path pays no storage round trip for any of it:

- **Registrations** are read from an in-process snapshot of the (small) flows and scopes tables,
  loaded by one list query of each when it is older than ``ttl`` (30 s unless told otherwise).
  A change (``PUT``) takes effect at once on the instance that handled it and within the TTL
  on every other instance: disabling a flow stops its claims everywhere within 30 s.
- **Counts** accumulate in memory, here (a :class:`Tally` per flow, scope and pair of flows, changed in place
  under one lock), and are merged into the store now and then: see :mod:`oncegate.service.usage`. The lists
  flush this process's counts before they read.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from oncegate.domain import fingerprint_rules
from oncegate.domain.copies import frozen, mutable
from oncegate.domain.key_patterns import declared
from oncegate.domain.keys import normalise_scope
from oncegate.domain.limits import DEFAULT_HORIZON_DAYS, DEFAULT_LEASE_SECONDS, DEFAULT_RETENTION_DAYS
from oncegate.domain.records import (
    Claim,
    ClaimFilter,
    Conflict,
    FingerprintRules,
    Flow,
    FlowRecord,
    Overlap,
    Page,
    ScopeRecord,
    flow_text,
)
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision
from oncegate.errors import ConcurrentUpdate, InvalidRequest, OnceGateError, StoreUnavailable
from oncegate.service.commands import KEEP, Paging
from oncegate.service.usage import Counted, Usage, pair
from oncegate.stores.paging import every_item, page_of
from oncegate.stores.port import ClaimIndex, ClaimListing, ConflictRecords, InventoryRecords

if TYPE_CHECKING:
    from oncegate.service.commands.registry import RegisterFlow, SetScope

logger = logging.getLogger(__name__)

REGISTRY_TTL = timedelta(seconds=30)
FLUSH_INTERVAL = timedelta(seconds=60)
# Open conflicts are read a page at a time, and claims when they are counted again or their rules' versions are.
CONFLICT_PAGE = 1000
RECOUNT_PAGE = 1000
SAVE_ROUNDS = 8
T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


def _page(items: Iterable[T], place: Callable[[T], tuple[str, str]], page: Paging) -> tuple[list[T], str | None]:
    """One page of ``items`` in the order of their place, and the cursor after its last item."""
    return page_of(items, place, top=page.limit, cursor=page.cursor)


@mutable
class Tally:
    """What this process counted of one record since its last flush, which the flush makes a delta of.

    Mutable, so that counting a claim changes a few numbers in place instead of making a record.
    """

    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    counts: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)
    example_claim_id: str | None = None
    # The include pointers of each version of a scope's rules that a payload matched.
    matched: dict[int, set[str]] = field(default_factory=dict)

    def seen(self, at: datetime) -> None:
        # Widened in place, without a call per time: every answer is seen twice (issue 36).
        first, last = self.first_seen_at, self.last_seen_at
        if first is None or at < first:
            self.first_seen_at = at
        if last is None or at > last:
            self.last_seen_at = at


def _tally(tallies: dict[K, Tally], key: K) -> Tally:
    tally = tallies.get(key)
    if tally is None:
        tally = tallies[key] = Tally()
    return tally


# A tally made the delta a flush adds to its stored record: a record of its kind holding only counts and times.


def _flow_delta(flow: Flow, tally: Tally) -> FlowRecord:
    seen = (tally.first_seen_at, tally.last_seen_at)
    return FlowRecord(
        flow,
        first_seen_at=seen[0],
        last_seen_at=seen[1],
        claims=tally.counts["claims"],
        duplicates=tally.counts["duplicates"],
        claims_by_source=dict(tally.sources),
    )


def _scope_delta(scope: str, tally: Tally) -> ScopeRecord:
    by_status = {ClaimStatus(status): count for status, count in tally.counts.items() if count}
    return ScopeRecord(
        scope,
        first_seen_at=tally.first_seen_at,
        last_seen_at=tally.last_seen_at,
        claims_by_status=by_status,
        claims_by_source=dict(tally.sources),
        fingerprint_rules=tuple(
            FingerprintRules(version, matched=tuple(sorted(pointers))) for version, pointers in tally.matched.items()
        ),
    )


def _overlap_delta(flows: tuple[Flow, Flow], tally: Tally) -> Overlap:
    return Overlap(
        flows,
        count=tally.counts["count"],
        first_seen_at=tally.first_seen_at,
        last_seen_at=tally.last_seen_at,
        example_claim_id=tally.example_claim_id,
    )


@frozen
class _Snapshot:
    """The registrations as one instance last read them, and until when they stand (read plus the cache's time)."""

    fresh_until: datetime
    flows: dict[Flow, FlowRecord]
    scopes: dict[str, ScopeRecord]


class InventoryStore(InventoryRecords, ClaimIndex, ClaimListing, ConflictRecords, Protocol):
    """What the inventory uses of the store: its own records, the claim index it flushes, the claims it counts
    again (and whose rules' versions Set scope keeps), open conflicts."""


class Inventory:
    """Registrations read through a short-lived cache, counts merged now and then, and the inventory's lists."""

    def __init__(
        self,
        store: InventoryStore,
        *,
        clock: Callable[[], datetime],
        ttl: timedelta = REGISTRY_TTL,
        flush_interval: timedelta = FLUSH_INTERVAL,
        require_registered: bool = False,
    ) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._require_registered = require_registered
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        # What this process counted since the last flush, taken whole by the next one.
        self._counting = threading.Lock()
        self._flows_counted: dict[Flow, Tally] = {}
        self._scopes_counted: dict[str, Tally] = {}
        self._overlaps_counted: dict[tuple[Flow, Flow], Tally] = {}
        # The claim index (Table Storage) is written at the same interval, off the claim path (issue 16).
        self.usage = Usage(
            store, clock=clock, interval=flush_interval, take=self._take, also=lambda: store.flush_index()
        )

    # -- the claim path: memory only, but for one refresh per TTL -------------------------------

    def _current(self, at: datetime | None = None) -> _Snapshot:
        # A fresh snapshot is read without the lock (a claim reads it three times): the attribute is swapped whole.
        # ``at``: the caller's reading of the same clock, which a claim's intent makes anyway; compared with the end
        # of the snapshot's time, worked out once, not with a difference made on every read (issue 36).
        snapshot = self._snapshot
        if snapshot is not None and (at or self._clock()) < snapshot.fresh_until:
            return snapshot
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None or self._clock() >= snapshot.fresh_until:
                flows = {record.flow: record for record in self._store.list_flows()}
                scopes = {record.scope: record for record in self._store.list_scopes()}
                snapshot = self._snapshot = _Snapshot(self._clock() + self._ttl, flows, scopes)
            return snapshot

    def refusal(self, flow: Flow | None, *, at: datetime | None = None) -> str | None:
        """Why the inventory blocks this flow from claiming; None when it may claim (``at``: now, as the caller read
        the clock)."""
        record = self._current(at).flows.get(flow) if flow else None
        if flow is not None and record is not None and not record.enabled:
            known = "; ".join(
                f"{name}: {value}" for name, value in (("owner", record.owner), ("notes", record.notes)) if value
            )
            why = f" ({known})" if known else ""
            return (
                f"{flow_text(flow, opening=True)} is disabled in the flow inventory{why}: nothing was done, and a "
                "person must enable the flow before it may claim."
            )
        if not self._require_registered or (record is not None and record.registered_at is not None):
            return None
        if flow is None:
            return "Only registered flows may claim, and this request names no flow: nothing was done; send flow."
        return (
            f"{flow_text(flow, opening=True)} is not registered in the flow inventory, and only registered flows may "
            "claim: nothing was done, and a person must register the flow first."
        )

    def lease_seconds(self, scope: str, *, at: datetime | None = None) -> int:
        """The lease of a claim of ``scope`` that does not ask for one (``at``: now, as the caller read the clock)."""
        record = self._current(at).scopes.get(scope)
        return record.lease_seconds if record and record.lease_seconds else DEFAULT_LEASE_SECONDS

    def fingerprint_rules(
        self, scope: str, version: int | None = None, *, fresh: bool = False, at: datetime | None = None
    ) -> FingerprintRules:
        """A version of the scope's fingerprint rules (None: the current one); ``fresh`` reads the scopes again
        (``at``: now, as the caller read the clock).

        A version this instance has not read yet was set on another instance since: read again at once,
        for a claim made under it must be compared under it. A version no longer kept (Set scope keeps
        those a claim still uses, within a bound: :func:`kept_rules`) gives the current rules.
        """
        record = self._scopes_read().get(scope) if fresh else self._current(at).scopes.get(scope)
        found = _rules_version(record, version)
        if found is None:
            record = self._scopes_read().get(scope)
            found = _rules_version(record, version)
        return found or _rules_version(record, None) or FingerprintRules()

    def _scopes_read(self) -> dict[str, ScopeRecord]:
        """The scopes as the store holds them now, put in this instance's snapshot (the flows stay as read)."""
        scopes = {record.scope: record for record in self._store.list_scopes()}
        current = self._current()
        with self._lock:
            if self._snapshot is current:
                self._snapshot = _Snapshot(current.fresh_until, current.flows, scopes)
        return scopes

    def rules_matched(self, scope: str, rules: FingerprintRules, unmatched: tuple[str, ...]) -> None:
        """The include pointers of ``rules`` a payload matched, remembered for the scope once (issue 33): counted in
        memory and merged into the scope row with the counts, so no claim pays a write for it."""
        matched = set(rules.include) - set(unmatched) - set(rules.matched)
        if matched:
            with self._counting:
                _tally(self._scopes_counted, scope).matched.setdefault(rules.version, set()).update(matched)

    def declares(self, scope: str, key: str) -> bool:
        """Whether ``key`` has the shape the owner of ``scope`` declared its keys have (its key pattern)."""
        record = self._current().scopes.get(normalise_scope(scope))
        return record is not None and declared(record.key_pattern, key)

    # -- counting, in memory only: merged into the store by ``usage`` ------------------------------

    def answered(self, scope: str, flow: Flow | None, decision: Decision, at: datetime) -> None:
        """Count a Check and claim answer: the scope and the flow (if named) seen at ``at``, the flow's claims
        counted (and its duplicates), under one take of the lock; flush the counts when the interval is over."""
        with self._counting:
            _tally(self._scopes_counted, scope).seen(at)
            if flow is not None:
                tally = _tally(self._flows_counted, flow)
                tally.seen(at)
                counts = tally.counts
                counts["claims"] += 1
                if decision is Decision.DUPLICATE:  # a Counter reads 0 for a flow with none
                    counts["duplicates"] += 1
        usage = self.usage
        # Judged at the answer's time, the clock its intent read (issue 36): no read of its own.
        if at >= usage.due_at:
            usage.flush_if_due()

    def copy_met(self, holder: Flow, caller: Flow, claim_id: str, at: datetime) -> None:
        """``caller`` met a claim that another flow, ``holder``, made: the two overlap."""
        with self._counting:
            tally = _tally(self._overlaps_counted, pair(holder, caller))
            tally.seen(at)
            tally.counts["count"] += 1
            tally.example_claim_id = tally.example_claim_id or claim_id

    def status_changed(self, scope: str, before: ClaimStatus | None, after: ClaimStatus | None) -> None:
        """A claim of ``scope`` went from ``before`` (None: it is new) to ``after`` (None: it was deleted)."""
        if before is after:
            return
        with self._counting:
            counts = _tally(self._scopes_counted, scope).counts
            if after is not None:
                counts[after.value] += 1
            if before is not None:
                counts[before.value] -= 1

    def source_claimed(self, scope: str, flow: Flow | None, source: str) -> None:
        """A new claim named its source system: counted per scope and per flow (issue 16)."""
        with self._counting:
            _tally(self._scopes_counted, scope).sources[source] += 1
            if flow is not None:
                _tally(self._flows_counted, flow).sources[source] += 1

    def _take(self) -> Counted:
        """Everything counted since the last flush, as deltas, for the flush; counting starts afresh."""
        with self._counting:
            flows, scopes, overlaps = self._flows_counted, self._scopes_counted, self._overlaps_counted
            self._flows_counted, self._scopes_counted, self._overlaps_counted = {}, {}, {}
        return Counted(
            [_flow_delta(flow, tally) for flow, tally in flows.items()],
            [_scope_delta(scope, tally) for scope, tally in scopes.items()],
            [_overlap_delta(pair, tally) for pair, tally in overlaps.items()],
        )

    def flush(self) -> None:
        """Write the counts gathered in memory to the store now; raises ``StoreUnavailable``, keeping them."""
        self.usage.flush()

    def close(self) -> None:
        """Flush the counts; a failure is logged, and those counts are lost."""
        try:
            self.usage.flush()
        except OnceGateError as exc:
            logger.warning("Inventory counts lost at close: %s", exc.message)

    # -- flows -------------------------------------------------------------------------------------

    def list_flows(self, page: Paging) -> tuple[list[FlowRecord], str | None]:
        """One page of the flows, by name and environment, with this process's counts flushed first."""
        self.usage.flush()
        return _page(self._store.list_flows(), lambda r: (r.flow.name, r.flow.environment), page)

    def register_flow(self, request: RegisterFlow) -> FlowRecord:
        """Register the flow, or set the settings the request names, a None among them to its default; the others
        and the counts stay, this process's merged first (the answer shows them)."""
        self.usage.flush()
        flow = request.flow
        named = {name: value for name in FLOW_SETTINGS if (value := getattr(request, name)) is not KEEP}
        if "enabled" in named and named["enabled"] is None:
            named["enabled"] = True  # a flow may claim until someone disables it

        def registered(record: FlowRecord) -> FlowRecord:
            return replace(record, **named, registered_at=record.registered_at or self._clock())

        saved = self._saved(
            self._store.list_flows, self._store.save_flow, lambda r: r.flow == flow, FlowRecord(flow), registered
        )
        logger.info("%s registered: enabled=%s", flow_text(flow, opening=True), saved.enabled)
        self._remember(saved)
        return saved

    def list_overlaps(self, page: Paging) -> tuple[list[Overlap], str | None]:
        """One page of the pairs of flows that met each other's claims, with this process's counts flushed first."""
        self.usage.flush()
        return _page(self._store.list_overlaps(), _overlap_place, page)

    # -- scopes ------------------------------------------------------------------------------------

    def list_scopes(self, page: Paging) -> tuple[list[tuple[ScopeRecord, int]], str | None]:
        """One page of the scopes, by name, each with its open conflicts; this process's counts flushed first."""
        self.usage.flush()
        found, cursor = _page(self._store.list_scopes(), lambda r: (r.scope, ""), page)
        open_conflicts = self._open_conflicts()
        return [(record, open_conflicts[record.scope]) for record in found], cursor

    def set_scope(self, request: SetScope) -> tuple[ScopeRecord, int]:
        """Set the settings the request names, a None among them to its default; the others and the counts stay.

        With the scope, its open conflicts; this process's counts merged first (the answer shows them).
        """
        self.usage.flush()
        scope = normalise_scope(request.scope)
        named = {name: value for name in SETTINGS if (value := getattr(request, name)) is not KEEP}

        def configured(record: ScopeRecord) -> ScopeRecord:
            changed = replace(
                record,
                **named,
                fingerprint_rules=fingerprint_rules.kept_rules(
                    _with_rules(record.fingerprint_rules, request), lambda: self._versions_in_use(scope)
                ),
                registered_at=record.registered_at or self._clock(),
            )
            _require_horizon_over_retention(changed, named)
            return changed

        saved = self._saved(
            self._store.list_scopes, self._store.save_scope, lambda r: r.scope == scope, ScopeRecord(scope), configured
        )
        self._remember(saved)
        return saved, self._open_conflicts()[scope]

    def _versions_in_use(self, scope: str) -> set[int]:
        """The versions of the scope's rules its claims and tombstones were made under: read whole, so only when
        the rules' versions outgrow their bound."""
        found = (ClaimFilter(tuple(ClaimStatus), scope=scope, tombstones=buried) for buried in (False, True))
        return {claim.rules_version for matching in found for claim in every_item(partial(self._claims_page, matching))}

    def _claims_page(self, matching: ClaimFilter, cursor: str | None) -> Page[Claim]:
        return self._store.list_claims(matching, limit=RECOUNT_PAGE, cursor=cursor)

    def recount_scopes(self) -> list[ScopeRecord]:
        """Count every scope's claims by status in the store again and keep those counts (issue 33); the scopes.

        The counts an instance adds up are merged now and then (:mod:`oncegate.service.usage`), so an instance
        stopped without closing (a kill -9, a crash) loses what it had not merged. One read of every claim puts
        them right; claims answered while it reads are counted once more or once less, until the next recount.
        """
        self.usage.flush()
        counted: dict[str, Counter[ClaimStatus]] = {}
        for claim in every_item(partial(self._claims_page, ClaimFilter(list(ClaimStatus)))):
            counted.setdefault(claim.scope, Counter())[claim.status] += 1
        scopes = {record.scope for record in self._store.list_scopes()} | set(counted)
        return [self._counted_again(scope, counted.get(scope, Counter())) for scope in sorted(scopes)]

    def _counted_again(self, scope: str, counted: Counter[ClaimStatus]) -> ScopeRecord:
        counts = {status: count for status, count in counted.items() if count}
        return self._saved(
            self._store.list_scopes,
            self._store.save_scope,
            lambda record: record.scope == scope,
            ScopeRecord(scope),
            lambda record: replace(record, claims_by_status=counts),
        )

    def _open_conflicts(self) -> Counter[str]:
        return Counter(conflict.scope for conflict in open_conflicts(self._store))

    # -- shared --------------------------------------------------------------------------------------

    @staticmethod
    def _saved(
        read: Callable[[], list[T]],
        save: Callable[[T], T],
        this: Callable[[T], bool],
        blank: T,
        change: Callable[[T], T],
    ) -> T:
        """``change`` applied to the stored record (or to ``blank``), re-read when a counts merge got there first."""
        for _ in range(SAVE_ROUNDS):
            stored = next((record for record in read() if this(record)), blank)
            try:
                return save(change(stored))
            except ConcurrentUpdate:
                continue
        raise StoreUnavailable("the inventory kept changing under this request; retry shortly.")

    def _remember(self, record: FlowRecord | ScopeRecord) -> None:
        """Put a registration in this instance's snapshot at once; other instances read it within the TTL."""
        with self._lock:
            current = self._snapshot
            if current is None:
                return
            flows, scopes = dict(current.flows), dict(current.scopes)
            if isinstance(record, FlowRecord):
                flows[record.flow] = record
            else:
                scopes[record.scope] = record
            self._snapshot = _Snapshot(current.fresh_until, flows, scopes)


def open_conflicts(store: ConflictRecords) -> Iterator[Conflict]:
    """Every open conflict, read a page at a time."""
    return every_item(
        lambda cursor: store.list_conflicts(status=ConflictStatus.OPEN, scope=None, limit=CONFLICT_PAGE, cursor=cursor)
    )


# The settings of a flow that Register flow sets by name, each a field of the command and of the flow's record.
FLOW_SETTINGS = ("owner", "enabled", "notes")

# The settings of a scope that Set scope sets by name, each a field of the command and of the scope's record.
SETTINGS = ("owner", "lease_seconds", "retention_days", "horizon_days", "description", "key_pattern")


def _require_horizon_over_retention(record: ScopeRecord, named: dict[str, Any]) -> None:
    """Refuses a horizon set shorter than the retention, whichever of the two the request named."""
    retention = record.retention_days or DEFAULT_RETENTION_DAYS
    if record.horizon_days is None or record.horizon_days >= retention:
        return
    if "horizon_days" in named:
        raise InvalidRequest(
            f"The horizon must be at least the scope's retention ({retention} days): claims are kept that long.",
            target="horizonDays",
        )
    raise InvalidRequest(
        f"The scope's horizon is {record.horizon_days} days, shorter than this retention: send horizonDays too, at "
        f"least {retention}, or null to go back to the default ({DEFAULT_HORIZON_DAYS} days, never shorter than "
        "the retention).",
        target="retentionDays",
    )


def _with_rules(history: tuple[FingerprintRules, ...], request: SetScope) -> tuple[FingerprintRules, ...]:
    """The rules' versions with the parts the request names changed as the next version, unless that changes
    nothing; a request that names no part leaves them as they are."""
    current = history[-1] if history else FingerprintRules()
    include, ignore, preset = request.fingerprint_include, request.fingerprint_ignore, request.fingerprint_preset
    if include is KEEP and ignore is KEEP and preset is KEEP:
        return history
    wanted = fingerprint_rules.rules(
        current.version + 1,
        include=current.include if include is KEEP else include,
        ignore=current.ignore if ignore is KEEP else ignore,
        preset=(fingerprint_rules.FingerprintPreset(current.preset) if current.preset else None)
        if preset is KEEP
        else preset,
    )
    return (*history, wanted) if fingerprint_rules.changed(current, wanted) else history


# A scope without rules (frozen, so one value serves every claim of such a scope, issue 36).
NO_RULES = FingerprintRules()


def _rules_version(record: ScopeRecord | None, version: int | None) -> FingerprintRules | None:
    """That version of the scope's rules (None: the current); None when the record does not hold it (yet)."""
    history = record.fingerprint_rules if record else ()
    if version is None:
        return history[-1] if history else NO_RULES
    if version == 0:
        return NO_RULES
    return next((rules for rules in history if rules.version == version), None)


def _overlap_place(record: Overlap) -> tuple[str, str]:
    first, second = record.flows
    return f"{first.name}\n{first.environment}", f"{second.name}\n{second.environment}"
