"""Records as the rows both stores write, in today's format, held to the limits of a row.

The same PascalCase names are SQLite columns and Table Storage properties, so a claim reads
the same in ``sqlite3`` and in the Azure portal's storage browser. Values are plain scalars
(str, int, bool, datetime); JSON values travel as text. Adapters add only their own keys and
their own spelling of datetimes.

A store writes one format, today's, made here; :mod:`oncegate.stores.row_reading` reads back every format a
release ever wrote (0.1.0's column names, schema 1's claims, the API's spelling of a history line's details) and
joins a long value's pieces. A column renamed on one side and not on the other fails the round trip of every
stored record (``tests/stores/test_row_round_trip.py``) and the store contract suite.

Table Storage keeps at most 64 KiB of UTF-16 in a string property (32,768 code units: a character outside
the BMP, such as an emoji, takes two), and at most 1 MiB and 252 properties of its own in an entity. A
result within the API's limits can still be longer than one property once JSON-escaped (a control character
becomes 6 characters), so :func:`spread` cuts such a value into pieces before a write (and
:func:`oncegate.stores.row_reading.gather` joins them after a read)::

    Details      the first 32,768 code units: filters, and the portal's column, still see the value's start
    Details__2   the next 32,768
    Details__3   the rest

Column names are PascalCase and never hold ``__``, so a piece cannot be mistaken for a column. A spread
entity must be written whole (Replace, never Merge): a merge would keep the last pieces of a longer value.

A row still over the limits is refused here as ``TooLarge`` (413), before anything is sent: Table Storage
would answer 400, which reached the caller as a 500. The SQLite store refuses the same rows
(:func:`checked_times`), so a record one store holds, any other holds too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from uuid import UUID

from oncegate.domain.keys import json_writer
from oncegate.domain.records import (
    Claim,
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
from oncegate.domain.statuses import ClaimStatus
from oncegate.errors import TooLarge

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

# Table Storage's limits on a row (above), which both stores hold every row to.
PROPERTY_UNITS = 32 * 1024
ENTITY_BYTES = 1024 * 1024
USER_PROPERTIES = 252
SYSTEM_PROPERTIES = frozenset({"PartitionKey", "RowKey", "Timestamp"})
SEPARATOR = "__"
# Encoding with "surrogatepass" measures and cuts a lone surrogate (JSON may carry one) instead of failing.
UTF16 = "utf-16-le"
SURROGATES = "surrogatepass"
HIGH_SURROGATES = range(0xD800, 0xDC00)
# Table Storage's size of a value beyond a string's, as it documents its entity size.
FIXED_BYTES: tuple[tuple[type, int], ...] = ((bool, 1), (int, 4), (float, 8), (datetime, 8), (UUID, 16))


# Made once: ``json.dumps`` with options builds an encoder a call, a third of a claim row's JSON time (issue 36).
_JSON_TEXT = json_writer()


def _json_text(value: Any) -> str | None:
    return None if value is None else _JSON_TEXT(value)


def _flow_columns(flow: Flow | None) -> Row:
    return {"FlowName": flow.name if flow else None, "FlowEnvironment": flow.environment if flow else None}


# The Status column of a tombstone (Claim.purged_at set; always of a succeeded claim): a list of claims by status
# never meets one, and a list of tombstones (ClaimFilter.tombstones) meets nothing else.
TOMBSTONE_STATUS = "purged"


def claim_to_row(claim: Claim) -> Row:
    # ClaimToken and Resolutions are written back only as earlier releases left them: a token in clear
    # stays valid until its attempt ends, and a resolution list no longer grows (see AppliedResolution).
    resolutions = [[r.conflict_id, r.fingerprint, r.decision.value] for r in claim.legacy_resolutions]
    flow, earlier = claim.flow, claim.earlier_attempt
    # The flow's columns and the empty JSON values written in place, not by calls that made a dict or returned None
    # for them: a claim row is made on every Check and claim (issue 36).
    return {
        "ClaimId": claim.claim_id,
        "Scope": claim.scope,
        "Status": TOMBSTONE_STATUS if claim.purged_at is not None else claim.status.value,
        "Attempt": claim.attempt,
        "Fingerprint": claim.fingerprint,
        "GrantId": claim.grant_id,
        "ClaimToken": claim.legacy_token,
        "RunId": claim.run_id,
        "FlowName": flow.name if flow else None,
        "FlowEnvironment": flow.environment if flow else None,
        "FirstReceivedAt": claim.first_received_at,
        "LastAttemptAt": claim.last_attempt_at,
        "UpdatedAt": claim.updated_at,
        "LeaseExpiresAt": claim.lease_expires_at,
        "TargetRecordId": claim.target_record_id,
        # ResultData and ErrorReason are the names 0.1.0 stored: the fields are `data` and `error` on the
        # wire and in code, but renaming a column would leave every row already written without them.
        "ResultData": None if claim.data is None else _JSON_TEXT(claim.data),
        "CompletedAt": claim.completed_at,
        "ErrorReason": claim.error,
        "Retryable": claim.retryable,
        "Reviewer": claim.reviewer,
        "GrantedTo": claim.granted_to,
        "Source": claim.source,
        "Reference": claim.reference,
        "Reconciling": None if earlier is None else _JSON_TEXT(_earlier_attempt_row(earlier)),
        "ReleasedInDoubt": claim.released_in_doubt,
        "Generation": claim.generation,
        "Resolutions": _json_text(resolutions) if resolutions else None,
        "KeyId": claim.key_id,
        # Both absent on rows written before issue 25: no fingerprint rules, each attempt its own key.
        "RulesVersion": claim.rules_version or None,
        "IdempotencyAttempt": claim.idempotency_attempt,
        "PurgedAt": claim.purged_at,
        # Absent on rows written before issue 33, and past the bound: the fingerprint alone is compared.
        "Members": None if claim.members is None else _JSON_TEXT(dict(claim.members)),
        "SchemaVersion": CLAIM_SCHEMA,
    }


def _earlier_attempt_row(earlier: EarlierAttempt) -> Row:
    # The store's own names, not the API's: renaming an API field must not break rows already written.
    return {
        "Attempt": earlier.attempt,
        "RunId": earlier.run_id,
        **_flow_columns(earlier.flow),
        "Status": earlier.status.value,
        "StartedAt": utc_iso(earlier.started_at),
        "LeaseExpiresAt": utc_iso(earlier.lease_expires_at),
        "Error": earlier.error,
    }


def utc_iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


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


# A history line's details under the store's own names (as columns are): the domain's names are snake_case,
# the API's camelCase. Rows written before (0.1.0 included) kept the API's spelling (row_reading reads it); a name
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


def _details_row(details: Row) -> Row:
    row = {}
    for name, value in details.items():
        kept = _details_row(value) if name in NESTED_DETAILS and isinstance(value, dict) else value
        row[DETAIL_NAMES.get(name, name)] = kept
    return row


def event_to_row(event: HistoryEvent) -> Row:
    flow = event.flow
    return {
        "ClaimId": event.claim_id,
        "EventId": event.event_id,
        "At": event.at,
        "Kind": event.kind.value,
        "Outcome": event.outcome,
        "Attempt": event.attempt,
        "RecognisedBy": event.recognised_by,
        "RunId": event.run_id,
        # Written in place, as a claim row's are (issue 36).
        "FlowName": flow.name if flow else None,
        "FlowEnvironment": flow.environment if flow else None,
        "Fingerprint": event.fingerprint,
        "Source": event.source,
        "Details": _JSON_TEXT(_details_row(event.details)) if event.details else None,
        # A line counting repeated answers: how many, and the last one's time (At holds the first one's).
        "Count": event.count,
        "LastAt": event.last_at,
    }


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


def _rules_row(rules: FingerprintRules) -> Row:
    return {
        "Version": rules.version,
        "Include": list(rules.include),
        "Ignore": list(rules.ignore),
        "Preset": rules.preset,
        "PresetIgnore": list(rules.preset_ignore),
        "Matched": list(rules.matched),
    }


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


def secret_to_row(record: KeySecretRecord) -> Row:
    return {
        "KeyId": record.key_id,
        "AddedAt": record.added_at,
        "Announced": record.in_use_from is None,
        "InUseFrom": record.in_use_from,
        "RetiredAt": record.retired_at,
    }


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


# -- held to the limits of a row -------------------------------------------------------------------------------


def spread(entity: Mapping[str, Any]) -> dict[str, Any]:
    """``entity`` with every string over a property's limit in numbered pieces; raises ``TooLarge`` if still too big."""
    if _fits_as_it_is(entity):
        return dict(entity)
    spread_out = dict(piece for name, value in entity.items() for piece in _pieces(name, value))
    _refuse_oversized(spread_out, entity)
    return spread_out


