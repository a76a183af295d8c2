"""The contract as a plain model: what one claim must look like after each action, and what flows hold.

The state machine in ``test_interleavings.py`` drives the real service and this model side by side.
The model is the decision table of the contract written as directly as possible, with none of the
service's machinery (stores, races, events), so that a disagreement points at one of the two.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import JsonValue

from oncegate.domain.statuses import ClaimStatus, Decision, Outcome, Resolution
from oncegate.models import FlowRef, RecordResultRequest
from tests.service.calls import FLOW, FLOW_COPY

STALE = "stale_claim"
BUSY = "claim_busy"
RESOLVED = "conflict_resolved"


@dataclass(frozen=True)
class Run:
    """A flow run; ``instance`` is the service instance (of two) its requests reach."""

    run_id: str
    flow: FlowRef
    instance: int


# Two runs of a flow and one of its copy in a second environment, spread over two service instances.
RUNS = {run.run_id: run for run in (Run("run-1", FLOW, 0), Run("run-2", FLOW, 1), Run("run-3", FLOW_COPY, 0))}


@dataclass(frozen=True)
class Result:
    """A result a flow records: its outcome and what comes with it."""

    outcome: Outcome
    target_record_id: str | None = None
    error: str | None = None
    retryable: bool = True

    def request(self, token: str) -> RecordResultRequest:
        data: JsonValue = {"record": self.target_record_id} if self.target_record_id else None
        return RecordResultRequest(
            claim_token=token,
            outcome=self.outcome,
            target_record_id=self.target_record_id,
            data=data,
            error=self.error,
            retryable=self.retryable,
        )

    def same_as(self, other: Result | None) -> bool:
        """Whether the service must take this as the same result sent again (``retryable`` counts for failed only)."""
        if other is None or (self.outcome, self.target_record_id, self.error) != (
            other.outcome,
            other.target_record_id,
            other.error,
        ):
            return False
        return self.outcome is not Outcome.FAILED or self.retryable == other.retryable


def succeeded(target_record_id: str) -> Result:
    return Result(Outcome.SUCCEEDED, target_record_id=target_record_id)


UNKNOWN = Result(Outcome.UNKNOWN, error="the ERP call timed out")
FAILED_RETRYABLE = Result(Outcome.FAILED, error="the ERP was busy", retryable=True)
FAILED_FINAL = Result(Outcome.FAILED, error="the ERP rejected the order", retryable=False)


class Change(StrEnum):
    """What a write with a claim token should do."""

    APPLIED = "applied"
    REPEATED = "repeated"  # the same request again: a no-op
    STALE = STALE


@dataclass
class Holding:
    """What a run that got ``proceed`` or ``reconcile`` knows: its token, its lease, what it did and sent."""

    run_id: str
    key: str
    token: str
    decision: Decision
    lease_expires_at: datetime
    acted: str | None = None  # the target record the run created, or found when reconciling
    sent: Result | None = None  # the last result recorded with a 200
    released: bool = False
    fenced: bool = False  # the service answered stale_claim: the run stops

    @property
    def done(self) -> bool:
        return self.released or self.fenced or (self.sent is not None and self.sent.outcome is not Outcome.UNKNOWN)


@dataclass
class ExpectedClaim:
    """One business key's claim as the contract says it must be."""

    claim_id: str
    status: ClaimStatus | None = None
    attempt: int = 0
    fingerprint: str | None = None
    aliases: set[str] = field(default_factory=set)  # fingerprints a reviewer kept as the original
    token: str | None = None
    run_id: str | None = None
    granted: Decision | None = None
    lease_expires_at: datetime | None = None
    # The current attempt's recorded result; None while it runs, and after accept_new (failed, safe to retry).
    result: Result | None = None
    released: bool = False  # the current attempt was released
    previous: tuple[int, str] | None = None  # (attempt, run id) a reconcile grant reconciles
    # Versions a reviewer started with accept_new; each may have its own side effect.
    epoch: int = 0
    open_conflicts: dict[str, str] = field(default_factory=dict)  # fingerprint -> conflict id

    def accepts(self, fingerprint: str) -> bool:
        return fingerprint == self.fingerprint or fingerprint in self.aliases

    def decide(self, run_id: str, fingerprint: str, now: datetime) -> Decision:
        """The contract's decision table."""
        if self.status is None:
            return Decision.PROCEED
        if self.status is not ClaimStatus.RELEASED and not self.accepts(fingerprint):
            return Decision.CONFLICT
        if self.status is ClaimStatus.IN_PROGRESS:
            assert self.lease_expires_at is not None
            assert self.granted is not None
            if self.lease_expires_at <= now:
                return Decision.RECONCILE
            # The very same run asking again: its run id (which names its flow here) and its version.
            same_run = run_id == self.run_id and fingerprint == self.fingerprint
            return self.granted if same_run else Decision.IN_PROGRESS
        if self.status is ClaimStatus.UNKNOWN:
            return Decision.RECONCILE
        if self.status is ClaimStatus.SUCCEEDED:
            return Decision.DUPLICATE
        if self.status is ClaimStatus.FAILED and self.result is not None and not self.result.retryable:
            return Decision.BLOCKED
        return Decision.PROCEED

    def grant(self, decision: Decision, token: str, run_id: str, fingerprint: str, lease_expires_at: datetime) -> None:
        """A new attempt for ``run_id``: the earlier holder's token is fenced off from now on."""
        self.previous = (self.attempt, self.run_id or "") if decision is Decision.RECONCILE else None
        self.status, self.attempt, self.granted = ClaimStatus.IN_PROGRESS, self.attempt + 1, decision
        self.token, self.run_id, self.fingerprint = token, run_id, fingerprint
        self.lease_expires_at, self.result, self.released = lease_expires_at, None, False

    def record(self, token: str, result: Result) -> Change:
        if token != self.token:
            return Change.STALE
        if result.same_as(self.result):
            return Change.REPEATED
        if self.status not in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
            return Change.STALE
        self.status, self.result, self.lease_expires_at = ClaimStatus(result.outcome.value), result, None
        self.released = False
        return Change.APPLIED

    def release(self, token: str) -> Change:
        """Give the attempt up; an attempt granted to reconcile leaves the earlier one in doubt (``unknown``).

        The contract says "never: an expired lease silently handed to a new run as proceed": released, the
        claim would tell the next run proceed, though the attempt being reconciled may have done the side effect.
        """
        if token != self.token:
            return Change.STALE
        if self.released:
            return Change.REPEATED
        if self.status is not ClaimStatus.IN_PROGRESS:
            return Change.STALE
        in_doubt = self.granted is Decision.RECONCILE
        self.status = ClaimStatus.UNKNOWN if in_doubt else ClaimStatus.RELEASED
        self.lease_expires_at, self.released = None, True
        return Change.APPLIED

    def heartbeat(self, token: str, now: datetime, lease_seconds: int) -> Change:
        if token != self.token or self.status is not ClaimStatus.IN_PROGRESS:
            return Change.STALE
        self.lease_expires_at = now + timedelta(seconds=lease_seconds)
        return Change.APPLIED

    def resolve(self, fingerprint: str, decision: Resolution) -> None:
        """Apply a reviewer's decision on the conflict opened for ``fingerprint``."""
        del self.open_conflicts[fingerprint]
        if decision is Resolution.KEEP_ORIGINAL:
            self.aliases.add(fingerprint)
        elif decision is Resolution.ACCEPT_NEW:
            # "Failed, safe to retry" under the new version, whose next claim proceeds.
            self.status, self.result, self.lease_expires_at, self.released = ClaimStatus.FAILED, None, None, False
            self.fingerprint, self.aliases, self.epoch = fingerprint, set(), self.epoch + 1


@dataclass
class ExpectedConflict:
    key: str
    fingerprint: str
    decision: Resolution | None = None


class Target:
    """The target system (an ERP): every record the flows created, per key and accepted version."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, int], list[str]] = defaultdict(list)

    def create(self, key: str, epoch: int, run_id: str) -> str:
        record_id = f"ERP-{key}-{epoch}-{len(self.records[key, epoch]) + 1}-{run_id}"
        self.records[key, epoch].append(record_id)
        return record_id

    def find(self, key: str, epoch: int) -> str | None:
        found = self.records[key, epoch]
        return found[0] if found else None
