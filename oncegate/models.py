"""Every request and response body of the contract, as pydantic models.

Field names are snake_case in Python and camelCase on the wire (``runId``, ``claimToken``).
Requests forbid unknown fields, so a misspelt field is a 400 naming it rather than a value
silently ignored. Size limits are checked on the canonical JSON of a value.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from oncegate.domain.statuses import (
    AttentionReason,
    ClaimStatus,
    ConflictSource,
    ConflictStatus,
    Decision,
    EventKind,
    Outcome,
    Resolution,
)

DATA_LIMIT_BYTES = 16 * 1024
DETAILS_LIMIT_BYTES = 8 * 1024
DEFAULT_LEASE_SECONDS = 300
MIN_LEASE_SECONDS = 15
MAX_LEASE_SECONDS = 86_400
# The longest cursor handed out: the place of a flow whose name and environment are 256 characters
# of four UTF-8 bytes each, in base64, sealed.
MAX_CURSOR_LENGTH = 4096
DEFAULT_RETENTION_DAYS = 90
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 3650


def json_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON form, the size limits' unit."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)


class _Request(_Model):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


Text256 = Annotated[str, Field(min_length=1, max_length=256)]
LeaseSeconds = Annotated[int, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]


class FlowRef(_Request):
    """The calling flow, e.g. ``{"name": "Create ERP order", "environment": "Default-contoso"}``."""

    name: Text256
    environment: Text256


Scope = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]


class BusinessIntent(_Request):
    """What identifies the business object and what it looks like."""

    scope: Scope
    key: str = Field(min_length=1, max_length=4096)
    payload: JsonValue = None
    fingerprint: str | None = Field(default=None, min_length=1, max_length=128)

    @field_validator("fingerprint")
    @classmethod
    def _one_way_to_fingerprint(cls, fingerprint: str | None, info: ValidationInfo) -> str | None:
        # On the field, not the model, so the 400 names it; payload is declared (and validated) first.
        if fingerprint is not None and info.data.get("payload") is not None:
            raise ValueError("give either payload or fingerprint, not both")
        return fingerprint


class ClaimRequest(BusinessIntent):
    """Check and claim: may this run do the side effect for this business key?"""

    run_id: Text256
    flow: FlowRef | None = None
    # None: the scope's default lease (PUT /api/scopes), else DEFAULT_LEASE_SECONDS.
    lease_seconds: LeaseSeconds | None = None


class LookupRequest(_Request):
    """Find a claim by its business key (keys never travel in URLs)."""

    scope: Scope
    key: str = Field(min_length=1, max_length=4096)


def _data_limit(value: JsonValue) -> JsonValue:
    if json_size(value) > DATA_LIMIT_BYTES:
        raise ValueError(f"data is over {DATA_LIMIT_BYTES} bytes as JSON")
    return value


def _details_limit(value: JsonValue) -> JsonValue:
    if json_size(value) > DETAILS_LIMIT_BYTES:
        raise ValueError(f"details is over {DETAILS_LIMIT_BYTES} bytes as JSON")
    return value


class _Token(_Request):
    claim_token: str = Field(min_length=1, max_length=128)


class RecordResultRequest(_Token):
    """The outcome of the side effect, with the record the target system really holds."""

    outcome: Outcome
    target_record_id: str | None = Field(default=None, min_length=1, max_length=512)
    data: Annotated[JsonValue, AfterValidator(_data_limit)] = None
    error: str | None = Field(default=None, max_length=4096)
    retryable: bool = True


class ReleaseRequest(_Token):
    """Give the claim up before any side effect."""

    reason: str | None = Field(default=None, max_length=1024)


class HeartbeatRequest(_Token):
    """Extend the lease of a long side effect."""

    # None: the scope's default lease, as for Check and claim.
    lease_seconds: LeaseSeconds | None = None


class ReportConflictRequest(BusinessIntent):
    """A conflict the flow found itself, e.g. the target system holds different data."""

    run_id: Text256
    flow: FlowRef | None = None
    reason: str = Field(min_length=1, max_length=1024)
    details: Annotated[JsonValue, AfterValidator(_details_limit)] = None


class ResolveConflictRequest(_Request):
    """A reviewer's decision on an open conflict."""

    decision: Resolution
    # Required with function keys; with Entra ID the signed-in caller is recorded instead.
    reviewer: Text256 | None = None
    note: str | None = Field(default=None, max_length=2048)


