"""Perform once on the wire: the call a flow asks OnceGate to make once, and what it is told (issue 34)."""

from enum import StrEnum
from typing import Annotated

from pydantic import Field, JsonValue, ValidationInfo, field_validator

from oncegate.domain.performing import PerformDecision
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, MAX_MAX_WAIT_SECONDS, MIN_MAX_WAIT_SECONDS
from oncegate.models.base import ADVANCED, BY_VALUE, IMPORTANT, WARNINGS, _Model, designer
from oncegate.models.claim_requests import BusinessIntent, CallingFlow, RunId
from oncegate.models.claim_views import ClaimId, EarlierAttemptView, LeaseExpiresAt

# A target's name, as an operator declares it: lower-case letters, digits and hyphens.
TARGET_NAME = r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$"
MAX_PATH_LENGTH = 2048
MAX_HEADERS = 32


class PerformMethod(StrEnum):
    """The HTTP methods Perform once sends."""

    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    DELETE = "DELETE"
    GET = "GET"


class PerformRequest(BusinessIntent):
    """Perform once: OnceGate claims the key, makes the call to a declared target once, and records its outcome."""

    run_id: RunId
    flow: CallingFlow = None
    reference: Annotated[
        str | None,
        designer(
            "Reference",
            "A label to find the claim again by eye, such as the order number, at most 256 characters; a target's "
            "look-up may find its record by it. Stored in clear: leave out anything that must not be kept.",
            IMPORTANT,
        ),
    ] = Field(default=None, min_length=1, max_length=256)
    target: Annotated[
        str,
        designer(
            "Target",
            "The name of a target an operator declared, such as erp-orders. OnceGate calls only declared targets, "
            "at the base address the operator set.",
            IMPORTANT,
        ),
    ] = Field(pattern=TARGET_NAME)
    method: Annotated[
        PerformMethod,
        BY_VALUE,
        designer("Method", "The HTTP method of the call: POST, PUT, PATCH, DELETE or GET.", IMPORTANT),
    ] = PerformMethod.POST
    path: Annotated[
        str,
        designer(
            "Path",
            "The path of the call under the target's base address, such as /orders, with its query if any. Never "
            "a whole URL.",
            IMPORTANT,
        ),
    ] = Field(min_length=1, max_length=MAX_PATH_LENGTH, pattern=r"^/")
    headers: Annotated[
        dict[str, str],
        designer(
            "Headers",
            "Request headers, such as Accept. OnceGate sets Idempotency-Key itself, and the target's authentication; "
            "Host, Authorization, Cookie and the framing headers are refused.",
            ADVANCED,
        ),
    ] = Field(default_factory=dict, max_length=MAX_HEADERS)
    body: Annotated[
        JsonValue,
        designer(
            "Body",
            "The body of the call as JSON, such as the order to create. Unless Payload or Fingerprint is given, the "
            "target, method, path and body make the fingerprint that tells changed data apart.",
            IMPORTANT,
        ),
    ] = None
    wait: Annotated[
        bool,
        designer(
            "Wait",
            "When another run is making the call now, wait for it instead of answering in_progress: the action "
            "answers 202 and the flow engine polls until that run ends, then gives what it got. A poll never makes "
            "the call. Needs Flow.",
            ADVANCED,
        ),
    ] = False
    max_wait_seconds: Annotated[
        int | None,
        designer(
            "Max Wait Seconds",
            f"With Wait: how long to wait at most, from {MIN_MAX_WAIT_SECONDS} to {MAX_MAX_WAIT_SECONDS} seconds "
            f"({DEFAULT_MAX_WAIT_SECONDS} when left empty); then the answer is in_progress.",
            ADVANCED,
        ),
    ] = Field(default=None, ge=MIN_MAX_WAIT_SECONDS, le=MAX_MAX_WAIT_SECONDS)

    @field_validator("wait")
    @classmethod
    def _recognisable_when_waiting(cls, wait: bool, info: ValidationInfo) -> bool:
        if wait and info.data.get("flow") is None:
            raise ValueError("wait needs flow, so that each poll is recognised as this run")
        return wait


class TargetResponse(_Model):
    """What is kept of the target's answer: its status, and the headers and body parts the target's declaration
    keeps (within the data limit, after the sensitive-data check)."""

    status: Annotated[int | None, designer("Response Status", "The HTTP status the target answered.", IMPORTANT)]
    headers: Annotated[
        dict[str, str] | None,
        designer("Response Headers", "The headers of the answer that the target's declaration keeps."),
    ] = None
    body: Annotated[
        JsonValue,
        designer("Response Body", "The parts of the answer's body that the target's declaration keeps.", IMPORTANT),
    ] = None


class PerformResponse(_Model):
    """The answer to Perform once: branch on ``decision``."""

    decision: Annotated[
        PerformDecision,
        designer(
            "Decision",
            "What happened; build a Switch on it. performed: the call was made now, use Response. duplicate: it was "
            "made before (or a look-up found its record), use Response, nothing was sent. in_progress: another run is "
            "making the call, ask again after Retry After Seconds. conflict: the key was used with other data, "
            "nothing was sent. blocked: an earlier call failed for good, a person must act. failed: the target "
            "refused, or nothing could be sent; Retryable says whether running again may help. reconcile: the "
            "outcome is unknown, look the record up (Claim Token lets you record it) or run again later.",
            IMPORTANT,
        ),
    ]
    response: Annotated[
        TargetResponse | None,
        designer("Response", "What is kept of the target's answer: the same for performed and every later duplicate."),
    ] = None
    target_record_id: Annotated[
        str | None,
        designer(
            "Target Record ID",
            "The id of the record the target made, read from its answer where its declaration points.",
            IMPORTANT,
        ),
    ] = None
    idempotency_key: Annotated[
        str | None,
        designer(
            "Idempotency Key",
            "The Idempotency-Key OnceGate sent the target: the same when a call in doubt is sent again.",
        ),
    ] = None
    claim_id: ClaimId
    status: Annotated[
        str,
        designer("Claim Status", "Where the claim stands: in_progress, succeeded, failed, unknown, released or none."),
    ]
    attempt: Annotated[int, designer("Attempt", "The number of the attempt, counted from 1.")]
    reason: Annotated[str, designer("Reason", "Why, in one sentence.")]
    warnings: Annotated[list[str], WARNINGS]
    retryable: Annotated[
        bool | None,
        designer("Retryable", "With failed: whether running Perform once again may help."),
    ] = None
    retry_after_seconds: Annotated[
        int | None,
        designer("Retry After Seconds", "With in_progress (and reconcile in doubt): when to ask again, in seconds."),
    ] = None
    conflict_id: Annotated[
        str | None, designer("Conflict ID", "With conflict: the conflict that waits for its owner.")
    ] = None
    claim_token: Annotated[
        str | None,
        designer(
            "Claim Token",
            "With reconcile: this run holds the claim to look the record up itself; pass it to Record result.",
            ADVANCED,
        ),
    ] = None
    lease_expires_at: LeaseExpiresAt = None
    earlier_attempt: Annotated[
        EarlierAttemptView | None,
        Field(alias="lastAttempt"),
        designer("Last Attempt", "With reconcile: the attempt whose outcome is in doubt."),
    ] = None
    looked_up: Annotated[
        bool | None, designer("Looked Up", "Whether OnceGate looked the record up at the target for this answer.")
    ] = None
