"""What Check and claim answers, in the domain's words: the decision and what the flow needs to act on it.

Beside the decision table (:mod:`oncegate.domain.decisions`): :func:`answer` says what each decision
carries (the claim token and idempotency key with a grant, the holder with in_progress, the original
result with duplicate) and which warnings the claim met adds. :mod:`oncegate.service.claims` calls it with the
verdict and the claim as written; the entry points render the answer as the wire's ``ClaimResponse``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from oncegate.domain import members
from oncegate.domain.copies import replaced
from oncegate.domain.decisions import Verdict
from oncegate.domain.intent import Intent
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim, EarlierAttempt, Flow
from oncegate.domain.statuses import AnswerStatus, Decision
from oncegate.domain.warnings import ANOTHER_FLOW_COPY, SOURCE_DIFFERS


@dataclass(frozen=True, kw_only=True)
class LeaseHolder:
    """The run holding a live lease: its flow, never its run id (with it, another caller could pass for it)."""

    flow: Flow | None
    lease_expires_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class ClaimAnswer:
    """One Check and claim answer.

    ``claim_token``, ``idempotency_key`` and ``lease_expires_at`` come with a grant (proceed, reconcile) (the
    idempotency key: :func:`idempotency_key`); ``holder`` and
    ``retry_after_seconds`` with in_progress; ``result`` (the claim whose recorded result is the
    original one) with duplicate; ``earlier_attempt`` with reconcile; ``conflict_id`` with conflict.
    """

    decision: Decision
    claim_id: str
    status: AnswerStatus
    attempt: int
    reason: str
    warnings: list[str] = field(default_factory=list)
    claim_token: str | None = None
    idempotency_key: str | None = None
    lease_expires_at: datetime | None = None
    retry_after_seconds: int | None = None
    holder: LeaseHolder | None = None
    result: Claim | None = None
    earlier_attempt: EarlierAttempt | None = None
    conflict_id: str | None = None
    # With conflict: the parts of the payload that changed, by JSON Pointer (the first few), and how many more.
    changed: tuple[str, ...] = ()
    more_changed: int = 0


# Said to the maker instead of the verdict's reason: the fingerprints (keyed digests) mean nothing to a maker, they
# stay in the history's line.
CONFLICT_REASON = (
    "This key was already claimed with different business data (another amount, lines or version). "
    "Nothing was done; the conflict waits for its owner."
)


def idempotency_key(hasher: KeyHasher, claim: Claim) -> str:
    """The idempotency key a run hands the target system for the claim's current attempt (issue 25).

    Many target systems deduplicate on a key of their own (an ``Idempotency-Key`` header, a client request id,
    an external id field). Every ``proceed`` and ``reconcile`` answer carries one, made from the claim (never
    from the business key) with the secret of the claim's id (``hasher``), for the attempt whose key the claim
    keeps (``Claim.idempotency_attempt``, :func:`~oncegate.domain.decisions.key_attempt`; None: its own).
    """
    return hasher.idempotency_key(claim.claim_id, claim.first_received_at, claim.idempotency_attempt or claim.attempt)


def flow_warnings(claim: Claim, flow: Flow | None, decision: Decision) -> list[str]:
    """``another_flow_copy`` when a run of one flow meets the claim another flow holds or did."""
    if decision not in (Decision.DUPLICATE, Decision.IN_PROGRESS) or claim.flow is None or flow is None:
        return []
    return [ANOTHER_FLOW_COPY] if claim.flow != flow else []


def source_warnings(claim: Claim, source: str | None) -> list[str]:
    """``source_differs`` when the request names a source system other than the one the claim keeps."""
    differs = source is not None and claim.source is not None and claim.source != source
    return [SOURCE_DIFFERS] if differs else []


def answer(
    verdict: Verdict, claim: Claim, intent: Intent, token: str | None = None, key: str | None = None
) -> ClaimAnswer:
    """What the run is told of ``verdict`` on ``claim`` (as written): what each decision carries, and its warnings.

    The warnings are those the request itself earned (``intent.warnings``: its key, no flow, no fingerprint),
    then those meeting this claim adds; ``token`` is the claim token of the claim's grant, handed over only with
    a decision that grants, with ``key``, the attempt's idempotency key (:func:`idempotency_key`).
    """
    told = ClaimAnswer(
        decision=verdict.decision,
        claim_id=claim.claim_id,
        status=AnswerStatus(claim.status.value),
        attempt=claim.attempt,
        reason=verdict.reason,
        warnings=[
            *intent.warnings,
            *flow_warnings(claim, intent.flow, verdict.decision),
            *source_warnings(claim, intent.source),
        ],
    )
    if verdict.grants:
        return replaced(
            told,
            claim_token=token,
            idempotency_key=key,
            lease_expires_at=claim.lease_expires_at,
            earlier_attempt=verdict.earlier_attempt,
        )
    if verdict.decision is Decision.IN_PROGRESS:
        holder = LeaseHolder(flow=claim.flow, lease_expires_at=claim.lease_expires_at)
        return replaced(told, retry_after_seconds=verdict.retry_after_seconds, holder=holder)
    if verdict.decision is Decision.DUPLICATE:
        return replaced(told, result=claim)
    return told


def conflict_answer(claim: Claim, intent: Intent, conflict_id: str) -> ClaimAnswer:
    """The answer of a changed fingerprint: the conflict the owner will decide, and nothing done; the parts that
    changed named where the payloads were compared part by part (never their values)."""
    shown, more = members.named(intent.changed or ())
    reason = CONFLICT_REASON
    if shown:
        reason = (
            f"This key was already claimed with different business data: {', '.join(shown)}"
            f"{f' and {more} more parts' if more else ''} changed. Nothing was done; the conflict waits for its owner."
        )
    verdict = Verdict(Decision.CONFLICT, reason, reason)
    told = answer(verdict, claim, intent)
    return replaced(told, conflict_id=conflict_id, changed=shown, more_changed=more)


def unclaimed(verdict: Verdict, intent: Intent) -> ClaimAnswer:
    """The answer when no claim stands for the key (none made, or the one made withdrawn): attempt 0."""
    return ClaimAnswer(
        decision=verdict.decision,
        claim_id=intent.claim_id,
        status=AnswerStatus.NONE,
        attempt=0,
        reason=verdict.reason,
        retry_after_seconds=verdict.retry_after_seconds,
        warnings=list(intent.warnings),
    )
