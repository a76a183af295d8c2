"""One Check and claim request, parsed once: the value the decision table, the answer, the history and the
inventory all read (issue 32).

The service (:meth:`oncegate.service.claims.Claims.intent`, or a waiting run's poll) makes it from the request:
the business key reduced to the claim id each secret of the key ring makes of it (the key itself is never
kept), the payload to its fingerprint and member digests, the signed-in caller to the digest a grant keeps,
the lease the scope gives. Deciding on a claim changes a few of its fields (under which secret the key was
found, when the answer was decided, which members differ), never what the run sent.

Times: ``now`` is when the request arrived (leases run from it); ``decided_at`` when its answer was decided
on the claim found, a tick past that claim's last write (None for a key never seen); ``written_at`` the time
of what the answer writes, the one or the other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from oncegate.domain import members
from oncegate.domain.copies import quick_init, replaced
from oncegate.domain.keys import Fingerprint, KeyHasher
from oncegate.domain.records import Claim, FingerprintRules, Flow


@dataclass(frozen=True)
class Identity:
    """The business key, fingerprint and signed-in caller as one secret makes them."""

    hasher: KeyHasher
    claim_id: str
    fingerprint: Fingerprint | None
    members: Mapping[str, str] | None = None
    # Who signed in (Entra ID) as this secret digests it, what a grant keeps; None with function keys.
    granted_to: str | None = None


@quick_init
@dataclass(frozen=True, kw_only=True)
class Intent:
    """What a run asks, under the secret of the claim being decided; ``identities`` holds it under every
    secret known, older secrets first.

    The fields from ``granted_to`` on are what a claim the answer grants is made of: the signed-in caller's
    digest, the claim id and the secret's check value, the lease, the grant's id (random, so drawn by the
    service: the decision stays pure), the source system and reference, and the rules and member digests the
    fingerprint was made under.
    """

    run_id: str
    flow: Flow | None
    fingerprint: Fingerprint | None
    now: datetime
    granted_to: str | None = None
    claim_id: str = ""
    scope: str = ""
    key_id: str | None = None
    lease: timedelta = timedelta(seconds=300)
    grant_id: str = ""
    source: str | None = None
    reference: str | None = None
    decided_at: datetime | None = None
    # The version of the scope's fingerprint rules ``fingerprint`` was made under (issue 25), and the current
    # rules the members are compared under (issue 33).
    rules_version: int = 0
    rules: FingerprintRules = field(default_factory=FingerprintRules)
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
        both = claim.members is not None and self.members is not None
        changed = members.changed(claim.members or {}, self.members or {}, self.rules) if both else None
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
        """
        if self.flow is None or self.fingerprint is None:
            return False
        if claim.granted_to is not None and claim.granted_to != self.granted_to:
            return False
        return claim.run_id == self.run_id and claim.flow == self.flow and self.same_data(claim)
