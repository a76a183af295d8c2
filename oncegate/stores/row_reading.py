"""Rows read back as records: every format a release of OnceGate wrote, and a long value's pieces joined.

The stores write today's format (:mod:`oncegate.stores.row_writing`, whose column names and details' names this
module reads); a row written before reads back here as a record of today, so that no record above the stores
carries a legacy field: 0.1.0's names kept as they were (``ResultData``, ``ErrorReason``), claims of schema 1
upgraded (their earlier attempt and doubt read from the history), history details in the API's old spelling,
and key secrets of releases before their state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from oncegate.domain.records import (
    AppliedResolution,
    Claim,
    ClaimFilter,
    Conflict,
    EarlierAttempt,
    FingerprintRecord,
    FingerprintRules,
    Flow,
    FlowRecord,
    HistoryEvent,
    KeySecretRecord,
    Overlap,
    ScopeRecord,
)
from oncegate.domain.statuses import (
    ClaimStatus,
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
    Resolution,
)
from oncegate.stores.row_writing import (
    CLAIM_SCHEMA,
    DETAIL_NAMES,
    NESTED_DETAILS,
    SEPARATOR,
    STATUS_COLUMNS,
    TOMBSTONE_STATUS,
    Row,
)

if TYPE_CHECKING:
    from oncegate.domain.backups import Restore


def _json_value(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _when(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    return parsed.astimezone(UTC)


def _required_when(value: datetime | str) -> datetime:
    parsed = _when(value)
    assert parsed is not None, "a required timestamp column is empty"
    return parsed


def _flow(row: Row) -> Flow | None:
    name = row.get("FlowName")
    return Flow(name, row.get("FlowEnvironment") or "") if name else None


def stored_statuses(matching: ClaimFilter) -> list[str]:
    """The Status column's values a list of ``matching`` reads."""
    return [TOMBSTONE_STATUS] if matching.tombstones else [status.value for status in matching.statuses]


def _earlier_attempt(row: Row | None) -> EarlierAttempt | None:
    if row is None:
        return None
    return EarlierAttempt(
        attempt=int(row["Attempt"]),
        run_id=row["RunId"],
        flow=_flow(row),
        status=ClaimStatus(row["Status"]),
        started_at=_required_when(row["StartedAt"]),
        lease_expires_at=_when(row.get("LeaseExpiresAt")),
        error=row.get("Error"),
    )


def claim_from_row(row: Row, version: str, history: Callable[[], list[HistoryEvent]] | None = None) -> Claim:
    """The claim of a row; a row of schema 1 comes upgraded (``history`` reads its claim's history if needed)."""
    retryable = row.get("Retryable")
    claim = Claim(
        claim_id=row["ClaimId"],
        scope=row["Scope"],
        status=ClaimStatus.SUCCEEDED if row["Status"] == TOMBSTONE_STATUS else ClaimStatus(row["Status"]),
        attempt=int(row["Attempt"]),
        fingerprint=row.get("Fingerprint"),
        grant_id=row.get("GrantId"),
        run_id=row["RunId"],
        flow=_flow(row),
        first_received_at=_required_when(row["FirstReceivedAt"]),
        last_attempt_at=_required_when(row["LastAttemptAt"]),
        updated_at=_required_when(row["UpdatedAt"]),
        lease_expires_at=_when(row.get("LeaseExpiresAt")),
        target_record_id=row.get("TargetRecordId"),
        data=_json_value(row.get("ResultData")),
        completed_at=_when(row.get("CompletedAt")),
        error=row.get("ErrorReason"),
        retryable=None if retryable is None else bool(retryable),
        reviewer=row.get("Reviewer"),
        granted_to=row.get("GrantedTo"),
        source=row.get("Source"),
        reference=row.get("Reference"),
        earlier_attempt=_earlier_attempt(_json_value(row.get("Reconciling"))),
        released_in_doubt=bool(row.get("ReleasedInDoubt")),
        generation=int(row.get("Generation") or 0),
        key_id=row.get("KeyId"),
        rules_version=int(row.get("RulesVersion") or 0),
        idempotency_attempt=_optional_int(row.get("IdempotencyAttempt")),
        purged_at=_when(row.get("PurgedAt")),
        members=_json_value(row.get("Members")),
        legacy_token=row.get("ClaimToken") or None,
        legacy_resolutions=tuple(
            AppliedResolution(conflict_id, fingerprint, Resolution(decision))
            for conflict_id, fingerprint, decision in _json_value(row.get("Resolutions")) or []
        ),
        version=version,
    )
    return claim if int(row.get("SchemaVersion") or 1) >= CLAIM_SCHEMA else _upgraded(claim, history)


