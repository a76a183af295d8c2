"""Check and claim and its wait: the operations a flow claims with (a claim once made: ``claim_records``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from oncegate import telemetry
from oncegate.domain.decisions import ClaimAnswer, Intent
from oncegate.domain.records import Claim, EarlierAttempt, Flow
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, Waiting
from oncegate.domain.warnings import ANOTHER_FLOW_COPY
from oncegate.entrypoints import waits
from oncegate.entrypoints.operations.table import Call, Designer, Dimensions, Members, Operation, Reply
from oncegate.entrypoints.parse import flow_of
from oncegate.models import (
    IMPORTANT,
    INTERNAL,
    ClaimItem,
    ClaimRequest,
    FlowRef,
)
from oncegate.models.base import shown

if TYPE_CHECKING:
    from oncegate.bootstrap import Services
    from oncegate.models import WaitQuery

WAITING = (
    "Wait was on and another run holds the claim: the engine polls the Location address after Retry-After seconds "
    "until the holder is done. The body is the in_progress answer."
)


def flow_dimensions(scope: str, flow: FlowRef | None) -> Dimensions:
    """The scope (lowercase, as stored) and the flow of an answer, for its telemetry event."""
    return {
        telemetry.SCOPE: scope.lower(),
        telemetry.FLOW_NAME: flow.name if flow else None,
        telemetry.FLOW_ENVIRONMENT: flow.environment if flow else None,
    }


def decision_dimensions(answer: Members) -> Dimensions:
    """The decision and warnings of a Check and claim answer as rendered, and the other flow a copy of a flow met."""
    part = answer["holder"] if "holder" in answer else answer.get("result", {})
    copy = part.get("flow") if ANOTHER_FLOW_COPY in answer["warnings"] else None
    return {
        telemetry.DECISION: answer["decision"],
        telemetry.WARNINGS: ",".join(answer["warnings"]) or None,
        telemetry.CHANGED_PARTS: json.dumps(answer["changedParts"]) if "changedParts" in answer else None,
        telemetry.HOLDER_FLOW_NAME: copy["name"] if copy else None,
        telemetry.HOLDER_FLOW_ENVIRONMENT: copy["environment"] if copy else None,
    }


# -- Check and claim, and its wait --------------------------------------------------------------------------


def claim_members(answer: ClaimAnswer) -> Members:
    """Check and claim's answer as the JSON members ``ClaimResponse`` declares, made straight from the decision
    table's answer: no ``ClaimResponse`` is made per request (issue 32's shapes).

    Its members in the model's order, named as the wire names them, an absent value left out (as the model's
    dump leaves out None), enums as their values, a kept result's data as ``SHOWN_JSON`` shows it; times stay
    datetimes, written by pydantic's own serializer as the model writes them (``http.render``).
    tests/http/test_claim_members.py holds it to ``ClaimResponse`` over every decision.
    """
    holder, result, earlier = answer.holder, answer.result, answer.earlier_attempt
    members: Members = {
        "decision": answer.decision.value,
        "claimId": answer.claim_id,
        "status": answer.status.value,
        "attempt": answer.attempt,
        "reason": answer.reason,
        "warnings": list(answer.warnings),
    }
    optional = {
        "claimToken": answer.claim_token,
        "idempotencyKey": answer.idempotency_key,
        "leaseExpiresAt": answer.lease_expires_at,
        "result": _result(result) if result else None,
        "retryAfterSeconds": answer.retry_after_seconds,
        "holder": _present(flow=_flow(holder.flow), leaseExpiresAt=holder.lease_expires_at) if holder else None,
        # "lastAttempt" on the wire since 0.1.0, which saved flows read.
        "lastAttempt": _earlier_attempt(earlier) if earlier else None,
        "conflictId": answer.conflict_id,
        "changedParts": list(answer.changed) or None,
        "moreChangedParts": answer.more_changed or None,
    }
    # A loop, not an update from a generator: a frame resumed for each of the eleven (issue 36).
    for name, value in optional.items():
        if value is not None:
            members[name] = value
    return members


def _present(**members: Any) -> Members:
    """The members given a value, in order (a nested part of the answer, its None left out as the model's are)."""
    return {name: value for name, value in members.items() if value is not None}


def _flow(flow: Flow | None) -> Members | None:
    return {"name": flow.name, "environment": flow.environment} if flow else None


def _result(claim: Claim) -> Members:
    """What the first successful run recorded (``ClaimResult``)."""
    return _present(
        targetRecordId=claim.target_record_id,
        data=shown(claim.data),
        completedAt=claim.completed_at,
        runId=claim.run_id,
        flow=_flow(claim.flow),
    )


def _earlier_attempt(earlier: EarlierAttempt) -> Members:
    """The attempt a reconcile answer asks the run to look up (``EarlierAttemptView``)."""
    return _present(
        attempt=earlier.attempt,
        runId=earlier.run_id,
        flow=_flow(earlier.flow),
        status=earlier.status.value,
        startedAt=earlier.started_at,
        leaseExpiresAt=earlier.lease_expires_at,
        error=earlier.error,
    )


def _check(call: Call[ClaimItem, None]) -> Intent:
    """What the run sent, read once into the value the claim service identifies and decides on (issue 32)."""
    body = call.body
    if telemetry.sending and telemetry.describing():
        telemetry.describe(flow_dimensions(body.scope, body.flow))
    return Intent(
        scope=body.scope,
        key=body.key,
        payload=body.payload,
        supplied_fingerprint=body.fingerprint,
        source=body.source,
        run_id=body.run_id,
        flow=flow_of(body.flow),
        lease_seconds=body.lease_seconds,
        reference=body.reference,
    )


def _claim(services: Services, call: Call[ClaimItem, None], command: Intent) -> tuple[ClaimAnswer, Any]:
    """The answer, and with ``wait`` the run still waiting for the holder (None: the answer is final)."""
    body = call.body
    if isinstance(body, ClaimRequest) and body.wait:  # an item of Check and claim many never waits
        max_wait = timedelta(seconds=body.max_wait_seconds or DEFAULT_MAX_WAIT_SECONDS)
        return services.waits.check_and_wait(command, signed_in=call.caller, max_wait=max_wait)
    return services.claims.check_and_claim(command, signed_in=call.caller), None


def _waited(call: Call[Any, Any], result: tuple[ClaimAnswer, Waiting | None]) -> Members | Reply:
    """The answer, or 202 while the run still waits (the Logic Apps asynchronous pattern; its poll address is
    HTTP's, ``oncegate.entrypoints.http``)."""
    answer, waiting = result
    members = claim_members(answer)
    if waiting is None:
        return members
    return Reply(202, members, waiting=waiting, at=WAIT_FOR_CLAIM.path(claimId=answer.claim_id))


def _ticket(call: Call[None, WaitQuery]) -> Waiting:
    waiting = waits.open_ticket(call.query.ticket, WAIT_FOR_CLAIM.path(claimId=call.claim_id), call.sealing)
    telemetry.describe({telemetry.SCOPE: waiting.scope})
    return waiting


# -- the table's entries -------------------------------------------------------------------------------------

CHECK_AND_CLAIM = Operation(
    name="check_and_claim",
    route="claims",
    method="POST",
    body=ClaimRequest,
    response="ClaimResponse",
    as_members=True,
    event=telemetry.CHECK,
    parse=_check,
    stores=lambda call, command: f"a claim of run {call.body.run_id}",
    serve=_claim,
    render=_waited,
    describe=decision_dimensions,
    designer=Designer(
        operation_id="CheckAndClaim",
        summary="Check and claim",
        description=(
            "Asks whether this run may do the side effect for a business key, and claims the key when it may. The "
            "answer is always a decision to branch on: proceed, duplicate, in_progress, reconcile, conflict or blocked."
        ),
        visibility=IMPORTANT,
        success="The decision, and what the flow needs to act on it.",
        errors=(400, 413, 503),
        body_description="The business key, its data and the calling run.",
        accepted=WAITING,
    ),
)

WAIT_FOR_CLAIM = Operation(
    name="wait_for_claim",
    route="claims/{claimId}/wait",
    method="GET",
    query="WaitQuery",  # named: a first Check and claim does not build it
    response="ClaimResponse",
    as_members=True,
    event=telemetry.CHECK,
    parse=_ticket,
    serve=lambda services, call, waiting: services.waits.poll(waiting, signed_in=call.caller),
    render=_waited,
    describe=decision_dimensions,
    designer=Designer(
        operation_id="WaitForClaim",
        summary="Wait for the holder of a claim",
        description=(
            "The address the engine polls after Check and claim answered 202 because Wait was on and another run "
            "held the claim. It answers 202 again while the holder holds the lease, then the decision for this run."
        ),
        visibility=INTERNAL,
        success="The decision, once the holder finished, failed, released or ran out of its lease, or the wait ended.",
        errors=(400, 404, 503),
        accepted=WAITING,
    ),
)

# In the order of the connector's definition; Record result (``claim_records``) and the bulk calls follow.
OPERATIONS = (CHECK_AND_CLAIM, WAIT_FOR_CLAIM)
