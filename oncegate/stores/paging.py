"""The conflict list's order and its opaque cursor, the same in every adapter.

Conflicts list oldest first by ``(CreatedAt, ConflictId)``. A cursor is the place of a page's
last item: its time as fixed-width UTC text, which sorts in time order, and its id.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from oncegate.errors import InvalidRequest


def utc_text(value: datetime) -> str:
    """Fixed-width UTC ISO text: compares as strings in time order."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def encode_cursor(created_at: str, conflict_id: str) -> str:
    """The cursor that resumes after the conflict at this place."""
    return base64.urlsafe_b64encode(json.dumps([created_at, conflict_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The place a cursor resumes after; raises ``InvalidRequest`` for one not handed out here."""
    try:
        created_at, conflict_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return str(created_at), str(conflict_id)
    except (ValueError, TypeError) as exc:
        raise InvalidRequest("cursor is not one this service handed out.", target="cursor") from exc
