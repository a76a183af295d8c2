"""Records as flat, named columns, shared by every adapter.

The same PascalCase names are SQLite columns and Table Storage properties, so a claim reads
the same in ``sqlite3`` and in the Azure portal's storage browser. Values are plain scalars
(str, int, bool, datetime); JSON values travel as text. Adapters add only their own keys and
their own spelling of datetimes.

Each stored record (claim, fingerprint, event, conflict, flow, scope, overlap, key secret) has its
``*_to_row`` / ``*_from_row`` pair side by side, so that a column renamed in one direction is seen in the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from oncegate.domain.keys import json_writer
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

if TYPE_CHECKING:
    from oncegate.domain.backups import Restore

Row = dict[str, Any]

CLAIM_COLUMNS = (
    "ClaimId",
    "Scope",
    "Status",
    "Attempt",
    "Fingerprint",
    "GrantId",
    "ClaimToken",
    "RunId",
    "FlowName",
    "FlowEnvironment",
    "FirstReceivedAt",
    "LastAttemptAt",
    "UpdatedAt",
    "LeaseExpiresAt",
    "TargetRecordId",
    "ResultData",
    "CompletedAt",
    "ErrorReason",
    "Retryable",
    "Reviewer",
    "GrantedTo",
    "Source",
    "Reference",
    "Reconciling",
    "ReleasedInDoubt",
    "Generation",
    "Resolutions",
    "KeyId",
    "RulesVersion",
    "IdempotencyAttempt",
    "PurgedAt",
    "Members",
    "SchemaVersion",
)
# 2: the earlier attempt and the release in doubt are columns (1 kept them in the history).
CLAIM_SCHEMA = 2
FINGERPRINT_COLUMNS = (
    "ClaimId",
    "Fingerprint",
    "Resolved",
    "AliasGeneration",
    "ConflictId",
    "Decision",
    "Reviewer",
    "Note",
    "ResolvedAt",
)
EVENT_COLUMNS = (
    "ClaimId",
    "EventId",
    "At",
    "Kind",
    "Outcome",
    "Attempt",
    "RecognisedBy",
    "RunId",
    "FlowName",
    "FlowEnvironment",
    "Fingerprint",
    "Source",
    "Details",
    "Count",
    "LastAt",
)
CONFLICT_COLUMNS = (
    "ConflictId",
    "ClaimId",
    "Scope",
    "Status",
    "Source",
    "Fingerprint",
    "ClaimFingerprint",
    "Reason",
    "RunId",
    "FlowName",
    "FlowEnvironment",
    "CreatedAt",
    "Details",
    "SourceSystem",
    "Changed",
    "Decision",
    "Reviewer",
    "Note",
    "ResolvedAt",
)


# Made once: ``json.dumps`` with options builds an encoder a call, a third of a claim row's JSON time (issue 36).
_JSON_TEXT = json_writer()


def _json_text(value: Any) -> str | None:
    return None if value is None else _JSON_TEXT(value)


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


def _flow_columns(flow: Flow | None) -> Row:
    return {"FlowName": flow.name if flow else None, "FlowEnvironment": flow.environment if flow else None}


def _flow(row: Row) -> Flow | None:
    name = row.get("FlowName")
    return Flow(name, row.get("FlowEnvironment") or "") if name else None


# The Status column of a tombstone (Claim.purged_at set; always of a succeeded claim): a list of claims by status
# never meets one, and a list of tombstones (ClaimFilter.tombstones) meets nothing else.
TOMBSTONE_STATUS = "purged"


def stored_statuses(matching: ClaimFilter) -> list[str]:
    """The Status column's values a list of ``matching`` reads."""
    return [TOMBSTONE_STATUS] if matching.tombstones else [status.value for status in matching.statuses]


def claim_to_row(claim: Claim) -> Row:
    # ClaimToken and Resolutions are written back only as earlier releases left them: a token in clear
    # stays valid until its attempt ends, and a resolution list no longer grows (see AppliedResolution).
    resolutions = [[r.conflict_id, r.fingerprint, r.decision.value] for r in claim.legacy_resolutions]
    return {
        "ClaimId": claim.claim_id,
        "Scope": claim.scope,
        "Status": TOMBSTONE_STATUS if claim.purged_at is not None else claim.status.value,
        "Attempt": claim.attempt,
        "Fingerprint": claim.fingerprint,
        "GrantId": claim.grant_id,
        "ClaimToken": claim.legacy_token,
        "RunId": claim.run_id,
        **_flow_columns(claim.flow),
        "FirstReceivedAt": claim.first_received_at,
        "LastAttemptAt": claim.last_attempt_at,
        "UpdatedAt": claim.updated_at,
        "LeaseExpiresAt": claim.lease_expires_at,
        "TargetRecordId": claim.target_record_id,
        # ResultData and ErrorReason are the names 0.1.0 stored: the fields are `data` and `error` on the
        # wire and in code, but renaming a column would leave every row already written without them.
        "ResultData": _json_text(claim.data),
        "CompletedAt": claim.completed_at,
        "ErrorReason": claim.error,
        "Retryable": claim.retryable,
        "Reviewer": claim.reviewer,
        "GrantedTo": claim.granted_to,
        "Source": claim.source,
        "Reference": claim.reference,
        "Reconciling": _json_text(_earlier_attempt_row(claim.earlier_attempt)),
        "ReleasedInDoubt": claim.released_in_doubt,
        "Generation": claim.generation,
        "Resolutions": _json_text(resolutions) if resolutions else None,
        "KeyId": claim.key_id,
        # Both absent on rows written before issue 25: no fingerprint rules, each attempt its own key.
        "RulesVersion": claim.rules_version or None,
        "IdempotencyAttempt": claim.idempotency_attempt,
        "PurgedAt": claim.purged_at,
        # Absent on rows written before issue 33, and past the bound: the fingerprint alone is compared.
        "Members": _json_text(dict(claim.members) if claim.members is not None else None),
        "SchemaVersion": CLAIM_SCHEMA,
    }


