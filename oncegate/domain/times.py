"""How a time reads where a person reads it: in a sentence (a reason, a refusal, a log line) and in the CLI.

One form everywhere (issue 33): ISO 8601 in UTC to the second with ``Z``, ``2026-12-06T10:05:41Z``. It has
no space, so a terminal folding a sentence never splits it, and it reads as the times the API answers do
(those keep their fraction of a second: a flow compares them).
"""

from __future__ import annotations

from datetime import UTC, datetime


def said(moment: datetime, timespec: str = "seconds") -> str:
    """``moment`` as a person reads it: ``2026-12-06T10:05:41Z`` (``timespec`` "milliseconds" where events a
    moment apart are told apart, as in the drill's history)."""
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
