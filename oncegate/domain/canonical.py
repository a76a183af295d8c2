"""RFC 8785 canonical JSON, the bytes a fingerprint and a member digest are made of.

The ``rfc8785`` library writes every value in Python, a character and a digit at a time; a claim's payload
is canonicalised on every Check and claim (issue 36). :func:`canonical` writes the common payloads
(objects of strings, safe integers, plain decimals, booleans and null) with the standard library's C
encoder, whose output for them is RFC 8785's byte for byte, and leaves anything else to the library:
so the bytes, and the errors, are the library's for every value (``tests/property/test_canonical.py``).

Where the two writings agree:

- strings: both escape ``"``, ``\\`` and the control characters alike (``\\n`` and the other short forms,
  ``\\u001f`` in lowercase hex for the rest) and write every other character as it is in UTF-8; a lone
  surrogate is the library's to refuse;
- object members: RFC 8785 sorts them by UTF-16 code units, which is code point order (Python's) while no
  name holds a character from U+D800 up;
- numbers: an integer within ±(2^53 - 1) as its digits; a float that is a whole number below 2^53 as the
  integer it is (``10.0`` is ``10``); any other float as Python's shortest round-trip digits, which are
  ECMAScript's while Python writes no exponent (from 1e-4 to 1e16). Other floats are the library's.
"""

from __future__ import annotations

import json
import math
from typing import Any

import rfc8785

# The integers JSON's doubles hold exactly (RFC 8785 refuses the others).
SAFE_INTEGER = 2**53 - 1
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")).encode


def canonical(value: Any) -> bytes:
    """``value`` as RFC 8785 writes it: the quick way where it writes the same bytes, the library's otherwise."""
    plain = _plain(value)
    if plain is not _OTHER:
        try:
            return _encode(plain).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: the library says what is wrong with it
    return bytes(rfc8785.dumps(value))


class _Other:
    """A value the quick way does not write as RFC 8785 does."""


_OTHER: Any = _Other()


def _plain(value: Any) -> Any:
    """``value`` with its whole floats made integers, or ``_OTHER`` when the quick way would write it otherwise."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is int:
        return value if -SAFE_INTEGER <= value <= SAFE_INTEGER else _OTHER
    if kind is float:
        return _number(value)
    if kind is dict:
        plain = {}
        for name, item in value.items():
            if type(name) is not str or (not name.isascii() and max(name) >= "\ud800"):
                return _OTHER
            written = _plain(item)
            if written is _OTHER:
                return _OTHER
            plain[name] = written
        return plain
    if kind is list:
        items = [_plain(item) for item in value]
        return _OTHER if any(item is _OTHER for item in items) else items
    return _OTHER


def _number(value: float) -> Any:
    if value.is_integer():
        return int(value) if -SAFE_INTEGER <= value <= SAFE_INTEGER else _OTHER
    if not math.isfinite(value) or "e" in repr(value):
        return _OTHER
    return value
