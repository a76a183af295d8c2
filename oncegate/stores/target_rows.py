"""A declared target as both stores keep it (issue 34): one row per target, keyed by its name.

The row is a format of its own, versioned by ``RowsVersion``, never the wire's: a field renamed at the API
leaves the rows as they are. Lists (CIDRs, statuses, kept headers and pointers) are JSON text, which both
stores hold as a string. No column holds a secret: ``AuthValue`` is an audience or ``HEADER=SECRET-NAME``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from oncegate.domain.targets import Target, TargetAuth

Row = dict[str, Any]
ROWS_VERSION = 1


def target_to_row(target: Target) -> Row:
    return {
        "Name": target.name,
        "RowsVersion": ROWS_VERSION,
        "BaseUrl": target.base_url,
        "TimeoutSeconds": target.timeout_seconds,
        "LookupPath": target.lookup_path,
        "Auth": target.auth.value,
        "AuthValue": target.auth_value,
        "AllowCidrs": _text(target.allow_cidrs),
        "HonoursIdempotencyKey": target.honours_idempotency_key,
        "SuccessStatuses": _text(target.success_statuses),
        "RetryableStatuses": _text(target.retryable_statuses),
        "RecordPointer": target.record_pointer,
        "KeptHeaders": _text(target.kept_headers),
        "KeptPointers": _text(target.kept_pointers),
        "DeclaredBy": target.declared_by,
        "DeclaredAt": target.declared_at,
    }


def target_from_row(row: Row, version: str) -> Target:
    declared_at = row.get("DeclaredAt")
    if isinstance(declared_at, str):
        declared_at = datetime.fromisoformat(declared_at)
    return Target(
        name=row["Name"],
        base_url=row["BaseUrl"],
        timeout_seconds=int(row["TimeoutSeconds"]),
        lookup_path=row.get("LookupPath"),
        auth=TargetAuth(row.get("Auth") or TargetAuth.NONE),
        auth_value=row.get("AuthValue"),
        allow_cidrs=tuple(_listed(row.get("AllowCidrs"))),
        honours_idempotency_key=bool(row.get("HonoursIdempotencyKey")),
        success_statuses=tuple(int(status) for status in _listed(row.get("SuccessStatuses"))),
        retryable_statuses=tuple(int(status) for status in _listed(row.get("RetryableStatuses"))),
        record_pointer=row.get("RecordPointer"),
        kept_headers=tuple(_listed(row.get("KeptHeaders"))),
        kept_pointers=tuple(_listed(row.get("KeptPointers"))),
        declared_by=row.get("DeclaredBy"),
        declared_at=None if declared_at is None else declared_at.astimezone(UTC),
        version=version,
    )


def _text(values: tuple[Any, ...]) -> str | None:
    return json.dumps(list(values), separators=(",", ":")) if values else None


def _listed(text: str | None) -> list[Any]:
    return [] if not text else list(json.loads(text))
