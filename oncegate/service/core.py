"""What the claim, result and conflict services share: the store's claims read, the key secrets and
clock, and the writes every one of them makes (history lines, status changes counted for the scope
catalogue), and the one parse of a request's key and data under every secret: Check and claim's whole
request, as the edge parsed it into its :class:`~oncegate.domain.decisions.Intent`, is identified here.

Beside it, what every claim service does the same way:

- a lost race to another writer is run again (:func:`settled`): a conditional write that lost
  (``StoreRace``) means another run changed the claim in between, so the attempt re-reads and decides
  again, and two runs can never both be told ``proceed``;
- claim tokens are made again from the grant each time one is needed (:func:`token`) and compared in
  constant time (:func:`holds`): the store never holds a token this release made, only the grant's random
  id, and a token is a MAC over it under the secret the claim's id was made with
  (:meth:`~oncegate.domain.keys.KeyHasher.claim_token`);
- the claims this instance wrote last are remembered at the version they were written with
  (:class:`RecentClaims`): the run that was granted a claim usually sends its result to the instance that
  granted it, which then writes the result in one request, with no read first, conditioned on the
  remembered version (the ETag on Table Storage). A claim changed by anyone since fails it, and the change
  is then decided again on a fresh read: a remembered claim is only ever the starting point of such a
  conditional write, never the ground for a refusal or a no-op.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from oncegate.bounded import Bounded
from oncegate.domain import members
from oncegate.domain.copies import replaced
from oncegate.domain.decisions import Identity, Intent
from oncegate.domain.fingerprint_rules import applied
from oncegate.domain.keys import (
    Fingerprint,
    KeyHasher,
    KeyRing,
    compact_time,
    named_personally,
    normalise_scope,
    normalise_source,
    urlsafe_text,
)
from oncegate.domain.records import Claim, FingerprintRecord, HistoryEvent
from oncegate.domain.sensitive import NUMBER_FINDINGS, SensitivePolicy, sensitive_findings
from oncegate.domain.statuses import (
    EventKind,
)
from oncegate.domain.warnings import NO_FINGERPRINT, NO_FLOW, RULE_MATCHED_NOTHING, SENSITIVE_KEY
from oncegate.errors import (
    NotFound,
    SensitiveKey,
    StoreRace,
    StoreUnavailable,
)
from oncegate.service.commands import BusinessData, KeyOf
from oncegate.service.inventory import Inventory
from oncegate.service.safeguard import Safeguard
from oncegate.stores.port import ClaimReads, HistoryRecords

logger = logging.getLogger(__name__)

C = TypeVar("C", Claim, None)
T = TypeVar("T")

# Each lost race means another writer made progress, so a handful of rounds always settles.
RACE_LIMIT = 8
# About 1 KB a claim: a few MB at most, and more than the claims one instance holds leases on.
REMEMBERED = 4096


def utc_now() -> datetime:
    return datetime.now(UTC)


def settled(attempt: Callable[[], T]) -> T:
    """Run ``attempt`` again each time it loses a race to another writer (it re-reads what changed)."""
    for _ in range(RACE_LIMIT):
        try:
            return attempt()
        except StoreRace:
            continue
    raise StoreUnavailable("the record kept changing under this request; retry shortly.")


class RecentClaims:
    """A bounded, thread-safe memory of the last claims written, least recently written forgotten first."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._claims: Bounded[str, Claim] = Bounded(size)

    def remember(self, claim: Claim) -> None:
        """Keep ``claim`` as stored; its version is what a later write is conditioned on."""
        self._claims.put(claim.claim_id, claim)

    def recall(self, claim_id: str) -> Claim | None:
        """The claim as this instance last wrote it, or None."""
        return self._claims.get(claim_id)

    def forget(self, claim_id: str) -> None:
        self._claims.pop(claim_id)


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
    # ``secrets.token_urlsafe(12)`` spelled out: the same read of ``os.urandom`` and the same text, without its two
    # calls around it (issue 36).
    return urlsafe_text(os.urandom(12)).rstrip("=")


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


