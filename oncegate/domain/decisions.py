"""The contract's decision table as one pure function, :func:`check_and_claim`: the stored claim (or none),
the caller's intent and now, what the inventory says of the flow and what reviewers decided, in; the
decision and the exact claim to write, out. :func:`decide` is its part for a claim that exists, and
:func:`first_claim` and :func:`taken_over` the records it writes. What a claim goes through after it
(results, releases, heartbeats, a reviewer's settlement, a conflict's resolution) is in
:mod:`oncegate.domain.transitions`.

The claim service does only the I/O around it: it reads the claim (and, on a fingerprint mismatch,
what reviewers decided about that fingerprint), calls :func:`check_and_claim`, and writes what its answer
says. The property tests compare this function with their own model of the contract.

The table answers with one value, the :class:`ClaimAnswer`: what it decided and the claim to write, then, once
written, what the run is told of it (:func:`answer`, beside the table: what each decision carries, the claim
token and idempotency key with a grant, the holder with in_progress, the original result with duplicate, and
which warnings the claim met adds). The entry points write it as the JSON members the wire's
``ClaimResponse`` declares.

The request the table reads is the :class:`Intent`: one Check and claim request, the value the edge parses the
wire's request into and the decision, the answer, the history and the inventory all read (issue 32). The edge
fills in what the run sent; the service adds what it makes of it
(:meth:`oncegate.service.core.ClaimsCore.identified`, or a waiting run's poll): the business key reduced to the
claim id each secret of the key ring makes of it (the key itself is never written), the payload to its
fingerprint and member digests, the signed-in caller to the digest a grant keeps, the lease the scope gives.
Deciding on a claim changes a few of its fields (under which secret the key was found, when the answer was
decided, which members differ), never what the run sent; whether a request is the holder's own or the same data
(:meth:`Intent.is_holder_of`, :meth:`Intent.same_data`) are rules of the table, kept on it.

Times: ``now`` is when the request arrived (leases run from it); ``decided_at`` when its answer was decided
on the claim found, a tick past that claim's last write (None for a key never seen); ``written_at`` the time
of what the answer writes, the one or the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import KW_ONLY, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from oncegate.domain import members
from oncegate.domain.copies import frozen, replaced
from oncegate.domain.keys import Fingerprint, KeyHasher
from oncegate.domain.members import named
from oncegate.domain.records import (
    Claim,
    EarlierAttempt,
    FingerprintRecord,
    FingerprintRules,
    Flow,
    call_under_way,
    carrying,
    marked_by_perform,
)
from oncegate.domain.statuses import AnswerStatus, ClaimStatus, Decision
from oncegate.domain.times import said
from oncegate.domain.warnings import ANOTHER_FLOW_COPY, SOURCE_DIFFERS

MAX_RETRY_AFTER_SECONDS = 60
# An intent's time before the service read its clock for it: the edge makes it of what the run sent, untimed.
UNREAD = datetime.min.replace(tzinfo=UTC)
# A scope without fingerprint rules, as an intent holds it until the service read its scope's (one value, frozen).
NO_RULES = FingerprintRules()


# -- The request, parsed once --------------------------------------------------------------------------------


@frozen
class Identity:
    """The business key, fingerprint and signed-in caller as one secret makes them."""

    hasher: KeyHasher
    claim_id: str
    fingerprint: Fingerprint | None
    members: Mapping[str, str] | None = None
    # Who signed in (Entra ID) as this secret digests it, what a grant keeps; None with function keys.
    granted_to: str | None = None


@frozen(kw_only=True)
class Intent:
    """What a run asks, under the secret of the claim being decided; ``identities`` holds it under every
    secret known, older secrets first.

    The edge makes it of what the run sent (the fields to ``reference``, then ``key``, ``payload``,
    ``supplied_fingerprint``, ``lease_seconds``); the service identifies it (:meth:`~oncegate.service.core.
    ClaimsCore.identified`), giving the rest: the fields from ``granted_to`` on are what a claim the answer grants
    is made of: the signed-in caller's digest, the claim id and the secret's check value, the lease, the grant's id
    (random, so drawn by the service: the decision stays pure), and the rules and member digests the fingerprint
    was made under. A waiting run's poll is made identified (:mod:`oncegate.service.waits`).
    """

    run_id: str
    flow: Flow | None
    scope: str = ""
    source: str | None = None
    reference: str | None = None
    # What the run sent and only the service reads: the business key and data, the caller's own fingerprint, the
    # lease asked for. A poll sends none of them: its ticket holds the key's identities.
    key: str = ""
    payload: Any = None
    supplied_fingerprint: str | None = None
    lease_seconds: int | None = None
    # When the request arrived, read off the service's clock as it is identified (UNREAD before).
    now: datetime = UNREAD
    fingerprint: Fingerprint | None = None
    granted_to: str | None = None
    claim_id: str = ""
    key_id: str | None = None
    lease: timedelta = timedelta(seconds=300)
    grant_id: str = ""
    decided_at: datetime | None = None
    # The version of the scope's fingerprint rules ``fingerprint`` was made under (issue 25), and the current
    # rules the members are compared under (issue 33).
    rules_version: int = 0
    rules: FingerprintRules = NO_RULES
    # The keyed digest of each member of the payload, kept by a claim the answer grants (issue 33).
    members: Mapping[str, str] | None = None
    # The members that differ from the claim's under the scope's current rules, when both have member digests:
    # they decide whether the data changed. None: the fingerprints decide (oncegate.domain.members).
    changed: tuple[str, ...] | None = None
    # The warnings the request itself earned (its key, no flow, no fingerprint): every answer carries them.
    warnings: tuple[str, ...] = ()
    identities: tuple[Identity, ...] = ()
    # How to make the fingerprint under another secret or version of the rules: a claim is compared under the
    # version it was made with (issue 25).
    fingerprint_in: Callable[[KeyHasher, int], Fingerprint | None] | None = None
    # Whether a new claim may be made for it: not for a poll address made before a key secret switch, which
    # holds the key under the older secrets only; new claims are made with the newer one (issue 31).
    may_claim: bool = True
    # What a claim the answer grants ``proceed`` keeps in its data from the write that grants it: Perform once's call
    # mark (oncegate.domain.performing.call_mark), so that no request is the holder asking again from the first
    # moment the claim exists (is_holder_of). None for Check and claim, whose grants carry no data.
    data: Any = None
    # What a claim the answer grants ``reconcile`` (a call in doubt taken over) keeps in its data from the write that
    # grants it: Perform once's look-up mark (oncegate.domain.performing.look_up_mark), for the same reason.
    look_up_data: Any = None

    @property
    def written_at(self) -> datetime:
        """The time of what this request writes: its history line, the claim's UpdatedAt."""
        return self.decided_at or self.now

    @property
    def lease_expires_at(self) -> datetime:
        return self.now + self.lease

    @property
    def hasher(self) -> KeyHasher:
        """The secret the claim being decided is named with."""
        identities = self.identities
        if len(identities) == 1 and identities[0].claim_id == self.claim_id:  # one secret: no search (issue 36)
            return identities[0].hasher
        return next(identity.hasher for identity in identities if identity.claim_id == self.claim_id)

    @property
    def older_identities(self) -> tuple[Identity, ...]:
        """The identities looked up before this one's claim is made: the older secrets' (see ``KeyRing``)."""
        identities = self.identities
        if identities and identities[0].claim_id == self.claim_id:  # the oldest secret's, or the only one's
            return ()
        mine = next(index for index, identity in enumerate(identities) if identity.claim_id == self.claim_id)
        return identities[:mine]

    @property
    def other_identities(self) -> tuple[Identity, ...]:
        identities = self.identities
        if len(identities) == 1 and identities[0].claim_id == self.claim_id:
            return ()
        return tuple(identity for identity in self.identities if identity.claim_id != self.claim_id)

    def as_(self, identity: Identity) -> Intent:
        """This request as the secret of ``identity`` names it."""
        return replaced(
            self,
            claim_id=identity.claim_id,
            key_id=identity.hasher.key_id,
            fingerprint=identity.fingerprint,
            members=identity.members,
            granted_to=identity.granted_to,
        )

    def compared(self, claim: Claim) -> Intent:
        """This request as it is compared with ``claim``: member by member under the current rules where both have
        member digests; its fingerprint under the rules the claim's was made with, which reviewers' decisions
        and the conflict's id are keyed by (issue 25)."""
        mine, theirs = claim.members, self.members
        changed = None if mine is None or theirs is None else members.changed(mine, theirs, self.rules, self.hasher)
        intent = replaced(self, changed=changed)
        return intent.under(claim.rules_version) if claim.fingerprint is not None else intent

    def under(self, rules_version: int) -> Intent:
        """This request fingerprinted under another version of its scope's fingerprint rules."""
        if rules_version == self.rules_version or self.fingerprint_in is None:
            return self
        return replaced(self, fingerprint=self.fingerprint_in(self.hasher, rules_version), rules_version=rules_version)

    def same_data(self, claim: Claim) -> bool:
        """Whether the business data is the claim's: no member the current rules keep differs, or (without member
        digests) the same fingerprint."""
        if self.changed is not None:
            return not self.changed
        return self.fingerprint is not None and self.fingerprint.matches(claim.fingerprint)

    def is_holder_of(self, claim: Claim) -> bool:
        """Whether this is the very run that holds the claim, asking again because its answer was lost.

        The run id alone is not enough: makers set it by hand, so two flows (or two runs of one flow)
        may send the same one. Only the same run id from the same flow with the same business data
        gets the lease back; anything else is another run (issue 9). A request that names no flow or
        no business data cannot be told from another run of the same run id (two items of one key in
        an "Apply to each" share the run's name): never the same run. Where the grant was made to a
        signed-in caller, only that caller is the same run: the run id and flow can be read from the
        processing record by anyone allowed to read claims.

        An attempt whose call Perform once recorded is never granted again: its call is under way, and a Check and
        claim given its token could release it to a run that sends the call again (the request of Perform once
        that recorded it ends the attempt itself). Perform once's ``proceed`` writes the call with the grant
        (``data``), so no moment lies between the claim and its call. Nor is an attempt Perform once took over to
        look an earlier call up (``look_up_data``): given its token, the run could do the side effect itself
        while the look-up, finding nothing, sends the call again.
        """
        return self.asks_again(claim) and not marked_by_perform(claim.data)

    def asks_again(self, claim: Claim) -> bool:
        """Whether this is the run the claim was granted to asking again, its grant given back or not (is_holder_of)."""
        if self.flow is None or self.fingerprint is None:
            return False
        if claim.granted_to is not None and claim.granted_to != self.granted_to:
            return False
        return claim.run_id == self.run_id and claim.flow == self.flow and self.same_data(claim)