def _fits_as_it_is(entity: Mapping[str, Any]) -> bool:
    """Whether ``entity`` needs no piece and is surely within the limits, judged from lengths alone."""
    return _times_if_it_fits(entity) is not None


def _times_if_it_fits(entity: Mapping[str, Any]) -> list[str] | None:
    """The names of ``entity``'s times if it needs no piece and is surely within the limits, judged from lengths
    alone; None when only the exact way can tell.

    Nearly every row is a few hundred bytes: this settles them in one pass over the values, without
    encoding any (a character is at most two UTF-16 code units, so a string of at most half a property's
    units fits; 4 bytes a character, and 24 a property besides its name, bound its size). The rest take
    the exact way. The times are found in the same pass, for the SQLite store, which writes them as text.
    """
    total = _names_bound(tuple(entity))
    if total is None:
        return None
    times: list[str] = []
    for name, value in entity.items():
        if value is None:  # most of a row's columns: settled before any type test
            continue
        # The exact types a row holds first, each by one comparison; a subclass of one by the tests after them.
        kind = type(value)
        if kind is str:
            length = len(value)
            if length > _SURELY_FITS:
                return None
            total += 4 * length
        elif kind is int or kind is bool:  # within a property's fixed bound
            continue
        elif kind is datetime or isinstance(value, datetime):
            times.append(name)
        elif isinstance(value, str):
            length = len(value)
            if length > _SURELY_FITS:
                return None
            total += 4 * length
        elif isinstance(value, bytes):
            total += 4 + len(value)
    return times if total <= ENTITY_BYTES else None


