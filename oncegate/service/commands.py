"""What each service action takes: plain values, already checked for shape at the edge.

The HTTP entry points (and the tests' ``Gate``) parse the wire's pydantic requests into these in
:mod:`oncegate.entrypoints.parse`; a service never sees a wire model. Each field is the request's,
with the wire's types made domain ones (a flow reference is a :class:`~oncegate.domain.records.Flow`).

Check and claim has no command of its own: its request is parsed straight into the
:class:`~oncegate.domain.decisions.Intent` the claim service identifies and the decision table reads (issue 32).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from oncegate.domain.fingerprint_rules import FingerprintPreset
from oncegate.domain.records import Flow
from oncegate.domain.statuses import ConflictStatus, Resolution, SettledOutcome
from oncegate.domain.transitions import Result


@dataclass(frozen=True, kw_only=True)
class KeyOf:
    """A business key in its scope: what Look up claim takes, and what Perform once and Report conflict add to."""

    scope: str
    key: str


@dataclass(frozen=True, kw_only=True)
class BusinessData(KeyOf):
    """A business key with its data: the payload (or the caller's own fingerprint) and the source system."""

    payload: Any = None
    fingerprint: str | None = None
    source: str | None = None


@dataclass(frozen=True, kw_only=True)
class PerformOnce(BusinessData):
    """Perform once: the call OnceGate makes itself for this business key, at most once (issue 34).

    ``target`` names a declared target, ``path`` a path under its base URL (never a URL); ``body`` is JSON.
    """

    run_id: str
    target: str
    method: str
    path: str
    headers: dict[str, str]
    body: Any = None
    flow: Flow | None = None
    reference: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReportConflict(BusinessData):
    """A conflict the flow found itself, about the claim of this key."""

    run_id: str
    flow: Flow | None = None
    reason: str
    details: Any = None


@dataclass(frozen=True, kw_only=True)
class RecordResult:
    """The side effect's outcome, from the run holding the claim."""

    claim_token: str
    result: Result


@dataclass(frozen=True, kw_only=True)
class Release:
    """The run holding the claim gives it up before any side effect."""

    claim_token: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Heartbeat:
    """The run holding the claim extends its lease."""

    claim_token: str
    lease_seconds: int | None = None


@dataclass(frozen=True, kw_only=True)
class Acknowledge:
    """A reviewer acknowledges a failure that is not retryable: the key stays blocked."""

    reviewer: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Settle(Acknowledge):
    """A reviewer settles an attempt in doubt with the outcome found in the target system."""

    outcome: SettledOutcome
    attempt: int
    target_record_id: str | None = None
    data: Any = None


@dataclass(frozen=True, kw_only=True)
class ResolveConflict:
    """A reviewer's decision on a conflict."""

    decision: Resolution
    reviewer: str
    note: str | None = None


@dataclass(frozen=True, kw_only=True)
class Paging:
    """Which page of a list: at most ``limit`` items after ``cursor`` (the store's, or None for the first)."""

    limit: int
    cursor: str | None = None


@dataclass(frozen=True, kw_only=True)
class ListConflicts(Paging):
    """The conflicts of one status and scope, or all."""

    status: ConflictStatus | None = None
    scope: str | None = None


@dataclass(frozen=True, kw_only=True)
class ListAttention(Paging):
    """The claims that need a person, of one scope or all."""

    scope: str | None = None


class Unchanged(Enum):
    """A setting that Set scope or Register flow did not name: it stays as it is (issue 31)."""

    KEEP = "keep"


KEEP = Unchanged.KEEP


@dataclass(frozen=True, kw_only=True)
class RegisterFlow:
    """Register a flow, or change its registration.

    A setting left ``KEEP`` stays as the registration holds it; None resets it to its default (no owner, no
    notes, enabled), so that no request resets what an operator set without naming it.
    """

    flow: Flow
    owner: str | Unchanged | None = KEEP
    enabled: bool | Unchanged | None = KEEP
    notes: str | Unchanged | None = KEEP


@dataclass(frozen=True, kw_only=True)
class SetScope:
    """A scope's owner, default lease, retention, horizon, description, key pattern and fingerprint rules.

    A setting left ``KEEP`` stays as the scope holds it; None (no pointers, for the rules' lists) resets it to
    its default. Only what the request names changes, so that no request resets what an operator set.
    """

    scope: str
    owner: str | Unchanged | None = KEEP
    lease_seconds: int | Unchanged | None = KEEP
    retention_days: int | Unchanged | None = KEEP
    horizon_days: int | Unchanged | None = KEEP
    description: str | Unchanged | None = KEEP
    key_pattern: str | Unchanged | None = KEEP
    # The fingerprint rules (issue 25): JSON Pointers, checked for shape at the edge.
    fingerprint_include: tuple[str, ...] | Unchanged = KEEP
    fingerprint_ignore: tuple[str, ...] | Unchanged = KEEP
    fingerprint_preset: FingerprintPreset | Unchanged | None = KEEP
