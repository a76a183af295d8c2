"""A payload as a claim keeps it: as keyed digests of its RFC 8785 canonical JSON, whole (the fingerprint) and
member by member, what a later version of the fingerprint rules needs of a claim (issue 33).

A claim keeps one fingerprint, made under the rules of its scope when it was made; rules set later could
not be applied to it, since the payload itself is never kept. So a claim also keeps a digest of each
member of its payload: each leaf (a scalar, or an empty object or array), named by its JSON Pointer::

    {"Title": "Lunch", "Lines": [{"Qty": 2}], "Modified": "2026-12-06T10:00:00Z"}
    /Title      -> o:<MAC of "Lunch">
    /Lines/0/Qty -> oao:<MAC of 2>
    /Modified   -> o:<MAC of "2026-...">

The digest is a MAC keyed from the key secret, as the fingerprint's HMAC is (keyed BLAKE2b, RFC 7693: one
pass, a third of an HMAC's time for a trigger body's fifty members), over the pointer, the shape and the
RFC 8785 canonical value: the row reveals which members there were, never a value. The shape (``o`` an object's
member, ``a`` an array's item, one letter per segment) tells ``{"0": 1}`` from ``[1]`` and lets a ``*``
segment match array items only, as :mod:`oncegate.domain.fingerprint_rules` reads it.

Two payloads are the same business data under some rules when every member the rules keep has the same
digest in both (:func:`changed` names those that differ). Members are compared where they are: an
array item ignored does not move the items after it, as it does in the fingerprint of the rules applied.

The digests are bounded (:data:`MAX_MEMBERS`, :data:`MAX_TEXT`) so that a payload accepted before never
makes a claim row too large to store: past the bound a claim keeps only its fingerprint, as before. The
pointers are kept in clear, so a payload whose member names seem to carry personal data
(:func:`named_personally`) keeps only its fingerprint too: never refused for it, as it was accepted before.

RFC 8785 canonical JSON (:func:`canonical`) is the bytes a fingerprint and a member digest are made of. The
``rfc8785`` library writes every value in Python, a character and a digit at a time; a claim's payload is
canonicalised on every Check and claim (issue 36). :func:`canonical` writes the common payloads
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

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from json.encoder import encode_basestring
from typing import Any

import rfc8785

from oncegate.domain.fingerprint_rules import WILDCARD, segments
from oncegate.domain.records import FingerprintRules
from oncegate.domain.sensitive import sensitive_findings

# At most this many members, and this many characters of them as stored (compact JSON): one Table Storage
# property (32,768 UTF-16 code units) holds them whole, and a claim row stays far from the entity's 1 MiB.
MAX_MEMBERS = 500
MAX_TEXT = 16_000
# Of a conflict's changed members, this many are named; the rest are counted.
MAX_NAMED = 20
# 80 bits of a MAC: equality of one member's value, not a secret's strength.
DIGEST_BYTES = 10

Members = Mapping[str, str]


# -- RFC 8785 canonical JSON ----------------------------------------------------------------------------------

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


# -- members --------------------------------------------------------------------------------------------------


def escaped(token: str) -> str:
    """A reference token as a JSON Pointer writes it (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def leaves(payload: Any) -> Iterator[tuple[str, str, Any]]:
    """Each leaf of ``payload`` with its pointer and shape: a scalar, or an empty object or array.

    The payload itself is always one, ``""``: its value when it is a scalar, else an empty object or array for its
    kind, which the rules keep as they keep the payload's kind (``{"a": 1}`` under rules that leave ``/a`` out is
    still an object, never an array).
    """
    if isinstance(payload, dict | list) and payload:
        yield "", "", type(payload)()
    stack: list[tuple[str, str, Any]] = [("", "", payload)]
    while stack:
        pointer, shape, value = stack.pop()
        if isinstance(value, dict) and value:
            stack.extend((f"{pointer}/{escaped(key)}", shape + "o", item) for key, item in value.items())
        elif isinstance(value, list) and value:
            stack.extend((f"{pointer}/{index}", shape + "a", item) for index, item in enumerate(value))
        else:
            yield pointer, shape, value


def member_digests(key: bytes, payload: Any) -> dict[str, str] | None:
    """The keyed digest of each member of ``payload``; None past the bound (the claim keeps its fingerprint only)."""
    found: dict[str, str] = {}
    size = 2
    begun = _begun(key)
    for pointer, shape, value in leaves(payload):
        try:
            canonical = _canonical(value)
        except (rfc8785.CanonicalizationError, TypeError, ValueError, UnicodeEncodeError):
            return None  # the fingerprint says what is wrong with it, where the rules keep it
        mac = begun.copy()
        mac.update(f"{pointer}\n{shape}\n".encode() + canonical)
        digest = found[pointer] = f"{shape}:{mac.hexdigest()}"
        size += _stored_length(pointer) + len(digest) + 4
        if size > MAX_TEXT or len(found) > MAX_MEMBERS:
            return None
    return found


@functools.lru_cache(maxsize=16)
def _begun(key: bytes) -> hashlib.blake2b:
    """The keyed BLAKE2b of member digests with its key block hashed once (a few key secrets a process): a copy of
    it, updated, is the digest ``hashlib.blake2b(message, key=key)`` makes, without hashing the key again for each
    member (issue 36)."""
    return hashlib.blake2b(key=key, digest_size=DIGEST_BYTES)


def named_personally(payload: Any) -> bool:
    """Whether a member name of ``payload`` seems to carry personal data: its member digests are then not kept,
    since a pointer names its members in clear (the claim keeps its fingerprint only, as before)."""
    stack = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if any(map(_personal, value)):
                return True
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


# An OData annotation (Dataverse's totalamount@OData.Community.Display.V1.FormattedValue) reads as an e-mail.
_ANNOTATION = re.compile(r"[A-Za-z0-9_]*@(?:odata|OData|Microsoft\.Dynamics\.CRM)\.[A-Za-z0-9_.]+")


@functools.lru_cache(maxsize=4096)
def _personal(name: str) -> bool:
    # Names repeat from one payload of a flow to the next: each is read once.
    return not _ANNOTATION.fullmatch(name) and bool(sensitive_findings(name))


def _canonical(value: Any) -> bytes:
    """A leaf as RFC 8785 writes it; strings, booleans, null, whole numbers and empty objects and arrays the quick
    way, which writes them alike (a trigger body is mostly strings, and the library takes several times as long;
    :func:`canonical` a few microseconds a number, issue 36)."""
    if isinstance(value, str):
        return str(encode_basestring(value)).encode()
    if value is None or isinstance(value, bool):
        return b"null" if value is None else b"true" if value else b"false"
    kind = type(value)
    # Whole numbers JSON's doubles hold exactly: their digits (10.0 is 10), as canonical writes them.
    if kind is int and -SAFE_INTEGER <= value <= SAFE_INTEGER:
        return str(value).encode()
    if kind is float and value.is_integer() and -SAFE_INTEGER <= value <= SAFE_INTEGER:
        return str(int(value)).encode()
    if (kind is dict or kind is list) and not value:
        return b"{}" if kind is dict else b"[]"
    return canonical(value)


def _stored_length(pointer: str) -> int:
    """At least the UTF-16 code units ``pointer`` takes as stored JSON text (an escaped control character is 6)."""
    if pointer.isascii() and pointer.isprintable():
        return len(pointer) + 2 + pointer.count('"') + pointer.count("\\")
    return len(json.dumps(pointer))


def kept(pointer: str, shape: str, rules: FingerprintRules) -> bool:
    """Whether the rules keep the member at ``pointer`` (of that shape): included (when they include), not ignored.

    The member ``""`` (the payload's kind, or the payload when it is a scalar) is always kept, as the rules keep it.
    """
    path = segments(pointer)
    if not path:
        return True
    if rules.include and not any(_within(path, shape, segments(rule)) for rule in rules.include):
        return False
    return not any(_within(path, shape, segments(rule)) for rule in rules.ignored)


def _within(path: tuple[str, ...], shape: str, rule: tuple[str, ...]) -> bool:
    """Whether the rule's pointer points at this member or at a part of the payload holding it."""
    if len(rule) > len(path):
        return False
    steps = zip(rule, path, shape, strict=False)
    return all(token == step or (token == WILDCARD and kind == "a") for token, step, kind in steps)


def changed(claimed: Members, asked: Members, rules: FingerprintRules) -> tuple[str, ...]:
    """The members the rules keep whose digests differ (or that one of the two payloads lacks), in pointer order."""
    differing = []
    for pointer in sorted(claimed.keys() | asked.keys()):
        mine, theirs = claimed.get(pointer), asked.get(pointer)
        if mine == theirs:
            continue
        shape = (mine or theirs or ":").split(":", 1)[0]
        if kept(pointer, shape, rules):
            differing.append(pointer)
    return tuple(differing)


def unmatched(payload: Any, rules: FingerprintRules) -> tuple[str, ...]:
    """The include pointers that point at nothing in ``payload`` (a mistyped pointer makes every payload alike)."""
    if not rules.include or not isinstance(payload, dict | list):
        return ()
    places = [(segments(pointer), shape) for pointer, shape, _ in leaves(payload) if pointer]
    return tuple(
        rule for rule in rules.include if not any(_within(path, shape, segments(rule)) for path, shape in places)
    )


def named(pointers: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    """The changed members a conflict names (the first :data:`MAX_NAMED`) and how many more there are."""
    return pointers[:MAX_NAMED], max(0, len(pointers) - MAX_NAMED)