# -- The decision table -----------------------------------------------------------------------------------------


class Change(StrEnum):
    """What the service writes for an answer, besides the history line every answer leaves."""

    NONE = "none"
    NEW_CLAIM = "new_claim"  # a key never seen: its first claim is inserted
    NEW_ATTEMPT = "new_attempt"  # the run takes the claim over: a new attempt, grant and lease
    WITHDRAW = "withdraw"  # the claim this request just made is deleted (a race across a key-secret switch)
    OPEN_CONFLICT = "open_conflict"  # the conflict queue gets (or finds) this fingerprint's conflict


@frozen(kw_only=True)
class LeaseHolder:
    """The run holding a live lease: its flow, never its run id (with it, another caller could pass for it)."""

    flow: Flow | None
    lease_expires_at: datetime | None


@frozen
class ClaimAnswer:
    """One Check and claim answer: what the decision table decided, then what the run is told of it (one value).

    The table (:func:`check_and_claim`) gives the decision, how the request was recognised (the history line's
    ``recognised_by``), the reason the run is told, what the service writes (``change``) and ``record``, the exact
    claim to write: a new key's first claim, or the claim taken over by a new attempt; None when the claim stays as
    it is. Once written, :func:`answer` (or :func:`unclaimed`, :func:`conflict_answer`) fills in what the run is told
    of the claim as written; until then those fields are empty.

    ``claim_token``, ``idempotency_key`` and ``lease_expires_at`` come with a grant (proceed, reconcile) (the
    idempotency key: :func:`idempotency_key`); ``holder`` and ``retry_after_seconds`` with in_progress; ``result``
    (the claim whose recorded result is the original one) with duplicate; ``earlier_attempt`` with reconcile (the
    attempt a reconcile looks up: the one taken over, or the one the holder was granted to reconcile);
    ``conflict_id`` with conflict.
    """

    decision: Decision
    recognised_by: str
    reason: str
    change: Change = Change.NONE
    _: KW_ONLY
    earlier_attempt: EarlierAttempt | None = None
    retry_after_seconds: int | None = None
    record: Claim | None = None
    # What the run is told of the claim as written.
    claim_id: str = ""
    status: AnswerStatus = AnswerStatus.NONE
    attempt: int = 0
    warnings: list[str] = field(default_factory=list)
    claim_token: str | None = None
    idempotency_key: str | None = None
    lease_expires_at: datetime | None = None
    holder: LeaseHolder | None = None
    result: Claim | None = None
    conflict_id: str | None = None
    # With conflict: the parts of the payload that changed, by JSON Pointer (the first few), and how many more.
    changed: tuple[str, ...] = ()
    more_changed: int = 0
    own_call: bool = False  # in_progress told the holder asking again while its Perform once call is under way

    @property
    def grants(self) -> bool:
        """Whether the answer hands the run the claim token: a new attempt, or the current one again."""
        return self.decision in (Decision.PROCEED, Decision.RECONCILE)


