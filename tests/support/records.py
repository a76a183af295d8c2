"""Builders for claims, history events, conflicts and inventory records, shared by the store and service tests."""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import (
    AppliedResolution,
    Claim,
    Conflict,
    FingerprintRules,
    Flow,
    FlowRecord,
    HistoryEvent,
    Overlap,
    ScopeRecord,
)
from oncegate.domain.statuses import (
    ClaimStatus,
    ConflictOrigin,
    ConflictStatus,
    EventKind,
    Resolution,
)

# Microseconds on purpose: a store that truncates timestamps fails the round-trip tests.
T0 = datetime(2024, 5, 1, 8, 30, 15, 123456, tzinfo=UTC)
FLOW = Flow("Create order in ERP", "Production")


def new_id() -> str:
    """A fresh unique id that is safe as a table key, like the service's ids."""
    return secrets.token_hex(16)


def event_id(at: datetime) -> str:
    """An event id as the service makes them: the timestamp first, so ids sort in time order."""
    return f"{at.strftime('%Y%m%dT%H%M%S%fZ')}-{secrets.token_hex(4)}"


def claim(claim_id: str | None = None, **changes: Any) -> Claim:
    """A fresh in-progress claim with only the required fields."""
    minimal = Claim(
        claim_id=claim_id or new_id(),
        scope="erp.create-order",
        status=ClaimStatus.IN_PROGRESS,
        attempt=1,
        fingerprint=None,
        grant_id=new_id(),
        run_id="run-1",
        flow=None,
        first_received_at=T0,
        last_attempt_at=T0,
        updated_at=T0,
    )
    return replace(minimal, **changes)


def full_claim(claim_id: str | None = None, **changes: Any) -> Claim:
    """A claim with every optional field set, including ones that are easy to lose (False, nested JSON)."""
    later = T0 + timedelta(minutes=5, microseconds=1)
    full = claim(
        claim_id,
        status=ClaimStatus.FAILED,
        attempt=3,
        fingerprint="sha256:" + "ab" * 32,
        flow=FLOW,
        # A non-UTC offset: the store may normalise it, but must keep the instant.
        last_attempt_at=later.astimezone(timezone(timedelta(hours=2))),
        updated_at=later,
        lease_expires_at=later + timedelta(minutes=10),
        target_record_id="SO-10042",
        data={"order": {"id": 42, "lines": [1.5, None, True]}, "note": "café ✓"},
        completed_at=later,
        error="ERP answered 409",
        retryable=False,
        reviewer="alex@example.com",
        source="sharepoint:expenses",
        reference="SO-10042 café",
        rules_version=2,
        idempotency_attempt=1,
        members={"": "", "/Amount": "o:" + "12" * 10, "/Lines/0/Qty": "oao:" + "34" * 10, "/a~1b": "o:" + "56" * 10},
        legacy_resolutions=(
            AppliedResolution(new_id(), "sha256:" + "cd" * 32, Resolution.KEEP_ORIGINAL),
            AppliedResolution(new_id(), None, Resolution.DISMISS),
        ),
    )
    return replace(full, **changes)


def event(claim_id: str, *, at: datetime = T0, **changes: Any) -> HistoryEvent:
    """A history event of the claim at ``at``."""
    made = HistoryEvent(
        claim_id=claim_id,
        event_id=event_id(at),
        at=at,
        kind=EventKind.CLAIM,
        outcome="proceed",
        attempt=1,
        recognised_by="new key",
        run_id="run-1",
        flow=FLOW,
        fingerprint="sha256:" + "ab" * 32,
        source="shop-eu",
        details={"leaseSeconds": 300, "warnings": ["another_flow_copy"]},
    )
    return replace(made, **changes)


