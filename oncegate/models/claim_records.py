"""A claim once made, as flows and people reach it: its result, lease and review, the queries that find it, and its
views (issue 36: apart from Check and claim's own, which a cold start builds alone)."""

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, JsonValue

from oncegate.domain.limits import (
    DATA_LIMIT_BYTES,
    ERROR_MAX_LENGTH,
    TARGET_RECORD_ID_MAX_LENGTH,
)
from oncegate.domain.statuses import AttentionReason, ClaimStatus, EventKind, Outcome, SettledOutcome
from oncegate.models.base import (
    ADVANCED,
    BY_VALUE,
    IMPORTANT,
    INTERNAL,
    SHOWN_JSON,
    SHOWN_MEMBERS,
    WARNINGS,
    Cursor,
    NextLink,
    QueryBoolean,
    QueryInteger,
    Reference,
    Scope,
    ScopeInput,
    Source,
    Text256,
    _Model,
    _Query,
    _Request,
    designer,
    stored_json,
)
from oncegate.models.claim_requests import BusinessKey, FlowRef, RequestedLease, flow_in_answer
from oncegate.models.claim_views import ClaimId, CompletedAt, LeaseExpiresAt


class LookupRequest(_Request):
    """Find a claim by its business key (keys never travel in URLs)."""

    scope: ScopeInput
    key: BusinessKey


_DATA = stored_json("data", DATA_LIMIT_BYTES)


class _Token(_Request):
    claim_token: Annotated[
        str,
        Field(min_length=1, max_length=128),
        designer(
            "Claim Token",
            "The claim token that Check and claim gave this run. It proves that the run still holds the claim.",
            IMPORTANT,
        ),
    ]


class RecordResultRequest(_Token):
    """The outcome of the side effect, with the record the target system really holds."""

    outcome: Annotated[
        Outcome,
        BY_VALUE,
        designer(
            "Outcome",
            "How the side effect ended: succeeded, failed, or unknown when it was attempted and its outcome is not "
            "known.",
            IMPORTANT,
        ),
    ]
    target_record_id: Annotated[
        str | None,
        designer(
            "Target Record ID",
            "The id of the record that the target system really holds, read back after the write.",
            IMPORTANT,
        ),
    ] = Field(default=None, min_length=1, max_length=TARGET_RECORD_ID_MAX_LENGTH)
    data: Annotated[
        JsonValue,
        _DATA,
        designer(
            "Result Data",
            "Small JSON, at most 16 KiB, that later duplicates get back instead of repeating the side effect.",
            ADVANCED,
        ),
    ] = None
    error: Annotated[
        str | None, designer("Error Message", "What went wrong, when the outcome is failed or unknown.", ADVANCED)
    ] = Field(default=None, max_length=ERROR_MAX_LENGTH)
    retryable: Annotated[
        bool,
        designer(
            "Retryable",
            "Whether the next run may try a failed side effect again (yes when left empty). When it is no, the "
            "next Check and claim answers blocked until a person acts.",
            ADVANCED,
        ),
    ] = True


class ReleaseRequest(_Token):
    """Give the claim up before any side effect."""

    reason: Annotated[
        str | None, designer("Reason", "Why this run gives the claim up before any side effect.", ADVANCED)
    ] = Field(default=None, max_length=1024)


class HeartbeatRequest(_Token):
    """Extend the lease of a long side effect."""

    # None: the scope's default lease, as for Check and claim.
    lease_seconds: RequestedLease = None


class ReviewClaimRequest(_Request):
    """A reviewer acknowledges a failure that is not retryable (the key stays blocked), or settles an attempt in
    doubt with what the target system holds: ``outcome``, ``attempt`` and, when it succeeded, ``targetRecordId``.
    """

    # Required with function keys; with Entra ID the signed-in caller is recorded instead.
    reviewer: Annotated[
        Text256 | None,
        designer(
            "Reviewer",
            "Who reviewed the failure, such as the reviewer's email address. Required with a function key "
            "connection; with Microsoft Entra ID the signed-in reviewer is recorded instead.",
            IMPORTANT,
        ),
    ] = None
    note: Annotated[
        str | None, designer("Note", "What the reviewer found or did, kept in the claim's history.", ADVANCED)
    ] = Field(default=None, max_length=2048)
    # The settlement of an attempt in doubt; all absent, the review acknowledges a failure as before.
    outcome: Annotated[
        SettledOutcome | None,
        BY_VALUE,
        designer(
            "Outcome",
            "Settles an attempt in doubt (in_progress past its lease, or unknown) with what the target system "
            "holds: succeeded when it holds the record, failed when it holds nothing, so that the next run may do "
            "the side effect. Leave empty to acknowledge a failure that is not retryable.",
            IMPORTANT,
        ),
    ] = None
    attempt: Annotated[
        int | None,
        designer(
            "Attempt",
            "With an outcome: the claim's attempt that you looked up in the target system. The review is refused "
            "if a run took the claim over since.",
            IMPORTANT,
        ),
    ] = Field(default=None, ge=1)
    target_record_id: Annotated[
        str | None,
        designer(
            "Target Record ID", "With outcome succeeded: the id of the record the target system holds.", IMPORTANT
        ),
    ] = Field(default=None, min_length=1, max_length=512)
    data: Annotated[
        JsonValue,
        _DATA,
        designer(
            "Result Data",
            "With outcome succeeded: small JSON, at most 16 KiB, that later duplicates get back.",
            ADVANCED,
        ),
    ] = None