def check_and_claim(
    claim: Claim | None, intent: Intent, records: Collection[FingerprintRecord] = (), *, refusal: str | None = None
) -> ClaimAnswer:
    """The whole of Check and claim's table: the stored claim (or None for a key never seen), the run's intent,
    the inventory's refusal of its flow (None when it may claim) and what reviewers decided about its
    fingerprint, in; the decision and the exact claim to write, out.
    """
    if refusal is not None:
        # Before any claim is made or taken over: a disabled or unregistered flow changes nothing.
        return ClaimAnswer(Decision.BLOCKED, refusal, refusal)
    if claim is None:
        reason = "First time this key is seen: do the side effect."
        return ClaimAnswer(
            Decision.PROCEED,
            "No claim existed for this key: first attempt.",
            reason,
            Change.NEW_CLAIM,
            record=first_claim(intent),
        )
    decided = decide(claim, intent, records)
    if decided.change is Change.NEW_ATTEMPT:
        return replaced(decided, record=taken_over(claim, intent, decided.earlier_attempt))
    return decided


def withdrawn() -> ClaimAnswer:
    """A claim just made during a key-secret rotation meets the key's claim under another secret: it is deleted.

    Two instances on both sides of the switch may each make a claim under their own secret. Each looks
    for the other's after making its own, so the later of the two always sees the earlier and withdraws:
    at most one proceeds. Both may withdraw; both are told to retry shortly, as in_progress, rather than
    racing again at once. See the rotation runbook in docs/operations.md.
    """
    reason = "Another instance claimed this key at the same moment during a key secret rotation; retry shortly."
    return ClaimAnswer(Decision.IN_PROGRESS, reason, reason, Change.WITHDRAW, retry_after_seconds=1)


