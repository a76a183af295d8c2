"""Retention: finished claims are deleted, with their history, once their scope's retention is over.

A claim is deleted when its last change (``UpdatedAt``) is older than its scope's ``retentionDays``
(``PUT /api/scopes``; 90 days when not set) and it is finished:

- ``succeeded`` or ``released``;
- ``failed`` and not retryable, **after review**: a reviewer acknowledged the failure
  (``POST /api/claims/{claimId}/review``) or resolved a conflict on the claim since it failed, so
  its ``reviewer`` is set. An unreviewed one waits in the attention list instead;
- ``failed`` and retryable, once its scope's **horizon** is over (below): its key's next run retries it,
  and one that has not come back by then is not expected to. The failure says the side effect did not
  happen, so a key that comes back after it is gone is answered ``proceed``, as its retry would be (a
  changed payload proceeds too, as a released claim's does, instead of opening a conflict). Kept for
  ever, one whose key never came back blocked retiring its key secret (``keys retire`` without ``--orphan``).

Never an ``in_progress`` or ``unknown`` claim, never a claim with an open conflict.

A succeeded claim leaves a tombstone (issue 26): its row keeps the status, target record, completion,
run, flow and fingerprint, and loses its data, labels and history, so that a late replay of the key
(a run resubmitted months on, a polling trigger turned back on) is still answered ``duplicate``. The
tombstone goes once the scope's horizon is over (``horizonDays``, a year by default, never shorter
than the retention), counted from the claim's last change, by the same purge, after the claims. A
released claim or a failure leaves nothing: nothing was done for the key, and its next
Check and claim is answered ``proceed``, as for a key never seen.

The claims are listed a page at a time (``list_claims``: finished and changed before the shortest
retention of any scope), each is checked against its own scope's retention and the open conflicts
(read again for each page), and the deletable ones are deleted a few at a time in parallel. Each
delete is conditioned on the version listed: a claim that changed in between is kept ("changed").
A purge may stop early, after ``max_pages`` or ``time_budget``, or when the store fails; its report
then carries the cursor to resume from, and a purge resumed there does not examine again what the
first one examined.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from oncegate.domain.limits import (
    DEFAULT_HORIZON_DAYS,
    DEFAULT_PAGE_SIZE,
    DEFAULT_RETENTION_DAYS,
    horizon_days,
)
from oncegate.domain.records import Claim, ClaimFilter, ScopeRecord
from oncegate.domain.safeguard import check_clock
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.store_id import check_store_id
from oncegate.errors import ClockSkewed, ConcurrentUpdate, OnceGateError, StoreUnavailable
from oncegate.service.inventory import Inventory, open_conflicts
from oncegate.stores.port import ClaimListing, ClaimWrites, ConflictRecords, InventoryRecords, StoreMarkRecords

logger = logging.getLogger(__name__)

FINISHED = (ClaimStatus.SUCCEEDED, ClaimStatus.RELEASED, ClaimStatus.FAILED)
# Each claim is its own partition in Table Storage, so deletes in parallel do not contend.
DELETE_WORKERS = 8


class Kept(StrEnum):
    """Why a claim the purge examined was not deleted."""

    WITHIN_RETENTION = "within_retention"
    RETRYABLE = "retryable"  # a retryable failure within its scope's horizon: its key's next run retries it
    UNREVIEWED = "unreviewed"
    OPEN_CONFLICT = "open_conflict"
    CHANGED = "changed"


@dataclass
class PurgeReport:
    """What a purge did: running totals while it goes (``on_progress``), its outcome at the end.

    ``deleted`` counts claims by scope and status: deleted, or that would be deleted in a dry run (a
    succeeded one leaves its tombstone). ``tombstones_deleted`` counts, by scope, the tombstones past
    their horizon deleted, once the claims are done, and ``tombstones_kept`` those past it kept for an open
    conflict (the conflict is about them). ``cursor`` is where a purge resumes (in the
    claims); ``finished`` says the list was read to its end.
    """

    dry_run: bool
    cursor: str | None = None
    finished: bool = False
    pages: int = 0
    examined: int = 0
    deleted: Counter[tuple[str, ClaimStatus]] = field(default_factory=Counter)
    kept: Counter[Kept] = field(default_factory=Counter)
    tombstones_deleted: Counter[str] = field(default_factory=Counter)
    tombstones_kept: Counter[str] = field(default_factory=Counter)
    error: str | None = None

    @property
    def deleted_total(self) -> int:
        return sum(self.deleted.values())

    @property
    def stopped_early(self) -> bool:
        return not self.finished

    def summary(self) -> str:
        """One line: what was examined, deleted and kept."""
        verb = "would delete" if self.dry_run else "deleted"
        by_scope = ", ".join(
            f"{scope} {status.value} {count}" for (scope, status), count in sorted(self.deleted.items())
        )
        kept = ", ".join(f"{reason.value} {count}" for reason, count in sorted(self.kept.items()))
        tombstones = sum(self.tombstones_deleted.values())
        past = f", {verb} {tombstones} tombstone{'s' * (tombstones != 1)} past the horizon" if tombstones else ""
        disputed = sum(self.tombstones_kept.values())
        if disputed:
            past += f", kept {disputed} past it with an open conflict"
        return (
            f"{self.pages} page{'s' * (self.pages != 1)}, {self.examined} claim{'s' * (self.examined != 1)} examined, "
            f"{verb} {self.deleted_total}"
            f"{f' ({by_scope})' if by_scope else ''}, kept {sum(self.kept.values())}"
            f"{f' ({kept})' if kept else ''}"
            f"{past}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "finished": self.finished,
            "pages": self.pages,
            "examined": self.examined,
            "deleted": self.deleted_total,
            "byScope": [
                {"scope": scope, "status": status.value, "claims": count}
                for (scope, status), count in sorted(self.deleted.items())
            ],
            "kept": {reason.value: count for reason, count in sorted(self.kept.items())},
            "tombstonesDeleted": sum(self.tombstones_deleted.values()),
            "tombstonesKept": sum(self.tombstones_kept.values()),
            "cursor": self.cursor,
            "error": self.error,
        }


def gone_at(claim: Claim, record: ScopeRecord | None) -> datetime | None:
    """When retention deletes this row at the earliest (None: never by itself): a tombstone, or the tombstone a
    succeeded claim becomes, and a retryable failure at its scope's horizon; a released claim or a reviewed failure
    at its retention."""
    if not claim.purgeable:
        return None
    record = record or ScopeRecord(claim.scope)
    if claim.status is ClaimStatus.SUCCEEDED or claim.retryable_failure:
        return claim.updated_at + timedelta(days=horizon_days(record))
    return claim.updated_at + timedelta(days=record.retention_days or DEFAULT_RETENTION_DAYS)


def buried(claim: Claim, now: datetime) -> Claim:
    """The tombstone of a succeeded claim: what a late replay of its key is answered with, and nothing else.

    Kept: the status, attempt, target record and completion (the answer's result), the run and flow that did it,
    the fingerprint (changed data is still a conflict) and the grant (the run's token still names it). Gone: the
    result's data, the labels stored in clear (source, reference), who reviewed it and who signed in.
    """
    return replace(
        claim,
        data=None,
        source=None,
        reference=None,
        error=None,
        reviewer=None,
        granted_to=None,
        earlier_attempt=None,
        lease_expires_at=None,
        purged_at=now,
    )


def kept_because(
    claim: Claim, *, now: datetime, retention_days: int, horizon_days: int, open_conflict: bool
) -> Kept | None:
    """Why a listed claim must stay; None when it may be deleted."""
    if claim.retryable_failure:
        if claim.updated_at >= now - timedelta(days=horizon_days):
            return Kept.RETRYABLE
    elif claim.status is ClaimStatus.FAILED and claim.reviewer is None:
        return Kept.UNREVIEWED
    if claim.updated_at >= now - timedelta(days=retention_days):
        return Kept.WITHIN_RETENTION
    if open_conflict:
        return Kept.OPEN_CONFLICT
    return None


class RetentionRecords(ClaimListing, ClaimWrites, ConflictRecords, InventoryRecords, StoreMarkRecords, Protocol):
    """What the purge uses of the store: claims listed and deleted, open conflicts, the scopes' retention, and the
    store's time (to measure its own clock against)."""


class Retention:
    """Deletes finished claims whose scope's retention is over; see the module's docstring."""

    def __init__(
        self,
        store: RetentionRecords,
        inventory: Inventory,
        *,
        clock: Callable[[], datetime],
        wall_clock: Callable[[], datetime] | None = None,
        workers: int = DELETE_WORKERS,
    ) -> None:
        self._store = store
        self._inventory = inventory
        self._clock = clock
        # The machine's clock, measured against the store's: in production ``clock`` is the same (tests move theirs).
        self._wall_clock = wall_clock or (lambda: datetime.now(UTC))
        self._workers = workers

    def _check_clock(self) -> None:
        """Refuse to purge on a clock the store's own time contradicts, as an instance refuses to claim on one, or on
        a store the app refuses (``NotConfigured``).

        A purge deletes what its clock says is old: on a machine running ahead (a wrong time on the operator's
        laptop), claims past no retention and tombstones before their horizon were deleted, and their keys were
        answered proceed again (5 of 5 on Table Storage a year ahead; issue 31). SQLite shares the machine's clock.
        """
        asked_at = self._wall_clock()
        marks = self._store.read_marks()
        # Nor on a store the app refuses: one half imported holds none of its scopes yet (they come last in an
        # export), and tombstones a scope keeps past the default horizon were purged as past it.
        check_store_id(marks, pinned=None, seen=None, fresh="", may_start=True)
        try:
            check_clock(replace(marks, asked_at=asked_at, answered_at=self._wall_clock()))
        except ClockSkewed as skewed:
            direction = "ahead of" if skewed.skew > timedelta(0) else "behind"
            raise ClockSkewed(
                f"This machine's clock is {abs(skewed.skew).total_seconds():.1f} s {direction} the store's: a purge "
                "on it would delete claims and tombstones before their scope's retention or horizon is over, and "
                "their keys would be answered proceed again. Nothing is deleted; check the machine's time "
                "synchronisation.",
                skew=skewed.skew,
            ) from skewed

    def purge(
        self,
        *,
        dry_run: bool = False,
        now: datetime | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        on_progress: Callable[[PurgeReport], None] | None = None,
        resume_cursor: str | None = None,
        max_pages: int | None = None,
        time_budget: timedelta | None = None,
    ) -> PurgeReport:
        """Delete (or with ``dry_run`` only count) the claims whose retention is over, a page at a time.

        ``on_progress`` gets the running report after each page. The purge stops early after
        ``max_pages`` pages or once ``time_budget`` is spent (after at least one page), or when the
        store fails (``error``); the report's ``cursor`` then resumes it. Raises ``InvalidRequest`` for
        a ``resume_cursor`` the store did not hand out, and ``StoreUnavailable`` when the store fails
        before the first page (reading the scopes' retention), ``ClockSkewed`` when this machine's clock is
        further from the store's than an instance may claim with.
        """
        self._check_clock()
        now = now or self._clock()
        retention, _ = self._limits()
        # One list for every scope: from the shortest retention on, each claim is then held to its own.
        changed_before = now - timedelta(days=min([DEFAULT_RETENTION_DAYS, *retention.values()]))
        deadline = None if time_budget is None else time.monotonic() + time_budget.total_seconds()
        report = PurgeReport(dry_run=dry_run, cursor=resume_cursor)
        with ThreadPoolExecutor(self._workers, thread_name_prefix="oncegate-purge") as pool:
            while not report.finished:
                try:
                    self._page(report, pool, now=now, changed_before=changed_before, size=page_size)
                except StoreUnavailable as exc:
                    report.error = exc.message
                    break
                if on_progress is not None:
                    on_progress(report)
                if (max_pages is not None and report.pages >= max_pages) or (
                    deadline is not None and time.monotonic() >= deadline
                ):
                    break
            if report.finished and report.error is None:
                self._tombstones(report, pool, now=now, size=page_size, deadline=deadline)
        if not dry_run:
            self._flush_counts()
        return report

    def _limits(self) -> tuple[dict[str, int], dict[str, int]]:
        """Each scope's retention and horizon in days, read for each page: a scope set while a purge runs (a
        horizon lengthened for keys that come back later than thought) holds from the purge's next page on."""
        scopes = self._store.list_scopes()
        retention = {record.scope: record.retention_days or DEFAULT_RETENTION_DAYS for record in scopes}
        return retention, {record.scope: horizon_days(record) for record in scopes}

    def _page(self, report: PurgeReport, pool: Executor, *, now: datetime, changed_before: datetime, size: int) -> None:
        page = self._store.list_claims(
            ClaimFilter(FINISHED, changed_before=changed_before), limit=size, cursor=report.cursor
        )
        retention, horizon = self._limits() if page.items else ({}, {})
        # Read for each page, so that a conflict opened while a long purge runs still keeps its claim.
        disputed = {conflict.claim_id for conflict in open_conflicts(self._store)} if page.items else set()
        doomed = []
        for claim in page.items:
            kept = kept_because(
                claim,
                now=now,
                retention_days=retention.get(claim.scope, DEFAULT_RETENTION_DAYS),
                horizon_days=horizon.get(claim.scope, DEFAULT_HORIZON_DAYS),
                open_conflict=claim.claim_id in disputed,
            )
            if kept is None:
                doomed.append(claim)
            else:
                report.kept[kept] += 1
        report.examined += len(page.items)
        outcomes = [True] * len(doomed) if report.dry_run else pool.map(lambda c: self._deleted(c, now=now), doomed)
        for claim, deleted in zip(doomed, outcomes, strict=True):
            if deleted:
                report.deleted[claim.scope, claim.status] += 1
            else:
                report.kept[Kept.CHANGED] += 1
        report.pages += 1
        report.cursor = page.cursor
        report.finished = page.cursor is None

    def _deleted(self, claim: Claim, *, now: datetime) -> bool:
        """Delete the claim as listed, a succeeded one down to its tombstone; False when it changed since (it
        is kept, and examined again next time)."""
        tombstone = buried(claim, now) if claim.status is ClaimStatus.SUCCEEDED else None
        try:
            self._store.delete_claim(claim, tombstone=tombstone)
        except ConcurrentUpdate:
            return False
        self._inventory.status_changed(claim.scope, claim.status, None)
        return True

    def _tombstones(
        self,
        report: PurgeReport,
        pool: Executor,
        *,
        now: datetime,
        size: int,
        deadline: float | None,
    ) -> None:
        """Delete the tombstones whose scope's horizon is over, counted from the claim's last change."""
        cursor: str | None = None
        while True:
            try:
                _, horizon = self._limits()
                matching = ClaimFilter(
                    (ClaimStatus.SUCCEEDED,),
                    tombstones=True,
                    changed_before=now - timedelta(days=min([DEFAULT_HORIZON_DAYS, *horizon.values()])),
                )
                page = self._store.list_claims(matching, limit=size, cursor=cursor)
            except StoreUnavailable as exc:
                report.error = exc.message
                return
            over = [
                tombstone
                for tombstone in page.items
                if tombstone.updated_at < now - timedelta(days=horizon.get(tombstone.scope, DEFAULT_HORIZON_DAYS))
            ]
            if over:
                # A tombstone with an open conflict stays, as a claim does: the conflict is about it. A conflict
                # opened after this reading wrote the tombstone first, so its delete fails (``_tombstone_deleted``).
                disputed = {conflict.claim_id for conflict in open_conflicts(self._store)}
                report.tombstones_kept.update(tombstone.scope for tombstone in over if tombstone.claim_id in disputed)
                over = [tombstone for tombstone in over if tombstone.claim_id not in disputed]
            gone = [True] * len(over) if report.dry_run else pool.map(self._tombstone_deleted, over)
            for tombstone, deleted in zip(over, gone, strict=True):
                report.tombstones_deleted[tombstone.scope] += int(deleted)
            cursor = page.cursor
            if cursor is None or (deadline is not None and time.monotonic() >= deadline):
                return

    def _tombstone_deleted(self, tombstone: Claim) -> bool:
        try:
            self._store.delete_claim(tombstone)
        except ConcurrentUpdate:
            return False  # taken over meanwhile (a reviewer accepted new data): a claim again
        return True

    def _flush_counts(self) -> None:
        # The scope catalogue's counts drop with the deleted claims; a failure leaves them for the next flush.
        try:
            self._inventory.flush()
        except OnceGateError as exc:
            logger.warning("Scope counts of the purge kept for the next flush: %s", exc.message)
