"""OnceGate's services as one object, for the tests: each call goes through the entry of the operation table.

Production code never holds such an object: ``oncegate.bootstrap`` builds the services and each
entry point calls the one it needs. The tests call the API as a flow does, across services, with
the wire's request models, so each call performs its entry of :mod:`oncegate.entrypoints.operations`
(the command parsed, the sensitive-data check, the service, the view rendered) as the HTTP pipeline
does, without HTTP; ``services`` is the bundle to wire with ``bootstrap.use_services``.
"""

from __future__ import annotations

from typing import Any

from oncegate.bootstrap import Services, wire
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.waiting import Waiting
from oncegate.entrypoints import render
from oncegate.entrypoints.http import answer, perform
from oncegate.entrypoints.operations import BY_NAME, Call
from oncegate.models import (
    ClaimNeedingAttention,
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictView,
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
from oncegate.service.attention import Attention
from oncegate.service.inventory import Inventory
from oncegate.service.retention import Retention
from oncegate.stores.port import ClaimStore


class Gate:
    """The services ``bootstrap.wire`` builds over ``store``, called as one (``options`` as ``wire`` takes them)."""

    def __init__(self, store: ClaimStore, keys: KeyHasher | KeyRing, **options: Any) -> None:
        self.services: Services = wire(store, keys, **options)

    @classmethod
    def of(cls, services: Services) -> Gate:
        """The services built elsewhere (``bootstrap.build_services``), called as one."""
        gate = cls.__new__(cls)
        gate.services = services
        return gate

    @property
    def store(self) -> ClaimStore:
        return self.services.store

    @property
    def inventory(self) -> Inventory:
        return self.services.inventory

    @property
    def attention(self) -> Attention:
        return self.services.attention

    @property
    def retention(self) -> Retention:
        return self.services.retention

    def close(self) -> None:
        self.services.close()

    def _answer(self, name: str, **given: Any) -> Any:
        """The response model of the entry ``name``, performed as the HTTP pipeline performs it."""
        return answer(BY_NAME[name], self.services, Call(**given))

    def _page(self, name: str, query: Any, **given: Any) -> tuple[list[Any], str | None]:
        """A list's page and the store's cursor of the next (without HTTP, the next page's link is the cursor)."""
        page = self._answer(name, query=query, **given)
        return page.value, page.next_link

    # -- claims

    def check_and_claim(self, request: ClaimRequest, *, signed_in: str | None = None) -> ClaimResponse:
        # Never waits: a request that does not ask to is passed as it is (a copy is a few microseconds of the claim's
        # figure in bench/costs.py, and nothing on the path reads which fields were sent).
        waits = isinstance(request, ClaimRequest) and request.wait
        body = request.model_copy(update={"wait": False}) if waits else request
        answered: ClaimResponse = self._answer("check_and_claim", body=body, caller=signed_in)
        return answered

    def check_and_wait(
        self, request: ClaimRequest, *, signed_in: str | None = None
    ) -> tuple[ClaimResponse, Waiting | None]:
        """Check and claim (wait): the answer, and the run as its polls ask again (None: the answer is final)."""
        body = request.model_copy(update={"wait": True})
        reply = perform(BY_NAME["check_and_claim"], self.services, Call(body=body, caller=signed_in))
        return ClaimResponse.model_validate(reply.model), reply.waiting  # its members, as a client reads them

    def poll(self, waiting: Waiting, *, signed_in: str | None = None) -> tuple[ClaimResponse, Waiting | None]:
        call: Call[None, None] = Call(caller=signed_in)
        reply = perform(BY_NAME["wait_for_claim"], self.services, call, waiting)
        return ClaimResponse.model_validate(reply.model), reply.waiting

    def get_claim(self, claim_id: str) -> ClaimView:
        return self.get_claim_page(claim_id)[0]

    def get_claim_page(self, claim_id: str) -> tuple[ClaimView, str | None]:
        """The claim with its history's first page, and the cursor of the next."""
        view: ClaimView = self._answer("get_claim", ids={"claimId": claim_id})
        return view.model_copy(update={"history_next_link": None}), view.history_next_link

    def lookup(self, request: LookupRequest) -> ClaimView:
        view: ClaimView = self._answer("lookup_claim", body=request)
        return view.model_copy(update={"history_next_link": None})

    def history(self, claim_id: str, query: ListPageQuery | None = None) -> tuple[list[HistoryEntry], str | None]:
        return self._page("list_claim_history", query or ListPageQuery(), ids={"claimId": claim_id})

    def health(self) -> Health:
        health: Health = self._answer("health")
        return health.model_copy(update={"store_location": None})

    def attention_page(self, query: ListClaimsQuery) -> tuple[list[ClaimNeedingAttention], str | None]:
        return self._page("list_claims_needing_attention", query)

    # -- results

    def record_result(self, claim_id: str, request: RecordResultRequest) -> ClaimView:
        view: ClaimView = self._answer("record_result", body=request, ids={"claimId": claim_id})
        return view

    def release(self, claim_id: str, request: ReleaseRequest) -> ClaimView:
        view: ClaimView = self._answer("release_claim", body=request, ids={"claimId": claim_id})
        return view

    def heartbeat(self, claim_id: str, request: HeartbeatRequest) -> ClaimView:
        view: ClaimView = self._answer("renew_claim", body=request, ids={"claimId": claim_id})
        return view

    def review(self, claim_id: str, request: ReviewClaimRequest) -> ClaimView:
        view: ClaimView = self._answer("review_claim", body=request, ids={"claimId": claim_id})
        return view

    # -- conflicts

    def report_conflict(self, request: ReportConflictRequest) -> ConflictView:
        view: ConflictView = self._answer("report_conflict", body=request)
        return view

    def get_conflict(self, conflict_id: str) -> ConflictView:
        view: ConflictView = self._answer("get_conflict", ids={"conflictId": conflict_id})
        return view

    def list_conflicts(self, query: ListConflictsQuery) -> tuple[list[ConflictView], str | None]:
        return self._page("list_conflicts", query)

    def poll_conflicts(self, *, scope: str | None, state: str | None, limit: int) -> tuple[list[ConflictView], str]:
        found, state = self.services.conflicts.poll_conflicts(scope=scope, state=state, limit=limit)
        return [render.conflict_view(conflict) for conflict in found], state

    def resolve_conflict(self, conflict_id: str, request: ResolveConflictRequest) -> ConflictView:
        view: ConflictView = self._answer("resolve_conflict", body=request, ids={"conflictId": conflict_id})
        return view

    # -- the flow inventory and the scope catalogue

    def register_flow(self, request: RegisterFlowRequest) -> FlowView:
        view: FlowView = self._answer("register_flow", body=request)
        return view

    def list_flows(self, query: ListPageQuery) -> tuple[list[FlowView], str | None]:
        return self._page("list_flows", query)

    def list_overlaps(self, query: ListPageQuery) -> tuple[list[OverlapView], str | None]:
        return self._page("list_flow_overlaps", query)

    def set_scope(self, request: SetScopeRequest) -> ScopeView:
        view: ScopeView = self._answer("set_scope", body=request)
        return view

    def list_scopes(self, query: ListPageQuery) -> tuple[list[ScopeView], str | None]:
        return self._page("list_scopes", query)
