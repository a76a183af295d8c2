"""Business keys, claim ids, fingerprints, member digests and claim tokens: everything keyed with the secret.

The business key is never stored: only ``claim id = HMAC-SHA256(secret, scope + "\\n" + key)``,
so a leaked table reveals neither order numbers nor anything a key may carry. Fingerprints are
keyed too (a plain hash of a guessable payload, such as a customer id with an e-mail, can be
confirmed by hashing guesses), and a claim token is a MAC that only the service can make, so a
reader of the table cannot take over a live claim. Each use has its own sub-key derived from the
secret, so a value made for one purpose never verifies for another.

A payload is kept as keyed digests of its RFC 8785 canonical JSON, whole (the fingerprint) and member by
member, what a later version of the fingerprint rules needs of a claim (issue 33). A claim keeps one
fingerprint, made under the rules of its scope when it was made; rules set later could not be applied to it,
since the payload itself is never kept. So a claim also keeps a digest of each member of its payload
(:func:`member_digests`), which :mod:`oncegate.domain.members` compares under the rules: each leaf (a scalar,
or an empty object or array), named by its JSON Pointer::

    {"Title": "Lunch", "Lines": [{"Qty": 2}], "Modified": "2026-12-06T10:00:00Z"}
    /Title      -> o:<MAC of "Lunch">
    /Lines/0/Qty -> oao:<MAC of 2>
    /Modified   -> o:<MAC of "2026-...">

The digest is a MAC keyed from the key secret, as the fingerprint's HMAC is (keyed BLAKE2b, RFC 7693: one
pass, a third of an HMAC's time for a trigger body's fifty members), over the pointer, the shape and the
RFC 8785 canonical value: the row reveals which members there were, never a value. The shape (``o`` an object's
member, ``a`` an array's item, one letter per segment) tells ``{"0": 1}`` from ``[1]`` and lets a ``*``
segment match array items only, as :mod:`oncegate.domain.fingerprint_rules` reads it.

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

import binascii
import functools
import hashlib
import hmac
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from types import ModuleType
from typing import Any

from oncegate.domain.copies import frozen
from oncegate.domain.sensitive import sensitive_findings
from oncegate.errors import InvalidRequest

SCOPE_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A source is a label of the same shape as a scope, and may name a list within a system (sharepoint:expenses).
# Compiled (re's cache) by the first claim that names a source: a new process compiles only what it matches.
SOURCE_PATTERN = r"[A-Za-z0-9._:-]{1,64}"
MAX_KEY_LENGTH = 512
MAX_FINGERPRINT_LENGTH = 128
MIN_SECRET_LENGTH = 32
KEYED_FINGERPRINT_PREFIX = "hmac:"
# 18 bytes of MAC: 144 bits, as many as the random tokens of earlier releases.
TOKEN_MAC_BYTES = 18
# At most this many members, and this many characters of them as stored (compact JSON): one Table Storage
# property (32,768 UTF-16 code units) holds them whole, and a claim row stays far from the entity's 1 MiB.
MAX_MEMBERS = 500
MAX_TEXT = 16_000
# 80 bits of a MAC: equality of one member's value, not a secret's strength.
DIGEST_BYTES = 10

Members = Mapping[str, str]


@functools.lru_cache(maxsize=1024)
def normalise_scope(scope: str) -> str:
    """Scopes compare case-insensitively, so they are stored lowercase."""
    # Kept for the few scopes a deployment has: a claim read it three times, a match of the pattern each (issue 36).
    # A scope refused raises, which the cache never keeps.
    if not SCOPE_PATTERN.fullmatch(scope):
        raise InvalidRequest("scope must be 1-64 characters of A-Z, a-z, 0-9, '.', '_' or '-'.", target="scope")
    return scope.lower()


def normalise_source(source: str | None) -> str | None:
    """The system a business object comes from, stored lowercase in clear (issue 16); None when not named."""
    if source is None:
        return None
    if not re.fullmatch(SOURCE_PATTERN, source):
        raise InvalidRequest("source must be 1-64 characters of A-Z, a-z, 0-9, '.', '_', ':' or '-'.", target="source")
    return source.lower()


def normalise_key(key: str) -> str:
    """NFC and trimmed, so the same key typed on two systems gives one claim."""
    normalised = unicodedata.normalize("NFC", key).strip()
    if not 1 <= len(normalised) <= MAX_KEY_LENGTH:
        raise InvalidRequest(f"key must be 1-{MAX_KEY_LENGTH} characters after trimming.", target="key")
    return normalised


_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
# A byte of each 5-bit value (0 to 31) to its letter.
_LETTERS = bytes.maketrans(bytes(range(32)), _BASE32.encode())
# How to give each of n 5-bit groups of an integer a byte of its own, by n: made once for each length of digest.
_SPREADS: dict[int, tuple[tuple[int, int, int], ...]] = {}


def _b32(digest: bytes) -> str:
    """``digest`` in lowercase base32 without padding, as ``base64.b32encode`` spells it (issue 36).

    Its 5-bit groups are moved apart into bytes of their own by a few operations on the whole number at once
    (:func:`_spread`), and the bytes made letters by one ``translate``: half the time of a look-up per two letters.
    """
    bits = len(digest) * 8
    characters = -(-bits // 5)
    value = int.from_bytes(digest, "big") << (characters * 5 - bits)
    steps = _SPREADS.get(characters)
    if steps is None:
        steps = _SPREADS[characters] = _spread(characters)
    for keep, moved, shift in steps:
        value = (value & keep) | ((value & moved) << shift)
    return value.to_bytes(characters, "big").translate(_LETTERS).decode("ascii")


def _spread(groups: int) -> tuple[tuple[int, int, int], ...]:
    """The steps that put each of ``groups`` 5-bit groups of an integer (group 0 its lowest bits) at bit 8 times its
    place: each step keeps the bits of one mask and moves those of another up by a shift.

    Halving, from the whole: a run of ``count`` groups whose first one is in place already (at 8 times its index)
    is cut in two, and its upper part moves up to where its own first group belongs; each half is then cut alike.
    The parts of one round that move by the same shift move in one step.
    """
    steps: list[tuple[int, int, int]] = []
    runs = [(0, groups)]  # (index of the first group, count of groups), each run's first group in place
    while any(count > 1 for _, count in runs):
        moves: dict[int, int] = {}
        halves: list[tuple[int, int]] = []
        for first, count in runs:
            if count == 1:
                halves.append((first, count))
                continue
            lower = count // 2
            # The upper part starts 5 bits a group above the run's first group, and belongs 8 bits a group above.
            moves[3 * lower] = moves.get(3 * lower, 0) | ((1 << 5 * (count - lower)) - 1) << (8 * first + 5 * lower)
            halves += [(first, lower), (first + lower, count - lower)]
        steps += [(~moved, moved, shift) for shift, moved in moves.items()]
        runs = halves
    return tuple(steps)


@frozen
class Fingerprint:
    """A request's fingerprint as it is stored now (keyed) and as releases before it was keyed stored it.

    Rows written by those releases hold the plain form, so a request matches a stored fingerprint in
    either form: an upgrade neither turns every retried key into a conflict nor needs a migration.
    """

    keyed: str
    plain: str

    def matches(self, stored: str | None) -> bool:
        return stored is not None and stored in (self.keyed, self.plain)


def _derive(secret: bytes, purpose: str) -> bytes:
    return hmac.digest(secret, f"oncegate {purpose} v1".encode(), "sha256")


_BLOCK = 64  # SHA-256's block: the key's length in HMAC-SHA256
_INNER_PAD = bytes(byte ^ 0x36 for byte in range(256))
_OUTER_PAD = bytes(byte ^ 0x5C for byte in range(256))


class _Mac:
    """HMAC-SHA256 under one key (RFC 2104), with the key's inner and outer hashes begun once.

    ``hmac.digest`` begins both on every call, and a claim makes four MACs under the same few keys: copying the
    two begun hashes is a third of the time (issue 36). The same digest as ``hmac.digest(key, message, "sha256")``.
    """

    def __init__(self, key: bytes) -> None:
        block = (hashlib.sha256(key).digest() if len(key) > _BLOCK else key).ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(block.translate(_INNER_PAD))
        self._outer = hashlib.sha256(block.translate(_OUTER_PAD))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


class KeyHasher:
    """Turns business keys, fingerprints and grants into values keyed with a secret the store never sees."""

    def __init__(self, secret: str) -> None:
        if len(secret) < MIN_SECRET_LENGTH:
            raise ValueError(f"the key secret must be at least {MIN_SECRET_LENGTH} characters")
        self._secret = secret.encode("utf-8")
        self._claim_mac = _Mac(self._secret)
        self._fingerprint_mac = _Mac(_derive(self._secret, "fingerprint"))
        self._token_mac = _Mac(_derive(self._secret, "claim token"))
        self._idempotency_mac = _Mac(_derive(self._secret, "idempotency key"))
        self._member_key = _derive(self._secret, "member")
        # Made once per secret: every claim carries it, and deriving it was an HMAC per request (issue 36).
        self._key_id = _b32(_derive(self._secret, "key check"))[:16]

    @property
    def key_id(self) -> str:
        """A check value of the secret, safe to store: an HMAC of a fixed label, never the secret itself.

        The store remembers the key ids it was used with, so a service started with another secret
        is refused before it answers ``proceed`` for every key already done.
        """
        return self._key_id

    @property
    def cursor_key(self) -> bytes:
        """The key of the seal on cursors and poll addresses the HTTP edge hands out (``oncegate.cursors``)."""
        return _derive(self._secret, "cursor")

    def claim_id(self, scope: str, key: str) -> str:
        """The claim's address: 52 lowercase base32 characters, stable for the same scope and key."""
        message = f"{normalise_scope(scope)}\n{normalise_key(key)}".encode()
        return _b32(self._claim_mac.digest(message))

    def fingerprint(self, *, supplied: str | None, payload: Any) -> Fingerprint | None:
        """The payload's fingerprint (it wins over a supplied one), or the supplied one keyed; None without either."""
        plain = payload_fingerprint(payload) if payload is not None else supplied
        if plain is None:
            return None
        digest = self._fingerprint_mac.digest(plain.encode())
        return Fingerprint(keyed=KEYED_FINGERPRINT_PREFIX + _b32(digest), plain=plain)

    def members(self, payload: Any) -> dict[str, str] | None:
        """The keyed digest of each member of the payload (:func:`member_digests`); None past the bound."""
        return member_digests(self._member_key, payload)

    def emptied(self, pointer: str, shape: str, kind: str) -> str:
        """The digest the member at ``pointer`` has as an empty object (``kind`` ``o``) or array (``a``)."""
        mac = _begun(self._member_key).copy()
        mac.update(f"{pointer}\n{shape}\n".encode() + (b"{}" if kind == "o" else b"[]"))
        return f"{shape}:{mac.hexdigest()}"

    def claim_token(self, claim_id: str, attempt: int, grant_id: str) -> str:
        """The token of one grant: the attempt number (so errors can name it), then a MAC over the grant."""
        message = f"{claim_id}\n{attempt}\n{grant_id}".encode()
        mac = self._token_mac.digest(message)[:TOKEN_MAC_BYTES]
        return f"{attempt}.{urlsafe_text(mac)}"

    def idempotency_key(self, claim_id: str, born: datetime, attempt: int) -> str:
        """The idempotency key of one attempt of a claim, shaped as a UUID (RFC 9562 version 8).

        A MAC over the claim id, when the claim was first received (a key claimed again after retention
        deleted its claim is a new business event) and the attempt: nothing in it leads back to the
        business key, and only this service can make it. Which attempt is :mod:`oncegate.domain.idempotency`'s.
        """
        # Whole seconds: the time reads back the same from every store.
        message = f"{claim_id}\n{_whole_seconds(born)}\n{attempt}".encode()
        raw = bytearray(self._idempotency_mac.digest(message)[:16])
        raw[6] = (raw[6] & 0x0F) | 0x80  # version 8: custom
        raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC's variant
        # As str(uuid.UUID(bytes=raw)) spells it: 8-4-4-4-12 lowercase hex digits.
        digits = raw.hex()
        return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"

    def signed_in_digest(self, name: str) -> str:
        """Who a grant was made to (Entra ID sign-in), kept as a keyed digest: the row names nobody."""
        digest = self._token_mac.digest(f"signed in\n{name}".encode())
        return KEYED_FINGERPRINT_PREFIX + _b32(digest[:16])

    def token_matches(self, token: str, claim_id: str, attempt: int, grant_id: str) -> bool:
        """Whether ``token`` is the one this grant was given, compared in constant time."""
        expected = self.claim_token(claim_id, attempt, grant_id)
        return hmac.compare_digest(token.encode(), expected.encode())


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def urlsafe_text(data: bytes) -> str:
    """``data`` in base64url with its padding, as ``base64.urlsafe_b64encode(data).decode()`` spells it, without the
    two calls that function makes around ``binascii``'s: each claim token and grant id is one (issue 36)."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).decode("ascii")


def _whole_seconds(when: datetime) -> str:
    """``when`` in UTC to the second, as ``strftime("%Y%m%dT%H%M%SZ")`` writes it."""
    # A time the service made is in UTC already: converting it is a copy of it (issue 36).
    return compact_time(when if when.tzinfo is UTC else when.astimezone(UTC))


def compact_time(when: datetime, *, fraction: bool = False) -> str:
    """``when``'s own fields as ``strftime("%Y%m%dT%H%M%SZ")`` writes them (``fraction``: ``"%Y%m%dT%H%M%S%fZ"``),
    at a third of its time: a claim writes two such times (issue 36)."""
    if when.year < 1000:  # strftime's %Y pads no year below 1000 on some platforms: its own spelling
        return when.strftime("%Y%m%dT%H%M%S%fZ" if fraction else "%Y%m%dT%H%M%SZ")
    fields = (when.year, when.month, when.day, when.hour, when.minute, when.second)
    # %-formatting: twice as quick here as format specifiers.
    if fraction:
        return "%04d%02d%02dT%02d%02d%02d%06dZ" % (*fields, when.microsecond)  # noqa: UP031
    return "%04d%02d%02dT%02d%02d%02dZ" % fields  # noqa: UP031


def payload_fingerprint(payload: Any) -> str:
    """SHA-256 of the RFC 8785 canonical form: key order and number spelling do not matter."""
    try:
        written = canonical(payload)
    except _library().IntegerDomainError as exc:
        # Its message quotes the number, which may be thousands of digits.
        raise InvalidRequest(
            f"payload holds an integer beyond ±{SAFE_INTEGER:,} (2^53 - 1), which RFC 8785 and JSON's doubles do not "
            "carry exactly: send it as a string.",
            target="payload",
        ) from exc
    except (_library().CanonicalizationError, TypeError, ValueError) as exc:
        raise InvalidRequest(f"payload cannot be canonicalised: {exc}", target="payload") from exc
    return "sha256:" + hashlib.sha256(written).hexdigest()


def conflict_id(claim_id: str, fingerprint: str | None, round_: int, *, born: datetime | None = None) -> str:
    """Same claim + fingerprint + resolution round gives the same id, so an open conflict is found again.

    ``born``: when the claim was first received, for a claim made again after retention deleted the key's
    earlier one, whose conflicts took the plain ids (issue 22): a new life of the key gets ids of its own.
    """
    # Whole seconds: the time reads back the same from every store (two lives of a key are days apart).
    life = f"\n{born.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}" if born else ""
    message = f"{claim_id}\n{fingerprint or ''}\n{round_}{life}"
    return _b32(hashlib.sha256(message.encode()).digest()[:15])


def conflict_ids(claim_id: str, fingerprint: str | None, round_: int, born: datetime) -> tuple[str, str]:
    """The ids a conflict of this round may have: the plain one, and the one of a claim made again."""
    return conflict_id(claim_id, fingerprint, round_), conflict_id(claim_id, fingerprint, round_, born=born)


class KeyRing:
    """The secrets a service knows: the one new claims are made with, and the others of a rotation.

    During a rotation a business key may have been claimed under the previous secret (or, on an
    instance already switched, under the next one), so every secret is looked up. ``lookup_order``
    puts the older secret first, the same on every instance of every phase, so that where two
    claims of one key exist (a race between instances on both sides of the switch) every instance
    decides on the same one.
    """

    def __init__(self, current: KeyHasher, *, previous: KeyHasher | None = None, next_: KeyHasher | None = None):
        self.current = current
        self.lookup_order: tuple[KeyHasher, ...] = tuple(k for k in (previous, current, next_) if k is not None)

    @property
    def rotating(self) -> bool:
        return len(self.lookup_order) > 1

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(hasher.key_id for hasher in self.lookup_order)


# -- RFC 8785 canonical JSON ----------------------------------------------------------------------------------

# The integers JSON's doubles hold exactly (RFC 8785 refuses the others).
SAFE_INTEGER = 2**53 - 1


def json_writer(*, sort_keys: bool = False, allow_nan: bool = True) -> Callable[[Any], str]:
    """Compact JSON text (UTF-8 characters as they are), as ``json.JSONEncoder(...).encode`` writes it, by one encoder
    made here once: ``encode`` makes its encoder again on every call, half its time on a claim's small values (issue
    36). Without the check for circular values, which JSON parsed or records made by the service never hold."""
    if c_make_encoder is None:  # an interpreter without the C encoder: the library's own way
        library = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, allow_nan=allow_nan, separators=(",", ":"))
        return library.encode
    default = json.JSONEncoder().default
    encoder = c_make_encoder(None, default, encode_basestring, None, ":", ",", sort_keys, False, allow_nan)
    return lambda value: "".join(encoder(value, 0))


_encode = json_writer(sort_keys=True, allow_nan=False)


def canonical(value: Any) -> bytes:
    """``value`` as RFC 8785 writes it: the quick way where it writes the same bytes, the library's otherwise."""
    plain = _plain(value)
    if plain is not _OTHER:
        try:
            return _encode(plain).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: the library says what is wrong with it
    return bytes(_library().dumps(value))


