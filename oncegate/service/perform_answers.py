"""What Perform once tells the flow (:class:`PerformAnswer`), made of a claim or of Check and claim's answer: nothing
here reads, writes or calls (issue 34)."""

from __future__ import annotations

import math
from dataclasses import field, replace
from datetime import datetime

from oncegate.domain.copies import frozen
from oncegate.domain.decisions import ClaimAnswer, held_reason, lease_left
from oncegate.domain.performing import KeptResponse, PerformDecision
from oncegate.domain.records import CALL_DEADLINE_MARGIN, Claim, EarlierAttempt, call_over_at, marked_by_perform
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.targets import Target, TargetReply
from oncegate.domain.times import said
from oncegate.domain.waiting import Waiting

# When a run told in_progress asks again, where no lease or deadline says it.
ASK_AGAIN_SECONDS = 5


@frozen(kw_only=True)
class PerformAnswer:
    """What Perform once tells the flow: the decision, the response kept, and the claim it stands on.

    ``claim_token`` and ``lease_expires_at`` come with ``reconcile`` when this run holds the claim to look
    the record up itself (no look-up is declared, or it could not tell), as Check and claim's reconcile.
    """

    decision: PerformDecision
    claim_id: str
    status: str
    attempt: int
    reason: str
    warnings: list[str] = field(default_factory=list)
    response: KeptResponse | None = None
    target_record_id: str | None = None
    idempotency_key: str | None = None
    claim_token: str | None = None
    lease_expires_at: datetime | None = None
    retry_after_seconds: int | None = None
    retryable: bool | None = None
    conflict_id: str | None = None
    earlier_attempt: EarlierAttempt | None = None
    looked_up: bool = False
    # What the target answered the call this request made (for telemetry): its status, or why none came.
    target_status: int | None = None
    target_failure: str | None = None


def held(answer: ClaimAnswer, why: str, seconds: int = ASK_AGAIN_SECONDS) -> PerformAnswer:
    return PerformAnswer(
        decision=PerformDecision.IN_PROGRESS,
        claim_id=answer.claim_id,
        status=ClaimStatus.IN_PROGRESS.value,
        attempt=answer.attempt,
        reason=f"{why}: ask again in {seconds} s.",
        warnings=list(answer.warnings),
        retry_after_seconds=seconds,
    )


def seconds_until(moment: datetime, now: datetime) -> int:
    """When to ask again for what is due at ``moment``, in whole seconds, at least one."""
    return max(1, math.ceil((moment - now).total_seconds()))


def answered(answer: ClaimAnswer) -> PerformAnswer:
    """Check and claim's answer as Perform once tells it: the response kept with the claim's result."""
    result = answer.result
    kept = KeptResponse.of_data(result.data) if result is not None else None
    decision = PerformDecision(answer.decision.value)
    told = PerformAnswer(
        decision=decision,
        claim_id=answer.claim_id,
        status=answer.status.value,
        attempt=answer.attempt,
        reason=answer.reason,
        warnings=list(answer.warnings),
        response=kept,
        target_record_id=result.target_record_id if result else None,
        retry_after_seconds=answer.retry_after_seconds,
        conflict_id=answer.conflict_id,
    )
    if decision is PerformDecision.RECONCILE:
        return replace(
            told,
            idempotency_key=answer.idempotency_key,
            claim_token=answer.claim_token,
            lease_expires_at=answer.lease_expires_at,
            earlier_attempt=answer.earlier_attempt,
        )
    return told


def making_the_call(answer: PerformAnswer, seconds: int, *, own: bool = False) -> PerformAnswer:
    """``answer`` as in_progress while another run makes the call, asking again after ``seconds``; ``own``: the run
    asking is the one whose call (an earlier request's) is under way."""
    return replace(
        answer,
        reason=held_reason(seconds, own=True)
        if own
        else f"Another run is making the call now: ask again in {seconds} s.",
        retry_after_seconds=seconds,
    )


def own_call(claim: Claim, waiting: Waiting) -> bool:
    """Whether the call (or look-up) under way on ``claim`` is the waiting run's own, made by an earlier request."""
    return claim.run_id == waiting.run_id and claim.flow == waiting.flow and marked_by_perform(claim.data)


def under_way_in_doubt(answer: PerformAnswer, over: datetime, seconds: int) -> PerformAnswer:
    """``answer`` as in_progress while the call of its attempt is in doubt and may still be under way at the target
    until ``over`` (records.call_over_at), asking again after ``seconds`` (a wait's poll may come before it)."""
    margin = int(CALL_DEADLINE_MARGIN.total_seconds())
    return replace(
        answer,
        reason=(
            f"The call of attempt {answer.attempt} is in doubt and may still be under way at the target until "
            f"{said(over)} (its deadline and {margin} s for the instances' clocks), when a look-up can tell: ask "
            f"again in {seconds} s."
        ),
        retry_after_seconds=seconds,
    )


def polled(claim: Claim, waiting: Waiting, now: datetime) -> PerformAnswer:
    """What a waiting run is told of the claim as it stands, without taking it: what the holder got."""
    base = PerformAnswer(
        decision=PerformDecision.IN_PROGRESS,
        claim_id=claim.claim_id,
        status=claim.status.value,
        attempt=claim.attempt,
        reason="",
        response=KeptResponse.of_data(claim.data),
        target_record_id=claim.target_record_id,
    )
    fingerprints = {keyed for identity in waiting.identities for keyed in identity.fingerprints.values()}
    if claim.fingerprint is not None and fingerprints and claim.fingerprint not in fingerprints:
        return replace(
            base,
            decision=PerformDecision.CONFLICT,
            response=None,
            target_record_id=None,
            reason="The key now stands for other business data: run Perform once again for the conflict.",
        )
    if claim.status is ClaimStatus.SUCCEEDED:
        return replace(
            base, decision=PerformDecision.DUPLICATE, reason=f"Done by run {claim.run_id}: reuse its response."
        )
    if claim.status is ClaimStatus.IN_PROGRESS and claim.lease_expires_at and claim.lease_expires_at > now:
        # As Check and claim's in_progress: the lease left, within a minute (a poll that goes on paces it anew).
        return making_the_call(base, lease_left(claim.lease_expires_at, now), own=own_call(claim, waiting))
    if claim.status in (ClaimStatus.FAILED, ClaimStatus.RELEASED):
        retryable = claim.status is ClaimStatus.RELEASED or bool(claim.retryable)
        then = "run Perform once again to send it" if retryable else "a person must act"
        return replace(
            base,
            decision=PerformDecision.FAILED,
            retryable=retryable,
            reason=f"The holder's call failed ({claim.error or claim.status.value}): {then}.",
        )
    # No claim token to settle it with: when to run Perform once again, which looks the record up after the deadline.
    over = call_over_at(claim)
    seconds = seconds_until(over, now) if over is not None else 1
    return replace(
        base,
        decision=PerformDecision.RECONCILE,
        reason=f"The holder's call ended in doubt: run Perform once again in {seconds} s, which looks it up.",
        retry_after_seconds=seconds,
    )


def reason_for(decision: PerformDecision, target: Target, reply: TargetReply, error: str | None) -> str:
    if decision is PerformDecision.DUPLICATE:
        return f"The earlier call's record was found by a look-up at target {target.name}: reuse it."
    if decision is PerformDecision.PERFORMED:
        return f"Target {target.name} answered {reply.status}: done once."
    if decision is PerformDecision.RECONCILE:
        return f"{error} The next Perform once after the call's deadline looks it up."
    return error or f"Target {target.name} answered {reply.status}."
