"""Results of the side effect: record result, release and heartbeat with the claim token, and the review of
a failure that is not retryable or of an attempt in doubt, which a reviewer settles without the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

from oncegate.domain.decisions import Refusal, Settlement, in_doubt, settle
from oncegate.domain.records import Claim
from oncegate.domain.statuses import (
    ClaimStatus,
    EventKind,
    Outcome,
    SettledOutcome,
)
from oncegate.errors import (
    InvalidRequest,
    StateConflict,
    StoreRace,
)
from oncegate.models import (
    ClaimView,
    HeartbeatRequest,
    RecordResultRequest,
    ReleaseRequest,
    ReviewClaimRequest,
)
from oncegate.service.common import (
    RELEASED_IN_DOUBT,
    ClaimsCore,
    settled,
    stale_token_message,
)
from oncegate.service.privacy import warned
from oncegate.service.views import claim_view

logger = logging.getLogger(__name__)


class Results:
    """What the run holding a claim reports, and the review a failure for good waits for."""

    def __init__(self, core: ClaimsCore) -> None:
        self._core = core

    def record_result(self, claim_id: str, request: RecordResultRequest) -> ClaimView:
        """Store the side effect's outcome; the same result sent again is a no-op.

        Refused for personal data, the result is not stored and the run keeps its lease: it may send it again without.
        """
        warnings = self._core.stored_data.check(request, f"claim {claim_id}")
        view = self._with_token(claim_id, request.claim_token, lambda claim, now: self._record(claim, request, now))
        return warned(view, warnings)

    def release(self, claim_id: str, request: ReleaseRequest) -> ClaimView:
        """Give up the claim before any side effect, so the next run may proceed."""
        warnings = self._core.stored_data.check(request, f"claim {claim_id}")
        view = self._with_token(claim_id, request.claim_token, lambda claim, now: self._release(claim, request, now))
        return warned(view, warnings)

    def heartbeat(self, claim_id: str, request: HeartbeatRequest) -> ClaimView:
        """Extend the lease of the run holding the claim."""
        return self._with_token(
            claim_id, request.claim_token, lambda claim, now: self._extend_lease(claim, request, now)
        )

    def _with_token(self, claim_id: str, token: str, change: Callable[[Claim, datetime], Claim]) -> ClaimView:
        self._core.require_safe_store()
        recalled = self._core.recent.recall(claim_id)
        written = self._written_from(recalled, token, change) if recalled else None
        if written is not None:
            return claim_view(written)

        def attempt() -> ClaimView:
            claim = self._core.store.get_claim(claim_id)
            if not self._core.holds(claim, token):
                raise StateConflict("stale_claim", stale_token_message(claim), target="claimToken")
            return claim_view(change(claim, self._core.clock()))

        return settled(attempt)

    def _written_from(self, recalled: Claim, token: str, change: Callable[[Claim, datetime], Claim]) -> Claim | None:
        """The change written in one request from the claim as this instance last wrote it, or None to read first.

        The write is conditioned on the recalled version: if anyone changed the claim since, it fails and
        the change is decided again on a fresh read. A refusal, or a no-op that writes nothing, is never
        answered from a recalled claim, which another instance may have moved on since.
        """
        if not self._core.holds(recalled, token):
            return None
        try:
            written = change(recalled, self._core.clock())
        except (StoreRace, StateConflict):
            return None
        return None if written is recalled else written

    def _record(self, claim: Claim, request: RecordResultRequest, now: datetime) -> Claim:
        now = self._core.decided_at(claim, now)  # its history line stands after the claim it was decided on
        if self._same_result(claim, request):
            return claim
        if claim.status not in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
            raise StateConflict(
                "stale_claim",
                f"Attempt {claim.attempt} already ended as {claim.status.value}; "
                "only the same result may be sent again.",
                target="outcome",
            )
        succeeded = request.outcome is Outcome.SUCCEEDED
        failed = request.outcome is Outcome.FAILED
        recorded = replace(
            claim,
            status=ClaimStatus(request.outcome.value),
            target_record_id=request.target_record_id,
            data=request.data,
            completed_at=now if succeeded else None,
            error=request.error,
            retryable=request.retryable if failed else None,
            # A failure for good waits for a review of its own: an earlier reviewer saw another attempt.
            reviewer=None if failed and not request.retryable else claim.reviewer,
            lease_expires_at=None,
            updated_at=now,
        )
        details = {
            "targetRecordId": request.target_record_id,
            "data": request.data,
            "error": request.error,
            "retryable": request.retryable if failed else None,
        }
        target = f" (target record {request.target_record_id})" if request.target_record_id else ""
        event = self._core.event(
            claim,
            EventKind.RESULT,
            request.outcome.value,
            f"Run {claim.run_id} recorded {request.outcome.value}{target}.",
            at=now,
            run_id=claim.run_id,
            flow=claim.flow,
            fingerprint=claim.fingerprint,
            details={name: value for name, value in details.items() if value is not None},
        )
        return self._core.counted(claim, self._core.store.update_claim(recorded, event))

    @staticmethod
    def _same_result(claim: Claim, request: RecordResultRequest) -> bool:
        return (
            claim.status.value == request.outcome.value
            and claim.target_record_id == request.target_record_id
            and claim.data == request.data
            and claim.error == request.error
            and (request.outcome is not Outcome.FAILED or claim.retryable == request.retryable)
        )

    def _release(self, claim: Claim, request: ReleaseRequest, now: datetime) -> Claim:
        now = self._core.decided_at(claim, now)
        if claim.status is ClaimStatus.RELEASED or claim.released_in_doubt:
            return claim
        self._require_in_progress(claim, "released")
        reason = request.reason or "no reason given"
        doubted = claim.earlier_attempt
        if doubted is None:
            released = replace(claim, status=ClaimStatus.RELEASED, lease_expires_at=None, updated_at=now)
            recognised = f"Run {claim.run_id} released the claim before any side effect: {reason}."
        else:
            # This run did nothing, but the attempt it was reconciling may have: the doubt stays, so the
            # next run is told reconcile again, never proceed.
            released = replace(
                claim,
                status=ClaimStatus.UNKNOWN,
                lease_expires_at=None,
                updated_at=now,
                error=f"{RELEASED_IN_DOUBT} attempt {doubted.attempt}'s outcome is still unknown.",
                released_in_doubt=True,
            )
            recognised = (
                f"Run {claim.run_id} released the claim while reconciling ({reason}); the outcome of attempt "
                f"{doubted.attempt} is still unknown, so the next run reconciles."
            )
        event = self._core.event(
            claim,
            EventKind.RELEASE,
            released.status.value,
            recognised,
            at=now,
            run_id=claim.run_id,
            flow=claim.flow,
            details={"reason": request.reason} if request.reason else {},
        )
        return self._core.counted(claim, self._core.store.update_claim(released, event))

    def _extend_lease(self, claim: Claim, request: HeartbeatRequest, now: datetime) -> Claim:
        self._require_in_progress(claim, "extended by a heartbeat")
        lease = timedelta(seconds=request.lease_seconds or self._core.inventory.lease_seconds(claim.scope))
        # No history line, so no stamp; but UpdatedAt never goes back, or a later answer's stamp could (issue 22).
        extended = replace(claim, lease_expires_at=now + lease, updated_at=max(now, claim.updated_at))
        stored = self._core.store.update_claim(extended, None)
        self._core.recent.remember(stored)
        return stored

    @staticmethod
    def _require_in_progress(claim: Claim, verb: str) -> None:
        if claim.status is not ClaimStatus.IN_PROGRESS:
            raise StateConflict(
                "stale_claim",
                f"Attempt {claim.attempt} already ended as {claim.status.value}; it can no longer be {verb}.",
                target="claimToken",
            )

    # -- Reviewing a failure, or settling an attempt in doubt ---------------------------------

    def review(self, claim_id: str, request: ReviewClaimRequest) -> ClaimView:
        """Acknowledge a failure that is not retryable, or, with an outcome, settle an attempt in doubt.

        Acknowledged, the key stays blocked and the claim leaves the attention list. Settled (the
        attempt is ``unknown``, or ``in_progress`` past its lease), the claim takes the outcome the
        reviewer found in the target system, without the run's claim token: succeeded with its record,
        or failed and retryable. Either way it may be deleted once its scope's retention is over. The
        same review by the same reviewer again is a no-op.
        """
        if request.reviewer is None:
            raise InvalidRequest("reviewer is required: who reviewed the claim.", target="reviewer")
        settling = request.outcome is not None
        _check_review_fields(request)
        warnings = self._core.stored_data.check(request, f"claim {claim_id}")
        self._core.require_safe_store()

        def attempt() -> ClaimView:
            claim = self._core.store.get_claim(claim_id)
            return claim_view(self._settle(claim, request) if settling else self._acknowledge(claim, request))

        return warned(settled(attempt), warnings)

    def _acknowledge(self, claim: Claim, request: ReviewClaimRequest) -> Claim:
        if claim.status is not ClaimStatus.FAILED or claim.retryable is not False:
            state = "a retryable failure" if claim.status is ClaimStatus.FAILED else claim.status.value
            doubt = (
                " An attempt in doubt is settled instead: send the outcome found in the target system and the attempt."
                if in_doubt(claim, self._core.clock())
                else ""
            )
            raise StateConflict(
                "claim_not_blocked",
                f"Attempt {claim.attempt} of this claim is {state}: only a failure that is not retryable "
                f"is acknowledged.{doubt}",
                target="claimId",
            )
        if claim.reviewer == request.reviewer:
            return claim
        now = self._core.decided_at(claim, self._core.clock())
        event = self._core.event(
            claim,
            EventKind.REVIEW,
            "acknowledged",
            f"Reviewer {request.reviewer} acknowledged the failure of attempt {claim.attempt}: the key stays blocked.",
            at=now,
            details={"note": request.note} if request.note else {},
        )
        logger.info("Claim %s reviewed by %s", claim.claim_id, request.reviewer)
        stored = self._core.store.update_claim(replace(claim, reviewer=request.reviewer, updated_at=now), event)
        self._core.recent.remember(stored)
        return stored

    def _settle(self, claim: Claim, request: ReviewClaimRequest) -> Claim:
        # _check_review_fields and review() made sure of these.
        assert request.reviewer is not None
        assert request.outcome is not None
        assert request.attempt is not None
        settlement = Settlement(
            reviewer=request.reviewer,
            attempt=request.attempt,
            outcome=Outcome(request.outcome.value),
            now=self._core.decided_at(claim, self._core.clock()),
            target_record_id=request.target_record_id,
            data=request.data,
        )
        # A row of an earlier release keeps its reconciling state in the history: read it, as the settled row drops it.
        claim = self._core.explicit(claim)
        decided = settle(claim, settlement)
        if isinstance(decided, Refusal):
            if decided.busy:
                raise StateConflict("claim_busy", decided.message, target=decided.target)
            raise StateConflict("stale_claim", decided.message, target=decided.target)
        if decided is claim:
            return claim
        found = f"holds target record {request.target_record_id}" if request.target_record_id else "holds nothing"
        details = {
            "reviewer": request.reviewer,
            "previousStatus": claim.status.value,
            "targetRecordId": request.target_record_id,
            "data": request.data,
            "note": request.note,
        }
        event = self._core.event(
            claim,
            EventKind.REVIEW,
            settlement.outcome.value,
            f"Reviewer {request.reviewer} settled attempt {claim.attempt} ({claim.status.value}) as "
            f"{settlement.outcome.value}: the target system {found}.",
            at=settlement.now,
            run_id=claim.run_id,
            flow=claim.flow,
            fingerprint=claim.fingerprint,
            details={name: value for name, value in details.items() if value is not None},
        )
        logger.info("Claim %s settled as %s by %s", claim.claim_id, settlement.outcome.value, request.reviewer)
        return self._core.counted(claim, self._core.store.update_claim(decided, event))


def _check_review_fields(request: ReviewClaimRequest) -> None:
    """The settlement's fields go together: an outcome needs the attempt, and a record only comes with success."""
    if request.outcome is None:
        given = [name for name in ("attempt", "target_record_id", "data") if getattr(request, name) is not None]
        if given:
            field = ReviewClaimRequest.model_fields[given[0]].alias or given[0]
            raise InvalidRequest(f"{field} settles an attempt in doubt: send it with outcome.", target=field)
        return
    if request.attempt is None:
        raise InvalidRequest(
            "attempt is required with outcome: the claim's attempt you looked up in the target system.",
            target="attempt",
        )
    if request.outcome is SettledOutcome.FAILED and (request.target_record_id or request.data is not None):
        target = "targetRecordId" if request.target_record_id else "data"
        raise InvalidRequest(f"{target} comes with outcome succeeded: a failed attempt made no record.", target=target)
