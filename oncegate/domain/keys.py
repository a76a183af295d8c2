"""Business keys, claim ids and fingerprints.

The business key is never stored: only ``claim id = HMAC-SHA256(secret, scope + "\\n" + key)``,
so a leaked table reveals neither order numbers nor anything a key may carry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import unicodedata
from typing import Any

import rfc8785

from oncegate.errors import InvalidRequest

SCOPE_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_KEY_LENGTH = 512
MAX_FINGERPRINT_LENGTH = 128
MIN_SECRET_LENGTH = 32


def normalise_scope(scope: str) -> str:
    """Scopes compare case-insensitively, so they are stored lowercase."""
    if not SCOPE_PATTERN.fullmatch(scope):
        raise InvalidRequest("scope must be 1-64 characters of A-Z, a-z, 0-9, '.', '_' or '-'.", target="scope")
    return scope.lower()


def normalise_key(key: str) -> str:
    """NFC and trimmed, so the same key typed on two systems gives one claim."""
    normalised = unicodedata.normalize("NFC", key).strip()
    if not 1 <= len(normalised) <= MAX_KEY_LENGTH:
        raise InvalidRequest(f"key must be 1-{MAX_KEY_LENGTH} characters after trimming.", target="key")
    return normalised


def _b32(digest: bytes) -> str:
    return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


class KeyHasher:
    """Turns scope + business key into the claim id with a secret the store never sees."""

    def __init__(self, secret: str) -> None:
        if len(secret) < MIN_SECRET_LENGTH:
            raise ValueError(f"the key secret must be at least {MIN_SECRET_LENGTH} characters")
        self._secret = secret.encode("utf-8")

    def claim_id(self, scope: str, key: str) -> str:
        """The claim's address: 52 lowercase base32 characters, stable for the same scope and key."""
        message = f"{normalise_scope(scope)}\n{normalise_key(key)}".encode()
        return _b32(hmac.new(self._secret, message, hashlib.sha256).digest())


def payload_fingerprint(payload: Any) -> str:
    """SHA-256 of the RFC 8785 canonical form: key order and number spelling do not matter."""
    try:
        canonical = rfc8785.dumps(payload)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise InvalidRequest(f"payload cannot be canonicalised: {exc}", target="payload") from exc
    return "sha256:" + hashlib.sha256(canonical).hexdigest()


def conflict_id(claim_id: str, fingerprint: str | None, round_: int) -> str:
    """Same claim + fingerprint + resolution round gives the same id, so an open conflict is found again."""
    message = f"{claim_id}\n{fingerprint or ''}\n{round_}".encode()
    return _b32(hashlib.sha256(message).digest()[:15])