def _earlier_attempt_row(earlier: EarlierAttempt | None) -> Row | None:
    # The store's own names, not the API's: renaming an API field must not break rows already written.
    if earlier is None:
        return None
    return {
        "Attempt": earlier.attempt,
        "RunId": earlier.run_id,
        **_flow_columns(earlier.flow),
        "Status": earlier.status.value,
        "StartedAt": utc_iso(earlier.started_at),
        "LeaseExpiresAt": utc_iso(earlier.lease_expires_at),
        "Error": earlier.error,
    }


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


def utc_iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


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


def fingerprint_to_row(record: FingerprintRecord) -> Row:
    return {
        "ClaimId": record.claim_id,
        "Fingerprint": record.fingerprint,
        "Resolved": record.resolved,
        "AliasGeneration": record.alias_generation,
        "ConflictId": record.conflict_id,
        "Decision": record.decision.value if record.decision else None,
        "Reviewer": record.reviewer,
        "Note": record.note,
        "ResolvedAt": record.resolved_at,
    }


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


# A history line's details under the store's own names (as columns are): the domain's names are snake_case,
# the API's camelCase. Rows written before (0.1.0 included) kept the API's spelling, read back here; a name
# not listed (a conflict's details, a test's) is kept as it is, and "Data" (the flow's own JSON) is never renamed.
DETAIL_NAMES = {
    "target_record_id": "TargetRecordId",
    "data": "Data",
    "error": "Error",
    "retryable": "Retryable",
    "conflict_id": "ConflictId",
    "note": "Note",
    "reason": "Reason",
    "reviewer": "Reviewer",
    "previous_status": "PreviousStatus",
    "previous": "Previous",
    "reconciles": "Reconciles",
    "status": "Status",
    "fingerprint": "Fingerprint",
    "attempt": "Attempt",
    "last_attempt": "LastAttempt",
}
NESTED_DETAILS = ("previous", "reconciles")
_DETAIL_OF_STORED = {stored: name for name, stored in DETAIL_NAMES.items()}
_DETAIL_OF_LEGACY = {
    "targetRecordId": "target_record_id",
    "conflictId": "conflict_id",
    "previousStatus": "previous_status",
    "lastAttempt": "last_attempt",
}


def _details_row(details: Row) -> Row:
    row = {}
    for name, value in details.items():
        kept = _details_row(value) if name in NESTED_DETAILS and isinstance(value, dict) else value
        row[DETAIL_NAMES.get(name, name)] = kept
    return row


def _details(row: Row) -> Row:
    details = {}
    for stored, value in row.items():
        name = _DETAIL_OF_STORED.get(stored) or _DETAIL_OF_LEGACY.get(stored) or stored
        details[name] = _details(value) if name in NESTED_DETAILS and isinstance(value, dict) else value
    return details


def event_to_row(event: HistoryEvent) -> Row:
    return {
        "ClaimId": event.claim_id,
        "EventId": event.event_id,
        "At": event.at,
        "Kind": event.kind.value,
        "Outcome": event.outcome,
        "Attempt": event.attempt,
        "RecognisedBy": event.recognised_by,
        "RunId": event.run_id,
        **_flow_columns(event.flow),
        "Fingerprint": event.fingerprint,
        "Source": event.source,
        "Details": _json_text(_details_row(event.details)) if event.details else None,
        # A line counting repeated answers: how many, and the last one's time (At holds the first one's).
        "Count": event.count,
        "LastAt": event.last_at,
    }


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


