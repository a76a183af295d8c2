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
from typing import Protocol

from oncegate.domain import members
from oncegate.domain.answers import ClaimAnswer, answer, conflict_answer, flow_warnings, unclaimed
from oncegate.domain.backups import Restore
from oncegate.domain.decisions import Change, Verdict, check_and_claim, needs_fingerprint_records, withdrawn
from oncegate.domain.idempotency import idempotency_key
from oncegate.domain.keys import normalise_scope, normalise_source
from oncegate.domain.records import Claim, ClaimFilter, FingerprintRecord, HistoryEvent
from oncegate.domain.statuses import (
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
)
from oncegate.domain.warnings import NO_FINGERPRINT, NO_FLOW, RULE_MATCHED_NOTHING
from oncegate.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    NotFound,
    StateConflict,
)
from oncegate.service.backups import restore_notice
from oncegate.service.commands import CheckAndClaim, KeyOf, Paging
from oncegate.service.conflicts import Conflicts
from oncegate.service.core import ClaimsCore, flow_text
from oncegate.service.identity import Caller, keyed, new_grant_id, token
from oncegate.service.races import settled
from oncegate.stores.port import ClaimListing, ClaimReads, ClaimWrites, HistoryRecords, Reachable, RestoreReads

logger = logging.getLogger(__name__)

# The history lines Get claim and Look up claim return; the history's own list pages the rest.
HISTORY_PAGE = 50


