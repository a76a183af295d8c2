"""Conflicts: what a flow reports, the owner's resolution, the lists and the trigger, and the conflict shown."""

from datetime import datetime
from typing import Annotated

from pydantic import Field, JsonValue

from oncegate.domain.limits import DETAILS_LIMIT_BYTES
from oncegate.domain.statuses import ConflictOrigin, ConflictStatus, Resolution
from oncegate.models.base import (
    ADVANCED,
    BY_VALUE,
    CHANGED_PARTS,
    IMPORTANT,
    INTERNAL,
    MAX_CURSOR_LENGTH,
    MORE_CHANGED_PARTS,
    SHOWN_JSON,
    WARNINGS,
    Cursor,
    NextLink,
    QueryInteger,
    Scope,
    Text256,
    _Model,
    _Query,
    _Request,
    designer,
    stored_json,
)
from oncegate.models.claim_requests import BusinessIntent, CallingFlow, FlowRef, RunId, flow_in_answer


class ReportConflictRequest(BusinessIntent):
    """A conflict the flow found itself, e.g. the target system holds different data."""

    run_id: RunId
    flow: CallingFlow = None
    reason: Annotated[
        str, designer("Reason", "What differs, in one sentence that the owner can act on.", IMPORTANT)
    ] = Field(min_length=1, max_length=1024)
    details: Annotated[
        JsonValue,
        stored_json("details", DETAILS_LIMIT_BYTES),
        designer(
            "Details",
            "Any JSON that helps the owner decide, such as the values found in the target system, at most 8 KiB.",
            ADVANCED,
        ),
    ] = None


class ResolveConflictRequest(_Request):
    """A reviewer's decision on an open conflict."""

    decision: Annotated[
        Resolution,
        BY_VALUE,
        designer(
            "Resolution",
            "The owner's decision: accept_new makes the new data the claim's version, keep_original treats it as "
            "the same business intent, and dismiss closes the conflict without changing the claim.",
            IMPORTANT,
        ),
    ]
    # Required with function keys; with Entra ID the signed-in caller is recorded instead.
    reviewer: Annotated[
        Text256 | None,
        designer(
            "Reviewer",
            "Who decided, such as the approver's email address. Required with a function key connection; with "
            "Microsoft Entra ID the signed-in reviewer is recorded instead.",
            IMPORTANT,
        ),
    ] = None
    note: Annotated[
        str | None, designer("Note", "Why the reviewer decided this way, kept in the claim's history.", ADVANCED)
    ] = Field(default=None, max_length=2048)


class ListConflictsQuery(_Query):
    """Filters and paging of the conflict list."""

    # None (no filter) is spelled status=all in the query: http.list_conflicts reads it so.
    status: Annotated[
        ConflictStatus | None,
        designer(
            "Status",
            "Which conflicts to list: open (when left empty), resolved or all.",
            IMPORTANT,
            null=("all", "All"),
        ),
    ] = ConflictStatus.OPEN
    scope: Annotated[Scope | None, designer("Scope", "Only list the conflicts of this scope.", ADVANCED)] = None
    top: Annotated[
        QueryInteger,
        designer("Page Size", "How many conflicts one page holds, from 1 to 200 (50 when left empty).", ADVANCED),
    ] = Field(default=50, ge=1, le=200)
    cursor: Cursor = None


class PollConflictsQuery(_Query):
    """The polling trigger's filter and its state (handed back in ``Location``)."""

    scope: Annotated[
        Scope | None,
        designer(
            "Scope", "Only start the flow for conflicts of this scope; leave it empty for every scope.", IMPORTANT
        ),
    ] = None
    state: Annotated[
        str | None,
        designer(
            "Trigger State",
            "Where the last poll stopped; the service hands it back in the Location header.",
            INTERNAL,
        ),
    ] = Field(default=None, max_length=MAX_CURSOR_LENGTH)


class ConflictResolution(_Model):
    """How a reviewer closed a conflict."""

    decision: Annotated[
        Resolution, designer("Resolution Decision", "The owner's decision: accept_new, keep_original or dismiss.")
    ]
    reviewer: Annotated[str, designer("Reviewer", "Who resolved the conflict.")]
    note: Annotated[str | None, designer("Note", "Why the reviewer decided this way.")] = None
    resolved_at: Annotated[datetime, designer("Resolved At", "When the conflict was resolved, in UTC.")]


class ConflictView(_Model):
    """A conflict waiting for (or closed by) its owner."""

    conflict_id: Annotated[
        str, designer("Conflict ID", "The conflict's id. Resolve conflict and Get conflict take it.", IMPORTANT)
    ]
    claim_id: Annotated[str, designer("Claim ID", "The claim that the conflict is about.")]
    scope: Annotated[str, designer("Scope", "The scope of the claim, in lowercase.")]
    status: Annotated[ConflictStatus, designer("Conflict Status", "Whether the conflict is open or resolved.")]
    # Who noticed it: "source" on the wire since 0.1.0, which saved flows read.
    origin: Annotated[
        ConflictOrigin,
        Field(alias="source"),
        designer(
            "Source",
            "Who noticed the conflict: claim when Check and claim found it, reported when a flow reported it.",
        ),
    ]
    # Not "source", which on the wire already says who noticed the conflict (origin).
    source_system: Annotated[
        str | None,
        designer("Source System", "The source system that the run meeting the changed data named, if any."),
    ] = None
    fingerprint: Annotated[str | None, designer("New Fingerprint", "The fingerprint of the changed business data.")] = (
        None
    )
    claim_fingerprint: Annotated[
        str | None,
        designer("Claim Fingerprint", "The fingerprint that the claim held when the conflict opened."),
    ] = None
    reason: Annotated[str, designer("Reason", "What differs, in one sentence.", IMPORTANT)]
    changed_parts: Annotated[list[str] | None, CHANGED_PARTS] = None
    more_changed_parts: Annotated[int | None, MORE_CHANGED_PARTS] = None
    details: Annotated[JsonValue, SHOWN_JSON, designer("Details", "What the reporting flow added for the owner.")] = (
        None
    )
    run_id: Annotated[str, designer("Run ID", "The run that met the changed data.")]
    flow: Annotated[FlowRef | None, flow_in_answer("Flow", "the flow of the run that met the changed data")] = None
    created_at: Annotated[datetime, designer("Created At", "When the conflict opened, in UTC.")]
    resolution: Annotated[
        ConflictResolution | None,
        designer("Resolution", "How the owner closed the conflict, present once it is resolved."),
    ] = None
    # sensitive_data with ONCEGATE_SENSITIVE_DATA=warn (a stored field seems to carry personal data), and
    # sensitive_key with ONCEGATE_SENSITIVE_KEYS=warn (the reported key does).
    warnings: Annotated[list[str] | None, WARNINGS] = None


class ConflictList(_Model):
    """A page of conflicts; follow ``nextLink`` for the next."""

    value: Annotated[list[ConflictView], designer("Conflicts", "The conflicts, oldest first.")]
    next_link: NextLink = None
