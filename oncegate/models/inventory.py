"""The flow inventory and the scope catalogue: registrations, settings, lists and overlaps."""

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo, field_validator

from oncegate.domain.fingerprint_rules import FingerprintPreset, pointers_problem
from oncegate.domain.key_patterns import MAX_PATTERN_LENGTH, key_pattern_problem
from oncegate.domain.limits import (
    DEFAULT_HORIZON_DAYS,
    DEFAULT_RETENTION_DAYS,
    MAX_HORIZON_DAYS,
    MAX_RETENTION_DAYS,
    MIN_RETENTION_DAYS,
)
from oncegate.models.base import (
    ADVANCED,
    BY_VALUE,
    IMPORTANT,
    WARNINGS,
    LeaseSeconds,
    NextLink,
    ScopeInput,
    Text256,
    _Model,
    _Request,
    designer,
)
from oncegate.models.claim_requests import FlowRef, flow_in_answer


class RegisterFlowRequest(_Request):
    """Register a flow in the inventory, or change its registration: owner, enabled, notes.

    Only the fields given change (issue 31): a field left out stays as the registration holds it, and a field
    sent as null is reset (no owner, no notes, enabled). The parse reads which were given from ``model_fields_set``.
    """

    name: Annotated[
        Text256,
        designer(
            "Flow Name",
            "The name of the flow, as the flow sends it in the Flow Name field of Check and claim.",
            IMPORTANT,
        ),
    ]
    environment: Annotated[
        Text256,
        designer(
            "Flow Environment",
            "The environment the flow runs in, as the flow sends it with Check and claim.",
            IMPORTANT,
        ),
    ]
    owner: Annotated[
        Text256 | None,
        designer(
            "Owner",
            "Who answers for the flow, such as an email address. Left empty, the flow keeps its owner.",
            IMPORTANT,
        ),
    ] = None
    enabled: Annotated[
        bool | None,
        designer(
            "Enabled",
            "Whether the flow may claim. When it is no, the flow's Check and claim answers blocked until a person "
            "enables it again. Left empty, it stays (yes until set).",
            IMPORTANT,
        ),
    ] = None
    notes: Annotated[
        str | None,
        designer(
            "Notes",
            "Why the flow is registered or disabled; a blocked answer quotes it. Left empty, they stay.",
            ADVANCED,
        ),
    ] = Field(default=None, max_length=2048)


def _valid_key_pattern(pattern: str | None) -> str | None:
    if pattern is not None and (problem := key_pattern_problem(pattern)):
        raise ValueError(problem)
    return pattern


def _valid_included(pointers: list[str] | None) -> list[str] | None:
    if pointers is not None and (problem := pointers_problem(pointers, ignored=False)):
        raise ValueError(problem)
    return pointers


def _valid_ignored(pointers: list[str] | None) -> list[str] | None:
    if pointers is not None and (problem := pointers_problem(pointers, ignored=True)):
        raise ValueError(problem)
    return pointers


POINTERS_TEXT = (
    "JSON Pointers (RFC 6901) into Payload, such as /Title or /lines/*/amount, where * stands for every item of "
    "an array."
)
KEY_PATTERN_TEXT = (
    "A regular expression that the scope's keys match whole, such as 310115[0-9]{12} or [0-9]{16}. A key that "
    "matches it is never refused as personal data: set it when the scope's ids have the shape of a phone, card or "
    "resident id number."
)