class ReviewClaimRequest(_Request):
    """A reviewer acknowledges a failure that is not retryable: the key stays blocked."""

    # Required with function keys; with Entra ID the signed-in caller is recorded instead.
    reviewer: Text256 | None = None
    note: str | None = Field(default=None, max_length=2048)


class ListClaimsQuery(_Request):
    """The claims that need a person, and their paging: a list of every claim is not offered."""

    # Required, so that a bare GET /api/claims is refused naming it. The schema's default is for the
    # connector, which sends an internal parameter only when it has one.
    attention: bool = Field(json_schema_extra={"default": True})
    scope: Scope | None = None
    top: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_LENGTH)


class ListConflictsQuery(_Request):
    """Filters and paging of the conflict list."""

    status: ConflictStatus | None = ConflictStatus.OPEN
    scope: Scope | None = None
    top: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_LENGTH)


class RegisterFlowRequest(_Request):
    """Register a flow in the inventory, or change its registration: owner, enabled, notes.

    It replaces the registration: a field left out is cleared (``enabled`` becomes true).
    """

    name: Text256
    environment: Text256
    owner: Text256 | None = None
    enabled: bool = True
    notes: str | None = Field(default=None, max_length=2048)


class SetScopeRequest(_Request):
    """Set a scope's owner, default lease, retention and description; a field left out gets its default."""

    scope: Scope
    owner: Text256 | None = None
    lease_seconds: LeaseSeconds | None = None
    retention_days: int = Field(default=DEFAULT_RETENTION_DAYS, ge=MIN_RETENTION_DAYS, le=MAX_RETENTION_DAYS)
    description: str | None = Field(default=None, max_length=1024)


class ListPageQuery(_Request):
    """Paging of the inventory's lists."""

    top: int = Field(default=50, ge=1, le=200)
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_LENGTH)


class Holder(_Model):
    """The run holding a live lease: its flow, never its run id.

    Earlier releases showed the run id, which let another caller pass for the holder (issue 9);
    operators find the run with ``oncegate claims show``.
    """

    flow: FlowRef | None = None
    lease_expires_at: datetime | None = None


class ClaimResult(_Model):
    """What the first successful run recorded: reuse it instead of repeating the side effect."""

    target_record_id: str | None = None
    data: JsonValue = None
    completed_at: datetime | None = None
    run_id: str
    flow: FlowRef | None = None


class LastAttempt(_Model):
    """The attempt whose outcome is in doubt: check the target system for its record."""

    attempt: int
    run_id: str
    flow: FlowRef | None = None
    status: ClaimStatus
    started_at: datetime
    lease_expires_at: datetime | None = None
    error: str | None = None


class ClaimResponse(_Model):
    """The answer to Check and claim: branch on ``decision``."""

    decision: Decision
    claim_id: str
    # Absent when the inventory blocked the flow before any claim existed (attempt is then 0).
    status: ClaimStatus | None = None
    attempt: int
    reason: str
    warnings: list[str] = Field(default_factory=list)
    claim_token: str | None = None
    lease_expires_at: datetime | None = None
    result: ClaimResult | None = None
    retry_after_seconds: int | None = None
    holder: Holder | None = None
    last_attempt: LastAttempt | None = None
    conflict_id: str | None = None


class HistoryEntry(_Model):
    """One line of a claim's history and how it was recognised."""

    at: datetime
    event: EventKind
    outcome: str
    attempt: int
    run_id: str | None = None
    flow: FlowRef | None = None
    fingerprint: str | None = None
    recognised_by: str
    details: dict[str, JsonValue] = Field(default_factory=dict)


