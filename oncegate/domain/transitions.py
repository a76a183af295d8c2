"""The changes a claim goes through after Check and claim, each a pure function beside the decision table.

Each takes the stored claim, what the run (or reviewer) reports and when, and returns the
:class:`Transition`: the exact claim to write and the history line that says why, or the claim
itself when the request changes nothing (the same result sent again). A request that does not fit
the claim's state raises the ``StateConflict`` that names why (``StaleClaim``, ``ClaimBusy``). The result
service only reads, calls, writes and retries.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from oncegate.domain.copies import frozen
from oncegate.domain.records import Claim, Conflict, FingerprintRecord, still_in_doubt
from oncegate.domain.statuses import ClaimStatus, Outcome, Resolution
from oncegate.domain.times import said
from oncegate.errors import ClaimBusy, StaleClaim

# The error text of a release made while reconciling; rows of schema 1 were read back by it (see the stores).
RELEASED_IN_DOUBT = "Released while reconciling:"


@frozen
class Result:
    """What a run reports of its side effect (Record result), in the domain's words."""

    outcome: Outcome
    target_record_id: str | None = None
    data: Any = None
    error: str | None = None
    retryable: bool | None = None

    @property
    def details(self) -> dict[str, Any]:
        """What the history line keeps of it: the fields given (``retryable`` only for a failure)."""
        failed = self.outcome is Outcome.FAILED
        kept = {
            "target_record_id": self.target_record_id,
            "data": self.data,
            "error": self.error,
            "retryable": self.retryable if failed else None,
        }
        return {name: value for name, value in kept.items() if value is not None}


@frozen
class Transition:
    """The claim to write (``record is claim``: nothing to write) and its history line."""

    record: Claim
    outcome: str = ""
    recognised_by: str = ""

    def changes(self, claim: Claim) -> bool:
        return self.record is not claim


def _require_in_progress(claim: Claim, verb: str) -> None:
    if claim.status is not ClaimStatus.IN_PROGRESS:
        raise StaleClaim(
            f"Attempt {claim.attempt} already ended as {claim.status.value}; it can no longer be {verb}.",
            target="claimToken",
        )


def _same_result(claim: Claim, result: Result) -> bool:
    if claim.purged_at is not None:
        # A tombstone keeps the outcome and the target record of the result, not its data or text (issue 31).
        return claim.status.value == result.outcome.value and claim.target_record_id == result.target_record_id
    return (
        claim.status.value == result.outcome.value
        and claim.target_record_id == result.target_record_id
        and claim.data == result.data
        and claim.error == result.error
        and (result.outcome is not Outcome.FAILED or claim.retryable == result.retryable)
    )


def _differing(claim: Claim, result: Result) -> str:
    """The first field of ``result`` (as the wire names it) that is not what the attempt ended with."""
    if claim.status.value != result.outcome.value:
        return "outcome"
    if claim.target_record_id != result.target_record_id:
        return "targetRecordId"
    if claim.data != result.data:
        return "data"
    return "error" if claim.error != result.error else "retryable"


def recorded(claim: Claim, result: Result, now: datetime) -> Transition:
    """Record result: the attempt ends as the run says; the same result again is a no-op. An outcome ``unknown``
    keeps the call in doubt the claim carries (records.still_in_doubt): a later look-up still asks where it went. An
    attempt that ended otherwise keeps no call in doubt (its data.call is the call a look-up found)."""
    if result.outcome is Outcome.UNKNOWN and claim.status in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
        result = replace(result, data=still_in_doubt(result.data, claim))
    if _same_result(claim, result):
        return Transition(claim)
    if claim.status not in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
        field = _differing(claim, result)
        other = f" with another {field}" if field != "outcome" else ""
        raise StaleClaim(
            f"Attempt {claim.attempt} already ended as {claim.status.value}{other}; only the same result may be sent "
            "again.",
            target=field,
        )
    succeeded = result.outcome is Outcome.SUCCEEDED
    failed = result.outcome is Outcome.FAILED
    record = replace(
        claim,
        status=ClaimStatus(result.outcome.value),
        target_record_id=result.target_record_id,
        data=result.data,
        completed_at=now if succeeded else None,
        error=result.error,
        retryable=result.retryable if failed else None,
        # A failure for good waits for a review of its own: an earlier reviewer saw another attempt.
        reviewer=None if failed and not result.retryable else claim.reviewer,
        lease_expires_at=None,
        updated_at=now,
    )
    target = f" (target record {result.target_record_id})" if result.target_record_id else ""
    return Transition(record, result.outcome.value, f"Run {claim.run_id} recorded {result.outcome.value}{target}.")


