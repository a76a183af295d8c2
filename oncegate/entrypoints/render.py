"""The services' records rendered as the wire's views (:mod:`oncegate.models`), as the entries share them.

Where a domain record becomes the JSON a flow reads: each entry of the operation table
(:mod:`oncegate.entrypoints.operations`) renders what its service returns with these, or with its own view
where only it renders one (Check and claim's answer is its entry's, written straight as the JSON members its
model declares: :func:`~oncegate.entrypoints.operations.claims.claim_members`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oncegate import __version__, models
from oncegate.domain.limits import DEFAULT_LEASE_SECONDS, DEFAULT_RETENTION_DAYS, horizon_days
from oncegate.domain.records import (
    Claim,
    Conflict,
    FingerprintRules,
    Flow,
    FlowRecord,
    HistoryEvent,
    Overlap,
    ScopeRecord,
)
from oncegate.domain.statuses import ClaimStatus
from oncegate.stores.paging import utc_text

if TYPE_CHECKING:
    from oncegate.domain.backups import Restore
    from oncegate.models import (
        ClaimNeedingAttention,
        ClaimView,
        ConflictView,
        FlowRef,
        FlowView,
        Health,
        HistoryEntry,
        OverlapView,
        RestoredStore,
        ScopeView,
        SourceCount,
    )
    from oncegate.service.attention import NeedsAttention


def flow_ref(flow: Flow | None) -> FlowRef | None:
    return models.FlowRef(name=flow.name, environment=flow.environment) if flow else None


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
    return models.HistoryEntry(
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
    return models.ClaimView(
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
        purged_at=claim.purged_at,
        history=None if history is None else [history_entry(event) for event in history],
    )


def conflict_view(conflict: Conflict) -> ConflictView:
    resolution = None
    if conflict.decision is not None and conflict.resolved_at is not None:
        resolution = models.ConflictResolution(
            decision=conflict.decision,
            reviewer=conflict.reviewer or "",
            note=conflict.note,
            resolved_at=conflict.resolved_at,
        )
    return models.ConflictView(
        conflict_id=conflict.conflict_id,
        claim_id=conflict.claim_id,
        scope=conflict.scope,
        status=conflict.status,
        origin=conflict.origin,
        source_system=conflict.source_system,
        fingerprint=conflict.fingerprint,
        claim_fingerprint=conflict.claim_fingerprint,
        reason=conflict.reason,
        changed_parts=list(conflict.changed) or None,
        more_changed_parts=conflict.more_changed or None,
        details=conflict.details,
        run_id=conflict.run_id,
        flow=flow_ref(conflict.flow),
        created_at=conflict.created_at,
        resolution=resolution,
    )


def attention_view(item: NeedsAttention) -> ClaimNeedingAttention:
    return models.ClaimNeedingAttention(why=item.why, since=item.since, claim=claim_view(item.claim))


def _source_counts(claims_by_source: Mapping[str, int]) -> list[SourceCount] | None:
    """The claims per source system, most first; None (left out of the answer) when no claim named one."""
    ranked = sorted(claims_by_source.items(), key=lambda item: (-item[1], item[0]))
    return [models.SourceCount(source=source, claims=count) for source, count in ranked if count > 0] or None


def flow_view(record: FlowRecord) -> FlowView:
    return models.FlowView(
        name=record.flow.name,
        environment=record.flow.environment,
        registered=record.registered_at is not None,
        enabled=record.enabled,
        owner=record.owner,
        notes=record.notes,
        registered_at=record.registered_at,
        first_seen_at=record.first_seen_at,
        last_seen_at=record.last_seen_at,
        claims=record.claims,
        duplicates=record.duplicates,
        sources=_source_counts(record.claims_by_source),
    )


def overlap_view(record: Overlap) -> OverlapView:
    flow, other = (models.FlowRef(name=flow.name, environment=flow.environment) for flow in record.flows)
    return models.OverlapView(
        flow=flow,
        other_flow=other,
        count=record.count,
        first_seen_at=record.first_seen_at,
        last_seen_at=record.last_seen_at,
        example_claim_id=record.example_claim_id,
    )


def _rules_view(history: tuple[FingerprintRules, ...]) -> dict[str, Any]:
    """The current fingerprint rules as the scope's view shows them; nothing for a scope that never had any."""
    if not history:
        return {}
    current = history[-1]
    return {
        "fingerprint_include": list(current.include) or None,
        "fingerprint_ignore": list(current.ignore) or None,
        "fingerprint_preset": current.preset,
        "fingerprint_rules_version": current.version,
        # Include pointers no payload matched yet, as the counts merged so far know (issue 33): perhaps mistyped.
        "fingerprint_unmatched": [pointer for pointer in current.include if pointer not in current.matched] or None,
    }


def scope_view(record: ScopeRecord, open_conflicts: int) -> ScopeView:
    # Counts are deltas from every instance: until all have flushed, one may show below zero for a while.
    counts = {status.value: max(0, record.claims_by_status.get(status, 0)) for status in ClaimStatus}
    return models.ScopeView(
        scope=record.scope,
        owner=record.owner,
        lease_seconds=record.lease_seconds or DEFAULT_LEASE_SECONDS,
        retention_days=record.retention_days or DEFAULT_RETENTION_DAYS,
        horizon_days=horizon_days(record),
        description=record.description,
        key_pattern=record.key_pattern,
        **_rules_view(record.fingerprint_rules),
        registered_at=record.registered_at,
        first_seen_at=record.first_seen_at,
        last_seen_at=record.last_seen_at,
        claims=models.ClaimCounts.model_validate(counts),
        sources=_source_counts(record.claims_by_source),
        open_conflicts=open_conflicts,
    )


def health(store_kind: str, restore: Restore | None = None) -> Health:
    return models.Health(status="ok", store=store_kind, version=__version__, restored=restored_store(restore))


def restored_store(restore: Restore | None) -> RestoredStore | None:
    if restore is None:
        return None
    exported, until = utc_text(restore.exported_at), utc_text(restore.forgotten_until)
    message = (
        f"Restored from an export: keys done after {exported} are forgotten until {until}."
        if restore.completed_at
        else "An import into this store is under way; the app serves it only once the import has marked it."
    )
    return models.RestoredStore(
        restored_from=restore.restored_from,
        exported_at=restore.exported_at,
        restored_at=restore.completed_at,
        forgotten_until=restore.forgotten_until,
        message=message,
    )