class ClaimView(_Model):
    """The processing record of one business key (never the key itself, nor the claim token)."""

    claim_id: str
    scope: str
    status: ClaimStatus
    attempt: int
    fingerprint: str | None = None
    first_received_at: datetime
    last_attempt_at: datetime
    lease_expires_at: datetime | None = None
    run_id: str
    flow: FlowRef | None = None
    target_record_id: str | None = None
    data: JsonValue = None
    completed_at: datetime | None = None
    error: str | None = None
    retryable: bool | None = None
    reviewer: str | None = None
    history: list[HistoryEntry] | None = None
    # With ONCEGATE_SENSITIVE_DATA=warn: sensitive_data when a stored field seems to carry personal data.
    warnings: list[str] | None = None


class ClaimNeedingAttention(_Model):
    """A claim that nothing settles by itself: why it needs a person, since when, and the claim."""

    why: AttentionReason
    since: datetime
    claim: ClaimView


class ClaimAttentionList(_Model):
    """A page of the claims needing attention, oldest first; follow ``nextLink`` for the next."""

    value: list[ClaimNeedingAttention]
    next_link: str | None = None


class ConflictResolution(_Model):
    """How a reviewer closed a conflict."""

    decision: Resolution
    reviewer: str
    note: str | None = None
    resolved_at: datetime


class ConflictView(_Model):
    """A conflict waiting for (or closed by) its owner."""

    conflict_id: str
    claim_id: str
    scope: str
    status: ConflictStatus
    source: ConflictSource
    fingerprint: str | None = None
    claim_fingerprint: str | None = None
    reason: str
    details: JsonValue = None
    run_id: str
    flow: FlowRef | None = None
    created_at: datetime
    resolution: ConflictResolution | None = None
    # sensitive_data with ONCEGATE_SENSITIVE_DATA=warn (a stored field seems to carry personal data), and
    # sensitive_key with ONCEGATE_SENSITIVE_KEYS=warn (the reported key does).
    warnings: list[str] | None = None


class ConflictList(_Model):
    """A page of conflicts; follow ``nextLink`` for the next."""

    value: list[ConflictView]
    next_link: str | None = None


class FlowView(_Model):
    """A flow in the inventory: its registration, and how often it claimed (counts lag by up to a minute)."""

    name: str
    environment: str
    registered: bool
    enabled: bool
    owner: str | None = None
    notes: str | None = None
    registered_at: datetime | None = None
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    claims: int
    duplicates: int
    # With ONCEGATE_SENSITIVE_DATA=warn: sensitive_data when a stored field seems to carry personal data.
    warnings: list[str] | None = None


class FlowList(_Model):
    """A page of the flow inventory; follow ``nextLink`` for the next."""

    value: list[FlowView]
    next_link: str | None = None


class OverlapView(_Model):
    """Two flows answering for the same claims: one made them, the other met them as duplicate or in progress."""

    flow: FlowRef
    other_flow: FlowRef
    count: int
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    example_claim_id: str | None = None


class OverlapList(_Model):
    """A page of overlapping flows; follow ``nextLink`` for the next."""

    value: list[OverlapView]
    next_link: str | None = None


class ClaimCounts(_Model):
    """Claims of a scope by status."""

    in_progress: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    released: int = 0


class ScopeView(_Model):
    """A side effect in the catalogue: its settings, claims by status and open conflicts."""

    scope: str
    owner: str | None = None
    lease_seconds: int
    retention_days: int
    description: str | None = None
    registered_at: datetime | None = None
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    claims: ClaimCounts
    open_conflicts: int
    # With ONCEGATE_SENSITIVE_DATA=warn: sensitive_data when a stored field seems to carry personal data.
    warnings: list[str] | None = None


class ScopeList(_Model):
    """A page of the side-effect catalogue; follow ``nextLink`` for the next."""

    value: list[ScopeView]
    next_link: str | None = None


class PollConflictsQuery(_Request):
    """The polling trigger's filter and its state (handed back in ``Location``)."""

    scope: Scope | None = None
    state: str | None = Field(default=None, max_length=MAX_CURSOR_LENGTH)


class Health(_Model):
    """Liveness of the service and its store."""

    status: str
    store: str
    version: str


class ErrorDetail(_Model):
    target: str | None = None
    message: str


class ErrorInfo(_Model):
    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(_Model):
    """Microsoft REST API guidelines error body."""

    error: ErrorInfo