class ListClaimsQuery(_Query):
    """The claims that need a person, and their paging: a list of every claim is not offered."""

    # Required, so that a bare GET /api/claims is refused naming it. The schema's default is for the
    # connector, which sends an internal parameter only when it has one.
    attention: Annotated[
        QueryBoolean,
        designer("Needing Attention", "Lists only the claims that need a person, which is always the case.", INTERNAL),
    ] = Field(json_schema_extra={"default": True})
    scope: Annotated[Scope | None, designer("Scope", "Only list the claims of this scope.", ADVANCED)] = None
    top: Annotated[
        QueryInteger,
        designer("Page Size", "How many claims one page holds, from 1 to 200 (50 when left empty).", ADVANCED),
    ] = Field(default=50, ge=1, le=200)
    cursor: Cursor = None


def _in_utc(moment: datetime) -> datetime:
    # 9999-12-31T23:59:59-23:59 is a valid time that UTC cannot write: refused here, not a 500 in the store.
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("must be a time between the years 1 and 9999 in UTC") from exc


class FindClaimsQuery(_Query):
    """Claims found by where they came from: source system, reference, status and first received (issue 16).

    At least one of ``source``, ``reference``, ``status`` and ``since`` is given: the HTTP layer reads
    a request without any as the attention list's, which refuses a bare list of every claim.
    """

    source: Annotated[
        Source | None,
        designer("Source System", "Only list the claims of this source system, such as shop-eu.", IMPORTANT),
    ] = None
    reference: Annotated[
        Reference | None,
        designer("Reference", "Only list the claims with this reference, such as SO-1001.", IMPORTANT),
    ] = None
    status: Annotated[
        ClaimStatus | None,
        designer(
            "Claim Status",
            "Only list the claims in this status: in_progress, succeeded, failed, unknown or released.",
            ADVANCED,
        ),
    ] = None
    since: Annotated[
        Annotated[AwareDatetime, AfterValidator(_in_utc)] | None,
        designer(
            "Received Since",
            "Only list the claims first received at or after this time, such as 2026-12-01T00:00:00Z.",
            ADVANCED,
        ),
    ] = None
    scope: Annotated[Scope | None, designer("Scope", "Only list the claims of this scope.", ADVANCED)] = None
    top: Annotated[
        QueryInteger,
        designer("Page Size", "How many claims one page holds, from 1 to 200 (50 when left empty).", ADVANCED),
    ] = Field(default=50, ge=1, le=200)
    cursor: Cursor = None


class HistoryEntry(_Model):
    """One line of a claim's history and how it was recognised."""

    at: Annotated[datetime, designer("Event Time", "When the event happened, in UTC.")]
    # "event" on the wire since 0.1.0, which saved flows read.
    kind: Annotated[
        EventKind,
        Field(alias="event"),
        designer("Event", "What the entry records: a claim, result, release, conflict, resolution or review."),
    ]
    outcome: Annotated[
        str, designer("Event Outcome", "The decision or outcome of the event, such as proceed, duplicate or succeeded.")
    ]
    attempt: Annotated[int, designer("Event Attempt", "The attempt that the event belongs to.")]
    run_id: Annotated[str | None, designer("Event Run ID", "The run that caused the event.")] = None
    flow: Annotated[FlowRef | None, flow_in_answer("Event Flow", "the flow that caused the event")] = None
    fingerprint: Annotated[str | None, designer("Event Fingerprint", "The fingerprint that the run presented.")] = None
    source: Annotated[str | None, designer("Event Source System", "The source system that the run named.")] = None
    recognised_by: Annotated[str, designer("Recognised By", "How the service recognised the request, in one sentence.")]
    details: Annotated[
        dict[str, JsonValue],
        SHOWN_MEMBERS,
        designer("Event Details", "More about the event, such as the conflict id or the result it replaced."),
    ] = Field(default_factory=dict)
    # Answers alike (same attempt, outcome, flow and reason) are one entry: how many, the first and the last.
    count: Annotated[
        int | None,
        designer(
            "Event Count",
            "How many answers alike this entry stands for: the same outcome for the same attempt, flow and reason.",
        ),
    ] = None
    first_at: Annotated[
        datetime | None, designer("First Event Time", "When the first of the answers counted came, in UTC.")
    ] = None
    last_at: Annotated[
        datetime | None, designer("Last Event Time", "When the last of the answers counted came, in UTC.")
    ] = None


