"""Check and claim and its wait: the operations a flow claims with (a claim once made: ``claim_records``)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from oncegate import telemetry
from oncegate.domain.decisions import ClaimAnswer, Intent
from oncegate.domain.records import Claim, EarlierAttempt
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, Waiting
from oncegate.domain.warnings import ANOTHER_FLOW_COPY
from oncegate.entrypoints import render, waits
from oncegate.entrypoints.operations.table import Call, Designer, Dimensions, Operation, Reply
from oncegate.entrypoints.parse import flow_of
from oncegate.models import (
    IMPORTANT,
    INTERNAL,
    ClaimItem,
    ClaimRequest,
    ClaimResponse,
    ClaimResult,
    EarlierAttemptView,
    FlowRef,
    Holder,
    WaitQuery,
)

if TYPE_CHECKING:
    from oncegate.bootstrap import Services

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


def decision_dimensions(answer: ClaimResponse) -> Dimensions:
    """The decision and warnings of a Check and claim answer, and the other flow a copy of a flow met."""
    holder = answer.holder.flow if answer.holder else answer.result.flow if answer.result else None
    copy = holder if ANOTHER_FLOW_COPY in answer.warnings else None
    return {
        telemetry.DECISION: answer.decision.value,
        telemetry.WARNINGS: ",".join(answer.warnings) or None,
        telemetry.CHANGED_PARTS: json.dumps(answer.changed_parts) if answer.changed_parts else None,
        telemetry.HOLDER_FLOW_NAME: copy.name if copy else None,
        telemetry.HOLDER_FLOW_ENVIRONMENT: copy.environment if copy else None,
    }


# -- Check and claim, and its wait --------------------------------------------------------------------------


def earlier_attempt_view(earlier: EarlierAttempt | None) -> EarlierAttemptView | None:
    """The attempt a reconcile answer asks the run to look up, as the API shows it."""
    if earlier is None:
        return None
    return EarlierAttemptView(
        attempt=earlier.attempt,
        run_id=earlier.run_id,
        flow=render.flow_ref(earlier.flow),
        status=earlier.status,
        started_at=earlier.started_at,
        lease_expires_at=earlier.lease_expires_at,
        error=earlier.error,
    )


def claim_result(claim: Claim) -> ClaimResult:
    return ClaimResult(
        target_record_id=claim.target_record_id,
        data=claim.data,
        completed_at=claim.completed_at,
        run_id=claim.run_id,
        flow=render.flow_ref(claim.flow),
    )


def claim_response(answer: ClaimAnswer) -> ClaimResponse:
    holder = answer.holder
    return ClaimResponse(
        decision=answer.decision,
        claim_id=answer.claim_id,
        status=answer.status,
        attempt=answer.attempt,
        reason=answer.reason,
        warnings=list(answer.warnings),
        claim_token=answer.claim_token,
        idempotency_key=answer.idempotency_key,
        lease_expires_at=answer.lease_expires_at,
        retry_after_seconds=answer.retry_after_seconds,
        holder=Holder(flow=render.flow_ref(holder.flow), lease_expires_at=holder.lease_expires_at) if holder else None,
        result=claim_result(answer.result) if answer.result else None,
        earlier_attempt=earlier_attempt_view(answer.earlier_attempt),
        conflict_id=answer.conflict_id,
        changed_parts=list(answer.changed) or None,
        more_changed_parts=answer.more_changed or None,
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


def _waited(call: Call[Any, Any], result: tuple[ClaimAnswer, Waiting | None]) -> ClaimResponse | Reply:
    """The answer, or 202 while the run still waits (the Logic Apps asynchronous pattern; its poll address is
    HTTP's, ``oncegate.entrypoints.http``)."""
    answer, waiting = result
    response = claim_response(answer)
    if waiting is None:
        return response
    return Reply(202, response, waiting=waiting, at=WAIT_FOR_CLAIM.path(claimId=response.claim_id))


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
    response=ClaimResponse,
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
    query=WaitQuery,
    response=ClaimResponse,
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
