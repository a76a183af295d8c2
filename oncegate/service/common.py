"""What the claim, result and conflict services share: who is asking, under which key secret, and the
writes every one of them makes (history lines, status changes counted for the scope catalogue).

A lost race (``StoreRace``) means another run changed the claim in between: :func:`settled` runs an
attempt again, which re-reads and decides again, so two runs can never both be told ``proceed``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from oncegate.domain.decisions import Intent
from oncegate.domain.keys import Fingerprint, KeyHasher, KeyRing, normalise_scope
from oncegate.domain.records import Claim, EarlierAttempt, FingerprintRecord, Flow, HistoryEvent
from oncegate.domain.sensitive import NUMBER_FINDINGS, SensitivePolicy, sensitive_findings
from oncegate.domain.statuses import (
    ClaimStatus,
    Decision,
    EventKind,
)
from oncegate.domain.transitions import RELEASED_IN_DOUBT
from oncegate.domain.warnings import SENSITIVE_KEY, SOURCE_DIFFERS
from oncegate.errors import (
    NotFound,
    SensitiveKey,
    StoreRace,
    StoreUnavailable,
)
from oncegate.models import (
    BusinessIntent,
    EarlierAttemptView,
    FlowRef,
    LookupRequest,
)
from oncegate.service.inventory import Inventory
from oncegate.service.privacy import StoredDataGuard
from oncegate.service.recent import REMEMBERED, RecentClaims
from oncegate.service.safeguard import Safeguard
from oncegate.stores.port import ClaimReads, HistoryRecords

logger = logging.getLogger(__name__)

# Each lost race means another writer made progress, so a handful of rounds always settles.
RACE_LIMIT = 8
T = TypeVar("T")
C = TypeVar("C", Claim, None)
# How rows of schema 1 kept the earlier_attempt state: the granting event's details, the release's error text.
LEGACY_LAST_ATTEMPT = "lastAttempt"


def utc_now() -> datetime:
    return datetime.now(UTC)


# The event id of a line counting repeated answers starts so; the others start with their time, a digit.
SERIES = "series-"
# The least step between two times a store keeps apart: both keep microseconds.
TICK = timedelta(microseconds=1)


def keyed(fingerprint: Fingerprint | None) -> str | None:
    return fingerprint.keyed if fingerprint else None


def flow_text(flow: Flow | None) -> str:
    return f"flow '{flow.name}' in '{flow.environment}'" if flow else "an unnamed flow"


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


def legacy_earlier_attempt(details: dict[str, Any]) -> EarlierAttempt:
    """The reconciled attempt as schema-1 rows kept it: the API's EarlierAttemptView, in its wire spelling."""
    last = EarlierAttemptView.model_validate(details)
    # The same fields under the same names (services/views.py maps them back), but for the flow's own type.
    return EarlierAttempt(**{**dict(last), "flow": flow_of(last.flow)})


def flow_of(ref: FlowRef | None) -> Flow | None:
    return Flow(ref.name, ref.environment) if ref else None


def settled(attempt: Callable[[], T]) -> T:
    """Run ``attempt`` again each time it loses a race to another writer (it re-reads what changed)."""
    for _ in range(RACE_LIMIT):
        try:
            return attempt()
        except StoreRace:
            continue
    raise StoreUnavailable("the record kept changing under this request; retry shortly.")


