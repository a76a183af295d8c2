"""The service called as a flow calls it: short builders for the requests the tests repeat."""

from __future__ import annotations

from typing import Any

from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.statuses import ClaimStatus, Decision, EventKind, Outcome, Resolution
from oncegate.models import (
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictView,
    FlowRef,
    FlowView,
    HeartbeatRequest,
    ListPageQuery,
    OverlapView,
    RecordResultRequest,
    RegisterFlowRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ScopeView,
    SetScopeRequest,
)
from tests.conftest import KEY_SECRET
from tests.gate import Gate

SCOPE = "erp.create-order"
KEY = "ORDER-1001"
FLOW = FlowRef(name="Create ERP order", environment="Default-contoso")
# The same flow copied into another environment: another flow for the contract.
FLOW_COPY = FlowRef(name="Create ERP order", environment="Test-contoso")


def keyed(fingerprint: str) -> str:
    """A supplied fingerprint as the service stores it: keyed with the test secret."""
    made = KeyHasher(KEY_SECRET).fingerprint(supplied=fingerprint, payload=None)
    assert made is not None
    return made.keyed


def claim(
    service: Gate,
    *,
    run: str = "run-1",
    key: str = KEY,
    scope: str = SCOPE,
    flow: FlowRef | None = FLOW,
    **fields: Any,
) -> ClaimResponse:
    """Check and claim; ``fingerprint="v1"`` unless a payload or fingerprint is given."""
    if "payload" not in fields:
        fields.setdefault("fingerprint", "v1")
    return service.check_and_claim(ClaimRequest(scope=scope, key=key, run_id=run, flow=flow, **fields))


def record(service: Gate, answer: ClaimResponse, outcome: str = "succeeded", **fields: Any) -> ClaimView:
    """Record the result of the attempt ``answer`` granted, with its token."""
    return record_with(service, answer.claim_id, answer.claim_token, outcome, **fields)


def record_with(service: Gate, claim_id: str, token: str | None, outcome: str, **fields: Any) -> ClaimView:
    assert token is not None, "this answer granted no claim token"
    request = RecordResultRequest(claim_token=token, outcome=Outcome(outcome), **fields)
    return service.record_result(claim_id, request)


def release(service: Gate, answer: ClaimResponse, reason: str = "nothing to do") -> ClaimView:
    assert answer.claim_token is not None
    return service.release(answer.claim_id, ReleaseRequest(claim_token=answer.claim_token, reason=reason))


def heartbeat(service: Gate, answer: ClaimResponse, lease_seconds: int | None) -> ClaimView:
    assert answer.claim_token is not None
    return service.heartbeat(
        answer.claim_id, HeartbeatRequest(claim_token=answer.claim_token, lease_seconds=lease_seconds)
    )


def resolve(service: Gate, conflict_id: str | None, decision: str, reviewer: str = "ops@contoso") -> ConflictView:
    assert conflict_id is not None, "this answer opened no conflict"
    request = ResolveConflictRequest(decision=Resolution(decision), reviewer=reviewer, note="checked in the ERP")
    return service.resolve_conflict(conflict_id, request)


def report(service: Gate, *, run: str = "run-9", key: str = KEY, **fields: Any) -> ConflictView:
    """Report a conflict the flow found itself; ``fingerprint="v2"`` unless a payload or fingerprint is given."""
    if "payload" not in fields:
        fields.setdefault("fingerprint", "v2")
    fields.setdefault("reason", "The ERP holds another amount for this order.")
    return service.report_conflict(ReportConflictRequest(scope=SCOPE, key=key, run_id=run, flow=FLOW, **fields))


def succeeded(service: Gate, *, target: str = "SO-1", run: str = "run-1", **fields: Any) -> ClaimResponse:
    """A claim whose first attempt succeeded with the target record ``target``."""
    answer = claim(service, run=run, **fields)
    assert answer.decision is Decision.PROCEED
    assert record(service, answer, target_record_id=target).status is ClaimStatus.SUCCEEDED
    return answer


def history(service: Gate, claim_id: str) -> list[tuple[EventKind, str]]:
    """The claim's history as (event, outcome) pairs, oldest first: an entry counting answers alike, once each."""
    entries = service.get_claim(claim_id).history or []
    return [(entry.kind, entry.outcome) for entry in entries for _ in range(entry.count or 1)]


def register(service: Gate, flow: FlowRef = FLOW, **fields: Any) -> FlowView:
    """Register ``flow`` in the inventory (enabled unless ``enabled=False``)."""
    return service.register_flow(RegisterFlowRequest(name=flow.name, environment=flow.environment, **fields))


def flows(service: Gate) -> dict[tuple[str, str], FlowView]:
    """The whole flow inventory by (name, environment), this instance's counts flushed first."""
    listed, cursor = service.list_flows(ListPageQuery(top=200))
    assert cursor is None
    return {(view.name, view.environment): view for view in listed}


def overlaps(service: Gate) -> list[OverlapView]:
    listed, cursor = service.list_overlaps(ListPageQuery(top=200))
    assert cursor is None
    return listed


def set_scope(service: Gate, scope: str = SCOPE, **fields: Any) -> ScopeView:
    return service.set_scope(SetScopeRequest(scope=scope, **fields))


def scopes(service: Gate) -> dict[str, ScopeView]:
    """The whole scope catalogue by scope, this instance's counts flushed first."""
    listed, cursor = service.list_scopes(ListPageQuery(top=200))
    assert cursor is None
    return {view.scope: view for view in listed}


def ring(current: str, *, previous: str | None = None, next_: str | None = None) -> KeyRing:
    """The key ring of an instance with these secrets, as its settings give them."""
    return KeyRing(
        KeyHasher(current),
        previous=KeyHasher(previous) if previous else None,
        next_=KeyHasher(next_) if next_ else None,
    )
