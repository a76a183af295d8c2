"""Results of the side effect: record result, release and heartbeat with the claim token, and the review of
a failure that is not retryable or of an attempt in doubt, which a reviewer settles without the token.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from oncegate.domain.records import Claim
from oncegate.domain.statuses import (
    ClaimStatus,
    EventKind,
    Outcome,
)
from oncegate.domain.transitions import (
    Refusal,
    Settlement,
    Transition,
    extended,
    in_doubt,
    recorded,
    released,
    settle,
)
from oncegate.errors import (
    ClaimBusy,
    ClaimNotBlocked,
    InvalidRequest,
    StaleClaim,
    StateConflict,
    StoreRace,
)
from oncegate.service.core import ClaimsCore, settled, stale_token_message
from oncegate.stores.port import ClaimReads, ClaimWrites

if TYPE_CHECKING:
    from oncegate.service.commands.results import Acknowledge, Heartbeat, RecordResult, Release, Settle

logger = logging.getLogger(__name__)


class ResultRecords(ClaimReads, ClaimWrites, Protocol):
    """What recording results, releases, heartbeats and reviews use of the store: the claim, read and written."""


class Results:
    """What the run holding a claim reports, and the review a failure for good waits for."""

    def __init__(self, core: ClaimsCore, store: ResultRecords) -> None:
        self._core = core
        self._store = store

    def record_result(self, claim_id: str, request: RecordResult) -> Claim:
        """Store the side effect's outcome; the same result sent again is a no-op."""
        return self._with_token(claim_id, request.claim_token, lambda claim, now: self._record(claim, request, now))

    def release(self, claim_id: str, request: Release) -> Claim:
        """Give up the claim before any side effect, so the next run may proceed."""
        return self._with_token(claim_id, request.claim_token, lambda claim, now: self._release(claim, request, now))

    def heartbeat(self, claim_id: str, request: Heartbeat) -> Claim:
        """Extend the lease of the run holding the claim."""
        return self._with_token(
            claim_id, request.claim_token, lambda claim, now: self._extend_lease(claim, request, now)
        )

    def _with_token(self, claim_id: str, token: str, change: Callable[[Claim, datetime], Claim]) -> Claim:
        self._core.require_safe_store()
        recalled = self._core.recent.recall(claim_id)
        written = self._written_from(recalled, token, change) if recalled else None
        if written is not None:
            return written

        def attempt() -> Claim:
            claim = self._store.get_claim(claim_id)
            if not self._core.holds(claim, token):
                raise StaleClaim(stale_token_message(claim), target="claimToken")
            return change(claim, self._core.clock())

        return settled(attempt)

    def _written_from(self, recalled: Claim, token: str, change: Callable[[Claim, datetime], Claim]) -> Claim | None:
        """The change written in one request from the claim as this instance last wrote it, or None to read first.

        The write is conditioned on the recalled version: if anyone changed the claim since, it fails and
        the change is decided again on a fresh read. A refusal, or a no-op that writes nothing, is never
        answered from a recalled claim, which another instance may have moved on since: data refused for the call
        in doubt the recalled claim carries (records.still_in_doubt) may be a token another run's takeover fenced off.
        """
        if not self._core.holds(recalled, token):
            return None
        try:
            written = change(recalled, self._core.clock())
        except (StoreRace, StateConflict, InvalidRequest):
            return None
        return None if written is recalled else written

    def _record(self, claim: Claim, request: RecordResult, now: datetime) -> Claim:
        now = self._core.decided_at(claim, now)  # its history line stands after the claim it was decided on
        result = request.result
        change = recorded(claim, result, now)
        return self._written(claim, change, EventKind.RESULT, now, details=result.details, fingerprint=True)

    def _release(self, claim: Claim, request: Release, now: datetime) -> Claim:
        now = self._core.decided_at(claim, now)
        change = released(claim, request.reason, now)
        details = {"reason": request.reason} if request.reason else {}
        return self._written(claim, change, EventKind.RELEASE, now, details=details)

    def _extend_lease(self, claim: Claim, request: Heartbeat, now: datetime) -> Claim:
        lease = timedelta(seconds=request.lease_seconds or self._core.inventory.lease_seconds(claim.scope))
        stored = self._store.update_claim(extended(claim, lease, now).record, None)
        self._core.recent.remember(stored)
        return stored

    def _written(
        self,
        claim: Claim,
        change: Transition,
        kind: EventKind,
        now: datetime,
        *,
        details: dict[str, Any],
        fingerprint: bool = False,
    ) -> Claim:
        """The transition's claim written with its history line (nothing written for a no-op)."""
        if not change.changes(claim):
            return claim
        event = self._core.event(
            claim,
            kind,
            change.outcome,
            change.recognised_by,
            at=now,
            run_id=claim.run_id,
            flow=claim.flow,
            fingerprint=claim.fingerprint if fingerprint else None,
            details=details,
        )
        return self._core.counted(claim, self._store.update_claim(change.record, event))

    def review(self, claim_id: str, request: Acknowledge | Settle) -> Claim:
        """Acknowledge a failure that is not retryable, or, with an outcome, settle an attempt in doubt.

        Acknowledged, the key stays blocked and the claim leaves the attention list. Settled (the
        attempt is ``unknown``, or ``in_progress`` past its lease), the claim takes the outcome the
        reviewer found in the target system, without the run's claim token: succeeded with its record,
        or failed and retryable. Either way it may be deleted once its scope's retention is over. The
        same review by the same reviewer again is a no-op.
        """
        # The commands are made by the review's entry, which imported them: a claim needs none of them.
        from oncegate.service.commands.results import Settle

        self._core.require_safe_store()

        def attempt() -> Claim:
            claim = self._store.get_claim(claim_id)
            return self._settle(claim, request) if isinstance(request, Settle) else self._acknowledge(claim, request)

        return settled(attempt)

    def _acknowledge(self, claim: Claim, request: Acknowledge) -> Claim:
        if claim.status is not ClaimStatus.FAILED or claim.retryable is not False:
            state = "a retryable failure" if claim.status is ClaimStatus.FAILED else claim.status.value
            doubt = (
                " An attempt in doubt is settled instead: send the outcome found in the target system and the attempt."
                if in_doubt(claim, self._core.clock())
                else ""
            )
            raise ClaimNotBlocked(
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
        stored = self._store.update_claim(replace(claim, reviewer=request.reviewer, updated_at=now), event)
        self._core.recent.remember(stored)
        return stored

    def _settle(self, claim: Claim, request: Settle) -> Claim:
        settlement = Settlement(
            reviewer=request.reviewer,
            attempt=request.attempt,
            outcome=Outcome(request.outcome.value),
            now=self._core.decided_at(claim, self._core.clock()),
            target_record_id=request.target_record_id,
            data=request.data,
        )
        decided = settle(claim, settlement)
        if isinstance(decided, Refusal):
            if decided.busy:
                raise ClaimBusy(decided.message, target=decided.target)
            raise StaleClaim(decided.message, target=decided.target)
        found = f"holds target record {request.target_record_id}" if request.target_record_id else "holds nothing"
        change = Transition(
            decided,
            settlement.outcome.value,
            f"Reviewer {request.reviewer} settled attempt {claim.attempt} ({claim.status.value}) as "
            f"{settlement.outcome.value}: the target system {found}.",
        )
        details = {
            "reviewer": request.reviewer,
            "previous_status": claim.status.value,
            "target_record_id": request.target_record_id,
            "data": request.data,
            "note": request.note,
        }
        kept = {name: value for name, value in details.items() if value is not None}
        if change.changes(claim):
            logger.info("Claim %s settled as %s by %s", claim.claim_id, settlement.outcome.value, request.reviewer)
        return self._written(claim, change, EventKind.REVIEW, settlement.now, details=kept, fingerprint=True)
