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
from typing import TYPE_CHECKING, Any, Protocol

from oncegate.domain import members
from oncegate.domain.decisions import Identity
from oncegate.domain.keys import conflict_id as make_conflict_id
from oncegate.domain.keys import conflict_ids, normalise_scope, normalise_source
from oncegate.domain.limits import MIN_RETENTION_DAYS
from oncegate.domain.records import Claim, Conflict, FingerprintRecord, Flow
from oncegate.domain.statuses import (
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
    Resolution,
)
from oncegate.errors import (
    AlreadyExists,
    ConflictResolved,
    NotFound,
)
from oncegate.service.core import ClaimsCore, keyed, settled
from oncegate.stores.port import ClaimReads, ClaimWrites, ConflictRecords, HistoryRecords

if TYPE_CHECKING:
    from oncegate.service.commands.conflicts import ListConflicts, ReportConflict, ResolveConflict

logger = logging.getLogger(__name__)


class ConflictsRecords(ClaimReads, ClaimWrites, HistoryRecords, ConflictRecords, Protocol):
    """What the conflict queue uses of the store: conflicts, and the claims their resolutions change."""


# More than any difference between two instances' clocks (they are held within seconds of the store's), far less
# than a retention (a day at least): a conflict created this long before its claim was about an earlier claim.
OUTLIVED_MARGIN = timedelta(minutes=10)
# How long after its last change no purge deletes a claim, whatever its scope's retention (a day at least), less an
# hour for the clocks: a request decides and opens its conflict well within it, and a purge refuses a clock seconds
# away from the store's (oncegate.domain.safeguard.MAX_CLOCK_SKEW). A conflict on a claim changed since is opened
# without writing the claim.
NOT_PURGED_FOR = timedelta(days=MIN_RETENTION_DAYS) - timedelta(hours=1)


def outlived(conflict: Conflict, claim: Claim) -> bool:
    """Whether the conflict was about an earlier claim of the key, deleted by retention since (issue 22)."""
    return conflict.created_at < claim.first_received_at - OUTLIVED_MARGIN


