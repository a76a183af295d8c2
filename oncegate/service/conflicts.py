"""The conflict queue: conflicts a claim opens or a flow reports, their resolution by a reviewer, and the
polling trigger.

A resolution writes the claim first, conditioned on the version read, then closes the conflict: a
refused resolution has changed nothing (issue 9), and one cut short between the two writes is closed
as decided by the next read or resolution of the conflict.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from oncegate.domain.keys import conflict_id as make_conflict_id
from oncegate.domain.keys import conflict_ids, normalise_scope, normalise_source
from oncegate.domain.records import Claim, Conflict, FingerprintRecord, Flow
from oncegate.domain.statuses import (
    ClaimStatus,
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
    Resolution,
)
from oncegate.errors import (
    AlreadyExists,
    InvalidRequest,
    NotFound,
    StateConflict,
)
from oncegate.models import (
    ConflictView,
    ListConflictsQuery,
    ReportConflictRequest,
    ResolveConflictRequest,
)
from oncegate.service.common import (
    ClaimsCore,
    Identity,
    flow_of,
    keyed,
    settled,
)
from oncegate.service.privacy import warned
from oncegate.service.views import conflict_view

logger = logging.getLogger(__name__)


# More than any difference between two instances' clocks (they are held within seconds of the store's), far less
# than a retention (a day at least): a conflict created this long before its claim was about an earlier claim.
OUTLIVED_MARGIN = timedelta(minutes=10)


def outlived(conflict: Conflict, claim: Claim) -> bool:
    """Whether the conflict was about an earlier claim of the key, deleted by retention since (issue 22)."""
    return conflict.created_at < claim.first_received_at - OUTLIVED_MARGIN


class Conflicts:
    """Open, find, list and resolve conflicts; apply a reviewer's decision to its claim."""

    def __init__(self, core: ClaimsCore) -> None:
        self._core = core

    def report_conflict(self, request: ReportConflictRequest) -> ConflictView:
        """A conflict the flow found itself; the same open conflict comes back for the same fingerprint."""
        self._core.require_safe_store()
        identities, _, key_warnings = self._core.identify(request)
        warnings = [
            *key_warnings,
            *self._core.stored_data.check(request, f"a conflict reported by run {request.run_id}"),
        ]
        return warned(settled(lambda: self._report_once(identities, request, self._core.clock())), warnings)

    def _report_once(
        self, identities: tuple[Identity, ...], request: ReportConflictRequest, now: datetime
    ) -> ConflictView:
        found = self._core.find(identities)
        if found is None:
            raise NotFound("No claim exists for this key in this scope: check and claim first.", target="key")
        claim, identity = found
        now = self._core.decided_at(claim, now)
        fingerprint = identity.fingerprint
        flow = flow_of(request.flow)
        source = normalise_source(request.source)
        conflict, record = self.open_conflict(
            claim,
            keyed(fingerprint),
            ConflictOrigin.REPORTED,
            request.reason,
            request.run_id,
            flow,
            request.details,
            source_system=source,
        )
        if conflict.status is ConflictStatus.RESOLVED:
            # Resolved by an earlier release but never applied: applying it moves this fingerprint to a new
            # resolution round, so the report opens a new conflict.
            self.apply_resolution(claim, conflict, record, now)
            return self._report_once(identities, request, now)
        event = self._core.event(
            claim,
            EventKind.CONFLICT,
            Decision.CONFLICT.value,
            f"Run {request.run_id} reported a conflict: {request.reason} Conflict {conflict.conflict_id} is open.",
            at=now,
            run_id=request.run_id,
            flow=flow,
            fingerprint=keyed(fingerprint),
            source=source,
            details={"conflictId": conflict.conflict_id},
        )
        self._core.store.add_event(event)
        return conflict_view(conflict)

    def open_conflict(
        self,
        claim: Claim,
        fingerprint: str | None,
        origin: ConflictOrigin,
        reason: str,
        run_id: str,
        flow: Flow | None,
        details: Any = None,
        *,
        source_system: str | None = None,
    ) -> tuple[Conflict, FingerprintRecord | None]:
        """The open conflict of this fingerprint in its current round (made now, or found), and its record."""
        record = self._core.fingerprint_record(claim.claim_id, fingerprint)
        rounds = claim.resolved_rounds(fingerprint, [record] if record else [])
        conflict = Conflict(
            conflict_id=make_conflict_id(claim.claim_id, fingerprint, rounds),
            claim_id=claim.claim_id,
            scope=claim.scope,
            status=ConflictStatus.OPEN,
            origin=origin,
            fingerprint=fingerprint,
            claim_fingerprint=claim.fingerprint,
            reason=reason,
            run_id=run_id,
            flow=flow,
            created_at=self._core.clock(),
            details=details,
            source_system=source_system,
        )
        try:
            return self._core.store.create_conflict(conflict), record
        except AlreadyExists as exc:
            existing: Conflict = exc.existing
        if not outlived(existing, claim):
            return existing, record
        # The conflict of an earlier claim of this key, which retention deleted: it decides nothing about this
        # claim (issue 22). This claim's conflicts take ids of their own.
        logger.info(
            "Conflict %s belongs to an earlier claim of %s: a new one is opened", existing.conflict_id, claim.claim_id
        )
        renewed = replace(
            conflict, conflict_id=make_conflict_id(claim.claim_id, fingerprint, rounds, born=claim.first_received_at)
        )
        try:
            return self._core.store.create_conflict(renewed), record
        except AlreadyExists as exc:
            again: Conflict = exc.existing
            return again, record

    def get_conflict(self, conflict_id: str) -> ConflictView:
        """The conflict; one left open by a resolution cut short after changing the claim is closed first."""

        def attempt() -> ConflictView:
            conflict = self._core.store.get_conflict(conflict_id)
            if conflict.status is ConflictStatus.RESOLVED:
                return conflict_view(conflict)
            claim = self._core.store.get_claim(conflict.claim_id)
            if outlived(conflict, claim):
                return conflict_view(conflict)
            record = self._core.fingerprint_record(claim.claim_id, conflict.fingerprint)
            return conflict_view(self._repaired(conflict, claim, record, None, self._core.clock()))

        return settled(attempt)

    def list_conflicts(self, query: ListConflictsQuery) -> tuple[list[ConflictView], str | None]:
        """One page of conflicts and the cursor of the next page."""
        scope = normalise_scope(query.scope) if query.scope else None
        page = self._core.store.list_conflicts(status=query.status, scope=scope, limit=query.top, cursor=query.cursor)
        return [conflict_view(conflict) for conflict in page.items], page.cursor

    def poll_conflicts(self, *, scope: str | None, state: str | None, limit: int) -> tuple[list[ConflictView], str]:
        """Conflicts created after ``state`` (from now when absent), and the state to poll with next.

        The state is the place of the last conflict delivered, so each is delivered once.
        """
        state = state or self._core.store.conflicts_after(self._core.clock())
        page = self._core.store.list_conflicts(
            status=None, scope=normalise_scope(scope) if scope else None, limit=limit, cursor=state
        )
        if page.items:
            last = page.items[-1]
            state = self._core.store.conflicts_after(last.created_at, last.conflict_id)
        return [conflict_view(conflict) for conflict in page.items], state

    def resolve_conflict(self, conflict_id: str, request: ResolveConflictRequest) -> ConflictView:
        """Apply the reviewer's decision to the claim, then close the conflict; the same way again is a no-op.

        The claim is written first, conditioned on the version read: a refused resolution (``claim_busy``,
        ``conflict_resolved``) or one that lost a race to a new attempt has written nothing (issue 9). A
        crash between the two writes leaves the claim changed and the conflict open, which every later
        read or resolution of the conflict closes as decided (the decision is kept on the fingerprint record).
        """
        reviewer = request.reviewer
        if reviewer is None:
            raise InvalidRequest("reviewer is required: who decided.", target="reviewer")
        warnings = self._core.stored_data.check(request, f"conflict {conflict_id}")
        self._core.require_safe_store()

        def attempt() -> ConflictView:
            now = self._core.clock()
            conflict = self._core.store.get_conflict(conflict_id)
            claim = self._core.store.get_claim(conflict.claim_id)
            if outlived(conflict, claim):
                raise StateConflict(
                    "conflict_resolved",
                    f"Conflict {conflict.conflict_id} was about an earlier claim of this key, which retention deleted; "
                    "it decides nothing about the claim made since.",
                    target="conflictId",
                )
            record = self._core.fingerprint_record(claim.claim_id, conflict.fingerprint)
            if conflict.status is ConflictStatus.OPEN and not self._applied(claim, conflict, record):
                closed = replace(
                    conflict,
                    status=ConflictStatus.RESOLVED,
                    decision=request.decision,
                    reviewer=reviewer,
                    note=request.note,
                    resolved_at=now,
                )
                self.apply_resolution(claim, closed, record, now)
                return conflict_view(self._core.store.update_conflict(closed))
            conflict = self._repaired(conflict, claim, record, request.decision, now)
            if conflict.decision is not request.decision:
                decision = conflict.decision.value if conflict.decision else "?"
                raise StateConflict(
                    "conflict_resolved",
                    f"Conflict {conflict.conflict_id} was already resolved as {decision} by {conflict.reviewer}.",
                    target="decision",
                )
            return conflict_view(conflict)

        return warned(settled(attempt), warnings)

    @staticmethod
    def _applied(claim: Claim, conflict: Conflict, record: FingerprintRecord | None) -> bool:
        """Whether the claim already took this conflict's resolution: its round is one the fingerprint passed."""
        if claim.applied_legacy(conflict.conflict_id):
            return True
        rounds = claim.resolved_rounds(conflict.fingerprint, [record] if record else [])
        return any(
            conflict.conflict_id in conflict_ids(claim.claim_id, conflict.fingerprint, r, claim.first_received_at)
            for r in range(rounds)
        )

    def _repaired(
        self,
        conflict: Conflict,
        claim: Claim,
        record: FingerprintRecord | None,
        fallback: Resolution | None,
        now: datetime,
    ) -> Conflict:
        """The conflict with its stored state made whole: closed when its claim took it, applied when resolved."""
        applied = self._applied(claim, conflict, record)
        if conflict.status is ConflictStatus.OPEN and applied:
            decided = record is not None and record.conflict_id == conflict.conflict_id
            decision = record.decision if decided and record else fallback
            if decision is None:
                return conflict
            closed = replace(
                conflict,
                status=ConflictStatus.RESOLVED,
                decision=decision,
                reviewer=record.reviewer if decided and record else None,
                note=record.note if decided and record else None,
                resolved_at=record.resolved_at if decided and record else now,
            )
            logger.warning("Conflict %s was applied to its claim but left open: closed now", conflict.conflict_id)
            return self._core.store.update_conflict(closed)
        if conflict.status is ConflictStatus.RESOLVED and not applied:
            # Resolved by an earlier release, which wrote the conflict before the claim, and never applied.
            self.apply_resolution(claim, conflict, record, now)
        return conflict

    @staticmethod
    def _require_settled(claim: Claim) -> None:
        # Accepting a new version while an attempt is running or in doubt would orphan that attempt's result.
        if claim.status in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
            raise StateConflict(
                "claim_busy",
                f"Attempt {claim.attempt} of this claim is {claim.status.value}: record its result or reconcile it "
                "before accepting the new version.",
                target="decision",
            )

    def apply_resolution(
        self, claim: Claim, conflict: Conflict, record: FingerprintRecord | None, now: datetime
    ) -> Claim:
        """Write the resolved ``conflict``'s decision to its claim and fingerprint record, in one commit."""
        decision = conflict.decision
        assert decision is not None, "only a resolved conflict is applied"
        now = self._core.decided_at(claim, now)
        if decision is Resolution.ACCEPT_NEW:
            self._require_settled(claim)
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
        explanation = {
            Resolution.KEEP_ORIGINAL: "the new fingerprint counts as the same intent; its claims are duplicates",
            Resolution.DISMISS: "closed; the next mismatch opens a new conflict",
            Resolution.ACCEPT_NEW: "the new fingerprint is now the claim's version; its next claim may proceed",
        }[decision]
        details: dict[str, Any] = {"conflictId": conflict.conflict_id, "note": conflict.note}
        if decision is Resolution.ACCEPT_NEW:
            details["previous"] = {
                "status": claim.status.value,
                "fingerprint": claim.fingerprint,
                "targetRecordId": claim.target_record_id,
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
                generation=claim.generation + 1,
                lease_expires_at=None,
                target_record_id=None,
                data=None,
                completed_at=None,
            )
        event = self._core.event(
            claim,
            EventKind.RESOLUTION,
            decision.value,
            f"Reviewer {conflict.reviewer} resolved conflict {conflict.conflict_id} as {decision.value}: "
            f"{explanation}.",
            at=now,
            run_id=conflict.run_id,
            flow=conflict.flow,
            fingerprint=conflict.fingerprint,
            details={name: value for name, value in details.items() if value is not None},
        )
        stored = self._core.counted(claim, self._core.store.update_claim(changed, event, fingerprint=kept))
        logger.info("Conflict %s resolved as %s", conflict.conflict_id, decision.value)
        return stored
