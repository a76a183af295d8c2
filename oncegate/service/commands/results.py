"""What the run holding a claim reports with its claim token, and what a reviewer settles without it."""

from __future__ import annotations

from typing import Any

from oncegate.domain.copies import frozen
from oncegate.domain.statuses import SettledOutcome
from oncegate.domain.transitions import Result


@frozen(kw_only=True)
class RecordResult:
    """The side effect's outcome, from the run holding the claim."""

    claim_token: str
    result: Result


@frozen(kw_only=True)
class Release:
    """The run holding the claim gives it up before any side effect."""

    claim_token: str
    reason: str | None = None


@frozen(kw_only=True)
class Heartbeat:
    """The run holding the claim extends its lease."""

    claim_token: str
    lease_seconds: int | None = None


@frozen(kw_only=True)
class Acknowledge:
    """A reviewer acknowledges a failure that is not retryable: the key stays blocked."""

    reviewer: str
    note: str | None = None


@frozen(kw_only=True)
class Settle(Acknowledge):
    """A reviewer settles an attempt in doubt with the outcome found in the target system."""

    outcome: SettledOutcome
    attempt: int
    target_record_id: str | None = None
    data: Any = None