# The most characters a string may have to fit a property whatever they are: each is at most two UTF-16 code units.
_SURELY_FITS = PROPERTY_UNITS // 2


@lru_cache(maxsize=64)
def _names_bound(names: tuple[str, ...]) -> int | None:
    """The bound on an entity's size that its column names give (besides its values), or None when the names alone
    send it the exact way. Judged once for each set of names: rows of a kind all have the same (issue 36)."""
    if len(names) > USER_PROPERTIES:
        return None
    # Joined with a character no name holds, so that two names never make a separator between them.
    joined = "\0".join(names)
    if SEPARATOR in joined:
        return None
    return 4 + 24 * len(names) + 4 * len(joined)


def check(entity: Mapping[str, Any]) -> None:
    """Raise ``TooLarge`` if Table Storage could not hold ``entity``, even spread out."""
    if not _fits_as_it_is(entity):  # settled from lengths alone, nothing copied, for nearly every row
        spread(entity)


def checked_times(entity: Mapping[str, Any]) -> list[str]:
    """:func:`check`, which also gives the names of ``entity``'s times (``datetime`` values), found in the same
    pass over its values for nearly every row: the SQLite store writes each as text (issue 36)."""
    times = _times_if_it_fits(entity)
    if times is not None:
        return times
    spread(entity)
    return [name for name, value in entity.items() if isinstance(value, datetime)]


def entity_bytes(entity: Mapping[str, Any]) -> int:
    """The size Table Storage counts against its 1 MiB: 4 bytes, the keys, and per property 8, its name and value."""
    keys = str(entity.get("PartitionKey", "")) + str(entity.get("RowKey", ""))
    properties = (8 + 2 * _units(name) + _value_bytes(value) for name, value in _own(entity))
    return 4 + 2 * _units(keys) + sum(properties)


def _pieces(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    if SEPARATOR in name:
        raise ValueError(f"the column {name} holds {SEPARATOR}, which marks the pieces of a long value")
    # Fast path: no character takes more than two code units.
    if not isinstance(value, str) or len(value) <= PROPERTY_UNITS // 2:
        yield name, value
        return
    for number, piece in enumerate(_cut(value), start=1):
        yield (name if number == 1 else f"{name}{SEPARATOR}{number}"), piece


def _cut(text: str) -> list[str]:
    """``text`` in pieces of at most PROPERTY_UNITS code units, never between the two halves of a surrogate pair."""
    data = text.encode(UTF16, SURROGATES)
    pieces: list[str] = []
    start = 0
    while start < len(data):
        end = min(start + 2 * PROPERTY_UNITS, len(data))
        if end < len(data) and int.from_bytes(data[end - 2 : end], "little") in HIGH_SURROGATES:
            end -= 2
        pieces.append(data[start:end].decode(UTF16, SURROGATES))
        start = end
    return pieces


def _refuse_oversized(spread_out: Mapping[str, Any], entity: Mapping[str, Any]) -> None:
    count = sum(1 for _ in _own(spread_out))
    if count > USER_PROPERTIES:
        raise TooLarge(
            f"This record would need {count} properties as a stored row, over the {USER_PROPERTIES} a row may hold.",
            target="body",
        )
    size = entity_bytes(spread_out)
    if size > ENTITY_BYTES:
        largest = max(_own(entity), key=lambda item: _value_bytes(item[1]))[0]
        raise TooLarge(
            f"This record would take {size:,} bytes as a stored row, over the 1 MiB ({ENTITY_BYTES:,} bytes) "
            f"a row may hold; its largest value is {largest}.",
            target="body",
        )


def _own(entity: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    return ((name, value) for name, value in entity.items() if name not in SYSTEM_PROPERTIES and value is not None)


def _units(text: str) -> int:
    return len(text.encode(UTF16, SURROGATES)) // 2


def _value_bytes(value: Any) -> int:
    if isinstance(value, str):
        return 4 + 2 * _units(value)
    if isinstance(value, bytes):
        return 4 + len(value)
    # bool before int: a bool is an int to Python, a 1-byte Edm.Boolean to Table Storage.
    for kind, size in FIXED_BYTES:
        if isinstance(value, kind):
            return size
    raise TypeError(f"no Table Storage size is known for a {type(value).__name__} value")