class ClaimView(_Model):
    """The processing record of one business key (never the key itself, nor the claim token)."""

    claim_id: ClaimId
    scope: Annotated[str, designer("Scope", "The scope of the claim, in lowercase.")]
    source: Annotated[
        str | None,
        designer(
            "Source System", "The system the business object comes from, as the first request naming one gave it."
        ),
    ] = None
    reference: Annotated[
        str | None, designer("Reference", "The label that the flow gave to find the claim again, if any.")
    ] = None
    status: Annotated[
        ClaimStatus,
        designer(
            "Claim Status",
            "Where the claim's side effect stands: in_progress, succeeded, failed, unknown or released.",
        ),
    ]
    attempt: Annotated[int, designer("Attempt", "The number of the attempt, counted from 1.")]
    fingerprint: Annotated[
        str | None, designer("Fingerprint", "The fingerprint of the business data that the claim holds.")
    ] = None
    first_received_at: Annotated[datetime, designer("First Received At", "When the key was first claimed, in UTC.")]
    last_attempt_at: Annotated[
        datetime, designer("Last Attempt At", "When the current or last attempt started, in UTC.")
    ]
    lease_expires_at: LeaseExpiresAt = None
    run_id: Annotated[str, designer("Run ID", "The run of the current or last attempt.")]
    flow: Annotated[FlowRef | None, flow_in_answer("Flow", "the flow of the current or last attempt")] = None
    target_record_id: Annotated[
        str | None,
        designer("Target Record ID", "The id of the record in the target system, once a result is recorded."),
    ] = None
    data: Annotated[JsonValue, SHOWN_JSON, designer("Result Data", "The data recorded with the result.")] = None
    completed_at: CompletedAt = None
    error: Annotated[str | None, designer("Error Message", "The error recorded with a failed or unknown outcome.")] = (
        None
    )
    retryable: Annotated[
        bool | None, designer("Retryable", "Whether the next run may try the failed side effect again.")
    ] = None
    reviewer: Annotated[
        str | None,
        designer(
            "Reviewer",
            "Who last reviewed the claim: acknowledged its failure or resolved a conflict on it. A failure that is "
            "not retryable clears it until someone reviews that failure.",
        ),
    ] = None
    purged_at: Annotated[
        datetime | None,
        designer(
            "Purged At",
            "When retention purged the claim down to its tombstone, in UTC: only its status, target record, "
            "completion, run and flow are kept, so that a late replay of its key is still answered duplicate.",
        ),
    ] = None
    history: Annotated[
        list[HistoryEntry] | None,
        designer(
            "History",
            "Every attempt, result, duplicate and resolution, oldest first. Get claim and Look up claim return it: "
            "its first 50 entries, and the link to the rest when there are more.",
        ),
    ] = None
    history_next_link: Annotated[
        str | None,
        designer(
            "History Next Link",
            "The address of the history's next page (List claim history), absent when the history is whole.",
            INTERNAL,
        ),
    ] = None
    # With ONCEGATE_SENSITIVE_DATA=warn: sensitive_data when a stored field seems to carry personal data.
    warnings: Annotated[list[str] | None, WARNINGS] = None


class ClaimNeedingAttention(_Model):
    """A claim that nothing settles by itself: why it needs a person, since when, and the claim."""

    why: Annotated[
        AttentionReason,
        designer(
            "Why",
            "Why the claim needs a person. lease_expired: the run's lease ran out without a result. unknown: the "
            "outcome has been unknown for too long. failed_unreviewed: the attempt failed for good and nobody has "
            "reviewed it, so the key stays blocked.",
            IMPORTANT,
        ),
    ]
    since: Annotated[
        datetime,
        designer(
            "Needs Attention Since",
            "Since when, in UTC: when the lease ran out, or when the unknown or failed outcome was recorded.",
            IMPORTANT,
        ),
    ]
    claim: Annotated[ClaimView, designer("Claim", "The claim, without its history; Get claim shows that.")]


class ClaimAttentionList(_Model):
    """A page of the claims needing attention, oldest first; follow ``nextLink`` for the next."""

    value: Annotated[
        list[ClaimNeedingAttention],
        designer("Claims Needing Attention", "The claims that need a person, oldest first."),
    ]
    next_link: NextLink = None


class ClaimList(_Model):
    """A page of claims found by source system, reference, status or first received; follow ``nextLink``."""

    value: Annotated[
        list[ClaimView], designer("Claims", "The claims found, without their history; Get claim shows that.")
    ]
    next_link: NextLink = None


class ClaimHistory(_Model):
    """A page of a claim's history, oldest first; follow ``nextLink`` for the next."""

    value: Annotated[
        list[HistoryEntry],
        designer("History", "The claim's history entries, oldest first: attempts, results, answers and resolutions."),
    ]
    next_link: NextLink = None
