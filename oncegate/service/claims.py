"""The claim state machine: every decision of the contract, in one place, over the store port.

Writes come first and reads only on a lost race (the store's conditional insert carries the
existing claim back), so a new claim costs one storage round trip. Every answer leaves a
history event saying how the request was recognised. A lost race (``StoreRace``) means
another run changed the claim in between: the service re-reads and decides again, so two
runs can never both be told ``proceed`` for one attempt.
"""

from __future__ import annotations

import hmac
import logging
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from oncegate import __version__
from oncegate.domain.keys import Fingerprint, KeyHasher, KeyRing, normalise_scope
from oncegate.domain.keys import conflict_id as make_conflict_id
from oncegate.domain.records import Claim, Conflict, FingerprintRecord, Flow, HistoryEvent
from oncegate.domain.sensitive import SensitiveKeyPolicy, sensitive_findings
from oncegate.domain.statuses import (
    ClaimStatus,
    ConflictSource,
    ConflictStatus,
    Decision,
    EventKind,
    Outcome,
    Resolution,
)
from oncegate.errors import (
    AlreadyExists,
    ConcurrentUpdate,
    InvalidRequest,
    NotConfigured,
    NotFound,
    SensitiveKey,
    StateConflict,
    StoreRace,
    StoreUnavailable,
)
from oncegate.models import (
    BusinessIntent,
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictView,
    FlowRef,
    Health,
    HeartbeatRequest,
    Holder,
    LastAttempt,
    ListConflictsQuery,
    LookupRequest,
    RecordResultRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ReviewClaimRequest,
)
from oncegate.service.attention import UNKNOWN_ALERT, Attention
from oncegate.service.inventory import ANOTHER_FLOW_COPY, FLUSH_INTERVAL, REGISTRY_TTL, Inventory
from oncegate.service.privacy import StoredDataGuard, warned
from oncegate.service.retention import Retention
from oncegate.service.views import claim_result, claim_view, conflict_view, flow_ref
from oncegate.stores.paging import encode_cursor, utc_text
from oncegate.stores.port import ClaimStore

logger = logging.getLogger(__name__)

# Each lost race means another writer made progress, so a handful of rounds always settles.
RACE_LIMIT = 8
T = TypeVar("T")
C = TypeVar("C", Claim, None)
MAX_RETRY_AFTER_SECONDS = 60
NO_FINGERPRINT = "no_fingerprint"
NO_FLOW = "no_flow"
LAST_ATTEMPT = "lastAttempt"
SENSITIVE_KEY = "sensitive_key"


def utc_now() -> datetime:
    return datetime.now(UTC)


def _short(fingerprint: Fingerprint | str | None) -> str:
    if fingerprint is None:
        return "(none)"
    text = fingerprint.keyed if isinstance(fingerprint, Fingerprint) else fingerprint
    return text if len(text) <= 24 else text[:23] + "…"


def _keyed(fingerprint: Fingerprint | None) -> str | None:
    return fingerprint.keyed if fingerprint else None


def _flow_text(flow: Flow | None) -> str:
    return f"flow '{flow.name}' in '{flow.environment}'" if flow else "an unnamed flow"


def _stale_token_message(token: str, claim: Claim) -> str:
    # Never the holder's run id: with it, another caller could pass for the holder (issue 9).
    attempt = token.split(".", 1)[0]
    now = f"attempt {claim.attempt} now holds the claim, with status {claim.status.value}"
    if attempt.isdigit() and 0 < int(attempt) < claim.attempt:
        return f"This claim token is from attempt {attempt}; {now}."
    return f"This claim token does not match this claim: {now}. Send the token Check and claim gave this run."


def _new_grant_id() -> str:
    # Random per grant: the claim token is a MAC over it, so a claim deleted and made again gets new tokens.
    return secrets.token_urlsafe(12)


RELEASED_IN_DOUBT = "Released while reconciling:"


def _released_in_doubt(claim: Claim) -> bool:
    """Released by a run that was reconciling: in doubt still, and already as released as it gets."""
    return claim.status is ClaimStatus.UNKNOWN and (claim.error_reason or "").startswith(RELEASED_IN_DOUBT)


def _flow(ref: FlowRef | None) -> Flow | None:
    return Flow(ref.name, ref.environment) if ref else None


def _settled(attempt: Callable[[], T]) -> T:
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

    def is_holder_of(self, claim: Claim) -> bool:
        """Whether this is the very run that holds the claim, asking again because its answer was lost.

        The run id alone is not enough: makers set it by hand, so two flows (or two runs of one flow)
        may send the same one. Only the same run id from the same flow with the same business data
        gets the lease back; anything else is another run (issue 9).
        """
        # A request that names no flow or no business data cannot be told from another run of the same
        # run id (two items of one key in an "Apply to each" share the run's name): never the same run.
        if self.flow is None or self.fingerprint is None:
            return False
        return claim.run_id == self.run_id and claim.flow == self.flow and self.fingerprint.matches(claim.fingerprint)


