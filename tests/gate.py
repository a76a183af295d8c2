"""OnceGate's services as one object, for the tests: each call goes through the action that owns it.

Production code never holds such an object: ``oncegate.bootstrap`` builds the services and each
entry point calls the one it needs. The tests call the API as a flow does, across services, with
the wire's request models, so each call goes through :mod:`oncegate.entrypoints.actions` (the
personal-data check, the command parsed, the view rendered) as an HTTP action's does; ``services``
is the bundle to wire with ``bootstrap.use_services``.
"""

from __future__ import annotations

from typing import Any

from oncegate.bootstrap import Services, wire
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.waiting import Waiting
from oncegate.entrypoints import actions
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

    # -- claims

    def check_and_claim(self, request: ClaimRequest, *, signed_in: str | None = None) -> ClaimResponse:
        return actions.check_and_claim(self.services, request, signed_in=signed_in)

    def check_and_wait(
        self, request: ClaimRequest, *, signed_in: str | None = None
    ) -> tuple[ClaimResponse, Waiting | None]:
        """Check and claim (wait): the answer, and the run as its polls ask again (None: the answer is final)."""
        return actions.check_and_wait(self.services, request, signed_in=signed_in)

    def poll(self, waiting: Waiting, *, signed_in: str | None = None) -> tuple[ClaimResponse, Waiting | None]:
        return actions.poll(self.services, waiting, signed_in=signed_in)

    def get_claim(self, claim_id: str) -> ClaimView:
        return actions.get_claim(self.services, claim_id)[0]

    def get_claim_page(self, claim_id: str) -> tuple[ClaimView, str | None]:
        """The claim with its history's first page, and the cursor of the next."""
        return actions.get_claim(self.services, claim_id)

    def lookup(self, request: LookupRequest) -> ClaimView:
        return actions.lookup(self.services, request)[0]

    def history(self, claim_id: str, query: ListPageQuery | None = None) -> tuple[list[HistoryEntry], str | None]:
        return actions.history(self.services, claim_id, query or ListPageQuery())

    def health(self) -> Health:
        return actions.health(self.services)

    def attention_page(self, query: ListClaimsQuery) -> tuple[list[ClaimNeedingAttention], str | None]:
        return actions.claims_needing_attention(self.services, query)

    # -- results

    def record_result(self, claim_id: str, request: RecordResultRequest) -> ClaimView:
        return actions.record_result(self.services, claim_id, request)

    def release(self, claim_id: str, request: ReleaseRequest) -> ClaimView:
        return actions.release(self.services, claim_id, request)

    def heartbeat(self, claim_id: str, request: HeartbeatRequest) -> ClaimView:
        return actions.heartbeat(self.services, claim_id, request)

    def review(self, claim_id: str, request: ReviewClaimRequest) -> ClaimView:
        return actions.review(self.services, claim_id, request)

    # -- conflicts

    def report_conflict(self, request: ReportConflictRequest) -> ConflictView:
        return actions.report_conflict(self.services, request)

    def get_conflict(self, conflict_id: str) -> ConflictView:
        return actions.get_conflict(self.services, conflict_id)

    def list_conflicts(self, query: ListConflictsQuery) -> tuple[list[ConflictView], str | None]:
        return actions.list_conflicts(self.services, query)

    def poll_conflicts(self, *, scope: str | None, state: str | None, limit: int) -> tuple[list[ConflictView], str]:
        return actions.poll_conflicts(self.services, scope=scope, state=state, limit=limit)

    def resolve_conflict(self, conflict_id: str, request: ResolveConflictRequest) -> ConflictView:
        return actions.resolve_conflict(self.services, conflict_id, request)

    # -- the flow inventory and the scope catalogue

    def register_flow(self, request: RegisterFlowRequest) -> FlowView:
        return actions.register_flow(self.services, request)

    def list_flows(self, query: ListPageQuery) -> tuple[list[FlowView], str | None]:
        return actions.list_flows(self.services, query)

    def list_overlaps(self, query: ListPageQuery) -> tuple[list[OverlapView], str | None]:
        return actions.list_overlaps(self.services, query)

    def set_scope(self, request: SetScopeRequest) -> ScopeView:
        return actions.set_scope(self.services, request)

    def list_scopes(self, query: ListPageQuery) -> tuple[list[ScopeView], str | None]:
        return actions.list_scopes(self.services, query)
