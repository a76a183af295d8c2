"""OnceGate's services as one object, for the tests: each call goes to the service that owns it.

Production code never holds such an object: ``oncegate.bootstrap`` builds the services and each
entry point calls the one it needs. The tests call the API as a flow does, across services, so
they keep one object to call; ``services`` is the bundle to wire with ``bootstrap.use_services``.
"""

from __future__ import annotations

from typing import Any

from oncegate.bootstrap import Services, wire
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.models import (
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictView,
    Health,
    HeartbeatRequest,
    HistoryEntry,
    ListConflictsQuery,
    ListPageQuery,
    LookupRequest,
    RecordResultRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ReviewClaimRequest,
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
        return self.services.claims.check_and_claim(request, signed_in=signed_in)

    def get_claim(self, claim_id: str) -> ClaimView:
        return self.services.claims.get_claim(claim_id)[0]

    def lookup(self, request: LookupRequest) -> ClaimView:
        return self.services.claims.lookup(request)[0]

    def history(self, claim_id: str, query: ListPageQuery | None = None) -> tuple[list[HistoryEntry], str | None]:
        return self.services.claims.history(claim_id, query or ListPageQuery())

    def health(self) -> Health:
        return self.services.claims.health()

    # -- results

    def record_result(self, claim_id: str, request: RecordResultRequest) -> ClaimView:
        return self.services.results.record_result(claim_id, request)

    def release(self, claim_id: str, request: ReleaseRequest) -> ClaimView:
        return self.services.results.release(claim_id, request)

    def heartbeat(self, claim_id: str, request: HeartbeatRequest) -> ClaimView:
        return self.services.results.heartbeat(claim_id, request)

    def review(self, claim_id: str, request: ReviewClaimRequest) -> ClaimView:
        return self.services.results.review(claim_id, request)

    # -- conflicts

    def report_conflict(self, request: ReportConflictRequest) -> ConflictView:
        return self.services.conflicts.report_conflict(request)

    def get_conflict(self, conflict_id: str) -> ConflictView:
        return self.services.conflicts.get_conflict(conflict_id)

    def list_conflicts(self, query: ListConflictsQuery) -> tuple[list[ConflictView], str | None]:
        return self.services.conflicts.list_conflicts(query)

    def poll_conflicts(self, *, scope: str | None, state: str | None, limit: int) -> tuple[list[ConflictView], str]:
        return self.services.conflicts.poll_conflicts(scope=scope, state=state, limit=limit)

    def resolve_conflict(self, conflict_id: str, request: ResolveConflictRequest) -> ConflictView:
        return self.services.conflicts.resolve_conflict(conflict_id, request)