class SetScopeRequest(_Request):
    """Set a scope's owner, default lease, retention, horizon, description, key pattern and fingerprint rules.

    Only the fields given change (issue 31): a field left out stays as the scope holds it, and a field sent as
    null is reset to its default. The parse reads which were given from ``model_fields_set``.
    """

    scope: ScopeInput
    owner: Annotated[
        Text256 | None,
        designer(
            "Owner",
            "Who answers for the side effect and its conflicts, such as a team's email address. Left empty, the "
            "scope keeps its owner.",
            IMPORTANT,
        ),
    ] = None
    lease_seconds: Annotated[
        LeaseSeconds | None,
        designer(
            "Default Lease Seconds",
            "The lease of the scope's claims that do not ask for one, from 15 to 86400 seconds. Left empty, the scope "
            "keeps its lease (300 until set).",
            ADVANCED,
        ),
    ] = None
    retention_days: Annotated[
        int | None,
        designer(
            "Retention Days",
            f"How many days the scope's claims are kept, from 1 to 3650. Left empty, the scope keeps its retention "
            f"({DEFAULT_RETENTION_DAYS} until set).",
            ADVANCED,
        ),
    ] = Field(default=None, ge=MIN_RETENTION_DAYS, le=MAX_RETENTION_DAYS)
    horizon_days: Annotated[
        int | None,
        designer(
            "Horizon Days",
            f"How many days after its last change a succeeded claim's key is still answered duplicate, from the "
            f"retention to {MAX_HORIZON_DAYS}: past the retention, by the claim's tombstone. Left empty, the scope "
            f"keeps its horizon ({DEFAULT_HORIZON_DAYS} until set, never shorter than the retention).",
            ADVANCED,
        ),
    ] = Field(default=None, ge=MIN_RETENTION_DAYS, le=MAX_HORIZON_DAYS)
    description: Annotated[
        str | None,
        designer("Description", "What the side effect does, in one sentence. Left empty, it stays.", ADVANCED),
    ] = Field(default=None, max_length=1024)
    key_pattern: Annotated[
        str | None,
        Field(max_length=MAX_PATTERN_LENGTH),
        AfterValidator(_valid_key_pattern),
        designer("Key Pattern", f"{KEY_PATTERN_TEXT} Left empty, it stays.", ADVANCED),
    ] = None
    fingerprint_include: Annotated[
        list[Annotated[str, Field(max_length=256)]] | None,
        AfterValidator(_valid_included),
        designer(
            "Fingerprint Include",
            f"The parts of Payload that make up the business data; the rest is left out of the fingerprint. "
            f"{POINTERS_TEXT} Left empty, they stay.",
            ADVANCED,
        ),
    ] = None
    fingerprint_ignore: Annotated[
        list[Annotated[str, Field(max_length=256)]] | None,
        AfterValidator(_valid_ignored),
        designer(
            "Fingerprint Ignore",
            f"The parts of Payload left out of the fingerprint, such as a modified time or version stamp. "
            f"{POINTERS_TEXT} Left empty, they stay.",
            ADVANCED,
        ),
    ] = None
    fingerprint_preset: Annotated[
        FingerprintPreset | None,
        BY_VALUE,
        designer(
            "Fingerprint Preset",
            "Ignore the system fields of a trigger body sent as Payload: sharepoint (When an item is created or "
            "modified) or dataverse (When a row is added, modified or deleted). Left empty, it stays.",
            ADVANCED,
        ),
    ] = None

    @field_validator("horizon_days")
    @classmethod
    def _not_shorter_than_the_retention(cls, horizon: int | None, info: ValidationInfo) -> int | None:
        # On the field, so the 400 names it; retention_days is declared (and validated) first.
        retention = info.data.get("retention_days")
        if horizon is not None and retention is not None and horizon < retention:
            raise ValueError(
                f"the horizon must be at least the retention ({retention} days): claims are kept that long"
            )
        return horizon


RegisteredAt = Annotated[datetime | None, designer("Registered At", "When a person first registered it, in UTC.")]
FirstSeenAt = Annotated[datetime | None, designer("First Seen At", "When the service first saw it, in UTC.")]
LastSeenAt = Annotated[
    datetime | None, designer("Last Seen At", "When the service last saw it, in UTC. Counts may lag by a minute.")
]


class SourceCount(_Model):
    """How many claims were made for one source system (issue 16); counts lag as the others do."""

    source: Annotated[str, designer("Source System", "The source system, such as shop-eu.")]
    claims: Annotated[int, designer("Source Claims", "How many claims were made for it.")]


class FlowView(_Model):
    """A flow in the inventory: its registration, and how often it claimed (counts lag by up to a minute)."""

    name: Annotated[str, designer("Flow Name", "The name of the flow.")]
    environment: Annotated[str, designer("Flow Environment", "The environment the flow runs in.")]
    registered: Annotated[
        bool, designer("Registered", "Whether a person registered the flow; if not, it was only seen claiming.")
    ]
    enabled: Annotated[bool, designer("Enabled", "Whether the flow may claim; a disabled flow is answered blocked.")]
    owner: Annotated[str | None, designer("Owner", "Who answers for the flow.")] = None
    notes: Annotated[str | None, designer("Notes", "What the person who registered the flow noted.")] = None
    registered_at: RegisteredAt = None
    first_seen_at: FirstSeenAt = None
    last_seen_at: LastSeenAt = None
    claims: Annotated[int, designer("Claims", "How many times the flow asked Check and claim.")]
    duplicates: Annotated[
        int, designer("Duplicates", "How many of the flow's Check and claim requests were answered duplicate.")
    ]
    sources: Annotated[
        list[SourceCount] | None,
        designer("Flow Sources", "The claims that the flow made for each source system, most first."),
    ] = None
    # With ONCEGATE_SENSITIVE_DATA=warn: sensitive_data when a stored field seems to carry personal data.
    warnings: Annotated[list[str] | None, WARNINGS] = None


class FlowList(_Model):
    """A page of the flow inventory; follow ``nextLink`` for the next."""

    value: Annotated[list[FlowView], designer("Flows", "The flows, by name and environment.")]
    next_link: NextLink = None