def first_claim(intent: Intent) -> Claim:
    """A new key's claim: attempt 1, in progress, its lease running from when the run asked."""
    return Claim(
        claim_id=intent.claim_id,
        scope=intent.scope,
        status=ClaimStatus.IN_PROGRESS,
        attempt=1,
        fingerprint=intent.fingerprint.keyed if intent.fingerprint else None,
        rules_version=intent.rules_version,
        members=intent.members,
        grant_id=intent.grant_id,
        granted_to=intent.granted_to,
        run_id=intent.run_id,
        flow=intent.flow,
        first_received_at=intent.now,
        last_attempt_at=intent.now,
        updated_at=intent.now,
        lease_expires_at=intent.now + intent.lease,
        source=intent.source,
        reference=intent.reference,
        key_id=intent.key_id,
        data=intent.data,
    )


def key_attempt(claim: Claim, earlier: EarlierAttempt | None) -> int | None:
    """The attempt whose idempotency key a new attempt taking ``claim`` over carries (issue 25): when it reconciles
    an ``earlier`` attempt in doubt (its lease ran out, or its outcome was recorded ``unknown``), that attempt's, or
    the one whose key it carried in turn, so the target recognises a request that already reached it; else None,
    its own: an attempt after a recorded failure (or a release) gets a key of its own, so the target does not
    answer the retry with the failure it cached. The key itself: :func:`idempotency_key`."""
    if earlier is None:
        return None
    return claim.idempotency_attempt or claim.attempt


