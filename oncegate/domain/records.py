"""The records the claim service keeps. They know nothing of storage.

Every record the service keeps is here, side by side, so that a field added to one is read beside the
others; each is a plain dataclass.

``version`` is the store's opaque concurrency token (a row version in SQLite, the ETag in
Table Storage): the service hands it back unchanged on the next conditional update.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from oncegate.domain.copies import frozen
from oncegate.domain.statuses import (
    ClaimStatus,
    ConflictOrigin,
    ConflictStatus,
    EventKind,
    Resolution,
)
from oncegate.errors import InvalidRequest


@frozen(order=True)
class Flow:
    """The calling flow: a copy of the same flow in another environment is another Flow."""

    name: str
    environment: str


def flow_text(flow: Flow | None, *, opening: bool = False) -> str:
    """How a message names a flow (``opening``: at the start of a sentence)."""
    text = f"flow '{flow.name}' in '{flow.environment}'" if flow else "an unnamed flow"
    return text[0].upper() + text[1:] if opening else text


@frozen
class AppliedResolution:
    """A resolution applied by releases that listed them on the claim row; read, never written any more.

    The list grew with every resolution until the row was too large to write (issue 9), so resolutions
    now go to :class:`FingerprintRecord` rows. Claims written before keep their list as it was.
    """

    conflict_id: str
    fingerprint: str | None
    decision: Resolution


@frozen
class EarlierAttempt:
    """The attempt a reconciling run must look up in the target system: it may have done the side effect."""

    attempt: int
    run_id: str
    flow: Flow | None
    status: ClaimStatus
    started_at: datetime
    lease_expires_at: datetime | None = None
    error: str | None = None


@frozen
class Claim:
    """The processing record of one business key in one scope.

    ``grant_id`` names the current attempt's grant: the claim token is a MAC over it that only the
    service can make, so the row holds nothing that lets a reader act as the run. ``generation``
    counts the new versions a reviewer accepted (``accept_new``): a fingerprint kept as the same
    intent (``keep_original``) counts only within the generation it was kept in. ``legacy_token``
    and ``legacy_resolutions`` are what rows written by earlier releases hold instead.

    ``source`` (the system the business object comes from) and ``reference`` (the flow's label to find
    the claim again) are kept in clear, as the first request naming them gave them (issue 16).

    ``granted_to`` is a keyed digest of who signed in (Entra ID) when the current attempt was
    granted: only that caller gets it back as the same run asking again.

    ``purged_at`` says the claim is a tombstone: retention purged a succeeded claim at that time and
    kept what a late replay of its key needs to be answered ``duplicate`` (the status, the target
    record, the completion, the fingerprint) for its scope's horizon; its data, history and labels
    are gone.

    ``earlier_attempt`` is the earlier attempt the current one was granted to reconcile (None for an
    attempt granted ``proceed``); ``released_in_doubt`` says its run released it without knowing what
    that earlier attempt did, so the claim stays ``unknown``. (Rows written before these were fields
    kept them in the history and in the error text; the stores read them from there.)
    """

    claim_id: str
    scope: str
    status: ClaimStatus
    attempt: int
    fingerprint: str | None
    grant_id: str | None
    run_id: str
    flow: Flow | None
    first_received_at: datetime
    last_attempt_at: datetime
    updated_at: datetime
    lease_expires_at: datetime | None = None
    target_record_id: str | None = None
    data: Any = None
    completed_at: datetime | None = None
    error: str | None = None
    retryable: bool | None = None
    reviewer: str | None = None
    granted_to: str | None = None
    source: str | None = None
    reference: str | None = None
    earlier_attempt: EarlierAttempt | None = None
    released_in_doubt: bool = False
    generation: int = 0
    # The check value of the key secret the claim id was made with (None on rows of earlier releases).
    key_id: str | None = None
    # The version of its scope's fingerprint rules the fingerprint was made under (0: none; rows of earlier
    # releases): a request is fingerprinted under the same version to be compared with it (issue 25).
    rules_version: int = 0
    # The attempt whose idempotency key the current attempt hands the target system: an earlier one whose
    # outcome is in doubt, which this attempt reconciles; None for its own (see domain/idempotency.py).
    idempotency_attempt: int | None = None
    # A keyed digest per member of the payload, by JSON Pointer (oncegate.domain.keys); None: fingerprint only.
    members: Mapping[str, str] | None = None
    purged_at: datetime | None = None
    legacy_token: str | None = None
    legacy_resolutions: tuple[AppliedResolution, ...] = ()
    version: str | None = None

    def accepts(self, forms: Collection[str], records: Collection[FingerprintRecord]) -> bool:
        """Whether a fingerprint (in any of its ``forms``) counts as this claim's business intent."""
        return self.fingerprint in forms or self.aliased(forms, records)

    def aliased(self, forms: Collection[str], records: Collection[FingerprintRecord]) -> bool:
        """Whether a reviewer kept the original for a fingerprint (in any of its ``forms``) in this generation."""
        if any(record.fingerprint in forms and record.alias_generation == self.generation for record in records):
            return True
        return self.generation == 0 and bool(set(forms) & self._legacy_aliases())

    def _legacy_aliases(self) -> set[str | None]:
        accepted: set[str | None] = set()
        for applied in self.legacy_resolutions:
            if applied.decision is Resolution.ACCEPT_NEW:
                accepted = set()
            elif applied.decision is Resolution.KEEP_ORIGINAL:
                accepted.add(applied.fingerprint)
        return accepted

    def resolved_rounds(self, fingerprint: str | None, records: Collection[FingerprintRecord]) -> int:
        """How many conflicts for this fingerprint were resolved: part of the next conflict's id."""
        legacy = sum(1 for applied in self.legacy_resolutions if applied.fingerprint == fingerprint)
        return legacy + sum(record.resolved for record in records if record.fingerprint == (fingerprint or ""))

    def applied_legacy(self, conflict_id: str) -> bool:
        return any(applied.conflict_id == conflict_id for applied in self.legacy_resolutions)

    @property
    def retryable_failure(self) -> bool:
        """A failure its flow left retryable (or a review settled as failed): on no attention list, deleted by
        retention at its scope's horizon; its key's next run proceeds."""
        return self.status is ClaimStatus.FAILED and self.retryable is not False

    @property
    def purgeable(self) -> bool:
        """Whether retention deletes the claim some day as it stands (``oncegate.service.retention.gone_at`` says
        when): succeeded (or its tombstone), released, a retryable failure or a reviewed one. A claim ``in_progress``
        or ``unknown``, or a failure nobody reviewed, waits for its holder or a person, and its ``updated_at`` says
        since when (its holder's lease, the attention list)."""
        if self.status is ClaimStatus.FAILED:
            return self.retryable is not False or self.reviewer is not None
        return self.status in (ClaimStatus.SUCCEEDED, ClaimStatus.RELEASED)


