"""What flows and reviewers send about claims: Check and claim, Look up, the writes to a claim, the attention list."""

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime, Field, JsonValue, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from oncegate.domain.limits import DATA_LIMIT_BYTES, ERROR_MAX_LENGTH, TARGET_RECORD_ID_MAX_LENGTH
from oncegate.domain.statuses import ClaimStatus, Outcome, SettledOutcome
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, MAX_MAX_WAIT_SECONDS, MIN_MAX_WAIT_SECONDS
from oncegate.models.base import (
    ADVANCED,
    BY_VALUE,
    IMPORTANT,
    INTERNAL,
    Cursor,
    LeaseSeconds,
    Reference,
    Scope,
    ScopeInput,
    Source,
    SourceInput,
    Text256,
    _Query,
    _Request,
    designer,
    json_size,
)

# A sealed ticket holds the run id, flow and reference (up to 256 characters each, 4 bytes a character at most in
# its format) and a few digests: 6,874 characters at the very most (tests/http/test_wait_ticket_size.py).
MAX_TICKET_LENGTH = 8192


class FlowRef(_Request):
    """The calling flow, e.g. ``{"name": "Create ERP order", "environment": "Default-contoso"}``."""

    name: Annotated[
        Text256,
        designer(
            "Flow Name",
            "The name of the flow, such as Create ERP order. "
            "Use the expression workflow()?['tags']?['flowDisplayName'].",
            ADVANCED,
        ),
    ]
    environment: Annotated[
        Text256,
        designer(
            "Flow Environment",
            "The environment the flow runs in. Use the expression workflow()?['tags']?['environmentName'].",
            ADVANCED,
        ),
    ]


def flow_in_answer(title: str, which: str) -> FieldInfo:
    """The designer text of a flow an answer shows, its name and environment titled apart from any other flow's.

    ``which`` names the flow, such as "the flow that did the side effect". FlowRef's own text is for requests.
    """
    return designer(
        title,
        f"{which[0].upper()}{which[1:]}.",
        parts={
            "name": (f"{title} Name", f"The name of {which}."),
            "environment": (f"{title} Environment", f"The environment of {which}."),
        },
    )


BusinessKey = Annotated[
    str,
    Field(min_length=1, max_length=4096),
    designer(
        "Business Key",
        "The business key from the source system, such as an order number or source system plus record id. "
        "It is compared after trimming and Unicode normalisation, and never stored in clear.",
        IMPORTANT,
    ),
]
RunId = Annotated[
    Text256,
    designer(
        "Run ID",
        "The run of this flow, which identifies one execution and never the business object. Use the "
        "expression workflow()?['run']?['name'].",
        ADVANCED,
    ),
]
CallingFlow = Annotated[
    FlowRef | None,
    designer(
        "Flow",
        "The calling flow by name and environment, so that copies of a flow in other environments are told apart.",
        ADVANCED,
    ),
]
# None: the scope's default lease (PUT /api/scopes), else DEFAULT_LEASE_SECONDS.
RequestedLease = Annotated[
    LeaseSeconds | None,
    designer(
        "Lease Seconds",
        "How long this run holds the claim, from 15 to 86400 seconds (the scope's default lease when left empty, "
        "else 300). A run that asks after the lease ended without a result is told to reconcile.",
        ADVANCED,
    ),
]


class BusinessIntent(_Request):
    """What identifies the business object and what it looks like."""

    scope: ScopeInput
    key: BusinessKey
    source: SourceInput = None
    payload: Annotated[
        JsonValue,
        designer(
            "Payload",
            "The business data as any JSON value, such as the order being created. The service compares its "
            "fingerprint with the claim's to detect changed data and never stores it; give this or Fingerprint.",
            IMPORTANT,
        ),
    ] = None
    fingerprint: Annotated[
        str | None,
        designer(
            "Fingerprint",
            "A version of the business data that you compute yourself, such as a document version, at most 128 "
            "characters. Give this or Payload, not both.",
            ADVANCED,
        ),
    ] = Field(default=None, min_length=1, max_length=128)

    @field_validator("fingerprint")
    @classmethod
    def _one_way_to_fingerprint(cls, fingerprint: str | None, info: ValidationInfo) -> str | None:
        # On the field, not the model, so the 400 names it; payload is declared (and validated) first.
        if fingerprint is not None and info.data.get("payload") is not None:
            raise ValueError("give either payload or fingerprint, not both")
        return fingerprint