def released(claim: Claim, reason: str | None, now: datetime) -> Transition:
    """Release: the run gives the claim up before any side effect; released again is a no-op.

    A run that was reconciling did nothing, but the attempt it reconciled may have: the claim stays in
    doubt (``unknown``), so the next run is told reconcile again, never proceed.
    """
    if claim.status is ClaimStatus.RELEASED or claim.released_in_doubt:
        return Transition(claim)
    _require_in_progress(claim, "released")
    why = reason or "no reason given"
    doubted = claim.earlier_attempt
    if doubted is None:
        record = replace(claim, status=ClaimStatus.RELEASED, lease_expires_at=None, updated_at=now)
        return Transition(
            record, record.status.value, f"Run {claim.run_id} released the claim before any side effect: {why}."
        )
    record = replace(
        claim,
        status=ClaimStatus.UNKNOWN,
        lease_expires_at=None,
        updated_at=now,
        error=f"{RELEASED_IN_DOUBT} attempt {doubted.attempt}'s outcome is still unknown.",
        released_in_doubt=True,
    )
    return Transition(
        record,
        record.status.value,
        f"Run {claim.run_id} released the claim while reconciling ({why}); the outcome of attempt "
        f"{doubted.attempt} is still unknown, so the next run reconciles.",
    )


def extended(claim: Claim, lease: timedelta, now: datetime) -> Transition:
    """Heartbeat: the holder's lease runs ``lease`` from now. No history line; ``updated_at`` never goes back,
    or a later answer's time could stand before this change (issue 22)."""
    _require_in_progress(claim, "extended by a heartbeat")
    return Transition(replace(claim, lease_expires_at=now + lease, updated_at=max(now, claim.updated_at)))


@frozen
class Settlement:
    """What a reviewer found in the target system about an attempt whose outcome is in doubt.

    ``attempt`` is the attempt the reviewer looked at: a run that took the claim over since made a
    new one, and the reviewer's finding is not about it. ``outcome`` is succeeded (the target system
    holds ``target_record_id``) or failed (it holds nothing: the next run may do the side effect).
    """

    reviewer: str
    attempt: int
    outcome: Outcome
    now: datetime
    target_record_id: str | None = None
    data: Any = None


@frozen
class Refusal:
    """Why a settlement is refused, saying what to do, and the field it is about.

    ``busy``: a run holds the lease (``claim_busy``); otherwise the attempt is not the one looked at,
    or it ended (``stale_claim``).
    """

    message: str
    target: str
    busy: bool = False


def in_doubt(claim: Claim, now: datetime) -> bool:
    """Whether nobody can say what the claim's attempt did: ``unknown``, or ``in_progress`` past its lease."""
    if claim.status is ClaimStatus.UNKNOWN:
        return True
    lease = claim.lease_expires_at
    return claim.status is ClaimStatus.IN_PROGRESS and (lease is None or lease <= now)


def settle(claim: Claim, settlement: Settlement) -> Claim | Refusal:
    """The claim as the reviewer's settlement leaves it, the very ``claim`` when it already is, or why not.

    Only an attempt in doubt is settled, and only the attempt the reviewer looked at: a live lease may
    still end in the run's own result, and an attempt that ended has its result already.
    """
    if claim.attempt != settlement.attempt:
        return Refusal(
            f"The claim is at attempt {claim.attempt}, not the attempt {settlement.attempt} you looked at: a run "
            "took it over since. Read the claim again; settle only what its current attempt did.",
            "attempt",
        )
    if _settled_so(claim, settlement):
        return claim
    if claim.status is ClaimStatus.IN_PROGRESS and not in_doubt(claim, settlement.now):
        lease = said(claim.lease_expires_at) if claim.lease_expires_at else "(none)"
        return Refusal(
            f"Run {claim.run_id} holds the lease of attempt {claim.attempt} until {lease} and may still record its "
            "result: settle it only once the lease has run out.",
            "claimId",
            busy=True,
        )
    if not in_doubt(claim, settlement.now):
        return Refusal(
            f"Attempt {claim.attempt} already ended as {claim.status.value}: only an attempt in doubt (in_progress "
            "past its lease, or unknown) is settled.",
            "outcome",
        )
    succeeded = settlement.outcome is Outcome.SUCCEEDED
    return replace(
        claim,
        status=ClaimStatus(settlement.outcome.value),
        target_record_id=settlement.target_record_id,
        data=settlement.data,
        completed_at=settlement.now if succeeded else None,
        # Found not done: the next run may do the side effect, as after any failure that may be retried.
        error=None if succeeded else f"Reviewer {settlement.reviewer} found that attempt {claim.attempt} did nothing.",
        retryable=None if succeeded else True,
        reviewer=settlement.reviewer,
        lease_expires_at=None,
        earlier_attempt=None,
        released_in_doubt=False,
        updated_at=settlement.now,
    )


