"""Perform once at the edge: the wire's request parsed into the service's command, its answer rendered (issue 34).

The personal-data check of what the request stores (its source and reference) comes first, as for Check
and claim; what is kept of the target's answer is checked by the service, which drops what cannot be kept.
"""

from __future__ import annotations

from datetime import timedelta

from oncegate.bootstrap import Services
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, Waiting
from oncegate.entrypoints.parse import flow_of
from oncegate.entrypoints.render import earlier_attempt_view
from oncegate.models import PerformRequest, PerformResponse, TargetResponse
from oncegate.service.commands import PerformOnce
from oncegate.service.perform import PerformAnswer


def perform_once(
    services: Services, request: PerformRequest, *, signed_in: str | None = None
) -> tuple[PerformResponse, Waiting | None]:
    """Perform once: the answer, and the run still waiting for the holder when it asked to (None: final)."""
    stored = services.stored_data.check(request, f"a claim of run {request.run_id}")
    max_wait = timedelta(seconds=request.max_wait_seconds or DEFAULT_MAX_WAIT_SECONDS) if request.wait else None
    answer, waiting = services.perform.perform(command(request), signed_in=signed_in, max_wait=max_wait)
    rendered = response(answer)
    if stored:
        rendered = rendered.model_copy(update={"warnings": [*rendered.warnings, *stored]})
    return rendered, waiting


def poll(services: Services, waiting: Waiting, claim_id: str) -> tuple[PerformResponse, Waiting | None]:
    """A poll of a Perform once that waits: it reads, never calls."""
    answer, still = services.perform.poll(waiting, claim_id)
    return response(answer), still


def command(request: PerformRequest) -> PerformOnce:
    return PerformOnce(
        scope=request.scope,
        key=request.key,
        payload=request.payload,
        fingerprint=request.fingerprint,
        source=request.source,
        run_id=request.run_id,
        flow=flow_of(request.flow),
        reference=request.reference,
        target=request.target,
        method=request.method.value,
        path=request.path,
        headers=dict(request.headers),
        body=request.body,
    )


def response(answer: PerformAnswer) -> PerformResponse:
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
        earlier_attempt=earlier_attempt_view(answer.earlier_attempt),
        looked_up=answer.looked_up or None,
    )