# Rows of schema 1 kept the reconciling state in the history (the granting line's "lastAttempt", in the API's
# spelling) and the release's error text: read back here, so no record above the stores carries a legacy field.


def _upgraded(claim: Claim, history: Callable[[], list[HistoryEvent]] | None) -> Claim:
    """A schema-1 claim with its earlier attempt and doubt as fields, as 0.1.0 kept them in the history."""
    # Rows of schema 1 alone read the transitions' text: a store reading today's rows never imports them.
    from oncegate.domain.transitions import RELEASED_IN_DOUBT

    in_doubt = claim.status is ClaimStatus.UNKNOWN and (claim.error or "").startswith(RELEASED_IN_DOUBT)
    earlier = None
    if claim.attempt > 1 and history is not None:
        for event in history():
            grant = event.kind is EventKind.CLAIM and event.attempt == claim.attempt and event.run_id == claim.run_id
            if grant and event.outcome == Decision.RECONCILE and "last_attempt" in event.details:
                earlier = _legacy_earlier_attempt(event.details["last_attempt"])
    return replace(claim, earlier_attempt=earlier, released_in_doubt=in_doubt)


def _legacy_earlier_attempt(details: Row) -> EarlierAttempt:
    flow = details.get("flow")
    return EarlierAttempt(
        attempt=int(details["attempt"]),
        run_id=details["runId"],
        flow=Flow(flow["name"], flow["environment"]) if flow else None,
        status=ClaimStatus(details["status"]),
        started_at=_required_when(details["startedAt"]),
        lease_expires_at=_when(details.get("leaseExpiresAt")),
        error=details.get("error"),
    )


def fingerprint_from_row(row: Row, version: str) -> FingerprintRecord:
    alias, decision = row.get("AliasGeneration"), row.get("Decision")
    return FingerprintRecord(
        claim_id=row["ClaimId"],
        fingerprint=row["Fingerprint"],
        resolved=int(row["Resolved"]),
        alias_generation=None if alias is None else int(alias),
        conflict_id=row.get("ConflictId"),
        decision=Resolution(decision) if decision else None,
        reviewer=row.get("Reviewer"),
        note=row.get("Note"),
        resolved_at=_when(row.get("ResolvedAt")),
        version=version,
    )


_DETAIL_OF_STORED = {stored: name for name, stored in DETAIL_NAMES.items()}


_DETAIL_OF_LEGACY = {
    "targetRecordId": "target_record_id",
    "conflictId": "conflict_id",
    "previousStatus": "previous_status",
    "lastAttempt": "last_attempt",
}


def _details(row: Row) -> Row:
    details = {}
    for stored, value in row.items():
        name = _DETAIL_OF_STORED.get(stored) or _DETAIL_OF_LEGACY.get(stored) or stored
        details[name] = _details(value) if name in NESTED_DETAILS and isinstance(value, dict) else value
    return details


def event_from_row(row: Row) -> HistoryEvent:
    return HistoryEvent(
        claim_id=row["ClaimId"],
        event_id=row["EventId"],
        at=_required_when(row["At"]),
        kind=EventKind(row["Kind"]),
        outcome=row["Outcome"],
        attempt=int(row["Attempt"]),
        recognised_by=row["RecognisedBy"],
        run_id=row.get("RunId"),
        flow=_flow(row),
        fingerprint=row.get("Fingerprint"),
        source=row.get("Source"),
        details=_details(_json_value(row.get("Details")) or {}),
        count=None if row.get("Count") is None else int(row["Count"]),
        last_at=_when(row.get("LastAt")),
    )


def conflict_from_row(row: Row, version: str) -> Conflict:
    decision = row.get("Decision")
    changed = _json_value(row.get("Changed")) or []
    return Conflict(
        conflict_id=row["ConflictId"],
        claim_id=row["ClaimId"],
        scope=row["Scope"],
        status=ConflictStatus(row["Status"]),
        origin=ConflictOrigin(row["Source"]),
        fingerprint=row.get("Fingerprint"),
        claim_fingerprint=row.get("ClaimFingerprint"),
        reason=row["Reason"],
        run_id=row["RunId"],
        flow=_flow(row),
        created_at=_required_when(row["CreatedAt"]),
        details=_json_value(row.get("Details")),
        source_system=row.get("SourceSystem"),
        changed=tuple(changed[:-1]),
        more_changed=int(changed[-1]) if changed else 0,
        decision=Resolution(decision) if decision else None,
        reviewer=row.get("Reviewer"),
        note=row.get("Note"),
        resolved_at=_when(row.get("ResolvedAt")),
        version=version,
    )


