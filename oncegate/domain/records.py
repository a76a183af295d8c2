"""The records the claim service keeps. They know nothing of storage.

``version`` is the store's opaque concurrency token (a row version in SQLite, the ETag in
Table Storage): the service hands it back unchanged on the next conditional update.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from oncegate.domain.statuses import (
    ClaimStatus,
    ConflictSource,
    ConflictStatus,
    EventKind,
    Resolution,
)


@dataclass(frozen=True)
class Flow:
    """The calling flow: a copy of the same flow in another environment is another Flow."""

    name: str
    environment: str


@dataclass(frozen=True)
class AppliedResolution:
    """A conflict resolution already applied to the claim, kept so it is never applied twice."""

    conflict_id: str
    fingerprint: str | None
    decision: Resolution


@dataclass(frozen=True)
class Claim:
    """The processing record of one business key in one scope."""

    claim_id: str
    scope: str
    status: ClaimStatus
    attempt: int
    fingerprint: str | None
    claim_token: str
    run_id: str
    flow: Flow | None
    first_received_at: datetime
    last_attempt_at: datetime
    updated_at: datetime
    lease_expires_at: datetime | None = None
    target_record_id: str | None = None
    result_data: Any = None
    completed_at: datetime | None = None
    error_reason: str | None = None
    retryable: bool | None = None
    reviewer: str | None = None
    resolutions: tuple[AppliedResolution, ...] = ()
    version: str | None = None

    def accepted_fingerprints(self) -> set[str | None]:
        """Fingerprints that count as this claim's business intent.

        A reviewer's ``keep_original`` adds one; ``accept_new`` starts a new version, so
        the aliases of the old version no longer count.
        """
        accepted: set[str | None] = {self.fingerprint}
        for applied in self.resolutions:
            if applied.decision is Resolution.ACCEPT_NEW:
                accepted = {self.fingerprint}
            elif applied.decision is Resolution.KEEP_ORIGINAL:
                accepted.add(applied.fingerprint)
        return accepted

    def resolution_round(self, fingerprint: str | None) -> int:
        """How many conflicts for this fingerprint were resolved: part of the next conflict's id."""
        return sum(1 for applied in self.resolutions if applied.fingerprint == fingerprint)

    def has_applied(self, conflict_id: str) -> bool:
        return any(applied.conflict_id == conflict_id for applied in self.resolutions)


@dataclass(frozen=True)
class HistoryEvent:
    """One line of a claim's history: an answer, a result, a release, a conflict or a resolution.

    ``event_id`` sorts in time order (it starts with the timestamp) and is unique.
    """

    claim_id: str
    event_id: str
    at: datetime
    kind: EventKind
    outcome: str
    attempt: int
    recognised_by: str
    run_id: str | None = None
    flow: Flow | None = None
    fingerprint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Conflict:
    """The same key seen with a different fingerprint, waiting for its owner."""

    conflict_id: str
    claim_id: str
    scope: str
    status: ConflictStatus
    source: ConflictSource
    fingerprint: str | None
    claim_fingerprint: str | None
    reason: str
    run_id: str
    flow: Flow | None
    created_at: datetime
    details: Any = None
    decision: Resolution | None = None
    reviewer: str | None = None
    note: str | None = None
    resolved_at: datetime | None = None
    version: str | None = None


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list and the opaque cursor of the next (None on the last page)."""

    items: list[T]
    cursor: str | None = None