@dataclass(frozen=True)
class Identity:
    """A business key and fingerprint as one secret makes them: the claim id and the keyed fingerprint."""

    hasher: KeyHasher
    claim_id: str
    fingerprint: Fingerprint | None


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
        return replace(self, claim_id=identity.claim_id, fingerprint=identity.fingerprint, hasher=identity.hasher)

    @property
    def older_identities(self) -> tuple[Identity, ...]:
        """The identities looked up before this one's claim is made: the older secrets' (see ``KeyRing``)."""
        mine = next(index for index, identity in enumerate(self.identities) if identity.hasher is self.hasher)
        return self.identities[:mine]

    @property
    def other_identities(self) -> tuple[Identity, ...]:
        return tuple(identity for identity in self.identities if identity.hasher is not self.hasher)

    def source_warnings(self, claim: Claim) -> list[str]:
        """``source_differs`` when this request names a source system other than the one the claim keeps."""
        differs = self.source is not None and claim.source is not None and claim.source != self.source
        return [SOURCE_DIFFERS] if differs else []

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
        )


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
        stored_data: StoredDataGuard,
        sensitive_keys: SensitivePolicy,
    ) -> None:
        self.store = store
        self.safeguard = safeguard
        self.clock = clock
        self.inventory = inventory
        self.stored_data = stored_data
        self.sensitive_keys = sensitive_keys
        self.recent = RecentClaims()
        self._stamped: OrderedDict[str, datetime] = OrderedDict()
        self._stamp_lock = threading.Lock()

    def identify(self, intent: BusinessIntent | LookupRequest) -> tuple[tuple[Identity, ...], str, list[str]]:
        """The key under every secret known (older first), the scope, and the warnings the key earned."""
        # A lookup stores nothing, so its refusal does not say so.
        warnings = self.check_key(intent.scope, intent.key, stores=isinstance(intent, BusinessIntent))
        supplied, payload = (intent.fingerprint, intent.payload) if isinstance(intent, BusinessIntent) else (None, None)
        identities = tuple(
            Identity(
                hasher=hasher,
                claim_id=hasher.claim_id(intent.scope, intent.key),
                fingerprint=hasher.fingerprint(supplied=supplied, payload=payload),
            )
            for hasher in self.keys.lookup_order
        )
        return identities, normalise_scope(intent.scope), warnings

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
        return self.safeguard.ring()

    def require_safe_store(self) -> None:
        """Refuse to act on a store whose claims this instance cannot read as they were made: another or a
        missing key secret, a store wiped or replaced, a clock too far from the store's (``oncegate.service.
        safeguard``). Each of those would answer ``proceed`` for keys already done.
        """
        self.safeguard.ring()

    def explicit(self, claim: Claim) -> Claim:
        """The claim with its earlier attempt and doubt as fields, read from the history for rows written before."""
        if not claim.state_in_history:
            return claim
        earlier_attempt = None
        if claim.attempt > 1:
            for event in self.store.list_events(claim.claim_id):
                grant = (
                    event.kind is EventKind.CLAIM and event.attempt == claim.attempt and event.run_id == claim.run_id
                )
                if grant and event.outcome == Decision.RECONCILE and LEGACY_LAST_ATTEMPT in event.details:
                    earlier_attempt = legacy_earlier_attempt(event.details[LEGACY_LAST_ATTEMPT])
        in_doubt = claim.status is ClaimStatus.UNKNOWN and (claim.error or "").startswith(RELEASED_IN_DOUBT)
        return replace(claim, earlier_attempt=earlier_attempt, released_in_doubt=in_doubt, state_in_history=False)

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
        with self._stamp_lock:
            last = self._stamped.pop(claim.claim_id, None)
            earliest = claim.updated_at if last is None else max(claim.updated_at, last)
            stamped = max(now, earliest + TICK)
            self._stamped[claim.claim_id] = stamped
            if len(self._stamped) > REMEMBERED:
                self._stamped.popitem(last=False)
        return stamped

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

    @staticmethod
    def token(claim: Claim, hasher: KeyHasher) -> str:
        """The current grant's claim token: made again from the grant, never read from the store."""
        if claim.grant_id is None:
            assert claim.legacy_token is not None, "a claim has a grant id or a token of an earlier release"
            return claim.legacy_token
        return hasher.claim_token(claim.claim_id, claim.attempt, claim.grant_id)

    def holds(self, claim: Claim, token: str) -> bool:
        """Whether ``token`` is the current grant's, made with any secret known (a rotation may be under way)."""
        grant_id = claim.grant_id
        if grant_id is None:
            return claim.legacy_token is not None and hmac.compare_digest(token.encode(), claim.legacy_token.encode())
        return any(
            hasher.token_matches(token, claim.claim_id, claim.attempt, grant_id) for hasher in self.keys.lookup_order
        )

    @staticmethod
    def event(
        claim: Claim, kind: EventKind, outcome: str, recognised_by: str, *, at: datetime, **fields: Any
    ) -> HistoryEvent:
        # The timestamp first makes event ids sort in time order; the random tail keeps them unique.
        event_id = f"{at.strftime('%Y%m%dT%H%M%S%fZ')}-{secrets.token_hex(4)}"
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