@frozen
class FingerprintRecord:
    """What reviewers decided about one fingerprint of a claim: a row of its own beside the claim.

    One row per fingerprint keeps the claim row bounded however many conflicts are resolved.
    ``resolved`` counts the conflicts resolved for it (the next conflict's id depends on it, so a
    dismissed mismatch opens a new conflict); ``alias_generation`` is the claim generation in which a
    reviewer kept the original for it. The last resolution is kept whole, so that a conflict whose
    claim was changed but whose own row was not (a crash between the two writes) is closed as decided.
    ``fingerprint`` is "" for a conflict reported without one.
    """

    claim_id: str
    fingerprint: str
    resolved: int = 0
    alias_generation: int | None = None
    conflict_id: str | None = None
    decision: Resolution | None = None
    reviewer: str | None = None
    note: str | None = None
    resolved_at: datetime | None = None
    version: str | None = None


@frozen
class HistoryEvent:
    """One line of a claim's history: an answer, a result, a release, a conflict or a resolution.

    ``event_id`` is unique in the claim's history. A history lists by ``at``, then ``event_id``.
    A line that counts repeated answers (``count`` set, see ``ClaimRecords.count_event``) has a
    series id of its own: it holds the first answer's fields, at its time, and how many answers alike
    came until ``last_at``.
    """

    claim_id: str
    event_id: str
    at: datetime
    kind: EventKind
    outcome: str
    attempt: int
    recognised_by: str
    run_id: str | None = None
    flow: Flow | None = None
    fingerprint: str | None = None
    source: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    count: int | None = None
    last_at: datetime | None = None


