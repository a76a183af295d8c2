"""Perform once: OnceGate makes the call to a declared target itself, once, and its poll address (issue 34)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from oncegate import telemetry
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, Waiting
from oncegate.entrypoints import render, waits
from oncegate.entrypoints.operations.table import Call, Designer, Dimensions, Operation, Reply
from oncegate.entrypoints.parse import flow_of
from oncegate.models import (
    IMPORTANT,
    INTERNAL,
    EarlierAttemptView,
    PerformRequest,
    PerformResponse,
    TargetResponse,
    WaitQuery,
)
from oncegate.service.commands.perform import PerformOnce
from oncegate.service.perform_answers import PerformAnswer

if TYPE_CHECKING:
    from oncegate.bootstrap import Services
    from oncegate.domain.records import EarlierAttempt

WAITING = (
    "Wait was on and another run is making the call: the engine polls the Location address after Retry-After seconds "
    "until that run is done. The body is the in_progress answer."
)


def _command(call: Call[PerformRequest, None]) -> PerformOnce:
    body = call.body
    flow = body.flow
    telemetry.describe(
        {
            telemetry.SCOPE: body.scope.lower(),
            telemetry.FLOW_NAME: flow.name if flow else None,
            telemetry.FLOW_ENVIRONMENT: flow.environment if flow else None,
            telemetry.TARGET: body.target,
        }
    )
    return PerformOnce(
        scope=body.scope,
        key=body.key,
        payload=body.payload,
        fingerprint=body.fingerprint,
        source=body.source,
        run_id=body.run_id,
        flow=flow_of(flow),
        reference=body.reference,
        target=body.target,
        method=body.method.value,
        path=body.path,
        headers=dict(body.headers),
        body=body.body,
    )


def _perform(
    services: Services, call: Call[PerformRequest, None], command: PerformOnce
) -> tuple[PerformAnswer, Waiting | None]:
    body = call.body
    max_wait = timedelta(seconds=body.max_wait_seconds or DEFAULT_MAX_WAIT_SECONDS) if body.wait else None
    answer, waiting = services.perform.perform(command, signed_in=call.caller, max_wait=max_wait)
    # What the target answered this request's call, for the alert on targets answering 5xx or timing out.
    telemetry.describe({telemetry.TARGET_STATUS: answer.target_status, telemetry.TARGET_FAILURE: answer.target_failure})
    return answer, waiting


def _ticket(call: Call[None, WaitQuery]) -> Waiting:
    waiting = waits.open_ticket(call.query.ticket, WAIT_FOR_PERFORM.path(claimId=call.claim_id), call.sealing)
    telemetry.describe({telemetry.SCOPE: waiting.scope})
    return waiting


def _poll(services: Services, call: Call[None, WaitQuery], waiting: Waiting) -> tuple[PerformAnswer, Waiting | None]:
    # Without HTTP (the tests' Gate) the claim is the waiting run's own.
    claim_id = call.ids.get("claimId") or waiting.identities[-1].claim_id
    return services.perform.poll(waiting, claim_id, signed_in=call.caller)


def _waited(call: Call[Any, Any], result: tuple[PerformAnswer, Waiting | None]) -> PerformResponse | Reply:
    """The answer, or 202 while the run waits for the run making the call (its poll address never calls)."""
    answer, waiting = result
    response = _response(answer)
    if waiting is None:
        return response
    # Its own poll address, under perform/: a Perform once's ticket is never taken where a poll may grant the claim.
    return Reply(202, response, waiting=waiting, at=WAIT_FOR_PERFORM.path(claimId=response.claim_id))


def _response(answer: PerformAnswer) -> PerformResponse:
    kept = answer.response
    return PerformResponse(
        decision=answer.decision,
        response=TargetResponse(status=kept.status, headers=kept.headers or None, body=kept.body) if kept else None,
        target_record_id=answer.target_record_id,
        idempotency_key=answer.idempotency_key,
        claim_id=answer.claim_id,
        status=answer.status,
        attempt=answer.attempt,
        reason=answer.reason,
        warnings=list(answer.warnings),
        retryable=answer.retryable,
        retry_after_seconds=answer.retry_after_seconds,
        conflict_id=answer.conflict_id,
        claim_token=answer.claim_token,
        lease_expires_at=answer.lease_expires_at,
        earlier_attempt=_earlier_attempt_view(answer.earlier_attempt),
        looked_up=answer.looked_up or None,
    )


def _earlier_attempt_view(earlier: EarlierAttempt | None) -> EarlierAttemptView | None:
    """The attempt a reconcile answer asks the run to look up, as Perform once's answer shows it."""
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


def _dimensions(answer: PerformResponse) -> Dimensions:
    return {
        telemetry.DECISION: answer.decision.value,
        telemetry.WARNINGS: ",".join(answer.warnings) or None,
        telemetry.LOOKED_UP: answer.looked_up,
    }


PERFORM_ONCE = Operation(
    name="perform_once",
    route="perform",
    method="POST",
    body=PerformRequest,
    response=PerformResponse,
    event=telemetry.PERFORM,
    parse=_command,
    stores=lambda call, command: f"a claim of run {call.body.run_id}",
    serve=_perform,
    render=_waited,
    describe=_dimensions,
    designer=Designer(
        operation_id="PerformOnce",
        summary="Perform once",
        description=(
            "OnceGate makes the HTTP call to a target an operator declared, at most once per business key, and "
            "records what came back: a flow run twice, or an action the engine retried, never reaches the target "
            "twice. It claims the key, sends the call with an Idempotency-Key header, and answers a decision to "
            "branch on: performed, duplicate (with the same response), in_progress, conflict, blocked, failed or "
            "reconcile. An unknown outcome is looked up at the target later, never sent blind."
        ),
        visibility=IMPORTANT,
        success="The decision, and what is kept of the target's answer.",
        errors=(400, 413, 503),
        body_description="The business key, its data, the calling run, and the call to make.",
        accepted=WAITING,
    ),
)

WAIT_FOR_PERFORM = Operation(
    name="wait_for_perform",
    route="perform/{claimId}/wait",
    method="GET",
    query=WaitQuery,
    response=PerformResponse,
    event=telemetry.PERFORM,
    parse=_ticket,
    serve=_poll,
    render=_waited,
    describe=_dimensions,
    designer=Designer(
        operation_id="WaitForPerform",
        summary="Wait for the run making a call",
        description=(
            "The address the engine polls after Perform once answered 202 because Wait was on and another run was "
            "making the call. It answers 202 while that run holds the claim, then what it got. It never makes the call."
        ),
        visibility=INTERNAL,
        success="What the run making the call got, once it ended, or in_progress when the wait ended.",
        errors=(400, 404, 503),
        accepted=WAITING,
    ),
)

OPERATIONS = (PERFORM_ONCE, WAIT_FOR_PERFORM)
