"""The quick canonical JSON and base32 against what they stand in for: the same bytes, or the same refusal.

A fingerprint stored last year must match the same payload sent today, so :func:`~oncegate.domain.keys.
canonical` may never write one byte the library would not (issue 36). The values are any JSON a trigger may
carry and more: every float (whole, tiny, huge, negative zero, infinities, NaN), integers past JSON's exact
range, every character (control characters, lone surrogates, characters past the BMP in values and member
names) and nesting.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from oncegate.domain import keys
from oncegate.domain.keys import _b32, canonical

ANY_CHARACTER = st.characters(codec=None, exclude_categories=())
TEXT = st.text(ANY_CHARACTER, max_size=12) | st.sampled_from(["", "a", "é", "\u2028", "\x7f", "\ud800", "😀", "\ue000"])
NUMBERS = (
    st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats()
    | st.sampled_from([0.0, -0.0, 10.0, 1e-7, 1e-6, 1e-4, 1e16, 1e21, 2.0**53, 2.0**53 + 2, 9007199254740991.0, 0.1])
)
LEAVES = st.none() | st.booleans() | NUMBERS | TEXT
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4))


def _library(value: Any) -> bytes | type[Exception]:
    try:
        return bytes(rfc8785.dumps(value))
    except Exception as exc:
        return type(exc)


def _quick(value: Any) -> bytes | type[Exception]:
    try:
        return canonical(value)
    except Exception as exc:
        return type(exc)


@settings(max_examples=1500)
@given(value=JSON)
@example({"order": "SO-1", "amount": 10.0, "lines": [{"sku": "A", "qty": 2, "price": 1.5}]})
@example({"b": 1, "a": {"\U0001f600": 1, "\ue000": 2}})
@example([1e21, -1e-7, 123456789.125, -0.0, 2**53, -(2**53)])
@example({"z\x00": '\x1f"\\\b\f\n\r\t', "\u00e9": None})
def test_the_quick_way_writes_what_the_library_writes(value: Any) -> None:
    assert _quick(value) == _library(value)


def test_the_common_payload_takes_the_quick_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """The speed-up is real only if a trigger's payload never reaches the library: one that did would fail here."""

    def refused(value: Any) -> bytes:
        raise AssertionError(f"the library was asked for {value!r}")

    monkeypatch.setattr(rfc8785, "dumps", refused)
    payload = {"order": "SO-1", "amount": 10.0, "total": 12.35, "lines": [{"qty": 2, "ok": True, "note": None}]}
    assert canonical(payload) == b'{"amount":10,"lines":[{"note":null,"ok":true,"qty":2}],"order":"SO-1","total":12.35}'


@pytest.mark.parametrize("value", [math.nan, math.inf, 2**53, "\ud800", {1: "a"}, (1, 2)])
def test_values_outside_the_quick_way_are_the_library_s(value: Any) -> None:
    assert _quick(value) == _library(value)


@given(digest=st.binary(max_size=40))
def test_base32_is_the_standard_library_s(digest: bytes) -> None:
    """Claim ids, keyed fingerprints and conflict ids are base32: the quick writing may not change one character."""
    assert _b32(digest) == base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def _leaf(value: Any) -> bytes | type[Exception]:
    try:
        return keys._canonical(value)
    except Exception as exc:
        return type(exc)


@settings(max_examples=1500)
@given(value=LEAVES | st.sampled_from([{}, [], 0, -0.0, 2**53 - 1, -(2**53 - 1), 2**53, 1.5, True, False]))
def test_a_member_digest_writes_its_leaf_as_the_library_does(value: Any) -> None:
    """A member digest is a MAC over its leaf's canonical bytes (issue 33): the quick numbers and empty
    containers of :mod:`oncegate.domain.keys` may not change one byte of it. A leaf the library refuses is refused
    (a lone surrogate as the encoder refuses it): the claim then keeps no member digests, as before."""
    written, library = _leaf(value), _library(value)
    if isinstance(library, bytes):
        assert written == library
    else:
        assert written in (library, UnicodeEncodeError)


def _written(write: Any, value: Any) -> str | tuple[type[Exception], str]:
    try:
        return str(write(value))
    except Exception as exc:
        return type(exc), str(exc)


@settings(max_examples=1000)
@given(value=JSON, sort_keys=st.booleans(), allow_nan=st.booleans())
@example(value={"b": [1.5, None, True, "é\u2028\x00"], "a": {}}, sort_keys=True, allow_nan=False)
@example(value=math.nan, sort_keys=False, allow_nan=False)
@example(value={"a": object()}, sort_keys=False, allow_nan=True)
def test_the_json_writer_writes_what_the_encoder_writes(value: Any, sort_keys: bool, allow_nan: bool) -> None:
    """The stored JSON text (a claim's Members and ResultData columns) and canonical JSON's quick way write through
    one encoder made once: the same text as ``json.JSONEncoder(...).encode``, or the same refusal (issue 36)."""
    library = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, allow_nan=allow_nan, separators=(",", ":"))
    assert _written(keys.json_writer(sort_keys=sort_keys, allow_nan=allow_nan), value) == _written(
        library.encode, value
    )