class Conflicts:
    """Open, find, list and resolve conflicts; apply a reviewer's decision to its claim."""

    def __init__(self, core: ClaimsCore, store: ConflictsRecords) -> None:
        self._core = core
        self._store = store

    def report_conflict(self, request: ReportConflict) -> tuple[Conflict, list[str]]:
        """A conflict the flow found itself; the same open conflict comes back for the same fingerprint.

        With the conflict, the warnings its key earned.
        """
        self._core.require_safe_store()
        identities, _, warnings = self._core.identify(request)
        return settled(lambda: self._report_once(identities, request, self._core.clock())), warnings

    def _report_once(self, identities: tuple[Identity, ...], request: ReportConflict, now: datetime) -> Conflict:
        found = self._core.find(identities)
        if found is None:
            raise NotFound("No claim exists for this key in this scope: check and claim first.", target="key")
        claim, identity = found
        now = self._core.decided_at(claim, now)
        # Under the rules the claim's own fingerprint was made with, to compare like with like (issue 25).
        fingerprint = self._core.fingerprint(identity.hasher, request, claim.rules_version)
        flow = request.flow
        source = normalise_source(request.source)
        conflict, record, claim = self.open_conflict(
            claim,
            keyed(fingerprint),
            ConflictOrigin.REPORTED,
            request.reason,
            request.run_id,
            flow,
            request.details,
            at=now,
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
            details={"conflict_id": conflict.conflict_id},
        )
        self._store.add_event(event)
        return conflict

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
        at: datetime,
        source_system: str | None = None,
        changed: tuple[str, ...] = (),
    ) -> tuple[Conflict, FingerprintRecord | None, Claim]:
        """The open conflict of this fingerprint in its current round (made now, or found), its record, and the
        claim as written before it (:meth:`_kept_from_purge`); ``at``: when the answer was decided on ``claim``.

        ``changed``: the members that differ from the claim's, by JSON Pointer (issue 33); the conflict names the
        first few and counts the rest. Raises ``ConcurrentUpdate`` when the claim changed since it was read, or is
        gone: the caller decides again on what it reads now.
        """
        claim = self._kept_from_purge(claim, at)
        shown, more = members.named(changed)
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
            changed=shown,
            more_changed=more,
        )
        try:
            return self._store.create_conflict(conflict), record, claim
        except AlreadyExists as exc:
            existing: Conflict = exc.existing
        if not outlived(existing, claim):
            return existing, record, claim
        # The conflict of an earlier claim of this key, which retention deleted: it decides nothing about this
        # claim (issue 22). This claim's conflicts take ids of their own.
        logger.info(
            "Conflict %s belongs to an earlier claim of %s: a new one is opened", existing.conflict_id, claim.claim_id
        )
        renewed = replace(
            conflict, conflict_id=make_conflict_id(claim.claim_id, fingerprint, rounds, born=claim.first_received_at)
        )
        try:
            return self._store.create_conflict(renewed), record, claim
        except AlreadyExists as exc:
            again: Conflict = exc.existing
            return again, record, claim

    def _kept_from_purge(self, claim: Claim, at: datetime) -> Claim:
        """The claim written (conditioned on its version, its last change moved to ``at``) before a conflict opens
        on it, when it is one retention may delete.

        The purge reads the open conflicts, then deletes each claim it listed conditioned on the version listed: a
        conflict opened in between would be left open on a deleted claim. Written first, the claim is either still
        the one the purge listed, which then fails its delete and keeps it (``changed``), or listed after this,
        within its retention and horizon again; or it was deleted first, and this write fails (``ConcurrentUpdate``)
        and the request is decided again on what is there now. No history line: the conflict's answer writes its own.
        A claim changed within ``NOT_PURGED_FOR`` is no purge's to delete yet, and is left as it is.
        """
        if not claim.purgeable or at - claim.updated_at < NOT_PURGED_FOR:
            # Not a claim a purge may delete now (a conflict leaves a waiting claim's time as it is): written, it
            # would only make the runs answered together race for
            # it (14 of 24 runs with changed data answered 503 on a claim settled a moment before).
            return claim
        return self._core.counted(claim, self._store.update_claim(replace(claim, updated_at=at), None))

    def get_conflict(self, conflict_id: str) -> Conflict:
        """The conflict; one left open by a resolution cut short after changing the claim is closed first."""

        def attempt() -> Conflict:
            conflict = self._store.get_conflict(conflict_id)
            if conflict.status is ConflictStatus.RESOLVED:
                return conflict
            claim = self._store.get_claim(conflict.claim_id)
            if outlived(conflict, claim):
                return conflict
            record = self._core.fingerprint_record(claim.claim_id, conflict.fingerprint)
            return self._repaired(conflict, claim, record, None, self._core.clock())

        return settled(attempt)

    def list_conflicts(self, query: ListConflicts) -> tuple[list[Conflict], str | None]:
        """One page of conflicts and the cursor of the next page."""
        scope = normalise_scope(query.scope) if query.scope else None
        page = self._store.list_conflicts(status=query.status, scope=scope, limit=query.limit, cursor=query.cursor)
        return page.items, page.cursor

    def poll_conflicts(self, *, scope: str | None, state: str | None, limit: int) -> tuple[list[Conflict], str]:
        """Conflicts created after ``state`` (from now when absent), and the state to poll with next.

        The state is the place of the last conflict delivered, so each is delivered once.
        """
        state = state or self._store.conflicts_after(self._core.clock())
        page = self._store.list_conflicts(
            status=None, scope=normalise_scope(scope) if scope else None, limit=limit, cursor=state
        )
        if page.items:
            last = page.items[-1]
            state = self._store.conflicts_after(last.created_at, last.conflict_id)
        return page.items, state

    def resolve_conflict(self, conflict_id: str, request: ResolveConflict) -> Conflict:
        """Apply the reviewer's decision to the claim, then close the conflict; the same way again is a no-op.

        The claim is written first, conditioned on the version read: a refused resolution (``claim_busy``,
        ``conflict_resolved``) or one that lost a race to a new attempt has written nothing (issue 9). A
        crash between the two writes leaves the claim changed and the conflict open, which every later
        read or resolution of the conflict closes as decided (the decision is kept on the fingerprint record).
        """
        reviewer = request.reviewer
        self._core.require_safe_store()

        def attempt() -> Conflict:
            now = self._core.clock()
            conflict = self._store.get_conflict(conflict_id)
            claim = self._store.get_claim(conflict.claim_id)
            if outlived(conflict, claim):
                raise ConflictResolved(
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
                return self._store.update_conflict(closed)
            conflict = self._repaired(conflict, claim, record, request.decision, now)
            if conflict.decision is not request.decision:
                decision = conflict.decision.value if conflict.decision else "?"
                raise ConflictResolved(
                    f"Conflict {conflict.conflict_id} was already resolved as {decision} by {conflict.reviewer}.",
                    target="decision",
                )
            return conflict

        return settled(attempt)

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
            return self._store.update_conflict(closed)
        if conflict.status is ConflictStatus.RESOLVED and not applied:
            # Resolved by an earlier release, which wrote the conflict before the claim, and never applied.
            self.apply_resolution(claim, conflict, record, now)
        return conflict

    def apply_resolution(
        self, claim: Claim, conflict: Conflict, record: FingerprintRecord | None, now: datetime
    ) -> Claim:
        """Write the resolved ``conflict``'s decision to its claim and fingerprint record, in one commit."""
        # The transitions after Check and claim are a resolution's, a result's and a review's: a claim that meets no
        # resolution left to apply never imports them (issue 36's cold start).
        from oncegate.domain.transitions import resolution_applied

        now = self._core.decided_at(claim, now)
        applied = resolution_applied(claim, conflict, record, now)
        decision = conflict.decision
        assert decision is not None, "only a resolved conflict is applied"
        event = self._core.event(
            claim,
            EventKind.RESOLUTION,
            decision.value,
            applied.recognised_by,
            at=now,
            run_id=conflict.run_id,
            flow=conflict.flow,
            fingerprint=conflict.fingerprint,
            details=applied.details,
        )
        stored = self._core.counted(
            claim, self._store.update_claim(applied.record, event, fingerprint=applied.fingerprint)
        )
        logger.info("Conflict %s resolved as %s", conflict.conflict_id, decision.value)
        return stored
