"""Sealed cursors: what the HTTP layer hands out in place of the stores' plain cursors.

A list's cursor and the polling trigger's state travel through the caller, who can change them.
The stores and the service make and read plain cursors; the HTTP layer seals each one it hands
out (``nextLink``, ``Location``) with a MAC over the cursor and the list it belongs to, and
opens each one it receives before anything parses it. A forged, tampered or borrowed cursor is
refused as a 400 without being read.

Sealed form: ``<plain cursor>.<tag>``, where the tag is a truncated HMAC-SHA256 in unpadded
base64url; plain cursors are base64url, so the whole stays URL-safe and adds 23 characters.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from oncegate.errors import InvalidRequest

# The label of the cursor sub-key: the key secret itself keys only claim ids, never a second purpose.
CURSOR_KEY_LABEL = b"oncegate cursor v1"
# 128 bits: a forger gets one guess per request, so this is far beyond reach.
TAG_BYTES = 16
SEPARATOR = "."


class CursorSeal:
    """Seals and opens cursors with one key; every instance from the same secret agrees."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_secret(cls, secret: str) -> CursorSeal:
        """The seal keyed with the cursor sub-key of the service's key secret."""
        return cls(hmac.new(secret.encode("utf-8"), CURSOR_KEY_LABEL, hashlib.sha256).digest())

    def seal(self, cursor: str, list_name: str) -> str:
        """``cursor`` with the tag binding it to ``list_name``, as the caller gets it."""
        return f"{cursor}{SEPARATOR}{self._tag(cursor, list_name)}"

    def open(self, sealed: str, list_name: str, *, target: str, refusal: str | None = None) -> str:
        """The plain cursor inside ``sealed``; 400 naming ``target`` unless this seal made it for ``list_name``.

        ``refusal`` says so in the words of what was sealed (a poll address is not a list's cursor).
        """
        cursor, separator, tag = sealed.rpartition(SEPARATOR)
        expected = self._tag(cursor, list_name).encode("ascii")
        # Only the tag is compared, in constant time; nothing reads the cursor before it verifies.
        if not separator or not hmac.compare_digest(tag.encode("utf-8", "surrogatepass"), expected):
            message = refusal or f"{target} is not one this service handed out for this list."
            raise InvalidRequest(message, target=target)
        return cursor

    def _tag(self, cursor: str, list_name: str) -> str:
        # The list's name is part of the message, so a cursor of one list is refused by another.
        message = f"{list_name}\n{cursor}".encode("utf-8", "surrogatepass")
        mac = hmac.new(self._key, message, hashlib.sha256).digest()[:TAG_BYTES]
        return base64.urlsafe_b64encode(mac).decode("ascii").rstrip("=")
