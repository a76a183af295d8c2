"""Values longer than a Table Storage property holds, spread over several; rows no store can hold, refused.

Table Storage keeps at most 64 KiB of UTF-16 in a string property (32,768 code units: a character outside
the BMP, such as an emoji, takes two), and at most 1 MiB and 252 properties of its own in an entity. A
result within the API's limits can still be longer than one property once JSON-escaped (a control character
becomes 6 characters), so :func:`spread` cuts such a value into pieces before a write and :func:`gather`
joins them after a read::

    Details      the first 32,768 code units: filters, and the portal's column, still see the value's start
    Details__2   the next 32,768
    Details__3   the rest

Column names are PascalCase and never hold ``__``, so a piece cannot be mistaken for a column. A spread
entity must be written whole (Replace, never Merge): a merge would keep the last pieces of a longer value.

A row still over the limits is refused here as ``TooLarge`` (413), before anything is sent: Table Storage
would answer 400, which reached the caller as a 500. The SQLite store refuses the same rows, so a record one
store holds, any other holds too.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

from oncegate.errors import TooLarge

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
        kind = type(value)
        if kind is int or kind is bool:  # within a property's fixed bound: settled before the type tests
            continue
        if kind is str or isinstance(value, str):
            if len(value) > PROPERTY_UNITS // 2:
                return None
            total += 4 * len(value)
        elif isinstance(value, datetime):
            times.append(name)
        elif isinstance(value, bytes):
            total += 4 + len(value)
    return times if total <= ENTITY_BYTES else None


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


def _piece_place(name: str) -> tuple[str, int] | None:
    """The column and number of a piece's property, e.g. ``("Details", 2)``; None for a column's own name."""
    column, separator, number = name.rpartition(SEPARATOR)
    if not separator or not (number.isascii() and number.isdigit()):
        return None
    return column, int(number)


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
