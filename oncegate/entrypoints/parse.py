"""The wire's requests parsed into the services' commands (:mod:`oncegate.service.commands`).

Every action (:mod:`oncegate.entrypoints.actions`) parses its request model here, so that a service
never sees a wire model. A request's fields that only go together on the wire (a settlement's
outcome and attempt) are checked here too, so that the services take commands that are whole.
"""

from __future__ import annotations

from typing import Any

from oncegate.domain.keys import normalise_scope, normalise_source
from oncegate.domain.records import (
    ClaimFilter,
    Flow,
)
from oncegate.domain.statuses import ClaimStatus, Outcome, SettledOutcome
from oncegate.domain.transitions import Result
from oncegate.errors import InvalidRequest
from oncegate.models import (
    ClaimItem,
    FindClaimsQuery,
    FlowRef,
    HeartbeatRequest,
    ListClaimsQuery,
    ListConflictsQuery,
    ListPageQuery,
    LookupRequest,
    RecordResultRequest,
    RegisterFlowRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ReviewClaimRequest,
    SetScopeRequest,
)
from oncegate.service.commands import (
    Acknowledge,
    CheckAndClaim,
    Heartbeat,
    KeyOf,
    ListAttention,
    ListConflicts,
    Paging,
    RecordResult,
    RegisterFlow,
    Release,
    ReportConflict,
    ResolveConflict,
    SetScope,
    Settle,
)


def flow_of(ref: FlowRef | None) -> Flow | None:
    return Flow(ref.name, ref.environment) if ref else None


def _run_of(request: ClaimItem | ReportConflictRequest) -> dict[str, Any]:
    """What Check and claim and Report conflict both say: the key, its business data, and the run asking."""
    return {
        "scope": request.scope,
        "key": request.key,
        "payload": request.payload,
        "fingerprint": request.fingerprint,
        "source": request.source,
        "run_id": request.run_id,
        "flow": flow_of(request.flow),
    }


def check_and_claim(request: ClaimItem) -> CheckAndClaim:
    return CheckAndClaim(**_run_of(request), lease_seconds=request.lease_seconds, reference=request.reference)


def lookup(request: LookupRequest) -> KeyOf:
    return KeyOf(scope=request.scope, key=request.key)


def report_conflict(request: ReportConflictRequest) -> ReportConflict:
    return ReportConflict(**_run_of(request), reason=request.reason, details=request.details)


def record_result(request: RecordResultRequest) -> RecordResult:
    return RecordResult(
        claim_token=request.claim_token,
        result=Result(
            outcome=Outcome(request.outcome.value),
            target_record_id=request.target_record_id,
            data=request.data,
            error=request.error,
            retryable=request.retryable,
        ),
    )


def release(request: ReleaseRequest) -> Release:
    return Release(claim_token=request.claim_token, reason=request.reason)


def heartbeat(request: HeartbeatRequest) -> Heartbeat:
    return Heartbeat(claim_token=request.claim_token, lease_seconds=request.lease_seconds)


def review(request: ReviewClaimRequest) -> Acknowledge | Settle:
    """An acknowledgement, or with an outcome a settlement; the fields of a settlement go together."""
    if request.reviewer is None:
        raise InvalidRequest("reviewer is required: who reviewed the claim.", target="reviewer")
    if request.outcome is None:
        given = [name for name in ("attempt", "target_record_id", "data") if getattr(request, name) is not None]
        if given:
            field = ReviewClaimRequest.model_fields[given[0]].alias or given[0]
            raise InvalidRequest(f"{field} settles an attempt in doubt: send it with outcome.", target=field)
        return Acknowledge(reviewer=request.reviewer, note=request.note)
    if request.attempt is None:
        raise InvalidRequest(
            "attempt is required with outcome: the claim's attempt you looked up in the target system.",
            target="attempt",
        )
    if request.outcome is SettledOutcome.FAILED and (request.target_record_id or request.data is not None):
        target = "targetRecordId" if request.target_record_id else "data"
        raise InvalidRequest(f"{target} comes with outcome succeeded: a failed attempt made no record.", target=target)
    return Settle(
        reviewer=request.reviewer,
        note=request.note,
        outcome=request.outcome,
        attempt=request.attempt,
        target_record_id=request.target_record_id,
        data=request.data,
    )


def resolve_conflict(request: ResolveConflictRequest) -> ResolveConflict:
    if request.reviewer is None:
        raise InvalidRequest("reviewer is required: who decided.", target="reviewer")
    return ResolveConflict(decision=request.decision, reviewer=request.reviewer, note=request.note)


def paging(query: ListPageQuery) -> Paging:
    return Paging(limit=query.top, cursor=query.cursor)


def claim_filter(query: FindClaimsQuery) -> tuple[ClaimFilter, Paging]:
    matching = ClaimFilter(
        statuses=[query.status] if query.status else list(ClaimStatus),
        scope=normalise_scope(query.scope) if query.scope else None,
        source=normalise_source(query.source),
        reference=query.reference,
        received_since=query.since,
    )
    return matching, Paging(limit=query.top, cursor=query.cursor)


def list_conflicts(query: ListConflictsQuery) -> ListConflicts:
    return ListConflicts(status=query.status, scope=query.scope, limit=query.top, cursor=query.cursor)


def list_attention(query: ListClaimsQuery) -> ListAttention:
    return ListAttention(scope=query.scope, limit=query.top, cursor=query.cursor)


# The fields of Register flow that name the flow rather than set something about it.
FLOW_IDENTITY = frozenset({"name", "environment"})


def register_flow(request: RegisterFlowRequest) -> RegisterFlow:
    """The settings the request names, a null among them reset; one left out stays as it is (issue 31)."""
    named: dict[str, Any] = {
        name: getattr(request, name) for name in request.model_fields_set - {"name", "environment"}
    }
    return RegisterFlow(flow=Flow(request.name, request.environment), **named)


def set_scope(request: SetScopeRequest) -> SetScope:
    """The settings the request names, a null among them reset; one left out stays as it is (issue 31)."""
    named: dict[str, Any] = {name: getattr(request, name) for name in request.model_fields_set - {"scope"}}
    for pointers in ("fingerprint_include", "fingerprint_ignore"):
        if pointers in named:
            named[pointers] = tuple(named[pointers] or ())
    return SetScope(scope=request.scope, **named)
