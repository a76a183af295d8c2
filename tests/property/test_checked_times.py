"""The size check that also finds a row's times, against the check and a separate pass: the same verdict, the same
names, for rows the quick way settles and rows only the exact way can (issue 36)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oncegate.errors import TooLarge
from oncegate.stores import row_writing
from oncegate.stores.row_writing import PROPERTY_UNITS

NAMES = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij_", min_size=1, max_size=12)
VALUES: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.datetimes(timezones=st.just(UTC)),
    st.text(max_size=40),
    st.binary(max_size=40),
    # Past half a property's units: only the exact way tells whether they fit, and where.
    st.integers(min_value=PROPERTY_UNITS // 2 - 2, max_value=PROPERTY_UNITS + 2).map(lambda n: "é" * n),
    st.integers(min_value=200_000, max_value=400_000).map(lambda n: "x" * n),
)


def _check_then_times(entity: dict[str, Any]) -> list[str]:
    row_writing.check(entity)
    return [name for name, value in entity.items() if isinstance(value, datetime)]


def _verdict(way: Any, entity: dict[str, Any]) -> Any:
    try:
        return way(entity)
    except TooLarge as refused:
        return ("refused", str(refused))
    except ValueError as wrong:  # a name holding the pieces' separator, which no column has
        return ("wrong", str(wrong))


@given(st.dictionaries(NAMES, VALUES, max_size=40))
def test_the_times_and_the_verdict_are_the_check_s_and_a_separate_pass_s(entity: dict[str, Any]) -> None:
    assert _verdict(row_writing.checked_times, dict(entity)) == _verdict(_check_then_times, dict(entity))


@pytest.mark.parametrize("count", [252, 253])
def test_a_row_of_too_many_properties_is_refused_the_same_way(count: int) -> None:
    entity: dict[str, Any] = {f"Column{n}": datetime(2026, 12, 7, tzinfo=UTC) for n in range(count)}
    assert _verdict(row_writing.checked_times, dict(entity)) == _verdict(_check_then_times, dict(entity))
