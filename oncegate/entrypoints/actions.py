"""Each action of the contract as the wire sees it: a request model in, a view model out.

One function per action: the personal-data check of what the request stores
(:mod:`oncegate.entrypoints.sensitive_data`), the request parsed into the service's command
(:mod:`oncegate.entrypoints.parse`, rendered back by :mod:`oncegate.entrypoints.render`), the service called. The HTTP
actions (:mod:`oncegate.entrypoints.http`) add routes, links and telemetry around these; the tests
call them too, so that they drive the services the way a flow does.
"""

from __future__ import annotations

from datetime import timedelta

from oncegate.bootstrap import Services
from oncegate.domain.keys import normalise_scope
from oncegate.domain.records import flow_text
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, Waiting
from oncegate.entrypoints import parse, render
from oncegate.entrypoints.sensitive_data import warned
from oncegate.models import (
    ClaimItem,
    ClaimNeedingAttention,
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictView,
    FindClaimsQuery,
    FlowView,
    Health,
    HeartbeatRequest,
    HistoryEntry,
    ListClaimsQuery,
    ListConflictsQuery,
    ListPageQuery,
    LookupRequest,
    OverlapView,
    RecordResultRequest,
    RegisterFlowRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ReviewClaimRequest,
    ScopeView,
    SetScopeRequest,
)

# -- claims ---------------------------------------------------------------------------------------------------


def check_and_claim(services: Services, request: ClaimItem, *, signed_in: str | None = None) -> ClaimResponse:
    """``signed_in`` names the caller Entra ID signed in (None with function keys)."""
    # Source and reference are stored in clear: checked first, before anything is read or written.
    stored = services.stored_data.check(request, f"a claim of run {request.run_id}")
    answer = render.claim_response(services.claims.check_and_claim(parse.check_and_claim(request), signed_in=signed_in))
    return _with_stored(answer, stored)


def check_and_wait(
    services: Services, request: ClaimRequest, *, signed_in: str | None = None
) -> tuple[ClaimResponse, Waiting | None]:
    """Check and claim (wait): the answer, and the run still waiting for the holder (None: the answer is final)."""
    stored = services.stored_data.check(request, f"a claim of run {request.run_id}")
    max_wait = timedelta(seconds=request.max_wait_seconds or DEFAULT_MAX_WAIT_SECONDS)
    answer, waiting = services.waits.check_and_claim(
        parse.check_and_claim(request), signed_in=signed_in, max_wait=max_wait
    )
    return _with_stored(render.claim_response(answer), stored), waiting


def poll(services: Services, waiting: Waiting, *, signed_in: str | None = None) -> tuple[ClaimResponse, Waiting | None]:
    """A poll of Check and claim (wait): its answer, and the run still waiting (None: the answer is final)."""
    answer, still = services.waits.poll(waiting, signed_in=signed_in)
    return render.claim_response(answer), still


def _with_stored(answer: ClaimResponse, stored: list[str]) -> ClaimResponse:
    return answer.model_copy(update={"warnings": [*answer.warnings, *stored]}) if stored else answer


def get_claim(services: Services, claim_id: str) -> tuple[ClaimView, str | None]:
    """The processing record with the first page of its history, and the cursor of the history's next page."""
    claim, history, cursor = services.claims.get_claim(claim_id)
    return render.claim_view(claim, history), cursor


def lookup(services: Services, request: LookupRequest) -> tuple[ClaimView, str | None]:
    claim, history, cursor = services.claims.lookup(parse.lookup(request))
    return render.claim_view(claim, history), cursor


def history(services: Services, claim_id: str, query: ListPageQuery) -> tuple[list[HistoryEntry], str | None]:
    events, cursor = services.claims.history(claim_id, parse.paging(query))
    return [render.history_entry(event) for event in events], cursor


def list_claims(services: Services, query: FindClaimsQuery) -> tuple[list[ClaimView], str | None]:
    found, cursor = services.claims.find(*parse.claim_filter(query))
    return [render.claim_view(claim) for claim in found], cursor


def claims_needing_attention(
    services: Services, query: ListClaimsQuery
) -> tuple[list[ClaimNeedingAttention], str | None]:
    found, cursor = services.attention.page(parse.list_attention(query))
    return [render.attention_view(item) for item in found], cursor