# The event id of a line counting repeated answers starts so; the others start with their time, a digit.
SERIES = "series-"
# The least step between two times a store keeps apart: both keep microseconds.
TICK = timedelta(microseconds=1)


class CoreRecords(ClaimReads, HistoryRecords, Protocol):
    """What the core reads itself: a claim, its fingerprint records, and (rows of 0.1.0) its history."""


class ClaimsCore:
    """The store, the key secrets, the clock and the policies every claim service works with."""

    def __init__(
        self,
        store: CoreRecords,
        safeguard: Safeguard,
        *,
        clock: Callable[[], datetime],
        inventory: Inventory,
        sensitive_keys: SensitivePolicy,
        sensitive_data: SensitivePolicy = SensitivePolicy.REJECT,
    ) -> None:
        self.store = store
        self.safeguard = safeguard
        self.clock = clock
        self.inventory = inventory
        self.sensitive_keys = sensitive_keys
        self.sensitive_data = sensitive_data
        self.recent = RecentClaims()
        self._stamped: Bounded[str, datetime] = Bounded(REMEMBERED)

    def identified(self, sent: Intent, *, signed_in: str | None = None) -> Intent:
        """Check and claim's request (``sent``: what the run sent, as the edge parsed it) identified once: its key
        reduced to claim ids, its data to fingerprints and member digests, the signed-in caller to the digest a
        grant keeps, the lease its scope gives, the warnings it earned. Nothing is written yet; every step after
        reads this one value."""
        # The safeguard's ring read once for the request (``require_safe_store`` reads the same): it refuses an
        # unsafe store here, and the identities and the current secret come from the one reading.
        ring = self.keys
        now = self.clock()  # the intent's time, which the inventory's cache is judged fresh at too
        inventory = self.inventory
        rules = inventory.fingerprint_rules(normalise_scope(sent.scope), at=now)
        identities, scope, warnings = self.identify(sent, rules_version=rules.version, ring=ring)
        if signed_in is not None:
            identities = tuple(replace(one, granted_to=one.hasher.signed_in_digest(signed_in)) for one in identities)
        # Older secrets first: the current one's identity is the last, but during a rotation's phases.
        current = identities[-1]
        if current.hasher is not ring.current:
            current = next(identity for identity in identities if identity.hasher is ring.current)
        if current.fingerprint is None:
            warnings.append(NO_FINGERPRINT)
        if sent.payload is not None and rules.include:
            unmatched = members.unmatched(sent.payload, rules)
            inventory.rules_matched(scope, rules, unmatched)
            if unmatched:
                warnings.append(RULE_MATCHED_NOTHING)
        if sent.flow is None:
            warnings.append(NO_FLOW)
        # Identified as the current secret names it at once: the same record ``.as_(current)`` makes, without a
        # second copy (issue 36).
        return replaced(
            sent,
            claim_id=current.claim_id,
            key_id=current.hasher.key_id,
            fingerprint=current.fingerprint,
            members=current.members,
            granted_to=current.granted_to,
            now=now,
            scope=scope,
            lease=timedelta(seconds=sent.lease_seconds or inventory.lease_seconds(scope, at=now)),
            source=normalise_source(sent.source),
            rules_version=rules.version,
            rules=rules,
            warnings=tuple(warnings),
            identities=identities,
            fingerprint_in=lambda hasher, version: self.fingerprint(hasher, sent, version),
        )

    def identify(
        self, request: KeyOf | Intent, *, rules_version: int = 0, ring: KeyRing | None = None
    ) -> tuple[tuple[Identity, ...], str, list[str]]:
        """The key under every secret known (older first), the scope, and the warnings the key earned; the
        fingerprint made under that version of the scope's fingerprint rules. ``ring``: the key secrets as the
        caller already read them (:attr:`keys` otherwise)."""
        data = _business_data(request)
        # A lookup stores nothing, so its refusal does not say so.
        warnings = self.check_key(request.scope, request.key, stores=data is not None)
        payload = data[0] if data is not None and self._keeps_members(data[0]) else None
        identities = tuple(
            [
                Identity(
                    hasher,
                    hasher.claim_id(request.scope, request.key),
                    self.fingerprint(hasher, request, rules_version),
                    hasher.members(payload) if payload is not None else None,
                )
                for hasher in (ring or self.keys).lookup_order
            ]
        )
        return identities, normalise_scope(request.scope), warnings

    def _keeps_members(self, payload: Any) -> bool:
        """Whether a claim of this payload keeps its member digests: not when their names (kept in clear) seem to
        carry personal data, unless the data policy is off (issue 33)."""
        if payload is None:
            return False
        return self.sensitive_data is SensitivePolicy.OFF or not named_personally(payload)

    def fingerprint(self, hasher: KeyHasher, request: KeyOf | Intent, rules_version: int) -> Fingerprint | None:
        """The request's fingerprint under a version of its scope's fingerprint rules (issue 25)."""
        data = _business_data(request)
        if data is None:
            return None
        payload, supplied = data
        if payload is not None and rules_version:
            payload = applied(payload, self.inventory.fingerprint_rules(normalise_scope(request.scope), rules_version))
        return hasher.fingerprint(supplied=supplied, payload=payload)

    def check_key(self, scope: str, key: str, *, stores: bool = True) -> list[str]:
        """The warning a business key earned for personal data, unless it is refused for it.

        A key of the shape its scope's owner declared (the scope's key pattern) earns nothing: the owner
        knows what the scope's ids look like where the digits alone cannot tell. ``stores`` says whether
        the request would store anything, which the refusal then says it did not.
        """
        findings = [] if self.sensitive_keys is SensitivePolicy.OFF else sensitive_findings(key)
        if findings and self.inventory.declares(scope, key):
            return []
        if findings and self.sensitive_keys is SensitivePolicy.REJECT:
            raise SensitiveKey(_key_refusal(scope, findings, stores=stores), target="key")
        return [SENSITIVE_KEY] if findings else []

    def find(self, identities: tuple[Identity, ...]) -> tuple[Claim, Identity] | None:
        """The claim of the first of these identities that has one (older secrets first), or None."""
        for identity in identities:
            try:
                return self.store.get_claim(identity.claim_id), identity
            except NotFound:
                continue
        return None

    @property
    def keys(self) -> KeyRing:
        """The key secrets to claim with now (during a switch, the ring of the phase before it)."""
        return self._ring()

    def require_safe_store(self) -> None:
        """Refuse to act on a store whose claims this instance cannot read as they were made: another or a
        missing key secret, a store wiped or replaced, a clock too far from the store's (``oncegate.service.
        safeguard``). Each of those would answer ``proceed`` for keys already done.
        """
        self._ring()

    def _ring(self) -> KeyRing:
        """The safeguard's last good reading, taken as it is until its time is up; only then is the safeguard asked
        for a new one, which refuses an unsafe store."""
        reading = self.safeguard.reading
        if reading is not None and time.monotonic() < reading.until:
            return reading.ring
        return self.safeguard.ring()

    def decided_at(self, claim: Claim, now: datetime) -> datetime:
        """When a change or answer decided on ``claim`` happened: ``now``, but after the claim was written.

        A request reads its clock when it arrives, and may then wait (for the store's write lock, a lost
        race) while another request creates or changes the claim; another instance's clock may run a few
        milliseconds behind. An answer decided by reading the claim happened after that claim was written,
        so its time is at least a tick past ``claim.updated_at``, and a change written from it carries that
        time on as its ``updated_at``: every history line stands after the change it was decided on,
        whichever instance answered (issue 22). Two lines this instance stamps for one claim never share
        a time either, so they list in the order it decided them.
        """

        def after(last: datetime | None) -> datetime:
            earliest = claim.updated_at if last is None else max(claim.updated_at, last)
            return max(now, earliest + TICK)

        return self._stamped.swap(claim.claim_id, after)

    def counted(self, before: Claim | None, after: C) -> C:
        """``after`` as stored (None: deleted), remembered for the holder's next write, its change of status
        counted for the scope catalogue."""
        claim = after or before
        assert claim is not None, "a change has a claim before or after it"
        if after is None:
            self.recent.forget(claim.claim_id)
        else:
            self.recent.remember(after)
        self.inventory.status_changed(claim.scope, before.status if before else None, after.status if after else None)
        return after

    def holds(self, claim: Claim, claim_token: str) -> bool:
        """Whether ``claim_token`` is the current grant's, under any secret this instance may claim with now."""
        return holds(self.keys, claim, claim_token)

    @staticmethod
    def event(
        claim: Claim, kind: EventKind, outcome: str, recognised_by: str, *, at: datetime, **fields: Any
    ) -> HistoryEvent:
        # The timestamp first makes event ids sort in time order; the random tail keeps them unique.
        # The tail as ``secrets.token_hex(4)`` makes it: four bytes of ``os.urandom`` in hex (issue 36).
        event_id = f"{compact_time(at, fraction=True)}-{os.urandom(4).hex()}"
        return HistoryEvent(
            claim_id=claim.claim_id,
            event_id=event_id,
            at=at,
            kind=kind,
            outcome=outcome,
            attempt=claim.attempt,
            recognised_by=recognised_by,
            **fields,
        )

    @staticmethod
    def repeated(event: HistoryEvent) -> HistoryEvent:
        """``event`` as an answer of its series, which the store counts in one line (``count_event``).

        Answers alike are one series: of the same attempt, kind, outcome, flow, fingerprint and source
        system, recognised the same way. Runs differ from one answer to the next; the line keeps the
        first's. 6,000 duplicates were 6,000 lines, and a 2 MB claim to read (issue 22).
        """
        alike = (
            event.attempt,
            event.kind.value,
            event.outcome,
            *((event.flow.name, event.flow.environment) if event.flow else ("", "")),
            event.fingerprint or "",
            event.source or "",
            event.recognised_by,
        )
        digest = hashlib.sha256("\n".join(map(str, alike)).encode()).hexdigest()[:32]
        return replace(event, event_id=f"{SERIES}{digest}", count=1, last_at=event.at)

    def fingerprint_record(self, claim_id: str, fingerprint: str | None) -> FingerprintRecord | None:
        records = self.store.get_fingerprints(claim_id, [fingerprint or ""])
        return records[0] if records else None


def _business_data(request: KeyOf | Intent) -> tuple[Any, str | None] | None:
    """The business data a request sent, its payload and its own fingerprint; None for a lookup's, which sends none."""
    if isinstance(request, Intent):
        return request.payload, request.supplied_fingerprint
    if isinstance(request, BusinessData):
        return request.payload, request.fingerprint
    return None


def _key_refusal(scope: str, findings: list[str], *, stores: bool) -> str:
    """Why the key is refused, and, for a number an id may share the shape of, how its scope's owner says so."""
    refusal = (
        f"The key seems to contain {' and '.join(findings)}: use an internal record id instead."
        f"{' Nothing was stored.' if stores else ''}"
    )
    if not NUMBER_FINDINGS.intersection(findings):
        return refusal
    return (
        f"{refusal} If the scope's keys are ids of this shape, such as order numbers, the scope's owner can declare "
        "it with Set scope's keyPattern, a regular expression the keys match whole "
        f"(oncegate scopes set {normalise_scope(scope)} --key-pattern '...'); such keys are then accepted."
    )