@frozen
class Conflict:
    """The same key seen with a different fingerprint, waiting for its owner.

    ``origin`` says who noticed it; ``source_system`` is the business source the run named (issue 16).
    """

    conflict_id: str
    claim_id: str
    scope: str
    status: ConflictStatus
    origin: ConflictOrigin
    fingerprint: str | None
    claim_fingerprint: str | None
    reason: str
    run_id: str
    flow: Flow | None
    created_at: datetime
    details: Any = None
    source_system: str | None = None
    # The parts of the payload that changed, by JSON Pointer, never their values: the first few, and how many more.
    changed: tuple[str, ...] = ()
    more_changed: int = 0
    decision: Resolution | None = None
    reviewer: str | None = None
    note: str | None = None
    resolved_at: datetime | None = None
    version: str | None = None


# Perform once keeps the call it makes in its claim's data under this member (oncegate.domain.performing). It is
# here, beside the claim, because the decision table reads it too (Intent.is_holder_of), and a new process's first
# Check and claim imports nothing of Perform once's (tests/http/test_cold_start.py).
CALL = "call"
# And under this one, from the write that takes a call in doubt over, while it looks the call up at the target.
LOOK_UP = "lookUp"
# And under this one, the call of the earlier attempt whose idempotency key a new attempt carries (it took a call in
# doubt over): a look-up of the claim asks the target that call went to, whichever target a later request names.
EARLIER_CALL = "earlierCall"
# The longest a call of Perform once may take (a target's timeoutSeconds at most): its mark's deadline is at most
# this long after it was sent.
LONGEST_CALL_SECONDS = 90
LONGEST_CALL = timedelta(seconds=LONGEST_CALL_SECONDS)
# How long past its recorded deadline a call in doubt is judged over: twice oncegate.domain.safeguard.MAX_CLOCK_ERROR
# (7 s; not imported, which imports this module; tests/perform/test_clock_skew.py ties them), as each instance the clock
# check lets through may really be that far from the store's clock (5 s measured, plus the store's whole-second Date
# and the round trip of the reading, which the measured skew may be off by), so two instances' may be twice that
# apart. The instance that sent the call ends it by the deadline on its own clock; one whose clock is ahead of the
# sender's judged the deadline passed while the call could still reach the target, looked it up, found nothing yet and
# made the order a second time. Every judgement that a call's deadline passed (a look-up, a hand-over to reconcile,
# the time a run or a wait's poll is told to ask again) waits this long past it, whichever instance judges: on SQLite
# too, where one clock judges, it costs a reconcile 14 s and keeps one rule for both stores.
CALL_DEADLINE_MARGIN = timedelta(seconds=14)


def marked_call(data: Any) -> Mapping[str, Any] | None:
    """The call a claim's data records, or None (not made by Perform once, or before the call was recorded)."""
    if isinstance(data, dict) and isinstance(data.get(CALL), dict):
        call: Mapping[str, Any] = data[CALL]
        return call
    return None


def looked_up_call(claim: Claim) -> Mapping[str, Any] | None:
    """The call a look-up of ``claim`` must find: the earlier one it carries, else the one its attempt made; only
    Perform once's mark (_performs) is a call: a flow's own result data may name a member "call" or "earlierCall"
    too. Perform once never writes both (an attempt that sends a call of its own writes it alone), so both are
    there only when a run recorded unknown with a member "call" of its own, which may look like a mark: the call
    carried beside it (still_in_doubt) is the one in doubt."""
    found = _call_in(claim.data, claim.updated_at)
    return found[0] if found is not None else None


def _call_in(data: Any, recorded_at: datetime) -> tuple[Mapping[str, Any], datetime] | None:
    """The call of looked_up_call in ``data`` recorded at ``recorded_at``, and its deadline."""
    if not isinstance(data, dict):
        return None
    for name in (EARLIER_CALL, CALL):
        call = data.get(name)
        if isinstance(call, dict) and (deadline := _performs(call, recorded_at)) is not None:
            return call, deadline
    return None


def call_deadline(claim: Claim) -> datetime | None:
    """When the outcome of the call a look-up must find (looked_up_call) is due at the latest: after it, a
    look-up may tell."""
    found = _call_in(claim.data, claim.updated_at)
    return found[1] if found is not None else None