def health(services: Services) -> Health:
    kind = services.claims.health()
    return render.health(kind, services.claims.restore())


# -- results ----------------------------------------------------------------------------------------------


def record_result(services: Services, claim_id: str, request: RecordResultRequest) -> ClaimView:
    """Refused for personal data, the result is not stored and the run keeps its lease: it may send it again."""
    stored = services.stored_data.check(request, f"claim {claim_id}")
    return warned(render.claim_view(services.results.record_result(claim_id, parse.record_result(request))), stored)


def release(services: Services, claim_id: str, request: ReleaseRequest) -> ClaimView:
    stored = services.stored_data.check(request, f"claim {claim_id}")
    return warned(render.claim_view(services.results.release(claim_id, parse.release(request))), stored)


def heartbeat(services: Services, claim_id: str, request: HeartbeatRequest) -> ClaimView:
    return render.claim_view(services.results.heartbeat(claim_id, parse.heartbeat(request)))


def review(services: Services, claim_id: str, request: ReviewClaimRequest) -> ClaimView:
    command = parse.review(request)
    stored = services.stored_data.check(request, f"claim {claim_id}")
    return warned(render.claim_view(services.results.review(claim_id, command)), stored)


# -- conflicts -------------------------------------------------------------------------------------------


def report_conflict(services: Services, request: ReportConflictRequest) -> ConflictView:
    stored = services.stored_data.check(request, f"a conflict reported by run {request.run_id}")
    conflict, warnings = services.conflicts.report_conflict(parse.report_conflict(request))
    return warned(render.conflict_view(conflict), [*warnings, *stored])


def get_conflict(services: Services, conflict_id: str) -> ConflictView:
    return render.conflict_view(services.conflicts.get_conflict(conflict_id))


def list_conflicts(services: Services, query: ListConflictsQuery) -> tuple[list[ConflictView], str | None]:
    found, cursor = services.conflicts.list_conflicts(parse.list_conflicts(query))
    return [render.conflict_view(conflict) for conflict in found], cursor


def poll_conflicts(
    services: Services, *, scope: str | None, state: str | None, limit: int
) -> tuple[list[ConflictView], str]:
    found, state = services.conflicts.poll_conflicts(scope=scope, state=state, limit=limit)
    return [render.conflict_view(conflict) for conflict in found], state


def resolve_conflict(services: Services, conflict_id: str, request: ResolveConflictRequest) -> ConflictView:
    command = parse.resolve_conflict(request)
    stored = services.stored_data.check(request, f"conflict {conflict_id}")
    return warned(render.conflict_view(services.conflicts.resolve_conflict(conflict_id, command)), stored)


# -- the flow inventory and the scope catalogue ---------------------------------------------------------------


def list_flows(services: Services, query: ListPageQuery) -> tuple[list[FlowView], str | None]:
    found, cursor = services.inventory.list_flows(parse.paging(query))
    return [render.flow_view(record) for record in found], cursor


def register_flow(services: Services, request: RegisterFlowRequest) -> FlowView:
    command = parse.register_flow(request)
    # Notes are free text kept for as long as the registration: checked like result data.
    stored = services.stored_data.check(request, flow_text(command.flow))
    return warned(render.flow_view(services.inventory.register_flow(command)), stored)


def list_overlaps(services: Services, query: ListPageQuery) -> tuple[list[OverlapView], str | None]:
    found, cursor = services.inventory.list_overlaps(parse.paging(query))
    return [render.overlap_view(record) for record in found], cursor


def list_scopes(services: Services, query: ListPageQuery) -> tuple[list[ScopeView], str | None]:
    found, cursor = services.inventory.list_scopes(parse.paging(query))
    return [render.scope_view(record, open_conflicts) for record, open_conflicts in found], cursor


def set_scope(services: Services, request: SetScopeRequest) -> ScopeView:
    command = parse.set_scope(request)
    stored = services.stored_data.check(request, f"scope {normalise_scope(request.scope)}")
    return warned(render.scope_view(*services.inventory.set_scope(command)), stored)
