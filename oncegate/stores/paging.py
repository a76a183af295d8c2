"""Lists' opaque cursors, the same in every adapter and in the service.

Conflicts list oldest first by ``(CreatedAt, ConflictId)``. A cursor is the place of a page's
last item: two strings, such as its time as fixed-width UTC text, which sorts in time order,
and its id. Lists read whole and sorted in memory page with :func:`page_of`; :func:`every_item`
reads a store's list page after page.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import TypeVar

from oncegate.domain.records import Page
from oncegate.errors import InvalidRequest

T = TypeVar("T")


def utc_text(value: datetime) -> str:
    """Fixed-width UTC ISO text: compares as strings in time order."""
    if value.tzinfo is UTC:
        # What isoformat writes for a time already in UTC (every time the service makes), at half its cost: a
        # claim writes three (issue 36). ``tests/property/test_utc_text.py`` holds the two ways alike.
        return "%04d-%02d-%02dT%02d:%02d:%02d.%06d+00:00" % (  # noqa: UP031
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def encode_cursor(created_at: str, conflict_id: str) -> str:
    """The cursor that resumes after the conflict at this place."""
    # UTF-8 rather than \u escapes: a place of long non-ASCII names stays within the cursor limit.
    text = json.dumps([created_at, conflict_id], ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode()


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The place a cursor resumes after; raises ``InvalidRequest`` for one not handed out here.

    The HTTP layer only passes on cursors whose seal verified; this still refuses anything else
    (arrays nested past the decoder's recursion limit, huge integers, other shapes) as a 400.
    """
    try:
        place = json.loads(base64.urlsafe_b64decode(cursor.encode("utf-8", "surrogatepass")))
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidRequest("cursor is not one this service handed out.", target="cursor") from exc
    if not (isinstance(place, list) and len(place) == 2 and all(isinstance(part, str) for part in place)):
        raise InvalidRequest("cursor is not one this service handed out.", target="cursor")
    return place[0], place[1]


def page_of(
    items: Iterable[T], place: Callable[[T], tuple[str, str]], *, top: int, cursor: str | None
) -> tuple[list[T], str | None]:
    """One page of ``items`` in the order of their place, and the cursor after its last item (None at the end)."""
    after = decode_cursor(cursor) if cursor else None
    rest = sorted((item for item in items if after is None or place(item) > after), key=place)
    more = len(rest) > top
    return rest[:top], encode_cursor(*place(rest[top - 1])) if more else None


def every_item(read: Callable[[str | None], Page[T]]) -> Iterator[T]:
    """Every item of a paged list: ``read(cursor)`` is called for each page, from None to the last."""
    cursor = None
    while True:
        page = read(cursor)
        yield from page.items
        cursor = page.cursor
        if cursor is None:
            return
