"""Records turned into the contract's response models."""

from __future__ import annotations

from typing import Any

from oncegate.domain.records import Claim, Conflict, EarlierAttempt, Flow, HistoryEvent
from oncegate.models import (
    ClaimResult,
    ClaimView,
    ConflictResolution,
    ConflictView,
    EarlierAttemptView,
    FlowRef,
    HistoryEntry,
)


def flow_ref(flow: Flow | None) -> FlowRef | None:
    return FlowRef(name=flow.name, environment=flow.environment) if flow else None


def earlier_attempt_view(earlier: EarlierAttempt | None) -> EarlierAttemptView | None:
    """The attempt a reconcile answer asks the run to look up, as the API shows it."""
    if earlier is None:
        return None
    return EarlierAttemptView(
        attempt=earlier.attempt,
        run_id=earlier.run_id,
        flow=flow_ref(earlier.flow),
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
        flow=flow_ref(claim.flow),
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def wire_details(details: dict[str, Any]) -> dict[str, Any]:
    """A history line's details as the API spells them: camelCase names (the flow's own ``data`` untouched)."""
    return {
        _camel(name): wire_details(value) if name in ("previous", "reconciles") and isinstance(value, dict) else value
        for name, value in details.items()
    }


def history_entry(event: HistoryEvent) -> HistoryEntry:
    return HistoryEntry(
        at=event.at,
        kind=event.kind,
        outcome=event.outcome,
        attempt=event.attempt,
        run_id=event.run_id,
        flow=flow_ref(event.flow),
        fingerprint=event.fingerprint,
        source=event.source,
        recognised_by=event.recognised_by,
        details=wire_details(event.details),
        count=event.count,
        first_at=event.at if event.count is not None else None,
        last_at=event.last_at,
    )


def claim_view(claim: Claim, history: list[HistoryEvent] | None = None) -> ClaimView:
    return ClaimView(
        claim_id=claim.claim_id,
        scope=claim.scope,
        source=claim.source,
        reference=claim.reference,
        status=claim.status,
        attempt=claim.attempt,
        fingerprint=claim.fingerprint,
        first_received_at=claim.first_received_at,
        last_attempt_at=claim.last_attempt_at,
        lease_expires_at=claim.lease_expires_at,
        run_id=claim.run_id,
        flow=flow_ref(claim.flow),
        target_record_id=claim.target_record_id,
        data=claim.data,
        completed_at=claim.completed_at,
        error=claim.error,
        retryable=claim.retryable,
        reviewer=claim.reviewer,
        history=None if history is None else [history_entry(event) for event in history],
    )


def conflict_view(conflict: Conflict) -> ConflictView:
    resolution = None
    if conflict.decision is not None and conflict.resolved_at is not None:
        resolution = ConflictResolution(
            decision=conflict.decision,
            reviewer=conflict.reviewer or "",
            note=conflict.note,
            resolved_at=conflict.resolved_at,
        )
    return ConflictView(
        conflict_id=conflict.conflict_id,
        claim_id=conflict.claim_id,
        scope=conflict.scope,
        status=conflict.status,
        origin=conflict.origin,
        source_system=conflict.source_system,
        fingerprint=conflict.fingerprint,
        claim_fingerprint=conflict.claim_fingerprint,
        reason=conflict.reason,
        details=conflict.details,
        run_id=conflict.run_id,
        flow=flow_ref(conflict.flow),
        created_at=conflict.created_at,
        resolution=resolution,
    )