def taken_over(claim: Claim, intent: Intent, earlier: EarlierAttempt | None) -> Claim:
    """The claim as a new attempt takes it over: what the earlier attempt left (its result, error, grant) is
    cleared; the first source and reference named are kept (a claim without them takes this run's). An
    attempt that reconciles keeps the idempotency key of the attempt in doubt."""
    fingerprint = intent.fingerprint.keyed if intent.fingerprint else None
    return replaced(
        claim,
        status=ClaimStatus.IN_PROGRESS,
        attempt=claim.attempt + 1,
        fingerprint=fingerprint or claim.fingerprint,
        rules_version=intent.rules_version if fingerprint else claim.rules_version,
        members=intent.members if fingerprint else claim.members,
        idempotency_attempt=key_attempt(claim, earlier),
        grant_id=intent.grant_id,
        granted_to=intent.granted_to,
        legacy_token=None,
        run_id=intent.run_id,
        flow=intent.flow,
        last_attempt_at=intent.written_at,
        updated_at=intent.written_at,
        lease_expires_at=intent.now + intent.lease,
        target_record_id=None,
        # A grant that reconciles looks first (what the earlier attempt did): it writes no call of its own yet, only
        # Perform once's look-up mark, and keeps the call it looks up (where it went), as it keeps its key.
        data=intent.data if earlier is None else carrying(intent.look_up_data, claim),
        completed_at=None,
        error=None,
        retryable=None,
        earlier_attempt=earlier,
        released_in_doubt=False,
        purged_at=None,  # a tombstone taken over (a reviewer accepted new data) is a claim again
        source=claim.source or intent.source,
        reference=claim.reference or intent.reference,
    )


def needs_fingerprint_records(claim: Claim, intent: Intent) -> bool:
    """Whether :func:`decide` needs what reviewers decided about this fingerprint: only on a mismatch."""
    return _comparable(claim, intent.fingerprint) and not intent.same_data(claim)


def decide(claim: Claim, intent: Intent, records: Collection[FingerprintRecord] = ()) -> ClaimAnswer:
    """The contract's decision table for a claim that exists (a new key is always ``proceed``)."""
    if _is_changed(claim, intent, records):
        return _conflict(claim, intent)
    if claim.status is ClaimStatus.IN_PROGRESS:
        return _held(claim, intent)
    if claim.status is ClaimStatus.UNKNOWN:
        return _in_doubt(claim, intent)
    if claim.status is ClaimStatus.SUCCEEDED:
        return _duplicate(claim, intent)
    if claim.status is ClaimStatus.FAILED and not claim.retryable:
        return _blocked(claim)
    if claim.status is ClaimStatus.RELEASED:
        previous = "was released"
    else:
        previous = f"failed and may be retried ({claim.error or 'no reason given'})"
    reason = f"Attempt {claim.attempt} {previous}: do the side effect."
    return ClaimAnswer(Decision.PROCEED, reason, reason, Change.NEW_ATTEMPT)


def earlier_attempt(claim: Claim) -> EarlierAttempt:
    """The claim's current attempt, as the next run must look it up."""
    return EarlierAttempt(
        attempt=claim.attempt,
        run_id=claim.run_id,
        flow=claim.flow,
        status=claim.status,
        started_at=claim.last_attempt_at,
        lease_expires_at=claim.lease_expires_at,
        error=claim.error,
    )


def short(fingerprint: Fingerprint | str | None) -> str:
    if fingerprint is None:
        return "(none)"
    text = fingerprint.keyed if isinstance(fingerprint, Fingerprint) else fingerprint
    return text if len(text) <= 24 else text[:23] + "…"


def _comparable(claim: Claim, fingerprint: Fingerprint | None) -> bool:
    # Without two fingerprints there is nothing to compare; a released claim has no result to protect.
    return fingerprint is not None and claim.fingerprint is not None and claim.status is not ClaimStatus.RELEASED


def _is_changed(claim: Claim, intent: Intent, records: Collection[FingerprintRecord]) -> bool:
    fingerprint = intent.fingerprint
    if fingerprint is None or not needs_fingerprint_records(claim, intent):
        return False
    forms = (fingerprint.keyed, fingerprint.plain)
    # Compared member by member, the claim's own fingerprint (made under the rules of its day) decides nothing.
    return not (claim.aliased(forms, records) if intent.changed is not None else claim.accepts(forms, records))


def _conflict(claim: Claim, intent: Intent) -> ClaimAnswer:
    reason = f"Fingerprint {short(intent.fingerprint)} differs from the claim's {short(claim.fingerprint)}."
    if intent.changed:
        # The parts first: a list or a terminal that clips the reason still shows where to look.
        shown, more = named(intent.changed)
        reason = f"Changed: {', '.join(shown)}{f' and {more} more parts' if more else ''}. {reason}"
    return ClaimAnswer(Decision.CONFLICT, reason, reason, Change.OPEN_CONFLICT)