class ClaimsRecords(ClaimReads, ClaimWrites, HistoryRecords, ClaimListing, Reachable, RestoreReads, Protocol):
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

    def check_and_claim(self, request: CheckAndClaim, *, signed_in: str | None = None) -> ClaimAnswer:
        """Decide whether this run may do the side effect; see the contract's decision table.

        ``signed_in`` names the caller Entra ID signed in (None with function keys): a grant made to a
        signed-in caller is given back to that caller only.
        """
        return self.decide_for(self.caller(request, signed_in=signed_in))

    def caller(self, request: CheckAndClaim, *, signed_in: str | None = None) -> Caller:
        """The request normalised: its key reduced to claim ids, its data to fingerprints; nothing written yet."""
        self._core.require_safe_store()
        return replace(self._caller(request), signed_in=signed_in)

    def decide_for(self, caller: Caller) -> ClaimAnswer:
        """Check and claim for a request already normalised (:meth:`caller`, or a waiting run's poll)."""
        refusal = self._core.inventory.refusal(caller.flow)
        answer = self._refused(caller, refusal) if refusal else settled(lambda: self._claim_once(caller))
        self._core.inventory.answered(caller.scope, caller.flow, answer.decision, caller.now)
        return answer

    def _refused(self, caller: Caller, refusal: str) -> ClaimAnswer:
        """Blocked by the inventory before any claim is made or taken over; an existing claim's history says why."""
        found = self._core.find(caller.identities)
        verdict = check_and_claim(found[0] if found else None, caller.intent(), refusal=refusal)
        if found is None:
            return unclaimed(verdict, caller.claim_id, caller.warnings)
        claim, identity = found
        caller = replace(caller.as_(identity), decided_at=self._core.decided_at(claim, caller.now))
        self._answered(claim, caller, verdict.decision, verdict.recognised_by)
        return answer(verdict, claim, caller.intent(), caller.warnings, None)

    def _caller(self, request: CheckAndClaim) -> Caller:
        rules = self._core.inventory.fingerprint_rules(normalise_scope(request.scope))
        identities, scope, warnings = self._core.identify(request, rules_version=rules.version)
        current = next(identity for identity in identities if identity.hasher is self._core.keys.current)
        flow = request.flow
        if current.fingerprint is None:
            warnings.append(NO_FINGERPRINT)
        if request.payload is not None and rules.include:
            unmatched = members.unmatched(request.payload, rules)
            self._core.inventory.rules_matched(scope, rules, unmatched)
            if unmatched:
                warnings.append(RULE_MATCHED_NOTHING)
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
            rules_version=rules.version,
            fingerprint_in=lambda hasher, version: self._core.fingerprint(hasher, request, version),
            members=current.members,
            rules=rules,
        )

    def _claim_once(self, caller: Caller) -> ClaimAnswer:
        # During a rotation the key may be claimed under an older secret: look there first.
        found = self._core.find(caller.older_identities if caller.may_claim else caller.identities)
        if found is not None:
            return self._decide(found[0], caller.as_(found[1]))
        if not caller.may_claim:
            raise NotFound(f"No claim of this key in the scope {caller.scope} under the secrets it was named with.")
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
        return self._told(verdict, stored, caller)

    def _withdrawn(self, made: Claim, caller: Caller) -> ClaimAnswer:
        """The claim this request made is deleted, as :func:`~oncegate.domain.decisions.withdrawn` says why."""
        verdict = withdrawn()
        logger.info("Claim %s made during a rotation meets a claim under another secret: withdrawn", made.claim_id)
        self._store.delete_claim(made)
        self._core.counted(made, None)
        return unclaimed(verdict, made.claim_id, caller.warnings)

    def _decide(self, claim: Claim, caller: Caller) -> ClaimAnswer:
        """Apply the decision table (oncegate.domain.decisions) to a claim that exists, and write what it says.

        One verdict may be decided twice: a conflict found resolved that the claim never heard of (an earlier
        release wrote the conflict before the claim) is applied to the claim, which is then decided again.
        """
        for repair in (True, False):
            caller = replace(caller, decided_at=self._core.decided_at(claim, caller.now))
            verdict = self._verdict(claim, caller)
            if verdict.change is Change.OPEN_CONFLICT and self._rules_moved(caller):
                # Set scope answered on another instance since this one read the rules: never a conflict under
                # rules older than the ones it answered with (issue 33).
                caller = self._under_current_rules(caller)
                verdict = self._verdict(claim, caller)
            caller = self._compared(claim, caller)
            if verdict.change is Change.NEW_ATTEMPT:
                return self._take_over(claim, caller, verdict)
            if verdict.change is not Change.OPEN_CONFLICT:
                flow_warning = verdict.decision in (Decision.DUPLICATE, Decision.IN_PROGRESS)
                self._answered(claim, caller, verdict.decision, verdict.recognised_by, flow_warning=flow_warning)
                return self._told(verdict, claim, caller)
            conflict, record = self._conflicts.open_conflict(
                claim,
                keyed(caller.fingerprint),
                ConflictOrigin.CLAIM,
                verdict.reason,
                caller.run_id,
                caller.flow,
                source_system=caller.source,
                changed=caller.changed or (),
            )
            if repair and conflict.status is ConflictStatus.RESOLVED:
                try:
                    claim = self._conflicts.apply_resolution(claim, conflict, record, caller.now)
                    continue
                except StateConflict:
                    pass  # a new version cannot be accepted while an attempt runs: the conflict answer stands
            recognised_by = f"{verdict.reason} Conflict {conflict.conflict_id} is open."
            self._answered(claim, caller, Decision.CONFLICT, recognised_by)
            return conflict_answer(claim, caller.intent(), caller.warnings, conflict.conflict_id)
        raise AssertionError("a claim repaired once is decided without repair")

    def _verdict(self, claim: Claim, caller: Caller) -> Verdict:
        caller = self._compared(claim, caller)
        return check_and_claim(claim, caller.intent(grant_id=new_grant_id()), self._fingerprints(claim, caller))

    @staticmethod
    def _compared(claim: Claim, caller: Caller) -> Caller:
        """The caller as it is compared with ``claim``: member by member under the current rules where both have
        member digests; its fingerprint under the rules the claim's was made with, which reviewers' decisions
        and the conflict's id are keyed by (issue 25)."""
        caller = caller.compared(claim)
        return caller.under(claim.rules_version) if claim.fingerprint is not None else caller

    def _rules_moved(self, caller: Caller) -> bool:
        """Whether the scope's rules changed since this instance read them (read again now: a conflict is rare).

        Only for a request compared member by member: a fingerprint is compared under the claim's own version.
        """
        if caller.members is None:
            return False
        return self._core.inventory.fingerprint_rules(caller.scope, fresh=True).version != caller.rules.version

    def _under_current_rules(self, caller: Caller) -> Caller:
        rules = self._core.inventory.fingerprint_rules(caller.scope)
        assert caller.fingerprint_in is not None, "a request's caller can fingerprint under any version"
        fingerprint = caller.fingerprint_in(caller.hasher, rules.version)
        return replace(caller, rules=rules, rules_version=rules.version, fingerprint=fingerprint)

    def _fingerprints(self, claim: Claim, caller: Caller) -> list[FingerprintRecord]:
        """What reviewers decided about the caller's fingerprint, read only on a mismatch (off the common path)."""
        if not needs_fingerprint_records(claim, caller.intent()):
            return []
        assert caller.fingerprint is not None
        return self._store.get_fingerprints(claim.claim_id, (caller.fingerprint.keyed, caller.fingerprint.plain))

    def _take_over(self, claim: Claim, caller: Caller, verdict: Verdict) -> ClaimAnswer:
        """A new attempt for this run: proceed, or reconcile the attempt it takes over."""
        renewed = verdict.record
        assert renewed is not None, "a new attempt's verdict carries the claim taken over"
        event = self._claim_event(renewed, caller, verdict.decision, verdict.recognised_by)
        if verdict.earlier_attempt is not None:
            event = replace(event, details={"reconciles": {"attempt": verdict.earlier_attempt.attempt}})
        # A new attempt is the only change that may give a claim its source or reference.
        stored = self._core.counted(claim, self._store.update_claim(renewed, event, relabelled=True))
        return self._told(verdict, stored, caller)

    # -- answers and events -----------------------------------------------------------------

    @staticmethod
    def _told(verdict: Verdict, claim: Claim, caller: Caller) -> ClaimAnswer:
        """The answer of ``verdict`` on ``claim`` as written; the claim token and idempotency key when it grants."""
        if not verdict.grants:
            return answer(verdict, claim, caller.intent(), caller.warnings, None)
        told = answer(verdict, claim, caller.intent(), caller.warnings, token(claim, caller.hasher))
        return replace(told, idempotency_key=idempotency_key(caller.hasher, claim))

    def _answered(
        self, claim: Claim, caller: Caller, decision: Decision, recognised_by: str, *, flow_warning: bool = False
    ) -> None:
        if flow_warning and flow_warnings(claim, caller.flow, decision):
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

    def get_claim(self, claim_id: str) -> tuple[Claim, list[HistoryEvent], str | None]:
        """The processing record with the first page of its history, and the cursor of the history's next page."""
        return self._with_history(self._store.get_claim(claim_id))

    def lookup(self, request: KeyOf) -> tuple[Claim, list[HistoryEvent], str | None]:
        """The processing record of a business key, found through its digest (under any secret known), as
        ``get_claim`` gives it."""
        self._core.require_safe_store()
        identities, scope, _ = self._core.identify(request)
        found = self._core.find(identities)
        if found is None:
            raise NotFound(f"No claim has this key in the scope {scope}.", target="key")
        # The claim as found: read again by its id, one deleted in between would be named by a digest.
        return self._with_history(found[0])

    def history(self, claim_id: str, page: Paging) -> tuple[list[HistoryEvent], str | None]:
        """One page of a claim's history, oldest first, and the cursor of the next page."""
        found = self._store.list_history(claim_id, limit=page.limit, cursor=page.cursor)
        if not found.items and page.cursor is None:
            self._store.get_claim(claim_id)  # every claim has a first line: raises NotFound for a claim unknown
        return found.items, found.cursor

    def _with_history(self, claim: Claim) -> tuple[Claim, list[HistoryEvent], str | None]:
        # The oldest lines first: the proceed, the reconciles and the results decide what a claim went through;
        # the rest is a page away. Repeated answers count in one line each, so most histories fit whole.
        page = self._store.list_history(claim.claim_id, limit=HISTORY_PAGE)
        return claim, page.items, page.cursor

    def find(self, matching: ClaimFilter, page: Paging) -> tuple[list[Claim], str | None]:
        """One page of the claims of a source system, reference, status or first received, without history.

        The cursor is the store's: a page may hold fewer than ``limit`` claims (even none) while it says more follow.
        """
        found = self._store.list_claims(matching, limit=page.limit, cursor=page.cursor)
        return found.items, found.cursor

    def health(self) -> str:
        """The store's kind; raises ``StoreUnavailable`` when the store does not answer, ``NotConfigured`` for
        another secret."""
        self._store.ping()
        self._core.safeguard.ring(fresh=True)
        return self._store.kind

    def restore(self) -> Restore | None:
        """The export the store was filled from, while its health is to say so (issue 35); None otherwise."""
        return restore_notice(self._store, self._core.clock())