def _library() -> ModuleType:
    """The ``rfc8785`` library, imported with the first value the quick way leaves to it (or the first error it
    names): a new process whose first claim holds a plain payload never loads it (issue 36's cold start)."""
    import rfc8785

    return rfc8785


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


# -- member digests----------------------------------------------------------------------------------------------


def escaped(token: str) -> str:
    """A reference token as a JSON Pointer writes it (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def leaves(payload: Any) -> Iterator[tuple[str, str, Any]]:
    """Each leaf of ``payload`` with its pointer and shape: a scalar, or an empty object or array.

    The payload itself is always one, ``""``: its value when it is a scalar, else an empty object or array for its
    kind, which the rules keep as they keep the payload's kind (``{"a": 1}`` under rules that leave ``/a`` out is
    still an object, never an array).
    """
    if isinstance(payload, (dict, list)) and payload:
        yield "", "", type(payload)()
    stack: list[tuple[str, str, Any]] = [("", "", payload)]
    # Pushed one by one, not through a generator: a claim's payload is walked on every Check and claim (issue 36).
    push, pop = stack.append, stack.pop
    while stack:
        pointer, shape, value = pop()
        if isinstance(value, dict) and value:
            shape += "o"
            for key, item in value.items():
                push((f"{pointer}/{escaped(key) if '~' in key or '/' in key else key}", shape, item))
        elif isinstance(value, list) and value:
            shape += "a"
            for index, item in enumerate(value):
                push((f"{pointer}/{index}", shape, item))
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
        except (_library().CanonicalizationError, TypeError, ValueError, UnicodeEncodeError):
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


# An OData annotation (Dataverse's totalamount@OData.Community.Display.V1.FormattedValue) reads as an e-mail. Compiled
# (re's cache) for the first name holding an @, which most flows never send: not by every new process (issue 36).
_ANNOTATION = r"[A-Za-z0-9_]*@(?:odata|OData|Microsoft\.Dynamics\.CRM)\.[A-Za-z0-9_.]+"


@functools.lru_cache(maxsize=4096)
def _personal(name: str) -> bool:
    # Names repeat from one payload of a flow to the next: each is read once.
    annotation = "@" in name and re.fullmatch(_ANNOTATION, name)
    return not annotation and bool(sensitive_findings(name))


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


@functools.lru_cache(maxsize=4096)
def _stored_length(pointer: str) -> int:
    """At least the UTF-16 code units ``pointer`` takes as stored JSON text (an escaped control character is 6).
    Kept for the pointers a process meets: a flow's payloads have the same members from one claim to the next, three
    a claim in the benchmark's (issue 36)."""
    if pointer.isascii() and pointer.isprintable():
        return len(pointer) + 2 + pointer.count('"') + pointer.count("\\")
    return len(json.dumps(pointer))
