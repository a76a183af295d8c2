"""Check and claim: the I/O around the contract's decision table (``oncegate.domain.decisions``).

The request is parsed once, into the :class:`~oncegate.domain.decisions.Intent` the edge makes of what the run
sent and the core identifies (:meth:`~oncegate.service.core.ClaimsCore.identified`); the decision, the answer,
the history line and the inventory's counts all read that one value. The service reads the claim, asks the pure
decision function, and writes what its :class:`~oncegate.domain.decisions.ClaimAnswer` says, then tells that
same value. Writes
come first and reads only on a lost race (the store's conditional insert carries the
existing claim back), so a new claim costs one storage round trip. Every answer leaves a
history event saying how the request was recognised. A lost race (``StoreRace``) means
another run changed the claim in between: the service re-reads and decides again, so two
runs can never both be told ``proceed`` for one attempt.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from oncegate.domain.copies import mutable, replaced
from oncegate.domain.decisions import (
    UNREAD,
    Change,
    ClaimAnswer,
    Intent,
    answer,
    check_and_claim,
    conflict_answer,
    flow_warnings,
    idempotency_key,
    needs_fingerprint_records,
    unclaimed,
    withdrawn,
)
from oncegate.domain.records import Claim, ClaimFilter, FingerprintRecord, HistoryEvent, flow_text
from oncegate.domain.statuses import (
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
)
from oncegate.domain.waiting import Unwritten
from oncegate.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    NotFound,
    StateConflict,
)
from oncegate.service.commands import KeyOf, Paging
from oncegate.service.conflicts import Conflicts
from oncegate.service.core import ClaimsCore, keyed, new_grant_id, settled, token
from oncegate.stores.port import ClaimListing, ClaimReads, ClaimWrites, HistoryRecords, Reachable, RestoreReads

if TYPE_CHECKING:
    from oncegate.domain.backups import Restore

logger = logging.getLogger(__name__)

# The history lines Get claim and Look up claim return; the history's own list pages the rest.
HISTORY_PAGE = 50


@mutable
class Waited:
    """A waiting run's answers left unwritten (issue 36): before a poll, those its earlier polls gave; after, those
    this answer leaves. ``keep``: whether an ``in_progress`` answer may stay unwritten (the wait goes on after it)."""

    unwritten: Unwritten | None
    keep: bool
    # A poll reads the claim first: it asks again about a claim that is there. The wait's first request writes first.
    poll: bool = True


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

    def check_and_claim(self, sent: Intent, *, signed_in: str | None = None) -> ClaimAnswer:
        """Decide whether this run may do the side effect; see the contract's decision table. ``sent``: what the
        run sent, as the edge parsed it.

        ``signed_in`` names the caller Entra ID signed in (None with function keys): a grant made to a
        signed-in caller is given back to that caller only.
        """
        return self.decide_for(self._core.identified(sent, signed_in=signed_in))

    def decide_for(self, intent: Intent, waited: Waited | None = None) -> ClaimAnswer:
        """Check and claim for a request already identified (:meth:`ClaimsCore.identified`, or a waiting run's poll).

        With ``waited`` (a waiting run's), the claim is read first, and an ``in_progress`` answer of the series
        its wait's first answer wrote is counted in ``waited`` instead of the history while the wait goes on.
        """
        assert intent.now is not UNREAD, "an intent is identified before it is decided on"
        held = waited.unwritten if waited else None
        refusal = self._core.inventory.refusal(intent.flow, at=intent.now)
        if refusal:
            answer = self._refused(intent, refusal, waited)
        else:
            answer = settled(lambda: self._claim_once(intent, waited))
        if waited is not None and waited.unwritten is held and held is not None:
            # Answered without a line of its own counting them (a new attempt, a new claim): counted on their own.
            if held.count:
                self._store.count_event(_unwritten_line(held, intent))
            waited.unwritten = None
        self._core.inventory.answered(intent.scope, intent.flow, answer.decision, intent.now)
        return answer

    def _refused(self, intent: Intent, refusal: str, waited: Waited | None = None) -> ClaimAnswer:
        """Blocked by the inventory before any claim is made or taken over; an existing claim's history says why."""
        found = self._core.find(intent.identities)
        decided = check_and_claim(found[0] if found else None, intent, refusal=refusal)
        if found is None:
            if waited is not None:
                waited.unwritten = None  # the claim the wait's answers were of is gone, and its history with it
            return unclaimed(decided, intent)
        claim, identity = found
        intent = replaced(intent.as_(identity), decided_at=self._core.decided_at(claim, intent.now))
        self._write_history(claim, intent, decided.decision, decided.recognised_by, waited=waited)
        return answer(decided, claim, intent)

    def _claim_once(self, intent: Intent, waited: Waited | None = None) -> ClaimAnswer:
        # During a rotation the key may be claimed under an older secret: look there first.
        polled = (waited is not None and waited.poll) or not intent.may_claim
        looked_up = intent.identities if polled else intent.older_identities
        found = self._core.find(looked_up) if looked_up else None  # one secret: nothing to look up (issue 36)
        if found is not None:
            return self._decide(found[0], intent.as_(found[1]), waited)
        if not intent.may_claim:
            raise NotFound(f"No claim of this key in the scope {intent.scope} under the secrets it was named with.")
        decided = check_and_claim(None, replaced(intent, grant_id=new_grant_id()))
        claim = decided.record
        assert claim is not None, "a new key's answer carries its first claim"
        event = self._history_line(claim, intent, decided.decision, decided.recognised_by)
        try:
            stored = self._core.counted(None, self._store.create_claim(claim, event))
        except AlreadyExists as exc:
            return self._decide(exc.existing, intent, waited)
        except NotFound as exc:
            # The claim in the way was gone when read back (withdrawn during a rotation, or purged): ask again.
            raise ConcurrentUpdate(f"claim {claim.claim_id} existed and is gone") from exc
        if waited is not None:
            # No claim of the key was left (purged, or restored without it): the answers the wait left unwritten
            # went with that claim's history, and are not this new claim's.
            waited.unwritten = None
        if intent.other_identities and self._core.find(intent.other_identities) is not None:
            return self._withdrawn(stored, intent)
        if intent.source is not None:
            self._core.inventory.source_claimed(intent.scope, intent.flow, intent.source)
        return self._answer(decided, stored, intent)

    def _withdrawn(self, made: Claim, intent: Intent) -> ClaimAnswer:
        """The claim this request made is deleted, as :func:`~oncegate.domain.decisions.withdrawn` says why."""
        logger.info("Claim %s made during a rotation meets a claim under another secret: withdrawn", made.claim_id)
        self._store.delete_claim(made)
        self._core.counted(made, None)
        return unclaimed(withdrawn(), intent)

    def _decide(self, claim: Claim, intent: Intent, waited: Waited | None = None) -> ClaimAnswer:
        """Apply the decision table (oncegate.domain.decisions) to a claim that exists, and write what it says.

        One answer may be decided twice: a conflict found resolved that the claim never heard of (an earlier
        release wrote the conflict before the claim) is applied to the claim, which is then decided again.
        """
        for repair in (True, False):
            intent = replaced(intent, decided_at=self._core.decided_at(claim, intent.now)).compared(claim)
            decided = self._decided(claim, intent)
            if decided.change is Change.OPEN_CONFLICT and self._rules_moved(intent):
                # Set scope answered on another instance since this one read the rules: never a conflict under
                # rules older than the ones it answered with (issue 33).
                intent = self._under_current_rules(intent).compared(claim)
                decided = self._decided(claim, intent)
            if decided.change is Change.NEW_ATTEMPT:
                return self._take_over(claim, intent, decided)
            if decided.change is not Change.OPEN_CONFLICT:
                flow_warning = decided.decision in (Decision.DUPLICATE, Decision.IN_PROGRESS)
                self._write_history(
                    claim, intent, decided.decision, decided.recognised_by, flow_warning=flow_warning, waited=waited
                )
                return self._answer(decided, claim, intent)
            # A claim retention may delete is written first, so that a purge never deletes it under the conflict.
            conflict, record, claim = self._conflicts.open_conflict(
                claim,
                keyed(intent.fingerprint),
                ConflictOrigin.CLAIM,
                decided.reason,
                intent.run_id,
                intent.flow,
                at=intent.written_at,
                source_system=intent.source,
                changed=intent.changed or (),
            )
            if repair and conflict.status is ConflictStatus.RESOLVED:
                try:
                    claim = self._conflicts.apply_resolution(claim, conflict, record, intent.now)
                    continue
                except StateConflict:
                    pass  # a new version cannot be accepted while an attempt runs: the conflict answer stands
            recognised_by = f"{decided.reason} Conflict {conflict.conflict_id} is open."
            self._write_history(claim, intent, Decision.CONFLICT, recognised_by, waited=waited)
            return conflict_answer(decided, claim, intent, conflict.conflict_id)
        raise AssertionError("a claim repaired once is decided without repair")

    def _decided(self, claim: Claim, intent: Intent) -> ClaimAnswer:
        """The decision table on ``claim`` for ``intent`` as compared with it (:meth:`Intent.compared`)."""
        return check_and_claim(claim, replaced(intent, grant_id=new_grant_id()), self._fingerprints(claim, intent))

    def _rules_moved(self, intent: Intent) -> bool:
        """Whether the scope's rules changed since this instance read them (read again now: a conflict is rare).

        Only for a request compared member by member: a fingerprint is compared under the claim's own version.
        """
        if intent.members is None:
            return False
        return self._core.inventory.fingerprint_rules(intent.scope, fresh=True).version != intent.rules.version

    def _under_current_rules(self, intent: Intent) -> Intent:
        rules = self._core.inventory.fingerprint_rules(intent.scope)
        assert intent.fingerprint_in is not None, "a request's intent can fingerprint under any version"
        fingerprint = intent.fingerprint_in(intent.hasher, rules.version)
        return replaced(intent, rules=rules, rules_version=rules.version, fingerprint=fingerprint)

    def _fingerprints(self, claim: Claim, intent: Intent) -> list[FingerprintRecord]:
        """What reviewers decided about the request's fingerprint, read only on a mismatch (off the common path)."""
        if not needs_fingerprint_records(claim, intent):
            return []
        assert intent.fingerprint is not None
        return self._store.get_fingerprints(claim.claim_id, (intent.fingerprint.keyed, intent.fingerprint.plain))

    def _take_over(self, claim: Claim, intent: Intent, decided: ClaimAnswer) -> ClaimAnswer:
        """A new attempt for this run: proceed, or reconcile the attempt it takes over."""
        renewed = decided.record
        assert renewed is not None, "a new attempt's answer carries the claim taken over"
        event = self._history_line(renewed, intent, decided.decision, decided.recognised_by)
        if decided.earlier_attempt is not None:
            event = replaced(event, details={"reconciles": {"attempt": decided.earlier_attempt.attempt}})
        # A new attempt is the only change that may give a claim its source or reference.
        stored = self._core.counted(claim, self._store.update_claim(renewed, event, relabelled=True))
        return self._answer(decided, stored, intent)

    # -- answers and history lines ------------------------------------------------------------

    @staticmethod
    def _answer(decided: ClaimAnswer, claim: Claim, intent: Intent) -> ClaimAnswer:
        """The table's answer as told on ``claim`` as written; the claim token and idempotency key when it grants."""
        if not decided.grants:
            return answer(decided, claim, intent)
        hasher = intent.hasher
        return answer(decided, claim, intent, token(claim, hasher), idempotency_key(hasher, claim))

    def _write_history(
        self,
        claim: Claim,
        intent: Intent,
        decision: Decision,
        recognised_by: str,
        *,
        flow_warning: bool = False,
        waited: Waited | None = None,
    ) -> None:
        """The history line of an answer that changes nothing, counted in the line of its series; a waiting run's
        answers left unwritten (``waited``) are counted with it, or left so once more (issue 36)."""
        if flow_warning and flow_warnings(claim, intent.flow, decision):
            recognised_by += f" The claim belongs to {flow_text(claim.flow)}, not {flow_text(intent.flow)}."
            if claim.flow is not None and intent.flow is not None:  # always, with a flow warning
                self._core.inventory.copy_met(claim.flow, intent.flow, claim.claim_id, intent.now)
        # An answer that changes nothing repeats as often as runs ask: counted in one line, not a line each.
        line = self._core.repeated(self._history_line(claim, intent, decision, recognised_by))
        if waited is None:
            self._store.count_event(line)
            return
        held = waited.unwritten
        if held is not None and held.series == line.event_id and held.claim_id == line.claim_id:
            if waited.keep and decision is Decision.IN_PROGRESS:
                # The wait goes on: the poll address counts this answer, the history is written once the wait ends.
                waited.unwritten = replace(held, count=held.count + 1, last_at=line.at)
                return
            line = replace(line, count=held.count + 1)  # the answers before it counted in the one write
            held = None
        self._store.count_event(line)
        if held is not None and held.count:
            self._store.count_event(_unwritten_line(held, intent))
        kept = waited.keep and decision is Decision.IN_PROGRESS
        waited.unwritten = Unwritten(line.claim_id, line.event_id, line.attempt, 0, line.at) if kept else None

    def _history_line(self, claim: Claim, intent: Intent, decision: Decision, recognised_by: str) -> HistoryEvent:
        return self._core.event(
            claim,
            EventKind.CLAIM,
            decision.value,
            recognised_by,
            at=intent.written_at,
            run_id=intent.run_id,
            flow=intent.flow,
            fingerprint=keyed(intent.fingerprint),
            source=intent.source,
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
        from oncegate.service.backups import restore_notice  # with health's first call: a claim never needs it

        return restore_notice(self._store, self._core.clock())


def _unwritten_line(held: Unwritten, intent: Intent) -> HistoryEvent:
    """The answers a wait left unwritten, to count in their series' line (written with the wait's first answer)."""
    return HistoryEvent(
        claim_id=held.claim_id,
        event_id=held.series,
        at=held.last_at,
        kind=EventKind.CLAIM,
        outcome=Decision.IN_PROGRESS.value,
        attempt=held.attempt,
        recognised_by="Another run held the lease while this run waited.",
        run_id=intent.run_id,
        flow=intent.flow,
        source=intent.source,
        count=held.count,
        last_at=held.last_at,
    )