def _settled_so(claim: Claim, settlement: Settlement) -> bool:
    """Whether this reviewer already settled the attempt this way (the answer to the first request was lost)."""
    return (
        claim.reviewer == settlement.reviewer
        and claim.status.value == settlement.outcome.value
        and claim.target_record_id == settlement.target_record_id
        and claim.data == settlement.data
    )


@frozen
class Applied:
    """A reviewer's resolution of a conflict as it changes the claim: the claim and fingerprint record to write
    in one commit, and the history line (its text and details)."""

    record: Claim
    fingerprint: FingerprintRecord
    recognised_by: str
    details: dict[str, Any]


EXPLANATIONS = {
    Resolution.KEEP_ORIGINAL: "the new fingerprint counts as the same intent; its claims are duplicates",
    Resolution.DISMISS: "closed; the next mismatch opens a new conflict",
    Resolution.ACCEPT_NEW: "the new fingerprint is now the claim's version; its next claim may proceed",
}


def _require_settled(claim: Claim) -> None:
    # Accepting a new version while an attempt is running or in doubt would orphan that attempt's result.
    if claim.status in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
        raise ClaimBusy(
            f"Attempt {claim.attempt} of this claim is {claim.status.value}: record its result or reconcile it "
            "before accepting the new version.",
            target="decision",
        )


def resolution_applied(claim: Claim, conflict: Conflict, record: FingerprintRecord | None, now: datetime) -> Applied:
    """The resolved ``conflict``'s decision applied to its claim and to its fingerprint's record."""
    decision = conflict.decision
    assert decision is not None, "only a resolved conflict is applied"
    if decision is Resolution.ACCEPT_NEW:
        _require_settled(claim)
    base = record or FingerprintRecord(claim_id=claim.claim_id, fingerprint=conflict.fingerprint or "")
    kept = replace(
        base,
        resolved=base.resolved + 1,
        alias_generation=claim.generation if decision is Resolution.KEEP_ORIGINAL else base.alias_generation,
        conflict_id=conflict.conflict_id,
        decision=decision,
        reviewer=conflict.reviewer,
        note=conflict.note,
        resolved_at=conflict.resolved_at or now,
    )
    changed = replace(claim, reviewer=conflict.reviewer, updated_at=now)
    details: dict[str, Any] = {"conflict_id": conflict.conflict_id, "note": conflict.note}
    if decision is Resolution.ACCEPT_NEW:
        details["previous"] = {
            "status": claim.status.value,
            "fingerprint": claim.fingerprint,
            "target_record_id": claim.target_record_id,
            "data": claim.data,
        }
        # "Failed, confirmed safe to retry" under the new fingerprint: its next claim proceeds, while the
        # old version, already done, is a mismatch again (a released claim would let any version through).
        # A new generation: fingerprints kept as the old version's intent no longer count.
        changed = replace(
            changed,
            status=ClaimStatus.FAILED,
            retryable=True,
            error=f"Superseded: reviewer {conflict.reviewer} accepted a new version (conflict "
            f"{conflict.conflict_id}); its next claim may proceed.",
            fingerprint=conflict.fingerprint,
            # The conflict keeps no member digests: the new version is compared by its fingerprint until its next
            # attempt keeps its own (issue 33).
            members=None,
            generation=claim.generation + 1,
            lease_expires_at=None,
            target_record_id=None,
            data=None,
            completed_at=None,
            purged_at=None,  # a tombstone whose new version is accepted is a claim again, failed and retryable
        )
    recognised_by = (
        f"Reviewer {conflict.reviewer} resolved conflict {conflict.conflict_id} as {decision.value}: "
        f"{EXPLANATIONS[decision]}."
    )
    return Applied(changed, kept, recognised_by, {name: value for name, value in details.items() if value is not None})