def lease_left(lease: datetime, now: datetime) -> int:
    """When a run told ``in_progress`` asks again, in seconds: when the lease runs out, within a minute."""
    return max(1, min(MAX_RETRY_AFTER_SECONDS, math.ceil((lease - now).total_seconds())))


def _held(claim: Claim, intent: Intent) -> ClaimAnswer:
    lease = claim.lease_expires_at
    if lease is None or lease <= intent.now:
        expired = f"expired at {said(lease)}" if lease else "expired"
        return _reconcile(claim, f"the lease of attempt {claim.attempt} {expired} without a result")
    if intent.is_holder_of(claim):
        return _granted_again(claim)
    retry_after = lease_left(lease, intent.now)
    own = intent.asks_again(claim)
    return ClaimAnswer(
        Decision.IN_PROGRESS,
        f"Run {claim.run_id} holds the lease until {said(lease)}.",
        held_reason(retry_after, own=own),
        retry_after_seconds=retry_after,
        own_call=own,
    )


def _in_doubt(claim: Claim, intent: Intent) -> ClaimAnswer:
    """An attempt recorded ``unknown`` is reconciled; but while the call Perform once made for it may still be under
    way at the target (its deadline has not passed), no look-up can tell what it did: a run handed the claim would
    look, find nothing yet and do the side effect itself. It is in_progress until then, as Perform once says."""
    deadline = call_under_way(claim, intent.now)
    if deadline is None:
        return _reconcile(claim, f"attempt {claim.attempt} was sent but its outcome is unknown")
    retry_after = lease_left(deadline, intent.now)
    return ClaimAnswer(
        Decision.IN_PROGRESS,
        f"The call of attempt {claim.attempt} is in doubt and may still be under way until {said(deadline)}.",
        in_doubt_reason(retry_after),
        retry_after_seconds=retry_after,
    )


def in_doubt_reason(retry_after: int) -> str:
    """What a run is told while Perform once's call in doubt may still be under way, asked to come back after
    ``retry_after`` seconds."""
    return (
        f"An earlier call's outcome is in doubt and may still be under way at the target; retry in {retry_after} s, "
        "when a look-up can tell."
    )


def held_reason(retry_after: int, *, own: bool = False) -> str:
    """What a run is told while another run holds the lease, asked to come back after ``retry_after`` seconds;
    ``own``: while its own Perform once call (or look-up) is under way, made by an earlier request of the run."""
    if own:
        return (
            f"This run's Perform once call (or look-up of an earlier one) is under way, made by an earlier request "
            f"of the run; ask again in {retry_after} s for its outcome: the call is not sent twice."
        )
    return f"Another run is doing the side effect now; retry in {retry_after} s or stop."


def _granted_again(claim: Claim) -> ClaimAnswer:
    # The run's first answer was lost. An attempt granted as reconcile must be answered reconcile again:
    # told "proceed", the run would skip looking in the target system for what the earlier attempt did.
    if claim.earlier_attempt is None:
        return ClaimAnswer(
            Decision.PROCEED,
            "The same run asked again while holding the lease.",
            "This run already holds the claim (its first answer was lost): go on.",
        )
    return ClaimAnswer(
        Decision.RECONCILE,
        "The same run asked again while holding the lease granted to reconcile.",
        "This run already holds the claim to reconcile (its first answer was lost): look the record up in the "
        "target system; record succeeded with its id if it is there, else do the side effect.",
        earlier_attempt=claim.earlier_attempt,
    )


def _reconcile(claim: Claim, why: str) -> ClaimAnswer:
    return ClaimAnswer(
        Decision.RECONCILE,
        f"Reconcile: {why}.",
        f"The earlier attempt may have done the side effect ({why}): look the record up in the target system; "
        "record succeeded with its id if it is there, else do the side effect.",
        Change.NEW_ATTEMPT,
        earlier_attempt=earlier_attempt(claim),
    )


