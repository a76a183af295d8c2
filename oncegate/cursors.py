"""Sealed cursors: what the HTTP layer hands out in place of the stores' plain cursors.

A list's cursor and the polling trigger's state travel through the caller, who can change them.
The stores and the service make and read plain cursors; the HTTP layer seals each one it hands
out (``nextLink``, ``Location``) with a MAC over the cursor and the list it belongs to, and
opens each one it receives before anything parses it. A forged, tampered or borrowed cursor is
refused as a 400 without being read.

Sealed form: ``<plain cursor>.<tag>``, where the tag is a truncated HMAC-SHA256 in unpadded
base64url; plain cursors are base64url, so the whole stays URL-safe and adds 23 characters.

The seal's key is derived from the key secret, so during a rotation a cursor, a poll address or a
trigger's state sealed under one secret must still open under the other (issue 31): a seal seals with
the secret new claims are named by and opens with any secret of the instance's key ring.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Sequence

from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.errors import InvalidRequest

# 128 bits: a forger gets one guess per request, so this is far beyond reach.
TAG_BYTES = 16
SEPARATOR = "."


class CursorSeal:
    """Seals with one key and opens with it or any of ``also``; every instance from the same secrets agrees."""

    def __init__(self, key: bytes, *, also: Sequence[bytes] = ()) -> None:
        self._key = key
        self._keys = (key, *also)

    @classmethod
    def from_secret(cls, secret: str) -> CursorSeal:
        """The seal keyed with the cursor sub-key of the service's key secret (``KeyHasher.cursor_key``)."""
        return cls.of(KeyRing(KeyHasher(secret)))

    @classmethod
    def of(cls, keys: KeyRing) -> CursorSeal:
        """The seal of a key ring: sealing with its current secret's sub-key, opening with any of its secrets'."""
        current = keys.current.cursor_key
        return cls(current, also=[hasher.cursor_key for hasher in keys.lookup_order if hasher is not keys.current])

    def seal(self, cursor: str, list_name: str) -> str:
        """``cursor`` with the tag binding it to ``list_name``, as the caller gets it."""
        return f"{cursor}{SEPARATOR}{self._tag(cursor, list_name, self._key)}"

    def open(self, sealed: str, list_name: str, *, target: str, refusal: str | None = None) -> str:
        """The plain cursor inside ``sealed``; 400 naming ``target`` unless this seal made it for ``list_name``.

        ``refusal`` says so in the words of what was sealed (a poll address is not a list's cursor).
        """
        cursor, separator, tag = sealed.rpartition(SEPARATOR)
        given = tag.encode("utf-8", "surrogatepass")
        # Only the tag is compared, in constant time, under each key; nothing reads the cursor before it verifies.
        matches = [hmac.compare_digest(given, self._tag(cursor, list_name, key).encode("ascii")) for key in self._keys]
        if not separator or not any(matches):
            message = refusal or f"{target} is not one this service handed out for this list."
            raise InvalidRequest(message, target=target)
        return cursor

    @staticmethod
    def _tag(cursor: str, list_name: str, key: bytes) -> str:
        # The list's name is part of the message, so a cursor of one list is refused by another.
        message = f"{list_name}\n{cursor}".encode("utf-8", "surrogatepass")
        mac = hmac.digest(key, message, "sha256")[:TAG_BYTES]
        return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")