class OverlapView(_Model):
    """Two flows answering for the same claims: one made them, the other met them as duplicate or in progress."""

    flow: Annotated[FlowRef, flow_in_answer("Flow", "one flow of the pair")]
    other_flow: Annotated[FlowRef, flow_in_answer("Other Flow", "the other flow of the pair")]
    count: Annotated[
        int,
        designer(
            "Overlap Count",
            "How many times one flow of the pair met a claim of the other, answered duplicate or in_progress.",
        ),
    ]
    first_seen_at: FirstSeenAt = None
    last_seen_at: LastSeenAt = None
    example_claim_id: Annotated[
        str | None, designer("Example Claim ID", "One claim that both flows met; Get claim shows its history.")
    ] = None


class OverlapList(_Model):
    """A page of overlapping flows; follow ``nextLink`` for the next."""

    value: Annotated[list[OverlapView], designer("Overlaps", "The pairs of flows that met each other's claims.")]
    next_link: NextLink = None


class ClaimCounts(_Model):
    """Claims of a scope by status."""

    in_progress: Annotated[int, designer("In Progress Claims", "Claims held under a lease now.")] = 0
    succeeded: Annotated[int, designer("Succeeded Claims", "Claims whose side effect succeeded.")] = 0
    failed: Annotated[int, designer("Failed Claims", "Claims whose last attempt failed.")] = 0
    unknown: Annotated[int, designer("Unknown Claims", "Claims whose last attempt has an unknown outcome.")] = 0
    released: Annotated[int, designer("Released Claims", "Claims given up before any side effect.")] = 0


class ScopeView(_Model):
    """A side effect in the catalogue: its settings, claims by status and open conflicts."""

    scope: Annotated[str, designer("Scope", "The scope, in lowercase.")]
    owner: Annotated[str | None, designer("Owner", "Who answers for the side effect and its conflicts.")] = None
    lease_seconds: Annotated[
        int, designer("Default Lease Seconds", "The lease of the scope's claims that do not ask for one.")
    ]
    retention_days: Annotated[int, designer("Retention Days", "How many days the scope's claims are kept.")]
    horizon_days: Annotated[
        int,
        designer(
            "Horizon Days",
            "How many days after its last change a succeeded claim's key is still answered duplicate: the claim for "
            "its retention, then its tombstone. A replay later than this is a new key.",
        ),
    ]
    description: Annotated[str | None, designer("Description", "What the side effect does.")] = None
    key_pattern: Annotated[
        str | None,
        designer(
            "Key Pattern",
            "The pattern the scope's keys match whole, as declared with Set scope; such keys are never refused as "
            "personal data.",
        ),
    ] = None
    fingerprint_include: Annotated[
        list[str] | None,
        designer("Fingerprint Include", "The parts of Payload that make up the business data, as set with Set scope."),
    ] = None
    fingerprint_ignore: Annotated[
        list[str] | None,
        designer(
            "Fingerprint Ignore",
            "The parts of Payload left out of the fingerprint, as set with Set scope; the preset's fields come on top.",
        ),
    ] = None
    fingerprint_preset: Annotated[
        FingerprintPreset | None, designer("Fingerprint Preset", "The trigger body preset set with Set scope.")
    ] = None
    fingerprint_rules_version: Annotated[
        int | None,
        designer(
            "Fingerprint Rules Version",
            "The version of the fingerprint rules, counted from 1. A request is compared with its claim part by "
            "part under the current version, whenever the claim was made.",
        ),
    ] = None
    fingerprint_unmatched: Annotated[
        list[str] | None,
        designer(
            "Fingerprint Unmatched",
            "The Fingerprint Include pointers that no payload has matched yet: perhaps mistyped. Counts may lag by "
            "a minute.",
        ),
    ] = None
    registered_at: RegisteredAt = None
    first_seen_at: FirstSeenAt = None
    last_seen_at: LastSeenAt = None
    claims: Annotated[
        ClaimCounts,
        designer(
            "Claims",
            "The scope's claims by status, as counted: they may lag by a minute, and lose a stopped instance's last "
            "minute until an operator counts them again.",
        ),
    ]
    sources: Annotated[
        list[SourceCount] | None,
        designer("Scope Sources", "The scope's claims made for each source system, most first."),
    ] = None
    open_conflicts: Annotated[int, designer("Open Conflicts", "How many conflicts of the scope wait for their owner.")]
    # With ONCEGATE_SENSITIVE_DATA=warn: sensitive_data when a stored field seems to carry personal data.
    warnings: Annotated[list[str] | None, WARNINGS] = None


class ScopeList(_Model):
    """A page of the side-effect catalogue; follow ``nextLink`` for the next."""

    value: Annotated[list[ScopeView], designer("Scopes", "The scopes, by name.")]
    next_link: NextLink = None