class ClaimService:
    """Check and claim, record results, and route changed business data to the conflict queue."""

    def __init__(
        self,
        store: ClaimStore,
        keys: KeyHasher | KeyRing,
        *,
        clock: Callable[[], datetime] = utc_now,
        sensitive_keys: SensitiveKeyPolicy = SensitiveKeyPolicy.REJECT,
        sensitive_data: SensitiveKeyPolicy | None = None,
        require_registered_flows: bool = False,
        registry_ttl: timedelta = REGISTRY_TTL,
        flush_interval: timedelta = FLUSH_INTERVAL,
        unknown_alert: timedelta = UNKNOWN_ALERT,
    ) -> None:
        self.store = store
        self._keys = keys if isinstance(keys, KeyRing) else KeyRing(keys)
        self._secret_checked = False
        self._sensitive_keys = sensitive_keys
        # Everything else a request stores (oncegate.service.privacy): the key's policy unless it has its own.
        self._stored_data = StoredDataGuard(sensitive_keys if sensitive_data is None else sensitive_data)
        self._clock = clock
        # The flow inventory and scope catalogue: registrations cached for ``registry_ttl``, counts
        # flushed every ``flush_interval`` (see oncegate.service.inventory).
        self.inventory = Inventory(
            store,
            clock=clock,
            ttl=registry_ttl,
            flush_interval=flush_interval,
            require_registered=require_registered_flows,
            stored_data=self._stored_data,
        )
        # Governance: the claims that need a person, and the deletion of finished ones after their retention.
        self.attention = Attention(store, clock=clock, unknown_alert=unknown_alert)
        self.retention = Retention(store, self.inventory, clock=clock)

    # -- Check and claim -------------------------------------------------------------------

    def check_and_claim(self, request: ClaimRequest) -> ClaimResponse:
        """Decide whether this run may do the side effect; see the contract's decision table."""
        self.require_known_secret()
        caller = self._caller(request)
        refusal = self.inventory.refusal(caller.flow)
        answer = self._refused(caller, refusal) if refusal else _settled(lambda: self._claim_once(caller))
        self.inventory.answered(caller.scope, caller.flow, answer, caller.now)
        return answer

    def _refused(self, caller: Caller, reason: str) -> ClaimResponse:
        """Blocked by the inventory before any claim is made or taken over; an existing claim's history says why."""
        found = self._find(caller.identities)
        if found is None:
            return ClaimResponse(
                decision=Decision.BLOCKED, claim_id=caller.claim_id, attempt=0, reason=reason, warnings=caller.warnings
            )
        claim, identity = found
        caller = caller.as_(identity)
        self._answered(claim, caller, Decision.BLOCKED, reason)
        return self._answer(Decision.BLOCKED, claim, caller, reason)

    def _caller(self, request: ClaimRequest) -> Caller:
        identities, scope, warnings = self._identify(request)
        current = next(identity for identity in identities if identity.hasher is self._keys.current)
        flow = _flow(request.flow)
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
            lease=timedelta(seconds=request.lease_seconds or self.inventory.lease_seconds(scope)),
            now=self._clock(),
            warnings=warnings,
        )

    def _identify(self, intent: BusinessIntent | LookupRequest) -> tuple[tuple[Identity, ...], str, list[str]]:
        """The key under every secret known (older first), the scope, and the warnings the key earned."""
        warnings = self._check_key(intent.key)
        supplied, payload = (intent.fingerprint, intent.payload) if isinstance(intent, BusinessIntent) else (None, None)
        identities = tuple(
            Identity(
                hasher=hasher,
                claim_id=hasher.claim_id(intent.scope, intent.key),
                fingerprint=hasher.fingerprint(supplied=supplied, payload=payload),
            )
            for hasher in self._keys.lookup_order
        )
        return identities, normalise_scope(intent.scope), warnings

    def _check_key(self, key: str) -> list[str]:
        """The warning a business key earned for personal data, unless it is refused for it."""
        findings = [] if self._sensitive_keys is SensitiveKeyPolicy.OFF else sensitive_findings(key)
        if findings and self._sensitive_keys is SensitiveKeyPolicy.REJECT:
            raise SensitiveKey(
                f"The key seems to contain {' and '.join(findings)}: use an internal record id instead. "
                "Nothing was stored.",
                target="key",
            )
        return [SENSITIVE_KEY] if findings else []

    def _find(self, identities: tuple[Identity, ...]) -> tuple[Claim, Identity] | None:
        """The claim of the first of these identities that has one (older secrets first), or None."""
        for identity in identities:
            try:
                return self.store.get_claim(identity.claim_id), identity
            except NotFound:
                continue
        return None

    # -- the key secret ----------------------------------------------------------------------

    def require_known_secret(self) -> None:
        """Refuse to act with a secret this store was never used with; remember the secrets it is used with.

        A new secret would give every business key a new claim id, and every key already done would
        be answered ``proceed`` again: a redeploy that regenerated the secret must stop here, not there.
        """
        if self._secret_checked:
            return
        known = self.store.key_ids()
        if known and not known & set(self._keys.key_ids):
            raise NotConfigured(
                "This store's claims were made with another key secret: every key already done would be "
                "claimed again. Set ONCEGATE_KEY_SECRET to the secret the store was used with (Key Vault keeps "
                "its earlier versions), or during a rotation set ONCEGATE_KEY_SECRET_PREVIOUS to it.",
                target="ONCEGATE_KEY_SECRET",
            )
        # The current secret first: an instance of a neighbouring phase that reads the store between two of
        # these writes must find a secret it knows, and every phase knows its neighbours' current secrets.
        for key_id in sorted(self._keys.key_ids, key=lambda key_id: key_id != self._keys.current.key_id):
            if key_id not in known:
                self.store.add_key_id(key_id)
        self._secret_checked = True

    def _claim_once(self, caller: Caller) -> ClaimResponse:
        # During a rotation the key may be claimed under an older secret: look there first.
        found = self._find(caller.older_identities)
        if found is not None:
            return self._decide(found[0], caller.as_(found[1]))
        claim = Claim(
            claim_id=caller.claim_id,
            scope=caller.scope,
            status=ClaimStatus.IN_PROGRESS,
            attempt=1,
            fingerprint=_keyed(caller.fingerprint),
            grant_id=_new_grant_id(),
            run_id=caller.run_id,
            flow=caller.flow,
            first_received_at=caller.now,
            last_attempt_at=caller.now,
            updated_at=caller.now,
            lease_expires_at=caller.lease_expires_at,
        )
        event = self._claim_event(claim, caller, Decision.PROCEED, "No claim existed for this key: first attempt.")
        try:
            stored = self._counted(None, self.store.create_claim(claim, event))
        except AlreadyExists as exc:
            return self._decide(exc.existing, caller)
        except NotFound as exc:
            # The claim in the way was gone when read back (withdrawn during a rotation, or purged): ask again.
            raise ConcurrentUpdate(f"claim {claim.claim_id} existed and is gone") from exc
        if caller.other_identities and self._find(caller.other_identities) is not None:
            return self._withdrawn(stored, caller)
        return self._granted(Decision.PROCEED, stored, caller, "First time this key is seen: do the side effect.")

    def _withdrawn(self, made: Claim, caller: Caller) -> ClaimResponse:
        """During a rotation, a claim made while another secret's claim of the key exists is withdrawn.

        Two instances on both sides of the switch may each make a claim under their own secret. Each
        looks for the other's after making its own, so the later of the two always sees the earlier
        and withdraws: at most one proceeds. Both may withdraw; both are told to retry shortly, as
        in_progress, rather than racing again at once. See the rotation runbook in docs/operations.md.
        """
        logger.info("Claim %s made during a rotation meets a claim under another secret: withdrawn", made.claim_id)
        self.store.delete_claim(made)
        self._counted(made, None)
        return ClaimResponse(
            decision=Decision.IN_PROGRESS,
            claim_id=made.claim_id,
            attempt=0,
            reason="Another instance claimed this key at the same moment during a key secret rotation; retry shortly.",
            retry_after_seconds=1,
            warnings=caller.warnings,
        )

    def _decide(self, claim: Claim, caller: Caller) -> ClaimResponse:
        if self._is_changed(claim, caller.fingerprint):
            return self._conflict(claim, caller)
        if claim.status is ClaimStatus.IN_PROGRESS:
            return self._held(claim, caller)
        if claim.status is ClaimStatus.UNKNOWN:
            return self._reconcile(claim, caller, f"attempt {claim.attempt} was sent but its outcome is unknown")
        if claim.status is ClaimStatus.SUCCEEDED:
            return self._duplicate(claim, caller)
        if claim.status is ClaimStatus.FAILED and not claim.retryable:
            return self._blocked(claim, caller)
        if claim.status is ClaimStatus.RELEASED:
            previous = "was released"
        else:
            previous = f"failed and may be retried ({claim.error_reason or 'no reason given'})"
        return self._next_attempt(claim, caller, f"Attempt {claim.attempt} {previous}: do the side effect.")

    def _is_changed(self, claim: Claim, fingerprint: Fingerprint | None) -> bool:
        # Without two fingerprints there is nothing to compare; a released claim has no result to protect.
        if fingerprint is None or claim.fingerprint is None or claim.status is ClaimStatus.RELEASED:
            return False
        if fingerprint.matches(claim.fingerprint):
            return False
        # A mismatch: only now read what reviewers decided about this fingerprint (one read, off the common path).
        forms = (fingerprint.keyed, fingerprint.plain)
        return not claim.accepts(forms, self.store.get_fingerprints(claim.claim_id, forms))

    def _held(self, claim: Claim, caller: Caller) -> ClaimResponse:
        lease = claim.lease_expires_at
        if lease is None or lease <= caller.now:
            return self._reconcile(
                claim, caller, f"the lease of attempt {claim.attempt} expired at {lease} without a result"
            )
        if caller.is_holder_of(claim):
            return self._granted_again(claim, caller)
        recognised = f"Run {claim.run_id} holds the lease until {lease.isoformat()}."
        self._answered(claim, caller, Decision.IN_PROGRESS, recognised, flow_warning=True)
        remaining = math.ceil((lease - caller.now).total_seconds())
        return self._answer(
            Decision.IN_PROGRESS,
            claim,
            caller,
            f"Another run is doing the side effect now; retry in {remaining} s or stop.",
            retry_after_seconds=max(1, min(MAX_RETRY_AFTER_SECONDS, remaining)),
            # Not the holder's run id: with it, another caller could pass for the holder (issue 9).
            holder=Holder(flow=flow_ref(claim.flow), lease_expires_at=lease),
        )

    def _granted_again(self, claim: Claim, caller: Caller) -> ClaimResponse:
        # The run's first answer was lost. An attempt granted as reconcile must be answered reconcile again:
        # told "proceed", the run would skip looking in the target system for what the earlier attempt did.
        last = self._reconciled(claim)
        if last is None:
            self._answered(claim, caller, Decision.PROCEED, "The same run asked again while holding the lease.")
            return self._granted(
                Decision.PROCEED, claim, caller, "This run already holds the claim (its first answer was lost): go on."
            )
        recognised = "The same run asked again while holding the lease granted to reconcile."
        self._answered(claim, caller, Decision.RECONCILE, recognised)
        reason = (
            "This run already holds the claim to reconcile (its first answer was lost): look the record up in the "
            "target system; record succeeded with its id if it is there, else do the side effect."
        )
        return self._granted(Decision.RECONCILE, claim, caller, reason, last_attempt=last)

    def _reconciled(self, claim: Claim) -> LastAttempt | None:
        """The attempt the current one reconciles, read from the event that granted it; None if it was a proceed."""
        if claim.attempt == 1:
            return None  # a first attempt has nothing before it to reconcile: no need to read the history
        for event in self.store.list_events(claim.claim_id):
            grant = event.kind is EventKind.CLAIM and event.attempt == claim.attempt and event.run_id == claim.run_id
            if grant and event.outcome == Decision.RECONCILE and LAST_ATTEMPT in event.details:
                return LastAttempt.model_validate(event.details[LAST_ATTEMPT])
        return None

    def _duplicate(self, claim: Claim, caller: Caller) -> ClaimResponse:
        if caller.fingerprint is None:
            how = f"No fingerprint was given, so only the key was compared; attempt {claim.attempt} succeeded."
        elif caller.fingerprint.matches(claim.fingerprint) or claim.fingerprint is None:
            how = f"Same key and fingerprint {_short(caller.fingerprint)} as attempt {claim.attempt}, which succeeded."
        else:
            how = f"Fingerprint {_short(caller.fingerprint)} was accepted by a reviewer as the same business intent."
        self._answered(claim, caller, Decision.DUPLICATE, how, flow_warning=True)
        return self._answer(
            Decision.DUPLICATE,
            claim,
            caller,
            f"Already done by run {claim.run_id}: skip the side effect and reuse the result.",
            result=claim_result(claim),
        )

    def _blocked(self, claim: Claim, caller: Caller) -> ClaimResponse:
        self._answered(claim, caller, Decision.BLOCKED, f"Attempt {claim.attempt} failed and is not retryable.")
        return self._answer(
            Decision.BLOCKED,
            claim,
            caller,
            f"Attempt {claim.attempt} failed and was marked not retryable ({claim.error_reason or 'no reason given'}): "
            "a person must act.",
        )

    def _next_attempt(self, claim: Claim, caller: Caller, reason: str) -> ClaimResponse:
        renewed = self._take_over(claim, caller)
        event = self._claim_event(renewed, caller, Decision.PROCEED, reason)
        stored = self._counted(claim, self.store.update_claim(renewed, event))
        return self._granted(Decision.PROCEED, stored, caller, reason)

    def _reconcile(self, claim: Claim, caller: Caller, why: str) -> ClaimResponse:
        renewed = self._take_over(claim, caller)
        last = LastAttempt(
            attempt=claim.attempt,
            run_id=claim.run_id,
            flow=flow_ref(claim.flow),
            status=claim.status,
            started_at=claim.last_attempt_at,
            lease_expires_at=claim.lease_expires_at,
            error=claim.error_reason,
        )
        # Kept on the event so that a retry of this run, whose answer was lost, is told reconcile again.
        event = replace(
            self._claim_event(renewed, caller, Decision.RECONCILE, f"Reconcile: {why}."),
            details={LAST_ATTEMPT: last.model_dump(mode="json", by_alias=True, exclude_none=True)},
        )
        stored = self._counted(claim, self.store.update_claim(renewed, event))
        reason = (
            f"The earlier attempt may have done the side effect ({why}): look the record up in the target system; "
            "record succeeded with its id if it is there, else do the side effect."
        )
        return self._granted(Decision.RECONCILE, stored, caller, reason, last_attempt=last)

    def _take_over(self, claim: Claim, caller: Caller) -> Claim:
        attempt = claim.attempt + 1
        return replace(
            claim,
            status=ClaimStatus.IN_PROGRESS,
            attempt=attempt,
            fingerprint=_keyed(caller.fingerprint) or claim.fingerprint,
            grant_id=_new_grant_id(),
            legacy_token=None,
            run_id=caller.run_id,
            flow=caller.flow,
            last_attempt_at=caller.now,
            updated_at=caller.now,
            lease_expires_at=caller.lease_expires_at,
            target_record_id=None,
            result_data=None,
            completed_at=None,
            error_reason=None,
            retryable=None,
        )

    def _conflict(self, claim: Claim, caller: Caller) -> ClaimResponse:
        reason = f"Fingerprint {_short(caller.fingerprint)} differs from the claim's {_short(claim.fingerprint)}."
        conflict, record = self._open_conflict(
            claim, _keyed(caller.fingerprint), ConflictSource.CLAIM, reason, caller.run_id, caller.flow
        )
        if conflict.status is ConflictStatus.RESOLVED:
            # Resolved by an earlier release that wrote the conflict before the claim, and the claim never heard
            # of it: repair, then decide again. A new version cannot be accepted while an attempt runs; then the
            # conflict answer stands.
            try:
                return self._decide(self._apply_resolution(claim, conflict, record, caller.now), caller)
            except StateConflict:
                pass
        self._answered(claim, caller, Decision.CONFLICT, f"{reason} Conflict {conflict.conflict_id} is open.")
        return self._answer(
            Decision.CONFLICT,
            claim,
            caller,
            f"This key was already claimed with different business data ({reason}) Nothing was done; "
            "the conflict waits for its owner.",
            conflict_id=conflict.conflict_id,
        )

    # -- answers and events -----------------------------------------------------------------

    def _counted(self, before: Claim | None, after: C) -> C:
        """``after`` as stored (None: deleted), its change of status counted for the scope catalogue."""
        claim = after or before
        assert claim is not None, "a change has a claim before or after it"
        self.inventory.status_changed(claim.scope, before.status if before else None, after.status if after else None)
        return after

    @staticmethod
    def _token(claim: Claim, hasher: KeyHasher) -> str:
        """The current grant's claim token: made again from the grant, never read from the store."""
        if claim.grant_id is None:
            assert claim.legacy_token is not None, "a claim has a grant id or a token of an earlier release"
            return claim.legacy_token
        return hasher.claim_token(claim.claim_id, claim.attempt, claim.grant_id)

    def _holds(self, claim: Claim, token: str) -> bool:
        """Whether ``token`` is the current grant's, made with any secret known (a rotation may be under way)."""
        grant_id = claim.grant_id
        if grant_id is None:
            return claim.legacy_token is not None and hmac.compare_digest(token.encode(), claim.legacy_token.encode())
        return any(
            hasher.token_matches(token, claim.claim_id, claim.attempt, grant_id) for hasher in self._keys.lookup_order
        )

    def _answer(self, decision: Decision, claim: Claim, caller: Caller, reason: str, **extra: Any) -> ClaimResponse:
        return ClaimResponse(
            decision=decision,
            claim_id=claim.claim_id,
            status=claim.status,
            attempt=claim.attempt,
            reason=reason,
            warnings=[*caller.warnings, *self._flow_warnings(claim, caller, decision)],
            **extra,
        )

    def _granted(self, decision: Decision, claim: Claim, caller: Caller, reason: str, **extra: Any) -> ClaimResponse:
        return self._answer(
            decision,
            claim,
            caller,
            reason,
            claim_token=self._token(claim, caller.hasher),
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
            recognised_by += f" The claim belongs to {_flow_text(claim.flow)}, not {_flow_text(caller.flow)}."
        self.store.add_event(self._claim_event(claim, caller, decision, recognised_by))

    def _claim_event(self, claim: Claim, caller: Caller, decision: Decision, recognised_by: str) -> HistoryEvent:
        return self._event(
            claim,
            EventKind.CLAIM,
            decision.value,
            recognised_by,
            at=caller.now,
            run_id=caller.run_id,
            flow=caller.flow,
            fingerprint=_keyed(caller.fingerprint),
        )

    @staticmethod
    def _event(
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

    # -- Record result, release, heartbeat ---------------------------------------------------

    def record_result(self, claim_id: str, request: RecordResultRequest) -> ClaimView:
        """Store the side effect's outcome; the same result sent again is a no-op.

        Refused for personal data, the result is not stored and the run keeps its lease: it may send it again without.
        """
        warnings = self._stored_data.check(request, f"claim {claim_id}")
        view = self._with_token(claim_id, request.claim_token, lambda claim, now: self._record(claim, request, now))
        return warned(view, warnings)

    def release(self, claim_id: str, request: ReleaseRequest) -> ClaimView:
        """Give up the claim before any side effect, so the next run may proceed."""
        warnings = self._stored_data.check(request, f"claim {claim_id}")
        view = self._with_token(claim_id, request.claim_token, lambda claim, now: self._release(claim, request, now))
        return warned(view, warnings)

    def heartbeat(self, claim_id: str, request: HeartbeatRequest) -> ClaimView:
        """Extend the lease of the run holding the claim."""
        return self._with_token(claim_id, request.claim_token, lambda claim, now: self._renew(claim, request, now))

    def _with_token(self, claim_id: str, token: str, change: Callable[[Claim, datetime], Claim]) -> ClaimView:
        self.require_known_secret()

        def attempt() -> ClaimView:
            claim = self.store.get_claim(claim_id)
            if not self._holds(claim, token):
                raise StateConflict("stale_claim", _stale_token_message(token, claim), target="claimToken")
            return claim_view(change(claim, self._clock()))

        return _settled(attempt)

    def _record(self, claim: Claim, request: RecordResultRequest, now: datetime) -> Claim:
        if self._same_result(claim, request):
            return claim
        if claim.status not in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
            raise StateConflict(
                "stale_claim",
                f"Attempt {claim.attempt} already ended as {claim.status.value}; "
                "only the same result may be sent again.",
                target="outcome",
            )
        succeeded = request.outcome is Outcome.SUCCEEDED
        failed = request.outcome is Outcome.FAILED
        recorded = replace(
            claim,
            status=ClaimStatus(request.outcome.value),
            target_record_id=request.target_record_id,
            result_data=request.data,
            completed_at=now if succeeded else None,
            error_reason=request.error,
            retryable=request.retryable if failed else None,
            # A failure for good waits for a review of its own: an earlier reviewer saw another attempt.
            reviewer=None if failed and not request.retryable else claim.reviewer,
            lease_expires_at=None,
            updated_at=now,
        )
        details = {
            "targetRecordId": request.target_record_id,
            "data": request.data,
            "error": request.error,
            "retryable": request.retryable if failed else None,
        }
        target = f" (target record {request.target_record_id})" if request.target_record_id else ""
        event = self._event(
            claim,
            EventKind.RESULT,
            request.outcome.value,
            f"Run {claim.run_id} recorded {request.outcome.value}{target}.",
            at=now,
            run_id=claim.run_id,
            flow=claim.flow,
            fingerprint=claim.fingerprint,
            details={name: value for name, value in details.items() if value is not None},
        )
        return self._counted(claim, self.store.update_claim(recorded, event))

    @staticmethod
    def _same_result(claim: Claim, request: RecordResultRequest) -> bool:
        return (
            claim.status.value == request.outcome.value
            and claim.target_record_id == request.target_record_id
            and claim.result_data == request.data
            and claim.error_reason == request.error
            and (request.outcome is not Outcome.FAILED or claim.retryable == request.retryable)
        )

    def _release(self, claim: Claim, request: ReleaseRequest, now: datetime) -> Claim:
        if claim.status is ClaimStatus.RELEASED or _released_in_doubt(claim):
            return claim
        self._require_in_progress(claim, "released")
        reason = request.reason or "no reason given"
        doubted = self._reconciled(claim)
        if doubted is None:
            released = replace(claim, status=ClaimStatus.RELEASED, lease_expires_at=None, updated_at=now)
            recognised = f"Run {claim.run_id} released the claim before any side effect: {reason}."
        else:
            # This run did nothing, but the attempt it was reconciling may have: the doubt stays, so the
            # next run is told reconcile again, never proceed.
            released = replace(
                claim,
                status=ClaimStatus.UNKNOWN,
                lease_expires_at=None,
                updated_at=now,
                error_reason=f"{RELEASED_IN_DOUBT} attempt {doubted.attempt}'s outcome is still unknown.",
            )
            recognised = (
                f"Run {claim.run_id} released the claim while reconciling ({reason}); the outcome of attempt "
                f"{doubted.attempt} is still unknown, so the next run reconciles."
            )
        event = self._event(
            claim,
            EventKind.RELEASE,
            released.status.value,
            recognised,
            at=now,
            run_id=claim.run_id,
            flow=claim.flow,
            details={"reason": request.reason} if request.reason else {},
        )
        return self._counted(claim, self.store.update_claim(released, event))

    def _renew(self, claim: Claim, request: HeartbeatRequest, now: datetime) -> Claim:
        self._require_in_progress(claim, "renewed")
        lease = timedelta(seconds=request.lease_seconds or self.inventory.lease_seconds(claim.scope))
        renewed = replace(claim, lease_expires_at=now + lease, updated_at=now)
        return self.store.update_claim(renewed, None)

    @staticmethod
    def _require_in_progress(claim: Claim, verb: str) -> None:
        if claim.status is not ClaimStatus.IN_PROGRESS:
            raise StateConflict(
                "stale_claim",
                f"Attempt {claim.attempt} already ended as {claim.status.value}; it can no longer be {verb}.",
                target="claimToken",
            )

    # -- Reviewing a failure -----------------------------------------------------------------

    def review(self, claim_id: str, request: ReviewClaimRequest) -> ClaimView:
        """Acknowledge a failure that is not retryable: the key stays blocked, the claim leaves the attention list.

        Reviewed, the claim may be deleted once its scope's retention is over. The same reviewer again is a no-op.
        """
        if request.reviewer is None:
            raise InvalidRequest("reviewer is required: who reviewed the failure.", target="reviewer")
        warnings = self._stored_data.check(request, f"claim {claim_id}")
        self.require_known_secret()

        def attempt() -> ClaimView:
            claim = self.store.get_claim(claim_id)
            if claim.status is not ClaimStatus.FAILED or claim.retryable is not False:
                state = "a retryable failure" if claim.status is ClaimStatus.FAILED else claim.status.value
                raise StateConflict(
                    "claim_not_blocked",
                    f"Attempt {claim.attempt} of this claim is {state}: only a failure that is not retryable "
                    "is reviewed.",
                    target="claimId",
                )
            if claim.reviewer == request.reviewer:
                return claim_view(claim)
            now = self._clock()
            event = self._event(
                claim,
                EventKind.REVIEW,
                "acknowledged",
                f"Reviewer {request.reviewer} acknowledged the failure of attempt {claim.attempt}: the key stays "
                "blocked.",
                at=now,
                details={"note": request.note} if request.note else {},
            )
            reviewed = replace(claim, reviewer=request.reviewer, updated_at=now)
            logger.info("Claim %s reviewed by %s", claim_id, request.reviewer)
            return claim_view(self.store.update_claim(reviewed, event))

        return warned(_settled(attempt), warnings)

    # -- Reading claims --------------------------------------------------------------------

    def get_claim(self, claim_id: str) -> ClaimView:
        """The processing record with its whole history."""
        claim = self.store.get_claim(claim_id)
        return claim_view(claim, self.store.list_events(claim_id))

    def lookup(self, request: LookupRequest) -> ClaimView:
        """The processing record of a business key, found through its digest (under any secret known)."""
        self.require_known_secret()
        identities, _, _ = self._identify(request)
        found = self._find(identities)
        if found is None:
            raise NotFound("No claim exists for this key in this scope.", target="key")
        return self.get_claim(found[0].claim_id)

    def close(self) -> None:
        """Flush the inventory's counts, then close the store."""
        self.inventory.close()
        self.store.close()

    def health(self) -> Health:
        """Raises ``StoreUnavailable`` when the store does not answer, ``NotConfigured`` for another secret."""
        self.store.ping()
        self.require_known_secret()
        return Health(status="ok", store=self.store.kind, version=__version__)

    # -- Conflicts ---------------------------------------------------------------------------

    def report_conflict(self, request: ReportConflictRequest) -> ConflictView:
        """A conflict the flow found itself; the same open conflict comes back for the same fingerprint."""
        self.require_known_secret()
        identities, _, key_warnings = self._identify(request)
        warnings = [*key_warnings, *self._stored_data.check(request, f"a conflict reported by run {request.run_id}")]
        return warned(_settled(lambda: self._report_once(identities, request, self._clock())), warnings)

    def _report_once(
        self, identities: tuple[Identity, ...], request: ReportConflictRequest, now: datetime
    ) -> ConflictView:
        found = self._find(identities)
        if found is None:
            raise NotFound("No claim exists for this key in this scope: check and claim first.", target="key")
        claim, identity = found
        fingerprint = identity.fingerprint
        flow = _flow(request.flow)
        conflict, record = self._open_conflict(
            claim, _keyed(fingerprint), ConflictSource.REPORTED, request.reason, request.run_id, flow, request.details
        )
        if conflict.status is ConflictStatus.RESOLVED:
            # Resolved by an earlier release but never applied: applying it moves this fingerprint to a new
            # resolution round, so the report opens a new conflict.
            self._apply_resolution(claim, conflict, record, now)
            return self._report_once(identities, request, now)
        event = self._event(
            claim,
            EventKind.CONFLICT,
            Decision.CONFLICT.value,
            f"Run {request.run_id} reported a conflict: {request.reason} Conflict {conflict.conflict_id} is open.",
            at=now,
            run_id=request.run_id,
            flow=flow,
            fingerprint=_keyed(fingerprint),
            details={"conflictId": conflict.conflict_id},
        )
        self.store.add_event(event)
        return conflict_view(conflict)

    def _open_conflict(
        self,
        claim: Claim,
        fingerprint: str | None,
        source: ConflictSource,
        reason: str,
        run_id: str,
        flow: Flow | None,
        details: Any = None,
    ) -> tuple[Conflict, FingerprintRecord | None]:
        """The open conflict of this fingerprint in its current round (made now, or found), and its record."""
        record = self._fingerprint_record(claim.claim_id, fingerprint)
        rounds = claim.resolved_rounds(fingerprint, [record] if record else [])
        conflict = Conflict(
            conflict_id=make_conflict_id(claim.claim_id, fingerprint, rounds),
            claim_id=claim.claim_id,
            scope=claim.scope,
            status=ConflictStatus.OPEN,
            source=source,
            fingerprint=fingerprint,
            claim_fingerprint=claim.fingerprint,
            reason=reason,
            run_id=run_id,
            flow=flow,
            created_at=self._clock(),
            details=details,
        )
        try:
            return self.store.create_conflict(conflict), record
        except AlreadyExists as exc:
            existing: Conflict = exc.existing
            return existing, record

    def _fingerprint_record(self, claim_id: str, fingerprint: str | None) -> FingerprintRecord | None:
        records = self.store.get_fingerprints(claim_id, [fingerprint or ""])
        return records[0] if records else None

    def get_conflict(self, conflict_id: str) -> ConflictView:
        """The conflict; one left open by a resolution cut short after changing the claim is closed first."""

        def attempt() -> ConflictView:
            conflict = self.store.get_conflict(conflict_id)
            if conflict.status is ConflictStatus.RESOLVED:
                return conflict_view(conflict)
            claim = self.store.get_claim(conflict.claim_id)
            record = self._fingerprint_record(claim.claim_id, conflict.fingerprint)
            return conflict_view(self._repaired(conflict, claim, record, None, self._clock()))

        return _settled(attempt)

    def list_conflicts(self, query: ListConflictsQuery) -> tuple[list[ConflictView], str | None]:
        """One page of conflicts and the cursor of the next page."""
        scope = normalise_scope(query.scope) if query.scope else None
        page = self.store.list_conflicts(status=query.status, scope=scope, limit=query.top, cursor=query.cursor)
        return [conflict_view(conflict) for conflict in page.items], page.cursor

    def poll_conflicts(self, *, scope: str | None, state: str | None, limit: int) -> tuple[list[ConflictView], str]:
        """Conflicts created after ``state`` (from now when absent), and the state to poll with next.

        The state is the place of the last conflict delivered, so each is delivered once.
        """
        state = state or encode_cursor(utc_text(self._clock()), "")
        page = self.store.list_conflicts(
            status=None, scope=normalise_scope(scope) if scope else None, limit=limit, cursor=state
        )
        if page.items:
            last = page.items[-1]
            state = encode_cursor(utc_text(last.created_at), last.conflict_id)
        return [conflict_view(conflict) for conflict in page.items], state

    def resolve_conflict(self, conflict_id: str, request: ResolveConflictRequest) -> ConflictView:
        """Apply the reviewer's decision to the claim, then close the conflict; the same way again is a no-op.

        The claim is written first, conditioned on the version read: a refused resolution (``claim_busy``,
        ``conflict_resolved``) or one that lost a race to a new attempt has written nothing (issue 9). A
        crash between the two writes leaves the claim changed and the conflict open, which every later
        read or resolution of the conflict closes as decided (the decision is kept on the fingerprint record).
        """
        reviewer = request.reviewer
        if reviewer is None:
            raise InvalidRequest("reviewer is required: who decided.", target="reviewer")
        warnings = self._stored_data.check(request, f"conflict {conflict_id}")
        self.require_known_secret()

        def attempt() -> ConflictView:
            now = self._clock()
            conflict = self.store.get_conflict(conflict_id)
            claim = self.store.get_claim(conflict.claim_id)
            record = self._fingerprint_record(claim.claim_id, conflict.fingerprint)
            if conflict.status is ConflictStatus.OPEN and not self._applied(claim, conflict, record):
                closed = replace(
                    conflict,
                    status=ConflictStatus.RESOLVED,
                    decision=request.decision,
                    reviewer=reviewer,
                    note=request.note,
                    resolved_at=now,
                )
                self._apply_resolution(claim, closed, record, now)
                return conflict_view(self.store.update_conflict(closed))
            conflict = self._repaired(conflict, claim, record, request.decision, now)
            if conflict.decision is not request.decision:
                decision = conflict.decision.value if conflict.decision else "?"
                raise StateConflict(
                    "conflict_resolved",
                    f"Conflict {conflict.conflict_id} was already resolved as {decision} by {conflict.reviewer}.",
                    target="decision",
                )
            return conflict_view(conflict)

        return warned(_settled(attempt), warnings)

    @staticmethod
    def _applied(claim: Claim, conflict: Conflict, record: FingerprintRecord | None) -> bool:
        """Whether the claim already took this conflict's resolution: its round is one the fingerprint passed."""
        if claim.applied_legacy(conflict.conflict_id):
            return True
        rounds = claim.resolved_rounds(conflict.fingerprint, [record] if record else [])
        return any(
            make_conflict_id(claim.claim_id, conflict.fingerprint, r) == conflict.conflict_id for r in range(rounds)
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
            return self.store.update_conflict(closed)
        if conflict.status is ConflictStatus.RESOLVED and not applied:
            # Resolved by an earlier release, which wrote the conflict before the claim, and never applied.
            self._apply_resolution(claim, conflict, record, now)
        return conflict

    @staticmethod
    def _require_settled(claim: Claim) -> None:
        # Accepting a new version while an attempt is running or in doubt would orphan that attempt's result.
        if claim.status in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
            raise StateConflict(
                "claim_busy",
                f"Attempt {claim.attempt} of this claim is {claim.status.value}: record its result or reconcile it "
                "before accepting the new version.",
                target="decision",
            )

    def _apply_resolution(
        self, claim: Claim, conflict: Conflict, record: FingerprintRecord | None, now: datetime
    ) -> Claim:
        """Write the resolved ``conflict``'s decision to its claim and fingerprint record, in one commit."""
        decision = conflict.decision
        assert decision is not None, "only a resolved conflict is applied"
        if decision is Resolution.ACCEPT_NEW:
            self._require_settled(claim)
        base = record or FingerprintRecord(claim_id=claim.claim_id, fingerprint=conflict.fingerprint or "")
        kept = replace(
            base,
            resolved=base.resolved + 1,
            alias_generation=claim.generation if decision is Resolution.KEEP_ORIGINAL else base.alias_generation,
            conflict_id=conflict.conflict_id,
            decision=decision,
            reviewer=conflict.reviewer,
            note=conflict.note,
            resolved_at=conflict.resolved_at or now,
        )
        changed = replace(claim, reviewer=conflict.reviewer, updated_at=now)
        explanation = {
            Resolution.KEEP_ORIGINAL: "the new fingerprint counts as the same intent; its claims are duplicates",
            Resolution.DISMISS: "closed; the next mismatch opens a new conflict",
            Resolution.ACCEPT_NEW: "the new fingerprint is now the claim's version; its next claim may proceed",
        }[decision]
        details: dict[str, Any] = {"conflictId": conflict.conflict_id, "note": conflict.note}
        if decision is Resolution.ACCEPT_NEW:
            details["previous"] = {
                "status": claim.status.value,
                "fingerprint": claim.fingerprint,
                "targetRecordId": claim.target_record_id,
                "data": claim.result_data,
            }
            # "Failed, confirmed safe to retry" under the new fingerprint: its next claim proceeds, while the
            # old version, already done, is a mismatch again (a released claim would let any version through).
            # A new generation: fingerprints kept as the old version's intent no longer count.
            changed = replace(
                changed,
                status=ClaimStatus.FAILED,
                retryable=True,
                error_reason=f"Superseded: reviewer {conflict.reviewer} accepted a new version (conflict "
                f"{conflict.conflict_id}); its next claim may proceed.",
                fingerprint=conflict.fingerprint,
                generation=claim.generation + 1,
                lease_expires_at=None,
                target_record_id=None,
                result_data=None,
                completed_at=None,
            )
        event = self._event(
            claim,
            EventKind.RESOLUTION,
            decision.value,
            f"Reviewer {conflict.reviewer} resolved conflict {conflict.conflict_id} as {decision.value}: "
            f"{explanation}.",
            at=now,
            run_id=conflict.run_id,
            flow=conflict.flow,
            fingerprint=conflict.fingerprint,
            details={name: value for name, value in details.items() if value is not None},
        )
        stored = self._counted(claim, self.store.update_claim(changed, event, fingerprint=kept))
        logger.info("Conflict %s resolved as %s", conflict.conflict_id, decision.value)
        return stored