def _duplicate(claim: Claim, intent: Intent) -> ClaimAnswer:
    if intent.fingerprint is None:
        how = f"No fingerprint was given, so only the key was compared; attempt {claim.attempt} succeeded."
    elif intent.fingerprint.matches(claim.fingerprint) or claim.fingerprint is None:
        how = f"Same key and fingerprint {short(intent.fingerprint)} as attempt {claim.attempt}, which succeeded."
    elif intent.same_data(claim):
        how = (
            f"Same key and business data as attempt {claim.attempt}, which succeeded: the payload differs only in "
            "what the scope's fingerprint rules leave out."
        )
    else:
        how = f"Fingerprint {short(intent.fingerprint)} was accepted by a reviewer as the same business intent."
    if claim.purged_at is not None:
        # Retention purged the claim, and its tombstone keeps the key for the scope's horizon (issue 26).
        how += f" The claim was purged at {said(claim.purged_at)}; its tombstone recognised the key."
        return ClaimAnswer(
            Decision.DUPLICATE,
            how,
            f"Already done by run {claim.run_id}, long enough ago that only the target record and the time it was "
            "done are kept: skip the side effect and reuse them.",
        )
    return ClaimAnswer(
        Decision.DUPLICATE, how, f"Already done by run {claim.run_id}: skip the side effect and reuse the result."
    )


def _blocked(claim: Claim) -> ClaimAnswer:
    why = claim.error or "no reason given"
    failed = f"Attempt {claim.attempt} failed and was marked not retryable ({why})"
    # Once reviewed, a person has acted: the key stays blocked for good, and the flow only stops.
    then = f"{claim.reviewer} reviewed it and the key stays blocked: stop" if claim.reviewer else "a person must act"
    return ClaimAnswer(Decision.BLOCKED, f"Attempt {claim.attempt} failed and is not retryable.", f"{failed}: {then}.")


# -- A reviewer settles an attempt in doubt ----------------------------------------------------


# -- What each answer carries ---------------------------------------------------------------------------------


# Said to the maker instead of the table's reason: the fingerprints (keyed digests) mean nothing to a maker, they
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


# Each claim status as an answer tells it, found once: ``AnswerStatus(value)`` looked it up by value on every answer
# (issue 36).
_ANSWERED = {status: AnswerStatus(status.value) for status in ClaimStatus}


def answer(
    decided: ClaimAnswer, claim: Claim, intent: Intent, token: str | None = None, key: str | None = None
) -> ClaimAnswer:
    """The table's answer as told on ``claim`` (as written): what each decision carries, and its warnings.

    The warnings are those the request itself earned (``intent.warnings``: its key, no flow, no fingerprint),
    then those meeting this claim adds; ``token`` is the claim token of the claim's grant, handed over only with
    a decision that grants, with ``key``, the attempt's idempotency key (:func:`idempotency_key`). The table
    gives ``earlier_attempt`` with reconcile only, and ``retry_after_seconds`` with in_progress only: they are
    told as decided.
    """
    # Each decision's own fields given with the others: one record made, not one and a copy (issue 36).
    carries: dict[str, Any] = {}
    if decided.grants:
        carries = {"claim_token": token, "idempotency_key": key, "lease_expires_at": claim.lease_expires_at}
    elif decided.decision is Decision.IN_PROGRESS:
        carries = {"holder": LeaseHolder(flow=claim.flow, lease_expires_at=claim.lease_expires_at)}
    elif decided.decision is Decision.DUPLICATE:
        carries = {"result": claim}
    return replaced(
        decided,
        claim_id=claim.claim_id,
        status=_ANSWERED[claim.status],
        attempt=claim.attempt,
        warnings=[
            *intent.warnings,
            *flow_warnings(claim, intent.flow, decided.decision),
            *source_warnings(claim, intent.source),
        ],
        **carries,
    )


def conflict_answer(decided: ClaimAnswer, claim: Claim, intent: Intent, conflict_id: str) -> ClaimAnswer:
    """The table's ``conflict`` as told: the conflict the owner will decide, and nothing done; the parts that
    changed named where the payloads were compared part by part (never their values). The table's reason names
    the fingerprints, which stay in the history's line."""
    shown, more = named(intent.changed or ())
    reason = CONFLICT_REASON
    if shown:
        reason = (
            f"This key was already claimed with different business data: {', '.join(shown)}"
            f"{f' and {more} more parts' if more else ''} changed. Nothing was done; the conflict waits for its owner."
        )
    told = answer(decided, claim, intent)
    return replaced(told, reason=reason, conflict_id=conflict_id, changed=shown, more_changed=more)


def unclaimed(decided: ClaimAnswer, intent: Intent) -> ClaimAnswer:
    """The table's answer as told when no claim stands for the key (none made, or the one made withdrawn):
    attempt 0."""
    return replaced(
        decided, claim_id=intent.claim_id, status=AnswerStatus.NONE, attempt=0, warnings=list(intent.warnings)
    )
