"""The quick spelling of a UTC time as the stores write it, against ``isoformat``'s: the same text for every time.

Lists page on these texts and compare them as strings (``oncegate.stores.paging``), so a time written by the quick
way must read exactly as one written before it (issue 36).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import example, given
from hypothesis import strategies as st

from oncegate.stores.paging import utc_text

OFFSETS = st.integers(min_value=-23 * 60, max_value=23 * 60).map(lambda minutes: timezone(timedelta(minutes=minutes)))


@given(st.datetimes(timezones=st.just(UTC)))
@example(datetime(1, 1, 1, tzinfo=UTC))
@example(datetime(999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
@example(datetime(2026, 12, 7, 1, 2, 3, tzinfo=UTC))
def test_a_utc_time_is_written_as_isoformat_writes_it(when: datetime) -> None:
    assert utc_text(when) == when.isoformat(timespec="microseconds")


@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 1, 1), timezones=OFFSETS))
def test_a_time_at_another_offset_is_written_in_utc(when: datetime) -> None:
    assert utc_text(when) == when.astimezone(UTC).isoformat(timespec="microseconds")
    assert utc_text(when) == utc_text(when.astimezone(UTC))
