"""Who is asking, under which key secret: a request's key reduced to its claim id, and the claim tokens.

A business key is never kept: :class:`Caller` holds it as the claim id (and fingerprint) every
secret of the key ring makes of it. A claim token is made again from the grant each time it is
needed and compared in constant time; the store never holds one this release made.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from oncegate.domain import members
from oncegate.domain.decisions import Intent
from oncegate.domain.keys import Fingerprint, KeyHasher, KeyRing
from oncegate.domain.records import Claim, FingerprintRules, Flow


def keyed(fingerprint: Fingerprint | None) -> str | None:
    return fingerprint.keyed if fingerprint else None


def stale_token_message(claim: Claim) -> str:
    """Why ``token`` is refused, the same for any token that does not verify: none of it is echoed or trusted.

    Not the attempt the token's text names: a made-up token names one too (issue 13). Never the holder's
    run id: with it, another caller could pass for the holder (issue 9).
    """
    return (
        f"This claim token does not match this claim: attempt {claim.attempt} now holds it, with status "
        f"{claim.status.value}. Send the token Check and claim gave this run; one of an earlier attempt no longer "
        "counts."
    )


def new_grant_id() -> str:
    # Random per grant: the claim token is a MAC over it, so a claim deleted and made again gets new tokens.
    return secrets.token_urlsafe(12)


@dataclass(frozen=True)
class Identity:
    """A business key and fingerprint as one secret makes them: the claim id and the keyed fingerprint."""

    hasher: KeyHasher
    claim_id: str
    fingerprint: Fingerprint | None
    members: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Caller:
    """One Check and claim request, normalised: the business key is already reduced to its claim id.

    ``claim_id``, ``fingerprint`` and ``hasher`` are the key as the secret of the claim being decided
    makes it: the current secret's, or during a rotation another secret's, under which the key was
    found. ``identities`` holds the key under every secret known, older secrets first.
    """

    claim_id: str
    scope: str
    fingerprint: Fingerprint | None
    hasher: KeyHasher
    identities: tuple[Identity, ...]
    run_id: str
    flow: Flow | None
    lease: timedelta
    now: datetime
    warnings: list[str] = field(default_factory=list)
    signed_in: str | None = None  # who signed in (Entra ID), in clear: digested per secret when stored
    source: str | None = None
    reference: str | None = None
    # When the answer was decided on the claim found (``ClaimsCore.decided_at``); None for a new claim.
    decided_at: datetime | None = None
    # The version of the scope's fingerprint rules ``fingerprint`` was made under, and how to make it under
    # another (a secret's, a version's): a claim is compared under the version it was made with (issue 25).
    rules_version: int = 0
    fingerprint_in: Callable[[KeyHasher, int], Fingerprint | None] | None = None
    # Whether a new claim may be made for it: not for a poll address made before a key secret switch, which
    # holds the key under the older secrets only; new claims are made with the newer one (issue 31).
    may_claim: bool = True
    # The keyed digest of each member of the payload (under ``hasher``), the scope's current rules they are
    # compared under, and what differs from the claim being decided (``compared``): issue 33.
    members: Mapping[str, str] | None = None
    rules: FingerprintRules = field(default_factory=FingerprintRules)
    changed: tuple[str, ...] | None = None

    @property
    def stamp(self) -> datetime:
        """The time of what this request writes: its history line, the claim's UpdatedAt. Leases run from ``now``."""
        return self.decided_at or self.now

    @property
    def granted_to(self) -> str | None:
        return self.hasher.signed_in_digest(self.signed_in) if self.signed_in else None

    @property
    def lease_expires_at(self) -> datetime:
        return self.now + self.lease

    def as_(self, identity: Identity) -> Caller:
        """This request as the secret of ``identity`` names it."""
        return replace(
            self,
            claim_id=identity.claim_id,
            fingerprint=identity.fingerprint,
            members=identity.members,
            hasher=identity.hasher,
        )

    def compared(self, claim: Claim) -> Caller:
        """This request with the members that differ from the claim's under the current rules; None (the
        fingerprints decide) unless both have member digests."""
        both = claim.members is not None and self.members is not None
        changed = members.changed(claim.members or {}, self.members or {}, self.rules) if both else None
        return replace(self, changed=changed)

    def under(self, rules_version: int) -> Caller:
        """This request fingerprinted under another version of its scope's fingerprint rules."""
        if rules_version == self.rules_version or self.fingerprint_in is None:
            return self
        fingerprint = self.fingerprint_in(self.hasher, rules_version)
        return replace(self, fingerprint=fingerprint, rules_version=rules_version)

    @property
    def older_identities(self) -> tuple[Identity, ...]:
        """The identities looked up before this one's claim is made: the older secrets' (see ``KeyRing``)."""
        mine = next(index for index, identity in enumerate(self.identities) if identity.hasher is self.hasher)
        return self.identities[:mine]

    @property
    def other_identities(self) -> tuple[Identity, ...]:
        return tuple(identity for identity in self.identities if identity.hasher is not self.hasher)

    def intent(self, *, grant_id: str = "") -> Intent:
        """What the decision table reads of this request; ``grant_id`` names the grant a new attempt would get."""
        return Intent(
            run_id=self.run_id,
            flow=self.flow,
            fingerprint=self.fingerprint,
            now=self.now,
            signed_in=self.granted_to,
            claim_id=self.claim_id,
            scope=self.scope,
            key_id=self.hasher.key_id,
            lease=self.lease,
            grant_id=grant_id,
            source=self.source,
            reference=self.reference,
            stamp=self.decided_at,
            rules_version=self.rules_version,
            members=self.members,
            changed=self.changed,
        )


def token(claim: Claim, hasher: KeyHasher) -> str:
    """The current grant's claim token: made again from the grant, never read from the store."""
    if claim.grant_id is None:
        assert claim.legacy_token is not None, "a claim has a grant id or a token of an earlier release"
        return claim.legacy_token
    return hasher.claim_token(claim.claim_id, claim.attempt, claim.grant_id)


def holds(keys: KeyRing, claim: Claim, token: str) -> bool:
    """Whether ``token`` is the current grant's, made with any secret known (a rotation may be under way)."""
    grant_id = claim.grant_id
    if grant_id is None:
        return claim.legacy_token is not None and hmac.compare_digest(token.encode(), claim.legacy_token.encode())
    return any(hasher.token_matches(token, claim.claim_id, claim.attempt, grant_id) for hasher in keys.lookup_order)