def flow_from_row(row: Row, version: str) -> FlowRecord:
    return FlowRecord(
        flow=Flow(row["FlowName"], row["FlowEnvironment"]),
        owner=row.get("Owner"),
        enabled=bool(row["Enabled"]),
        notes=row.get("Notes"),
        registered_at=_when(row.get("RegisteredAt")),
        first_seen_at=_when(row.get("FirstSeenAt")),
        last_seen_at=_when(row.get("LastSeenAt")),
        claims=int(row["Claims"]),
        duplicates=int(row["Duplicates"]),
        claims_by_source=_json_value(row.get("ClaimsBySource")) or {},
        version=version,
    )


def scope_from_row(row: Row, version: str) -> ScopeRecord:
    lease, retention, horizon = row.get("LeaseSeconds"), row.get("RetentionDays"), row.get("HorizonDays")
    return ScopeRecord(
        scope=row["Scope"],
        owner=row.get("Owner"),
        lease_seconds=None if lease is None else int(lease),
        retention_days=None if retention is None else int(retention),
        description=row.get("Description"),
        key_pattern=row.get("KeyPattern"),
        fingerprint_rules=tuple(_rules(rules) for rules in _json_value(row.get("FingerprintRules")) or []),
        horizon_days=None if horizon is None else int(horizon),
        registered_at=_when(row.get("RegisteredAt")),
        first_seen_at=_when(row.get("FirstSeenAt")),
        last_seen_at=_when(row.get("LastSeenAt")),
        claims_by_status={status: int(row[column]) for status, column in STATUS_COLUMNS.items() if row.get(column)},
        claims_by_source=_json_value(row.get("ClaimsBySource")) or {},
        version=version,
    )


def _rules(row: Row) -> FingerprintRules:
    return FingerprintRules(
        version=int(row["Version"]),
        include=tuple(row.get("Include") or ()),
        ignore=tuple(row.get("Ignore") or ()),
        preset=row.get("Preset"),
        preset_ignore=tuple(row.get("PresetIgnore") or ()),
        matched=tuple(row.get("Matched") or ()),
    )


def overlap_from_row(row: Row, version: str) -> Overlap:
    return Overlap(
        flows=(
            Flow(row["FlowName"], row["FlowEnvironment"]),
            Flow(row["OtherFlowName"], row["OtherFlowEnvironment"]),
        ),
        count=int(row["Count"]),
        first_seen_at=_when(row.get("FirstSeenAt")),
        last_seen_at=_when(row.get("LastSeenAt")),
        example_claim_id=row.get("ExampleClaimId"),
        version=version,
    )


def secret_from_row(row: Row, version: str) -> KeySecretRecord:
    added_at = _required_when(row["AddedAt"])
    in_use_from = _when(row.get("InUseFrom"))
    # Rows of releases before the secrets had a state (no Announced column): every secret an instance held was
    # written, and any may have made claims, so each counts as in use from when it was added.
    if row.get("Announced") is None:
        in_use_from = added_at
    return KeySecretRecord(
        key_id=row["KeyId"],
        added_at=added_at,
        in_use_from=in_use_from,
        retired_at=_when(row.get("RetiredAt")),
        version=version,
    )


def restore_from_row(row: Row) -> Restore:
    # A restore's record is read by health and the restore alone, never by a claim: imported at its first read.
    from oncegate.domain.backups import Restore

    return Restore(
        restored_from=row["RestoredFrom"],
        export_id=row["ExportId"],
        exported_at=_required_when(row["ExportedAt"]),
        started_at=_required_when(row["StartedAt"]),
        forgotten_until=_required_when(row["ForgottenUntil"]),
        records_done=int(row["RecordsDone"]),
        completed_at=_when(row.get("CompletedAt")),
    )


def gather(entity: Mapping[str, Any]) -> dict[str, Any]:
    """``entity`` with its pieces joined back into their columns."""
    whole: dict[str, Any] = {}
    pieces: list[tuple[str, int, str]] = []
    for name, value in entity.items():
        place = _piece_place(name)
        if place is None:
            whole[name] = value
        else:
            pieces.append((*place, value))
    for column, _, value in sorted(pieces):
        whole[column] += value
    return whole


def _piece_place(name: str) -> tuple[str, int] | None:
    """The column and number of a piece's property, e.g. ``("Details", 2)``; None for a column's own name."""
    column, separator, number = name.rpartition(SEPARATOR)
    if not separator or not (number.isascii() and number.isdigit()):
        return None
    return column, int(number)
