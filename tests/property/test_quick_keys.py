"""The quick ways of :mod:`oncegate.domain.keys` against what they stand in for: the same bytes and text.

A claim id, fingerprint, claim token or idempotency key made today must equal the one made last year from the
same key and secret, so each quick way (issue 36) is held to the standard library's: the MAC with its hashes
begun once to ``hmac.digest``, the time to the second to ``strftime``, the idempotency key to ``uuid.UUID``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import example, given, settings
from hypothesis import strategies as st

from oncegate.domain.keys import KeyHasher, _Mac, _whole_seconds, compact_time

SECRETS = st.text(min_size=32, max_size=120)
ZONES = st.sampled_from([UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))])


@settings(max_examples=500)
@given(key=st.binary(max_size=200), message=st.binary(max_size=300))
@example(key=b"", message=b"")
@example(key=b"k" * 64, message=b"a")  # a key of exactly one block
@example(key=b"k" * 65, message=b"a")  # a key longer than a block: hashed first
def test_the_mac_is_hmac_sha256(key: bytes, message: bytes) -> None:
    assert _Mac(key).digest(message) == hmac.digest(key, message, "sha256")


def test_a_mac_is_used_again_unchanged() -> None:
    mac = _Mac(b"secret")

    assert [mac.digest(b"one"), mac.digest(b"two"), mac.digest(b"one")] == [
        hmac.digest(b"secret", b"one", "sha256"),
        hmac.digest(b"secret", b"two", "sha256"),
        hmac.digest(b"secret", b"one", "sha256"),
    ]


@settings(max_examples=500)
@given(when=st.datetimes(min_value=datetime(1, 1, 2), timezones=ZONES))
@example(when=datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC))
@example(when=datetime(1000, 1, 1, tzinfo=UTC))
def test_the_time_to_the_second_is_strftimes(when: datetime) -> None:
    assert _whole_seconds(when) == when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


@settings(max_examples=500)
@given(when=st.datetimes(min_value=datetime(1, 1, 2), timezones=st.one_of(st.none(), ZONES)))
@example(when=datetime(999, 1, 1, 0, 0, 0, 5, tzinfo=UTC))
@example(when=datetime(2026, 12, 7, 0, 0, 0, 0, tzinfo=UTC))
def test_a_history_line_s_time_is_strftimes(when: datetime) -> None:
    """An event id starts with its time: the quick spelling keeps the ids of a claim's history in time order."""
    assert compact_time(when, fraction=True) == when.strftime("%Y%m%dT%H%M%S%fZ")
    assert compact_time(when) == when.strftime("%Y%m%dT%H%M%SZ")


def _derive(secret: str, purpose: str) -> bytes:
    return hmac.digest(secret.encode(), f"oncegate {purpose} v1".encode(), "sha256")


@settings(max_examples=300)
@given(
    secret=SECRETS,
    claim_id=st.text(max_size=60),
    born=st.datetimes(min_value=datetime(1000, 1, 1), timezones=ZONES),
    attempt=st.integers(1, 10**6),
)
def test_the_idempotency_key_is_the_one_made_before(secret: str, claim_id: str, born: datetime, attempt: int) -> None:
    message = f"{claim_id}\n{born.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}\n{attempt}".encode()
    raw = bytearray(hmac.digest(_derive(secret, "idempotency key"), message, "sha256")[:16])
    raw[6] = (raw[6] & 0x0F) | 0x80
    raw[8] = (raw[8] & 0x3F) | 0x80

    assert KeyHasher(secret).idempotency_key(claim_id, born, attempt) == str(uuid.UUID(bytes=bytes(raw)))


@settings(max_examples=300)
@given(
    secret=SECRETS,
    key=st.text(min_size=1, max_size=40).filter(lambda key: unicodedata.normalize("NFC", key).strip()),
    attempt=st.integers(1, 99),
)
def test_claim_ids_fingerprints_and_tokens_are_the_ones_made_before(secret: str, key: str, attempt: int) -> None:
    hasher = KeyHasher(secret)
    claim_id = hasher.claim_id("Orders", key)
    message = f"orders\n{unicodedata.normalize('NFC', key).strip()}".encode()
    fingerprint = hasher.fingerprint(supplied=key, payload=None)
    token_mac = hmac.digest(_derive(secret, "claim token"), f"{claim_id}\n{attempt}\ngrant".encode(), "sha256")

    assert claim_id == _b32_reference(hmac.digest(secret.encode(), message, "sha256"))
    assert fingerprint is not None
    assert fingerprint.keyed == "hmac:" + _b32_reference(
        hmac.digest(_derive(secret, "fingerprint"), key.encode(), "sha256")
    )
    assert hasher.claim_token(claim_id, attempt, "grant").endswith(base64.urlsafe_b64encode(token_mac[:18]).decode())
    assert hasher.signed_in_digest("ana") == "hmac:" + _b32_reference(
        hmac.digest(_derive(secret, "claim token"), b"signed in\nana", "sha256")[:16]
    )


def _b32_reference(digest: bytes) -> str:
    return base64.b32encode(digest).decode().lower().rstrip("=")


def test_a_secret_longer_than_a_block_keys_claim_ids_as_hmac_does() -> None:
    secret = "s" * 100
    expected = hmac.new(secret.encode(), b"orders\nSO-1", hashlib.sha256).digest()

    assert KeyHasher(secret).claim_id("orders", "SO-1") == _b32_reference(expected)
