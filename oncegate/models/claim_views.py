"""The answer to Check and claim, and the parts other answers share (the processing record: ``claim_records``)."""

from datetime import datetime
from typing import Annotated

from pydantic import Field, JsonValue

from oncegate.domain.statuses import AnswerStatus, ClaimStatus, Decision
from oncegate.models.base import (
    CHANGED_PARTS,
    IMPORTANT,
    MORE_CHANGED_PARTS,
    SHOWN_JSON,
    WARNINGS,
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
    data: Annotated[JsonValue, SHOWN_JSON, designer("Result Data", "The data that the successful run recorded.")] = None
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
