"""Claims as the service shows them: the answer to Check and claim, the processing record, the attention list."""

from datetime import datetime
from typing import Annotated

from pydantic import Field, JsonValue

from oncegate.domain.statuses import AnswerStatus, AttentionReason, ClaimStatus, Decision, EventKind
from oncegate.models.base import (
    CHANGED_PARTS,
    IMPORTANT,
    INTERNAL,
    MORE_CHANGED_PARTS,
    WARNINGS,
    NextLink,
    _Model,
    designer,
)
from oncegate.models.claim_requests import FlowRef, flow_in_answer


class Holder(_Model):
    """The run holding a live lease: its flow, never its run id.

    Earlier releases showed the run id, which let another caller pass for the holder (issue 9);
    operators find the run with ``oncegate claims show``.
    """

    flow: Annotated[FlowRef | None, flow_in_answer("Holder Flow", "the flow whose run holds the lease")] = None
    lease_expires_at: Annotated[
        datetime | None, designer("Holder Lease Expires At", "When the holder's lease ends, in UTC.")
    ] = None


ClaimId = Annotated[
    str,
    designer(
        "Claim ID",
        "The claim's id, the same for the same scope and key. The other claim actions take it.",
        IMPORTANT,
    ),
]
LeaseExpiresAt = Annotated[
    datetime | None, designer("Lease Expires At", "When the lease ends unless it is renewed, in UTC.")
]
CompletedAt = Annotated[datetime | None, designer("Completed At", "When the side effect succeeded, in UTC.")]


class ClaimResult(_Model):
    """What the first successful run recorded: reuse it instead of repeating the side effect."""

    target_record_id: Annotated[
        str | None,
        designer("Result Record ID", "The id of the record in the target system that the successful run recorded."),
    ] = None
    data: Annotated[JsonValue, designer("Result Data", "The data that the successful run recorded.")] = None
    completed_at: CompletedAt = None
    run_id: Annotated[str, designer("Result Run ID", "The run that did the side effect.")]
    flow: Annotated[FlowRef | None, flow_in_answer("Result Flow", "the flow that did the side effect")] = None


class EarlierAttemptView(_Model):
    """The attempt whose outcome is in doubt: check the target system for its record."""

    attempt: Annotated[int, designer("Last Attempt Number", "The number of the attempt whose outcome is in doubt.")]
    run_id: Annotated[str, designer("Last Attempt Run ID", "The run that made the attempt.")]
    flow: Annotated[FlowRef | None, flow_in_answer("Last Attempt Flow", "the flow that made the attempt")] = None
    status: Annotated[
        ClaimStatus,
        designer(
            "Last Attempt Status",
            "How the attempt stood: unknown, or in_progress when its lease ended without a result.",
        ),
    ]
    started_at: Annotated[datetime, designer("Last Attempt Started At", "When the attempt started, in UTC.")]
    lease_expires_at: Annotated[
        datetime | None, designer("Last Attempt Lease Expired At", "When the attempt's lease ended, in UTC.")
    ] = None
    error: Annotated[str | None, designer("Last Attempt Error", "The error that the attempt recorded, if any.")] = None


class ClaimResponse(_Model):
    """The answer to Check and claim: branch on ``decision``."""

    decision: Annotated[
        Decision,
        designer(
            "Decision",
            "What the flow should do next; build a Switch on it. proceed: do the side effect, read the record back "
            "and record the result. duplicate: skip the side effect and reuse Result. in_progress: another run holds "
            "the claim, so wait Retry After Seconds and ask again, or stop. reconcile: an earlier attempt may have "
            "done it, so look the record up in the target system first. conflict: do nothing and route Conflict ID "
            "to the owner. blocked: stop, because a person must act.",
            IMPORTANT,
        ),
    ]
    claim_id: ClaimId
    status: Annotated[
        AnswerStatus,
        designer(
            "Claim Status",
            "Where the claim's side effect stands: in_progress, succeeded, failed, unknown or released, or none when "
            "no claim exists because the flow inventory blocked the flow before any claim was made.",
        ),
    ]
    attempt: Annotated[
        int,
        designer(
            "Attempt",
            "The number of the attempt, counted from 1; 0 when the flow was blocked before any claim existed.",
        ),
    ]
    reason: Annotated[str, designer("Reason", "Why the service decided this way, in one sentence.")]
    # Required, as the contract has it: the service sends the list even when it is empty.
    warnings: Annotated[list[str], WARNINGS]
    claim_token: Annotated[
        str | None,
        designer(
            "Claim Token",
            "The token that proves this run holds the claim, present with proceed and reconcile. Pass it to Record "
            "result, Release claim or Heartbeat to extend the claim lease.",
            IMPORTANT,
        ),
    ] = None
    idempotency_key: Annotated[
        str | None,
        designer(
            "Idempotency Key",
            "A key to hand the target system (an Idempotency-Key header, a client request id, an external id), "
            "present with proceed and reconcile: the same while an earlier attempt's outcome is in doubt, so the "
            "target recognises a request it already got, and a new one after a recorded failure.",
            IMPORTANT,
        ),
    ] = None
    lease_expires_at: LeaseExpiresAt = None
    result: Annotated[
        ClaimResult | None, designer("Result", "What the first successful run recorded, present with duplicate.")
    ] = None
    retry_after_seconds: Annotated[
        int | None,
        designer("Retry After Seconds", "How many seconds to wait before asking again, present with in_progress."),
    ] = None
    holder: Annotated[
        Holder | None, designer("Holder", "The run that holds the claim now, present with in_progress.")
    ] = None
    # "lastAttempt" on the wire since 0.1.0, which saved flows read.
    earlier_attempt: Annotated[
        EarlierAttemptView | None,
        Field(alias="lastAttempt"),
        designer("Last Attempt", "The earlier attempt whose outcome is in doubt, present with reconcile."),
    ] = None
    conflict_id: Annotated[
        str | None,
        designer(
            "Conflict ID",
            "The conflict waiting for its owner, present with conflict. The same changed data for the same key "
            "gives the same conflict while it is open.",
            IMPORTANT,
        ),
    ] = None
    changed_parts: Annotated[list[str] | None, CHANGED_PARTS] = None
    more_changed_parts: Annotated[int | None, MORE_CHANGED_PARTS] = None


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
    data: Annotated[JsonValue, designer("Result Data", "The data recorded with the result.")] = None
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