def conflict_to_row(conflict: Conflict) -> Row:
    return {
        "ConflictId": conflict.conflict_id,
        "ClaimId": conflict.claim_id,
        "Scope": conflict.scope,
        "Status": conflict.status.value,
        "Source": conflict.origin.value,
        "Fingerprint": conflict.fingerprint,
        "ClaimFingerprint": conflict.claim_fingerprint,
        "Reason": conflict.reason,
        "RunId": conflict.run_id,
        **_flow_columns(conflict.flow),
        "CreatedAt": conflict.created_at,
        "Details": _json_text(conflict.details),
        # "Source" already holds who noticed the conflict (its origin: claim or reported), since 0.1.0.
        "SourceSystem": conflict.source_system,
        # The members named (JSON Pointers, never values) and how many more changed (issue 33).
        "Changed": _json_text([*conflict.changed, conflict.more_changed] if conflict.changed else None),
        "Decision": conflict.decision.value if conflict.decision else None,
        "Reviewer": conflict.reviewer,
        "Note": conflict.note,
        "ResolvedAt": conflict.resolved_at,
    }


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


# -- the inventory: flows, scopes and overlaps -----------------------------------------------------------

# One column per claim status, e.g. InProgressClaims: the portal shows counts, not a JSON blob.
STATUS_COLUMNS = {status: status.value.title().replace("_", "") + "Claims" for status in ClaimStatus}


def _sources_text(claims_by_source: Mapping[str, int]) -> str | None:
    # Sources are open-ended, so one JSON column rather than a column each, sorted to read alike everywhere.
    return _json_text(dict(sorted(claims_by_source.items()))) if claims_by_source else None


def flow_id(flow: Flow) -> str:
    """The flow's key in every store: flow names may hold characters a table key forbids (/ \\ # ?)."""
    return hashlib.sha256(f"{flow.name}\n{flow.environment}".encode()).hexdigest()[:32]


def overlap_id(flows: tuple[Flow, Flow]) -> str:
    """The key of an unordered pair of flows."""
    return hashlib.sha256("".join(sorted(map(flow_id, flows))).encode()).hexdigest()[:32]


def flow_to_row(record: FlowRecord) -> Row:
    return {
        "FlowId": flow_id(record.flow),
        "FlowName": record.flow.name,
        "FlowEnvironment": record.flow.environment,
        "Owner": record.owner,
        "Enabled": record.enabled,
        "Notes": record.notes,
        "RegisteredAt": record.registered_at,
        "FirstSeenAt": record.first_seen_at,
        "LastSeenAt": record.last_seen_at,
        "Claims": record.claims,
        "Duplicates": record.duplicates,
        "ClaimsBySource": _sources_text(record.claims_by_source),
    }


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


def scope_to_row(record: ScopeRecord) -> Row:
    return {
        "Scope": record.scope,
        "Owner": record.owner,
        "LeaseSeconds": record.lease_seconds,
        "RetentionDays": record.retention_days,
        "Description": record.description,
        "KeyPattern": record.key_pattern,
        "FingerprintRules": _json_text([_rules_row(rules) for rules in record.fingerprint_rules] or None),
        "HorizonDays": record.horizon_days,
        "RegisteredAt": record.registered_at,
        "FirstSeenAt": record.first_seen_at,
        "LastSeenAt": record.last_seen_at,
        **{column: record.claims_by_status.get(status, 0) for status, column in STATUS_COLUMNS.items()},
        "ClaimsBySource": _sources_text(record.claims_by_source),
    }


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


def _rules_row(rules: FingerprintRules) -> Row:
    return {
        "Version": rules.version,
        "Include": list(rules.include),
        "Ignore": list(rules.ignore),
        "Preset": rules.preset,
        "PresetIgnore": list(rules.preset_ignore),
        "Matched": list(rules.matched),
    }


def _rules(row: Row) -> FingerprintRules:
    return FingerprintRules(
        version=int(row["Version"]),
        include=tuple(row.get("Include") or ()),
        ignore=tuple(row.get("Ignore") or ()),
        preset=row.get("Preset"),
        preset_ignore=tuple(row.get("PresetIgnore") or ()),
        matched=tuple(row.get("Matched") or ()),
    )


def overlap_to_row(record: Overlap) -> Row:
    first, second = record.flows
    return {
        "OverlapId": overlap_id(record.flows),
        "FlowName": first.name,
        "FlowEnvironment": first.environment,
        "OtherFlowName": second.name,
        "OtherFlowEnvironment": second.environment,
        "Count": record.count,
        "FirstSeenAt": record.first_seen_at,
        "LastSeenAt": record.last_seen_at,
        "ExampleClaimId": record.example_claim_id,
    }


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


def secret_to_row(record: KeySecretRecord) -> Row:
    return {
        "KeyId": record.key_id,
        "AddedAt": record.added_at,
        "Announced": record.in_use_from is None,
        "InUseFrom": record.in_use_from,
        "RetiredAt": record.retired_at,
    }


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


def restore_to_row(restore: Restore) -> Row:
    return {
        "RestoredFrom": restore.restored_from,
        "ExportId": restore.export_id,
        "ExportedAt": restore.exported_at,
        "StartedAt": restore.started_at,
        "ForgottenUntil": restore.forgotten_until,
        "RecordsDone": restore.records_done,
        "CompletedAt": restore.completed_at,
    }


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