def _performs(call: Mapping[str, Any], recorded_at: datetime) -> datetime | None:
    """The deadline of ``call`` when it is Perform once's mark in data recorded at ``recorded_at``, else None. A
    flow's own result data may name a member "call" too, with a "deadline" of its own (a word, a time without a zone,
    a courier's pick-up next week). Perform once's mark says when the call was sent, and its deadline is at most
    ``LONGEST_CALL_SECONDS`` later; and it is written when the call is sent (with the grant that makes it, or in a
    write of its own), so it was sent no later than the claim was last written: every write after it is stamped
    after the claim it read (ClaimsCore.decided_at). A member sent after that, a run's own (its clock, its plans),
    is no mark: taken for one, a time years ahead kept the key in_progress until then."""
    deadline, sent_at = _zoned(call.get("deadline")), _zoned(call.get("sentAt"))
    if deadline is None or sent_at is None or sent_at > recorded_at:
        return None
    return deadline if timedelta(0) <= deadline - sent_at <= LONGEST_CALL else None


def call_over_at(claim: Claim) -> datetime | None:
    """When the call a look-up must find is over on every instance's clock: its deadline (call_deadline) plus
    CALL_DEADLINE_MARGIN, up to the whole second, so that an answer naming it (in whole seconds) never names a time
    before it. From then on a look-up may tell what it did; None without such a call."""
    deadline = call_deadline(claim)
    if deadline is None:
        return None
    over = deadline + CALL_DEADLINE_MARGIN
    return over.replace(microsecond=0) + timedelta(seconds=1) if over.microsecond else over


def call_under_way(claim: Claim, now: datetime) -> datetime | None:
    """When the call a look-up must find is over (call_over_at), while that is still ahead of ``now``: until then the
    call may still be under way at the target, and no look-up can tell what it did. None once it passed, or without
    such a call."""
    over = call_over_at(claim)
    return over if over is not None and over > now else None


def _zoned(text: Any) -> datetime | None:
    """``text`` as a time with its zone, or None."""
    if not isinstance(text, str):
        return None
    try:
        time = datetime.fromisoformat(text)
    except ValueError:
        return None
    return time if time.tzinfo is not None else None


def carrying(data: Any, taken_over: Claim) -> Any:
    """``data`` of a new attempt that takes over a claim in doubt (``taken_over``), carrying the call that claim made
    or carried in turn, as the attempt carries its idempotency key (decisions.key_attempt)."""
    call = looked_up_call(taken_over)
    if call is None:
        return data
    return {**(data if isinstance(data, dict) else {}), EARLIER_CALL: dict(call)}


def still_in_doubt(data: Any, recorded_over: Claim) -> Any:
    """``data`` a run records ``unknown`` with over a claim (``recorded_over``) that carries a call a look-up must
    find: that call is still in doubt where it went, so it stays (``earlierCall``) beside the run's own data, unless
    a look-up of that data finds the very call (Perform once recording its own call, a run giving it back). A member
    of the run's own is never taken for it, even shaped as Perform once's mark. Data that is no object has no room
    beside it: ``InvalidRequest`` (``data``), nothing recorded, rather than a call in doubt dropped (a later Perform
    once naming another target would make it there again)."""
    carried = _call_in(recorded_over.data, recorded_over.updated_at)
    if carried is None or _call_in(data, recorded_over.updated_at) == carried:
        return data
    if data is not None and not isinstance(data, dict):
        raise InvalidRequest(
            "This claim carries a call in doubt that an outcome unknown keeps in its data as earlierCall: give data "
            "as a JSON object, or none.",
            target="data",
        )
    return carrying(data, recorded_over)


def marked_by_perform(data: Any) -> bool:
    """Whether a request of Perform once acts on the claim: its call recorded, or its look-up under way."""
    return marked_call(data) is not None or (isinstance(data, dict) and isinstance(data.get(LOOK_UP), dict))


T = TypeVar("T")


@frozen
class ClaimFilter:
    """Which claims a list holds: in one of ``statuses`` (at least one), and each other filter only if given.

    Of ``scope``, last changed before ``changed_before``, of the source system ``source``, with
    ``reference``, first received at or after ``received_since``. ``tombstones`` lists the tombstones
    of purged claims (see :attr:`Claim.purged_at`) instead of the claims: a list holds one or the other.
    """

    statuses: Collection[ClaimStatus]
    scope: str | None = None
    changed_before: datetime | None = None
    source: str | None = None
    reference: str | None = None
    received_since: datetime | None = None
    tombstones: bool = False

    def matches(self, claim: Claim) -> bool:
        since, before = self.received_since, self.changed_before
        return (
            (claim.purged_at is not None) is self.tombstones
            and claim.status in self.statuses
            and self.scope in (None, claim.scope)
            and (before is None or claim.updated_at < before)
            and self.source in (None, claim.source)
            and self.reference in (None, claim.reference)
            and (since is None or claim.first_received_at >= since)
        )


