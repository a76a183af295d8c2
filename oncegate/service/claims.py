"""Check and claim: the I/O around the contract's decision table (``oncegate.domain.decisions``).

The service reads the claim, asks the pure decision function, and writes what it says. Writes
come first and reads only on a lost race (the store's conditional insert carries the
existing claim back), so a new claim costs one storage round trip. Every answer leaves a
history event saying how the request was recognised. A lost race (``StoreRace``) means
another run changed the claim in between: the service re-reads and decides again, so two
runs can never both be told ``proceed`` for one attempt.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta
from typing import Any, Protocol

from oncegate import __version__
from oncegate.domain.decisions import Change, Verdict, check_and_claim, needs_fingerprint_records, withdrawn
from oncegate.domain.idempotency import idempotency_key
from oncegate.domain.keys import normalise_scope, normalise_source
from oncegate.domain.records import Claim, ClaimFilter, FingerprintRecord, HistoryEvent
from oncegate.domain.statuses import (
    AnswerStatus,
    ClaimStatus,
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
)
from oncegate.domain.warnings import ANOTHER_FLOW_COPY, NO_FINGERPRINT, NO_FLOW
from oncegate.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    NotFound,
    StateConflict,
)
from oncegate.models import (
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    FindClaimsQuery,
    Health,
    HistoryEntry,
    Holder,
    ListPageQuery,
    LookupRequest,
)
from oncegate.service.conflicts import Conflicts
from oncegate.service.core import ClaimsCore, flow_of, flow_text
from oncegate.service.identity import Caller, keyed, new_grant_id, token
from oncegate.service.races import settled
from oncegate.service.views import claim_result, claim_view, earlier_attempt_view, flow_ref, history_entry
from oncegate.stores.port import ClaimListing, ClaimReads, ClaimWrites, HistoryRecords, Reachable

logger = logging.getLogger(__name__)

# The history lines Get claim and Look up claim return; the history's own list pages the rest.
HISTORY_PAGE = 50


class ClaimsRecords(ClaimReads, ClaimWrites, HistoryRecords, ClaimListing, Reachable, Protocol):
    """What Check and claim and the claim readers use of the store."""


class Claims:
    """Check and claim, and reading claims back (get and lookup), over the core the other services share.

    ``oncegate.bootstrap`` builds it with the other services; results (``oncegate.service.results``)
    and conflicts (``oncegate.service.conflicts``) are services of their own over the same core. It
    opens a conflict through the conflict service when a key comes back with other business data.
    """

    def __init__(self, core: ClaimsCore, conflicts: Conflicts, store: ClaimsRecords) -> None:
        self._core = core
        self._conflicts = conflicts
        self._store = store

    def check_and_claim(self, request: ClaimRequest, *, signed_in: str | None = None) -> ClaimResponse:
        """Decide whether this run may do the side effect; see the contract's decision table.

        ``signed_in`` names the caller Entra ID signed in (None with function keys): a grant made to a
        signed-in caller is given back to that caller only.
        """
        return self.decide_for(self.caller(request, signed_in=signed_in))

    def caller(self, request: ClaimRequest, *, signed_in: str | None = None) -> Caller:
        """The request normalised: its key reduced to claim ids, its data to fingerprints; nothing written yet."""
        self._core.require_safe_store()
        # Source and reference are stored in clear: checked first, before anything is read or written.
        stored_warnings = self._core.stored_data.check(request, f"a claim of run {request.run_id}")
        caller = replace(self._caller(request), signed_in=signed_in)
        caller.warnings.extend(stored_warnings)
        return caller

    def decide_for(self, caller: Caller) -> ClaimResponse:
        """Check and claim for a request already normalised (:meth:`caller`, or a waiting run's poll)."""
        refusal = self._core.inventory.refusal(caller.flow)
        answer = self._refused(caller, refusal) if refusal else settled(lambda: self._claim_once(caller))
        self._core.inventory.answered(caller.scope, caller.flow, answer.decision, caller.now)
        return answer

    def _refused(self, caller: Caller, refusal: str) -> ClaimResponse:
        """Blocked by the inventory before any claim is made or taken over; an existing claim's history says why."""
        found = self._core.find(caller.identities)
        verdict = check_and_claim(found[0] if found else None, caller.intent(), refusal=refusal)
        if found is None:
            return _unclaimed(verdict, caller.claim_id, caller)
        claim, identity = found
        caller = replace(caller.as_(identity), decided_at=self._core.decided_at(claim, caller.now))
        self._answered(claim, caller, verdict.decision, verdict.recognised_by)
        return self._answer(verdict.decision, claim, caller, verdict.reason)

    def _caller(self, request: ClaimRequest) -> Caller:
        rules_version = self._core.inventory.fingerprint_rules(normalise_scope(request.scope)).version
        identities, scope, warnings = self._core.identify(request, rules_version=rules_version)
        current = next(identity for identity in identities if identity.hasher is self._core.keys.current)
        flow = flow_of(request.flow)
        if current.fingerprint is None:
            warnings.append(NO_FINGERPRINT)
        if flow is None:
            warnings.append(NO_FLOW)
        return Caller(
            claim_id=current.claim_id,
            scope=scope,
            fingerprint=current.fingerprint,
            hasher=current.hasher,
            identities=identities,
            run_id=request.run_id,
            flow=flow,
            lease=timedelta(seconds=request.lease_seconds or self._core.inventory.lease_seconds(scope)),
            now=self._core.clock(),
            warnings=warnings,
            source=normalise_source(request.source),
            reference=request.reference,
            rules_version=rules_version,
            fingerprint_in=lambda hasher, version: self._core.fingerprint(hasher, request, version),
        )

    def _claim_once(self, caller: Caller) -> ClaimResponse:
        # During a rotation the key may be claimed under an older secret: look there first.
        found = self._core.find(caller.older_identities)
        if found is not None:
            return self._decide(found[0], caller.as_(found[1]))
        verdict = check_and_claim(None, caller.intent(grant_id=new_grant_id()))
        claim = verdict.record
        assert claim is not None, "a new key's verdict carries its first claim"
        event = self._claim_event(claim, caller, verdict.decision, verdict.recognised_by)
        try:
            stored = self._core.counted(None, self._store.create_claim(claim, event))
        except AlreadyExists as exc:
            return self._decide(exc.existing, caller)
        except NotFound as exc:
            # The claim in the way was gone when read back (withdrawn during a rotation, or purged): ask again.
            raise ConcurrentUpdate(f"claim {claim.claim_id} existed and is gone") from exc
        if caller.other_identities and self._core.find(caller.other_identities) is not None:
            return self._withdrawn(stored, caller)
        if caller.source is not None:
            self._core.inventory.source_claimed(caller.scope, caller.flow, caller.source)
        return self._granted(verdict.decision, stored, caller, verdict.reason)

    def _withdrawn(self, made: Claim, caller: Caller) -> ClaimResponse:
        """The claim this request made is deleted, as :func:`~oncegate.domain.decisions.withdrawn` says why."""
        verdict = withdrawn()
        logger.info("Claim %s made during a rotation meets a claim under another secret: withdrawn", made.claim_id)
        self._store.delete_claim(made)
        self._core.counted(made, None)
        return _unclaimed(verdict, made.claim_id, caller)

    def _decide(self, claim: Claim, caller: Caller) -> ClaimResponse:
        """Apply the decision table (oncegate.domain.decisions) to a claim that exists, and write what it says."""
        caller = replace(caller, decided_at=self._core.decided_at(claim, caller.now))
        if claim.fingerprint is not None:
            # Compared like with like: under the fingerprint rules the claim's fingerprint was made with (issue 25).
            caller = caller.under(claim.rules_version)
        records: list[FingerprintRecord] = []
        if needs_fingerprint_records(claim, caller.fingerprint):
            # A mismatch: only now read what reviewers decided about this fingerprint (one read, off the common path).
            assert caller.fingerprint is not None
            forms = (caller.fingerprint.keyed, caller.fingerprint.plain)
            records = self._store.get_fingerprints(claim.claim_id, forms)
        verdict = check_and_claim(claim, caller.intent(grant_id=new_grant_id()), records)
        if verdict.change is Change.OPEN_CONFLICT:
            return self._conflict(claim, caller, verdict)
        if verdict.change is Change.NEW_ATTEMPT:
            return self._take_over(claim, caller, verdict)
        flow_warning = verdict.decision in (Decision.DUPLICATE, Decision.IN_PROGRESS)
        self._answered(claim, caller, verdict.decision, verdict.recognised_by, flow_warning=flow_warning)
        if verdict.grants:
            return self._granted(
                verdict.decision,
                claim,
                caller,
                verdict.reason,
                earlier_attempt=earlier_attempt_view(verdict.earlier_attempt),
            )
        extra: dict[str, Any] = {}
        if verdict.decision is Decision.IN_PROGRESS:
            # Not the holder's run id: with it, another caller could pass for the holder (issue 9).
            extra = {
                "retry_after_seconds": verdict.retry_after_seconds,
                "holder": Holder(flow=flow_ref(claim.flow), lease_expires_at=claim.lease_expires_at),
            }
        elif verdict.decision is Decision.DUPLICATE:
            extra = {"result": claim_result(claim)}
        return self._answer(verdict.decision, claim, caller, verdict.reason, **extra)

    def _take_over(self, claim: Claim, caller: Caller, verdict: Verdict) -> ClaimResponse:
        """A new attempt for this run: proceed, or reconcile the attempt it takes over."""
        renewed = verdict.record
        assert renewed is not None, "a new attempt's verdict carries the claim taken over"
        event = self._claim_event(renewed, caller, verdict.decision, verdict.recognised_by)
        if verdict.earlier_attempt is not None:
            event = replace(event, details={"reconciles": {"attempt": verdict.earlier_attempt.attempt}})
        # A new attempt is the only change that may give a claim its source or reference.
        stored = self._core.counted(claim, self._store.update_claim(renewed, event, relabelled=True))
        return self._granted(
            verdict.decision,
            stored,
            caller,
            verdict.reason,
            earlier_attempt=earlier_attempt_view(verdict.earlier_attempt),
        )

    def _conflict(self, claim: Claim, caller: Caller, verdict: Verdict) -> ClaimResponse:
        reason = verdict.reason
        conflict, record = self._conflicts.open_conflict(
            claim,
            keyed(caller.fingerprint),
            ConflictOrigin.CLAIM,
            reason,
            caller.run_id,
            caller.flow,
            source_system=caller.source,
        )
        if conflict.status is ConflictStatus.RESOLVED:
            # Resolved by an earlier release that wrote the conflict before the claim, and the claim never heard
            # of it: repair, then decide again. A new version cannot be accepted while an attempt runs; then the
            # conflict answer stands.
            try:
                return self._decide(self._conflicts.apply_resolution(claim, conflict, record, caller.now), caller)
            except StateConflict:
                pass
        self._answered(claim, caller, Decision.CONFLICT, f"{reason} Conflict {conflict.conflict_id} is open.")
        return self._answer(
            Decision.CONFLICT,
            claim,
            caller,
            # The fingerprints (keyed digests) mean nothing to a maker: they stay in the history's line.
            "This key was already claimed with different business data (another amount, lines or version). "
            "Nothing was done; the conflict waits for its owner.",
            conflict_id=conflict.conflict_id,
        )

    # -- answers and events -----------------------------------------------------------------

    def _answer(self, decision: Decision, claim: Claim, caller: Caller, reason: str, **extra: Any) -> ClaimResponse:
        return ClaimResponse(
            decision=decision,
            claim_id=claim.claim_id,
            status=AnswerStatus(claim.status.value),
            attempt=claim.attempt,
            reason=reason,
            warnings=[*caller.warnings, *self._flow_warnings(claim, caller, decision), *caller.source_warnings(claim)],
            **extra,
        )

    def _granted(self, decision: Decision, claim: Claim, caller: Caller, reason: str, **extra: Any) -> ClaimResponse:
        return self._answer(
            decision,
            claim,
            caller,
            reason,
            claim_token=token(claim, caller.hasher),
            idempotency_key=idempotency_key(caller.hasher, claim),
            lease_expires_at=claim.lease_expires_at,
            **extra,
        )

    @staticmethod
    def _flow_warnings(claim: Claim, caller: Caller, decision: Decision) -> list[str]:
        if decision not in (Decision.DUPLICATE, Decision.IN_PROGRESS) or claim.flow is None or caller.flow is None:
            return []
        return [ANOTHER_FLOW_COPY] if claim.flow != caller.flow else []

    def _answered(
        self, claim: Claim, caller: Caller, decision: Decision, recognised_by: str, *, flow_warning: bool = False
    ) -> None:
        if flow_warning and self._flow_warnings(claim, caller, decision):
            recognised_by += f" The claim belongs to {flow_text(claim.flow)}, not {flow_text(caller.flow)}."
            if claim.flow is not None and caller.flow is not None:  # always, with a flow warning
                self._core.inventory.copy_met(claim.flow, caller.flow, claim.claim_id, caller.now)
        # An answer that changes nothing repeats as often as runs ask: counted in one line, not a line each.
        self._store.count_event(self._core.repeated(self._claim_event(claim, caller, decision, recognised_by)))

    def _claim_event(self, claim: Claim, caller: Caller, decision: Decision, recognised_by: str) -> HistoryEvent:
        return self._core.event(
            claim,
            EventKind.CLAIM,
            decision.value,
            recognised_by,
            at=caller.stamp,
            run_id=caller.run_id,
            flow=caller.flow,
            fingerprint=keyed(caller.fingerprint),
            source=caller.source,
        )

    # -- Reading claims --------------------------------------------------------------------

    def get_claim(self, claim_id: str) -> tuple[ClaimView, str | None]:
        """The processing record with the first page of its history, and the cursor of the history's next page."""
        return self._with_history(self._store.get_claim(claim_id))

    def lookup(self, request: LookupRequest) -> tuple[ClaimView, str | None]:
        """The processing record of a business key, found through its digest (under any secret known), as
        ``get_claim`` gives it."""
        self._core.require_safe_store()
        identities, scope, _ = self._core.identify(request)
        found = self._core.find(identities)
        if found is None:
            raise NotFound(f"No claim has this key in the scope {scope}.", target="key")
        # The claim as found: read again by its id, one deleted in between would be named by a digest.
        return self._with_history(found[0])

    def history(self, claim_id: str, query: ListPageQuery) -> tuple[list[HistoryEntry], str | None]:
        """One page of a claim's history, oldest first, and the cursor of the next page."""
        page = self._store.list_history(claim_id, limit=query.top, cursor=query.cursor)
        if not page.items and query.cursor is None:
            self._store.get_claim(claim_id)  # every claim has a first line: raises NotFound for a claim unknown
        return [history_entry(event) for event in page.items], page.cursor

    def _with_history(self, claim: Claim) -> tuple[ClaimView, str | None]:
        # The oldest lines first: the proceed, the reconciles and the results decide what a claim went through;
        # the rest is a page away. Repeated answers count in one line each, so most histories fit whole.
        page = self._store.list_history(claim.claim_id, limit=HISTORY_PAGE)
        return claim_view(claim, page.items), page.cursor

    def find(self, query: FindClaimsQuery) -> tuple[list[ClaimView], str | None]:
        """One page of the claims of a source system, reference, status or first received, without history.

        The cursor is the store's: a page may hold fewer than ``top`` claims (even none) while it says more follow.
        """
        matching = ClaimFilter(
            statuses=[query.status] if query.status else list(ClaimStatus),
            scope=normalise_scope(query.scope) if query.scope else None,
            source=normalise_source(query.source),
            reference=query.reference,
            received_since=query.since,
        )
        page = self._store.list_claims(matching, limit=query.top, cursor=query.cursor)
        return [claim_view(claim) for claim in page.items], page.cursor

    def health(self) -> Health:
        """Raises ``StoreUnavailable`` when the store does not answer, ``NotConfigured`` for another secret."""
        self._store.ping()
        self._core.safeguard.ring(fresh=True)
        return Health(status="ok", store=self._store.kind, version=__version__)


def _unclaimed(verdict: Verdict, claim_id: str, caller: Caller) -> ClaimResponse:
    """The answer when no claim stands for the key (none made, or the one made withdrawn): attempt 0."""
    return ClaimResponse(
        decision=verdict.decision,
        claim_id=claim_id,
        status=AnswerStatus.NONE,
        attempt=0,
        reason=verdict.reason,
        retry_after_seconds=verdict.retry_after_seconds,
        warnings=caller.warnings,
    )