class ClaimItem(BusinessIntent):
    """One record of Check and claim many, and what Check and claim's body has besides waiting (issue 25)."""

    run_id: RunId
    flow: CallingFlow = None
    lease_seconds: RequestedLease = None
    reference: Annotated[
        Reference | None,
        designer(
            "Reference",
            "A label to find the claim again by eye, such as the order number, at most 256 characters. Unlike the "
            "key it is stored in clear: leave out anything that must not be kept, such as personal data.",
            ADVANCED,
        ),
    ] = None


class ClaimRequest(ClaimItem):
    """Check and claim: may this run do the side effect for this business key?

    A bulk call's items are :class:`ClaimItem`: Check and claim many answers at once, so its items do not wait.
    """

    wait: Annotated[
        bool,
        designer(
            "Wait",
            "When another run holds the claim, wait for it to finish instead of answering in_progress: the action "
            "answers 202 and the flow engine polls until the holder succeeded, failed, released or ran out of its "
            "lease, then gives the decision this run gets at that moment. Needs Flow and Payload or Fingerprint.",
            ADVANCED,
        ),
    ] = False
    max_wait_seconds: Annotated[
        int | None,
        designer(
            "Max Wait Seconds",
            f"With Wait: how long to wait at most, from {MIN_MAX_WAIT_SECONDS} to {MAX_MAX_WAIT_SECONDS} seconds "
            f"({DEFAULT_MAX_WAIT_SECONDS} when left empty); then the answer is in_progress. Keep it within the "
            "action's timeout.",
            ADVANCED,
        ),
    ] = Field(default=None, ge=MIN_MAX_WAIT_SECONDS, le=MAX_MAX_WAIT_SECONDS)

    @field_validator("wait")
    @classmethod
    def _recognisable_when_waiting(cls, wait: bool, info: ValidationInfo) -> bool:
        # A repeated poll is the same run asking again only with its flow and business data (Intent.is_holder_of).
        data = info.data
        if wait and (data.get("flow") is None or (data.get("payload") is None and data.get("fingerprint") is None)):
            raise ValueError("wait needs flow, and payload or fingerprint, so that each poll is recognised as this run")
        return wait


class WaitQuery(_Query):
    """A poll of Check and claim (wait): the run's request, sealed in the address the 202 answer gave."""

    ticket: Annotated[
        str,
        Field(min_length=1, max_length=MAX_TICKET_LENGTH),
        designer("Ticket", "The waiting run's request, sealed; the Location header carries it.", INTERNAL),
    ]


class LookupRequest(_Request):
    """Find a claim by its business key (keys never travel in URLs)."""

    scope: ScopeInput
    key: BusinessKey


def _data_limit(value: JsonValue) -> JsonValue:
    if json_size(value) > DATA_LIMIT_BYTES:
        raise ValueError(f"data is over {DATA_LIMIT_BYTES} bytes as JSON")
    return value


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
        AfterValidator(_data_limit),
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
        AfterValidator(_data_limit),
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
        bool,
        designer("Needing Attention", "Lists only the claims that need a person, which is always the case.", INTERNAL),
    ] = Field(json_schema_extra={"default": True})
    scope: Annotated[Scope | None, designer("Scope", "Only list the claims of this scope.", ADVANCED)] = None
    top: Annotated[
        int, designer("Page Size", "How many claims one page holds, from 1 to 200 (50 when left empty).", ADVANCED)
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
        int, designer("Page Size", "How many claims one page holds, from 1 to 200 (50 when left empty).", ADVANCED)
    ] = Field(default=50, ge=1, le=200)
    cursor: Cursor = None