@frozen
class Page(Generic[T]):
    """One page of a list and the opaque cursor of the next (None on the last page)."""

    items: list[T]
    cursor: str | None = None


@frozen
class FlowRecord:
    """A flow in the inventory: what a person registered about it, and how much it has claimed.

    ``registered_at`` is None for a flow that was only seen (it claimed, nobody registered it).
    The counts are totals over every instance of the service, merged from their in-memory deltas.
    ``claims_by_source`` counts the claims the flow made for each source system named (issue 16).
    """

    flow: Flow
    owner: str | None = None
    enabled: bool = True
    notes: str | None = None
    registered_at: datetime | None = None
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    claims: int = 0
    duplicates: int = 0
    claims_by_source: Mapping[str, int] = field(default_factory=dict)
    version: str | None = None


@frozen
class FingerprintRules:
    """Which parts of a payload make up the business data, as a scope's owner set them: one version.

    ``include`` and ``ignore`` are the owner's JSON Pointers (RFC 6901, ``*`` for every item of an
    array); ``preset`` names the trigger body preset chosen, and ``preset_ignore`` holds its pointers as
    they were when this version was made, so that a later release's preset leaves this version's meaning
    alone. Version 0 is the scope without rules: the whole payload.
    """

    version: int = 0
    include: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    preset: str | None = None
    preset_ignore: tuple[str, ...] = ()
    # The include pointers some payload claimed under this version matched (issue 33): the others may be mistyped.
    matched: tuple[str, ...] = ()

    @property
    def ignored(self) -> tuple[str, ...]:
        """Every pointer left out: the preset's, then the owner's, each once."""
        return tuple(dict.fromkeys((*self.preset_ignore, *self.ignore)))

    @property
    def empty(self) -> bool:
        return not self.include and not self.ignored


@frozen
class ScopeRecord:
    """A side effect in the catalogue: its settings, and its claims by status.

    ``lease_seconds`` and ``retention_days`` are None until someone sets them; the service then
    applies its own defaults. A retention job reads ``retention_days`` from here.
    ``claims_by_source`` counts the claims made for each source system named (issue 16).
    ``key_pattern`` is the shape its owner declared its keys have (issue 22): see
    :mod:`oncegate.domain.key_patterns`. ``horizon_days`` is how long after its last change a
    succeeded claim's key is still recognised, as a tombstone once retention purged the claim.
    ``fingerprint_rules`` are its owner's fingerprint rules, every version kept (issue 25): see
    :mod:`oncegate.domain.fingerprint_rules`.
    """

    scope: str
    owner: str | None = None
    lease_seconds: int | None = None
    retention_days: int | None = None
    description: str | None = None
    key_pattern: str | None = None
    # Every version of the scope's fingerprint rules, oldest first: claims keep the version they were made under.
    fingerprint_rules: tuple[FingerprintRules, ...] = ()
    horizon_days: int | None = None
    registered_at: datetime | None = None
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    claims_by_status: Mapping[ClaimStatus, int] = field(default_factory=dict)
    claims_by_source: Mapping[str, int] = field(default_factory=dict)
    version: str | None = None


@frozen
class Overlap:
    """Two flows answering for the same claims: one made a claim, the other met it (duplicate or in progress).

    The pair is unordered; ``flows`` holds it sorted, so each pair has one record.
    """

    flows: tuple[Flow, Flow]
    count: int = 0
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    example_claim_id: str | None = None
    version: str | None = None


@frozen
class KeySecretRecord:
    """A key secret this store knows, by its check value (``KeyHasher.key_id``), never the secret.

    ``in_use_from`` is when claims began to be made with it: None while it is only announced (an
    instance holds it as ``ONCEGATE_KEY_SECRET_NEXT``). The first secret of a store is in use from its
    first claim; the next one from a moment a little after an instance first ran with it as its
    current secret (the switch), so that every instance still on the older secret alone notices
    before any claim is made with the newer one. ``retired_at`` is set by an operator who confirmed
    that no claim made with it is needed any more (``oncegate keys retire``).
    """

    key_id: str
    added_at: datetime
    in_use_from: datetime | None = None
    retired_at: datetime | None = None
    version: str | None = None

    @property
    def live(self) -> bool:
        """In use and not retired: every instance must be able to read the claims made with it."""
        return self.in_use_from is not None and self.retired_at is None