def conflict(conflict_id: str | None = None, **changes: Any) -> Conflict:
    """An open conflict with only the required fields."""
    minimal = Conflict(
        conflict_id=conflict_id or new_id(),
        claim_id=new_id(),
        scope="erp.create-order",
        status=ConflictStatus.OPEN,
        origin=ConflictOrigin.CLAIM,
        fingerprint=None,
        claim_fingerprint=None,
        reason="Fingerprint differs from the claim's.",
        run_id="run-2",
        flow=None,
        created_at=T0,
    )
    return replace(minimal, **changes)


def resolved_conflict(conflict_id: str | None = None, **changes: Any) -> Conflict:
    """A resolved conflict with every optional field set."""
    full = conflict(
        conflict_id,
        status=ConflictStatus.RESOLVED,
        origin=ConflictOrigin.REPORTED,
        fingerprint="sha256:" + "ef" * 32,
        claim_fingerprint="sha256:" + "ab" * 32,
        flow=FLOW,
        details={"target": {"total": "120.50"}, "seen": [1, 2]},
        source_system="shop-eu",
        changed=("/Amount", "/Lines/2/Qty"),
        more_changed=3,
        decision=Resolution.ACCEPT_NEW,
        reviewer="alex@example.com",
        note="The customer changed the order.",
        resolved_at=T0 + timedelta(hours=1, microseconds=7),
    )
    return replace(full, **changes)


def flow_record(**changes: Any) -> FlowRecord:
    """A flow seen but never registered, named as only a digest can key it (/ \\ # ? are not RowKey characters)."""
    return replace(FlowRecord(Flow(f"Orders/EU \\ #1? {new_id()[:6]}", "Default-contoso")), **changes)


def registered_flow(**changes: Any) -> FlowRecord:
    """A registered, disabled flow with every optional field set."""
    later = T0 + timedelta(minutes=3, microseconds=9)
    full = flow_record(
        owner="ana@contoso.com",
        enabled=False,
        notes="Copy left in Test: disabled until the owner decides. café ✓",
        registered_at=T0,
        first_seen_at=T0,
        last_seen_at=later,
        claims=12,
        duplicates=3,
        claims_by_source={"shop-eu": 9, "sharepoint:expenses": 2},
    )
    return replace(full, **changes)


def scope_record(**changes: Any) -> ScopeRecord:
    """A scope seen but never set up."""
    return replace(ScopeRecord(f"erp.create-order-{new_id()[:6]}"), **changes)


def configured_scope(**changes: Any) -> ScopeRecord:
    """A scope with every optional field set, and some claims in each status (one count negative, as deltas may be)."""
    full = scope_record(
        owner="erp-team@contoso.com",
        lease_seconds=900,
        retention_days=30,
        description="Creates the sales order in the ERP.",
        fingerprint_rules=(
            FingerprintRules(1, include=("/order", "/lines/*/amount"), matched=("/order",)),
            FingerprintRules(2, ignore=("/a~1b",), preset="sharepoint", preset_ignore=("/@odata.etag", "/Modified")),
        ),
        claims_by_source={"shop-eu": 40, "shop-us": 1},
        registered_at=T0,
        first_seen_at=T0,
        last_seen_at=T0 + timedelta(hours=1),
        claims_by_status=dict(zip(ClaimStatus, (-1, 7, 2, 1, 4), strict=True)),
    )
    return replace(full, **changes)


def overlap(**changes: Any) -> Overlap:
    """Two copies of a flow answering for the same claims."""
    made = Overlap(
        flows=(Flow("Create order", "Default-contoso"), Flow(f"Create order #{new_id()[:6]}", "Test/contoso")),
        count=2,
        first_seen_at=T0,
        last_seen_at=T0 + timedelta(seconds=5),
        example_claim_id=new_id(),
    )
    return replace(made, **changes)


def current_token(stored: Claim) -> str:
    """The claim token of the stored grant, made as the service makes it with the test secret."""
    from tests.conftest import KEY_SECRET

    assert stored.grant_id is not None
    return KeyHasher(KEY_SECRET).claim_token(stored.claim_id, stored.attempt, stored.grant_id)
