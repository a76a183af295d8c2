"""Claims that need a person: nothing in OnceGate settles them by itself.

- **lease_expired**: ``in_progress`` with its lease run out and no result. The run stopped, or works on
  without a heartbeat; the next Check and claim for the key is answered ``reconcile``.
- **unknown**: the outcome was recorded ``unknown`` at least ``unknown_alert`` ago (15 minutes unless told
  otherwise): a flow usually reconciles sooner, so one left longer is waiting for a person.
- **failed_unreviewed**: ``failed`` and not retryable, with no reviewer: the key is blocked until a person
  looks. A reviewer acknowledges it with :meth:`Results.review` (or resolves a conflict on it).

The list reads every ``in_progress``, ``unknown`` and ``failed`` claim through the store's
``list_claims``, a page at a time, and sorts what needs attention oldest first in memory; finished
claims (``succeeded``, ``released``) are not read. In a healthy deployment these are few.

:meth:`Attention.waiting` and :meth:`Attention.open_conflicts` sum up what waits, per scope, with
the oldest: the watch's telemetry (``oncegate.entrypoints.timers``) reports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from oncegate.domain.copies import frozen
from oncegate.domain.keys import normalise_scope
from oncegate.domain.records import Claim, ClaimFilter
from oncegate.domain.statuses import AttentionReason, ClaimStatus
from oncegate.service.commands import ListAttention
from oncegate.service.inventory import open_conflicts
from oncegate.stores.paging import every_item, page_of, utc_text
from oncegate.stores.port import ClaimListing, ConflictRecords

UNKNOWN_ALERT = timedelta(minutes=15)
WATCHED = (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN, ClaimStatus.FAILED)
READ_PAGE = 1000


@frozen
class NeedsAttention:
    """A claim that needs a person, why, and since when."""

    claim: Claim
    why: AttentionReason
    since: datetime

    @property
    def place(self) -> tuple[str, str]:
        """Oldest first: the list's order and its cursor."""
        return utc_text(self.since), self.claim.claim_id


@frozen
class Waiting:
    """How many claims (or conflicts) wait for a person, and since when the oldest of them has."""

    count: int
    oldest: datetime

    def add(self, since: datetime) -> Waiting:
        return replace(self, count=self.count + 1, oldest=min(self.oldest, since))


def counted(waiting: Mapping[tuple[str, AttentionReason], Waiting]) -> dict[str, Counter[AttentionReason]]:
    """The counts of :meth:`Attention.waiting` per scope, by why."""
    counts: dict[str, Counter[AttentionReason]] = {}
    for (scope, why), group in waiting.items():
        counts.setdefault(scope, Counter())[why] = group.count
    return counts


def needs_attention(claim: Claim, now: datetime, unknown_alert: timedelta) -> NeedsAttention | None:
    """Why ``claim`` needs a person at ``now``, or None when it does not."""
    lease = claim.lease_expires_at
    # Expired as Check and claim sees it: a lease ending now is over.
    if claim.status is ClaimStatus.IN_PROGRESS and (lease is None or lease <= now):
        return NeedsAttention(claim, AttentionReason.LEASE_EXPIRED, lease or claim.updated_at)
    if claim.status is ClaimStatus.UNKNOWN and claim.updated_at <= now - unknown_alert:
        return NeedsAttention(claim, AttentionReason.UNKNOWN, claim.updated_at)
    if claim.status is ClaimStatus.FAILED and claim.retryable is False and claim.reviewer is None:
        return NeedsAttention(claim, AttentionReason.FAILED_UNREVIEWED, claim.updated_at)
    return None


class AttentionRecords(ClaimListing, ConflictRecords, Protocol):
    """What the watch reads: the claims it lists, and the open conflicts it counts."""


class Attention:
    """The claims needing attention: a page of them, or their count per scope."""

    def __init__(
        self, store: AttentionRecords, *, clock: Callable[[], datetime], unknown_alert: timedelta = UNKNOWN_ALERT
    ) -> None:
        self._store = store
        self._clock = clock
        self.unknown_alert = unknown_alert

    def page(self, query: ListAttention) -> tuple[list[NeedsAttention], str | None]:
        """One page of the claims needing attention, oldest first, and the cursor of the next page."""
        scope = normalise_scope(query.scope) if query.scope else None
        return page_of(self._all(scope), lambda item: item.place, top=query.limit, cursor=query.cursor)

    def counts(self) -> dict[str, Counter[AttentionReason]]:
        """How many claims of each scope need attention, by why; empty when all is well."""
        return counted(self.waiting())

    def waiting(self) -> dict[tuple[str, AttentionReason], Waiting]:
        """The claims needing attention by scope and why: how many, and the oldest's since; empty when none."""
        groups: dict[tuple[str, AttentionReason], Waiting] = {}
        for item in self._all(None):
            place = (item.claim.scope, item.why)
            group = groups.get(place)
            groups[place] = Waiting(1, item.since) if group is None else group.add(item.since)
        return groups

    def open_conflicts(self) -> dict[str, Waiting]:
        """The open conflicts by scope: how many, and when the oldest opened; empty when none."""
        groups: dict[str, Waiting] = {}
        for conflict in open_conflicts(self._store):
            group, opened = groups.get(conflict.scope), conflict.created_at
            groups[conflict.scope] = Waiting(1, opened) if group is None else group.add(opened)
        return groups

    def _all(self, scope: str | None) -> Iterator[NeedsAttention]:
        now = self._clock()
        claims = every_item(
            lambda cursor: self._store.list_claims(ClaimFilter(WATCHED, scope=scope), limit=READ_PAGE, cursor=cursor)
        )
        for claim in claims:
            item = needs_attention(claim, now, self.unknown_alert)
            if item is not None:
                yield item
