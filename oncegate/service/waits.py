"""Check and claim (wait): a run that meets another run's lease waits for it, polled by the flow engine (issue 25).

The first request is Check and claim itself; when its answer is ``in_progress`` the run's request is
kept as a :class:`~oncegate.domain.waiting.Waiting` (the HTTP edge seals it into the poll address).
Each poll runs Check and claim again for it through the same decision table, so it answers what the
run would be answered asking again: ``duplicate`` once the holder succeeded, ``proceed`` after a
retryable failure or a release, ``reconcile`` after its lease ran out; ``in_progress`` while the
holder holds the lease, until the wait's deadline. A poll repeated after it answered is the same
run asking again: it gets its own grant back.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta

from oncegate.domain.decisions import ClaimAnswer, Identity, Intent, held_reason, in_doubt_reason
from oncegate.domain.keys import Fingerprint, KeyHasher
from oncegate.domain.statuses import AnswerStatus, Decision
from oncegate.domain.times import said
from oncegate.domain.waiting import Waiting, WaitingIdentity
from oncegate.errors import InvalidRequest, NotFound
from oncegate.service.claims import Claims, Waited
from oncegate.service.core import ClaimsCore

# The poll address's parameter, named by every refusal of one.
TICKET = "ticket"
STALE = "This poll address was made with a key secret the service no longer claims with: ask Check and claim again."


class Waits:
    """Check and claim that waits for the holder, and the polls that ask again."""

    def __init__(self, core: ClaimsCore, claims: Claims) -> None:
        self._core = core
        self._claims = claims

    def check_and_wait(
        self, sent: Intent, *, signed_in: str | None, max_wait: timedelta
    ) -> tuple[ClaimAnswer, Waiting | None]:
        """Check and claim; the waiting run too when the answer is ``in_progress`` (None: the answer is final)."""
        intent = self._core.identified(sent, signed_in=signed_in)
        waited = Waited(None, keep=max_wait > timedelta(0), poll=False)
        answer = self._claims.decide_for(intent, waited)
        if answer.decision is not Decision.IN_PROGRESS or max_wait <= timedelta(0):
            return answer, None
        waiting = self.waiting(intent, intent.now + max_wait)
        if waiting is None:
            return answer, None
        return _paced(answer, waiting, intent.now), replace(waiting, unwritten=waited.unwritten)

    def poll(self, waiting: Waiting, *, signed_in: str | None) -> tuple[ClaimAnswer, Waiting | None]:
        """Check and claim again for a waiting run; the run still waiting, or None when the answer is final."""
        self._core.require_safe_store()
        now = self._core.clock()
        if waiting.expired(now):
            raise InvalidRequest(
                f"This poll address expired: its wait ended at {said(waiting.deadline)}. Ask Check and claim again.",
                target=TICKET,
            )
        intent = self._intent(waiting, signed_in, now)
        # A ticket of a release before issue 36 has no series: its first in_progress answer writes one, as then.
        waited = Waited(waiting.unwritten, keep=not waiting.over(now))
        try:
            answer = self._claims.decide_for(intent, waited)
        except NotFound as exc:
            if intent.may_claim:
                raise
            # Made before the switch, and the key's claim under the older secret is gone: only the key makes a new one.
            raise InvalidRequest(STALE, target=TICKET) from exc
        if answer.decision is Decision.IN_PROGRESS and not waiting.over(now):
            return _paced(answer, waiting, now), replace(waiting, unwritten=waited.unwritten)
        return answer, None

    def require_own(self, waiting: Waiting, signed_in: str | None) -> None:
        """400 naming ``ticket`` unless the poll comes from the signed-in caller the address was handed to (if any):
        an address is in the run's history, read by whoever may read the flow's runs (Perform once's polls too)."""
        ring = self._core.keys
        if waiting.granted_to is not None and not (
            signed_in and any(waiting.granted_to == hasher.signed_in_digest(signed_in) for hasher in ring.lookup_order)
        ):
            raise InvalidRequest("This poll address was handed to another signed-in caller.", target=TICKET)

    def waiting(self, intent: Intent, deadline: datetime) -> Waiting | None:
        """The run as its polls ask again until ``deadline`` (Perform once's waits too); None when they could not
        (the answer stands, 200 as without wait)."""
        assert intent.fingerprint_in is not None, "a request's intent can fingerprint under any version"
        versions = {intent.rules_version}
        found = self._core.find(intent.identities)
        if found is not None:
            claim, identity = found
            if identity.fingerprint is not None and claim.fingerprint == identity.fingerprint.plain:
                # A claim of a release before fingerprints were keyed: the poll address carries the keyed form only.
                return None
            # The claim met is compared under its own version: the polls must be able to, without the payload.
            versions.add(claim.rules_version)
        identities = []
        for identity in intent.identities:
            made = {version: intent.fingerprint_in(identity.hasher, version) for version in versions}
            fingerprints = {version: fingerprint.keyed for version, fingerprint in made.items() if fingerprint}
            identities.append(WaitingIdentity(identity.hasher.key_id, identity.claim_id, fingerprints))
        return Waiting(
            scope=intent.scope,
            run_id=intent.run_id,
            flow=intent.flow,
            lease_seconds=int(intent.lease.total_seconds()),
            identities=tuple(identities),
            rules_version=intent.rules_version,
            deadline=deadline,
            since=intent.now,
            source=intent.source,
            reference=intent.reference,
            granted_to=intent.granted_to,
        )

    def _intent(self, waiting: Waiting, signed_in: str | None, now: datetime) -> Intent:
        """The waiting run's Check and claim, under the key secrets this instance knows now."""
        ring = self._core.keys
        hashers = {hasher.key_id: hasher for hasher in ring.lookup_order}
        self.require_own(waiting, signed_in)

        known = [(hashers[mine.key_id], mine) for mine in waiting.identities if mine.key_id in hashers]

        def fingerprint_in(hasher: KeyHasher, version: int) -> Fingerprint | None:
            return _fingerprint(next(mine for made_by, mine in known if made_by is hasher), version)

        identities = tuple(
            Identity(
                hasher,
                mine.claim_id,
                _fingerprint(mine, waiting.rules_version),
                granted_to=hasher.signed_in_digest(signed_in) if signed_in else None,
            )
            for hasher, mine in known
        )
        if not identities:
            raise InvalidRequest(STALE, target=TICKET)
        # A poll address made before a switch lacks the key under the new secret (only the key makes it): the
        # key's claim under the secret it has is decided on as before, but no new claim can be made for it.
        current = next((identity for identity in identities if identity.hasher is ring.current), identities[-1])
        intent = Intent(
            run_id=waiting.run_id,
            flow=waiting.flow,
            now=now,
            scope=waiting.scope,
            lease=timedelta(seconds=waiting.lease_seconds),
            source=waiting.source,
            reference=waiting.reference,
            rules_version=waiting.rules_version,
            identities=identities,
            fingerprint_in=fingerprint_in,
            may_claim=current.hasher is ring.current,
        )
        return intent.as_(current)


def _fingerprint(identity: WaitingIdentity, version: int) -> Fingerprint | None:
    """The waiting run's fingerprint under a version of the rules, as one secret keyed it (None: it sent none)."""
    if not identity.fingerprints:
        return None
    keyed = identity.fingerprints.get(version)
    if keyed is None:
        raise InvalidRequest(
            "The key was claimed again under fingerprint rules set while this run waited: ask Check and claim again.",
            target=TICKET,
        )
    # The keyed form only: the poll address carries no plain digest of the business data.
    return Fingerprint(keyed=keyed, plain=keyed)


def _paced(answer: ClaimAnswer, waiting: Waiting, now: datetime) -> ClaimAnswer:
    """The answer asking the engine to poll again on the wait's schedule (issue 33): sooner than the lease left,
    so that a holder done early is seen soon, and never past the wait's deadline or the holder's lease."""
    if answer.holder is None:
        # No holder (a claim withdrawn in a key-secret rotation): ask again as the answer says, within the wait.
        left = max(1, math.ceil((waiting.deadline - now).total_seconds()))
        return replace(answer, retry_after_seconds=min(answer.retry_after_seconds or left, left))
    if answer.status is AnswerStatus.UNKNOWN:
        # No run holds it: Perform once's call in doubt may still be under way until the answer's time, when a poll
        # is handed the claim to reconcile.
        seconds = waiting.poll_after(now, now + timedelta(seconds=answer.retry_after_seconds or 0))
        return replace(answer, retry_after_seconds=seconds, reason=in_doubt_reason(seconds))
    seconds = waiting.poll_after(now, answer.holder.lease_expires_at)
    return replace(answer, retry_after_seconds=seconds, reason=held_reason(seconds, own=answer.own_call))
