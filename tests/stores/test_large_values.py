"""Spreading long values over several Table Storage properties, and refusing rows no store can hold."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from oncegate.entrypoints import error_map
from oncegate.errors import TooLarge
from oncegate.stores.row_reading import gather
from oncegate.stores.row_writing import ENTITY_BYTES, PROPERTY_UNITS, USER_PROPERTIES, entity_bytes, spread

EMOJI = "\U0001f600"  # outside the BMP: one Python character, two UTF-16 code units
KEYS = {"PartitionKey": "p", "RowKey": "r"}


def units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_a_row_without_long_values_is_left_as_it_is() -> None:
    entity = {**KEYS, "Status": "failed", "Attempt": 2, "Retryable": False, "Details": "x" * PROPERTY_UNITS}

    assert spread(entity) == entity
    assert gather(entity) == entity


@pytest.mark.parametrize(
    ("text", "lengths"),
    [
        ("x" * (PROPERTY_UNITS + 1), [PROPERTY_UNITS, 1]),
        ("x" * (2 * PROPERTY_UNITS + 5), [PROPERTY_UNITS, PROPERTY_UNITS, 5]),
        (EMOJI * (PROPERTY_UNITS // 2), [PROPERTY_UNITS]),
        (EMOJI * (PROPERTY_UNITS // 2 + 1), [PROPERTY_UNITS, 2]),
        # The pair would straddle the cut: it moves whole to the next piece, which leaves one unit short.
        ("x" * (PROPERTY_UNITS - 1) + EMOJI, [PROPERTY_UNITS - 1, 2]),
    ],
    ids=["one over", "two pieces and some", "emoji exactly", "emoji one over", "a pair on the cut"],
)
def test_a_long_value_is_cut_in_utf16_code_units_and_gathered_back(text: str, lengths: list[int]) -> None:
    entity = {**KEYS, "Details": text, "Kind": "result"}

    stored = spread(entity)

    names = ["Details", *(f"Details__{number}" for number in range(2, len(lengths) + 1))]
    assert [units(stored[name]) for name in names] == lengths
    assert set(stored) == {*KEYS, "Kind", *names}
    assert gather(stored) == entity


def test_pieces_join_in_number_order_past_nine() -> None:
    text = "".join(chr(ord("a") + index) * PROPERTY_UNITS for index in range(11))

    stored = spread({**KEYS, "Details": text})

    assert "Details__11" in stored
    assert gather(stored)["Details"] == text


def test_a_column_name_holding_the_piece_separator_is_refused() -> None:
    with pytest.raises(ValueError, match="__"):
        spread({**KEYS, "Result__2": "x"})


def test_the_entity_size_counts_keys_names_and_values_as_table_storage_does() -> None:
    entity = {**KEYS, "S": "ab", "E": EMOJI, "I": 7, "B": True, "F": 1.5, "D": datetime(2024, 5, 1, tzinfo=UTC)}

    # 4 for the row, 2 a key character; per property 8, 2 a name character, and its value.
    assert entity_bytes(entity) == 4 + 2 * 2 + (10 + 4 + 4) + (10 + 4 + 4) + (10 + 4) + (10 + 1) + (10 + 8) + (10 + 8)


def filled(size: int) -> dict[str, Any]:
    """A row of exactly ``size`` bytes, in properties short enough to stay whole."""
    entity: dict[str, Any] = dict(KEYS)
    rest = size - entity_bytes(entity)
    for number in range(100, 1000):
        value = min(PROPERTY_UNITS // 2, (rest - 20) // 2)  # 20: 8, a 4-letter name and a string's length
        entity[f"P{number}"] = "x" * value
        rest -= 20 + 2 * value
        if rest == 0:
            return entity
    raise AssertionError("no row of that size")


def test_a_row_of_exactly_one_mib_is_kept_and_a_byte_more_is_refused() -> None:
    largest = filled(ENTITY_BYTES)
    over = filled(ENTITY_BYTES + 2)

    assert entity_bytes(largest) == ENTITY_BYTES
    assert spread(largest) == largest
    with pytest.raises(TooLarge, match="1 MiB") as raised:
        spread(over)
    assert error_map.status(raised.value) == 413


def test_a_row_over_one_mib_only_once_spread_is_refused() -> None:
    # The value fits by itself; the names of its pieces push the row over.
    text = "x" * ((ENTITY_BYTES - entity_bytes({**KEYS, "Details": ""})) // 2)
    entity = {**KEYS, "Details": text}

    assert entity_bytes(entity) == ENTITY_BYTES
    with pytest.raises(TooLarge, match="1 MiB"):
        spread(entity)


def test_252_properties_are_kept_and_253_refused() -> None:
    largest = {**KEYS, **{f"P{number}": number for number in range(USER_PROPERTIES)}}
    over = {**largest, "Extra": 1}

    assert spread(largest) == largest
    with pytest.raises(TooLarge, match="252"):
        spread(over)


def test_pieces_count_as_properties() -> None:
    entity = {**KEYS, **{f"P{number}": number for number in range(USER_PROPERTIES - 1)}}
    entity["Details"] = "x" * (PROPERTY_UNITS + 1)

    with pytest.raises(TooLarge, match="253"):
        spread(entity)
