"""A request's head as ``oncegate serve`` reads it: its header fields, within bounds, and its Host header.

The stdlib hands the header section to the ``email`` package, which took a third of the server's time per request
and reads more than HTTP allows; here it is read line by line within the limits of
:mod:`oncegate.entrypoints.incoming`, and the Host header, from which every URL and link of the answer is built, is
checked before anything is served (:mod:`oncegate.entrypoints.framing` answers the refusals).
"""

from __future__ import annotations

import re
from typing import Any

from oncegate.entrypoints.incoming import MAX_HEADER_BYTES, MAX_HEADER_LINE, MAX_HEADERS


class Headers:
    """A request's header fields, looked up by name in any case: what the handler and the stdlib ask of them."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields
        self._by_name: dict[str, list[str]] = {}
        for name, value in fields:
            self._by_name.setdefault(name.lower(), []).append(value)

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._by_name.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str] | None:
        return self._by_name.get(name.lower())

    def items(self) -> list[tuple[str, str]]:
        return list(self._fields)

    def __str__(self) -> str:
        return "".join(f"{name}: {value}\r\n" for name, value in self._fields)


class BadHeaders(Exception):
    """The header section cannot be read: too large (431), or not HTTP (400)."""

    def __init__(self, message: str, *, too_large: bool) -> None:
        super().__init__(message)
        self.too_large = too_large


def read_headers(rfile: Any) -> Headers:
    """The header section up to its empty line, within the stdlib's limits (line length, number of fields) and
    MAX_HEADER_BYTES in all.

    The stdlib hands it to the ``email`` package, which took a third of the server's time per
    request; HTTP needs none of MIME. A line folded onto the next (obs-fold) continues the field
    before it, as that package read it; a line with no colon is refused (RFC 9112 §5).
    """
    fields: list[tuple[str, str]] = []
    total = 0
    for _ in range(MAX_HEADERS + 1):
        line = rfile.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise BadHeaders("Line too long", too_large=True)
        if line in (b"\r\n", b"\n", b""):
            return Headers(fields)
        total += len(line)
        if total > MAX_HEADER_BYTES:
            raise BadHeaders(f"The header fields are over {MAX_HEADER_BYTES} bytes in all", too_large=True)
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if "\r" in text:
            # A CR alone inside a line: a reader that splits lines on it would see other fields (RFC 9112 §2.2).
            raise BadHeaders("Bad header line (a CR without its LF)", too_large=False)
        if "\x00" in text:
            # RFC 9110 §5.5: a field holding a NUL is refused, never passed on (a reader in C ends the value there).
            raise BadHeaders("Bad header line (a NUL)", too_large=False)
        if text[:1] in (" ", "\t") and fields:
            name, value = fields[-1]
            fields[-1] = (name, f"{value} {text.strip()}")
            continue
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            raise BadHeaders(f"Bad header line ({text[:80]!r})", too_large=False)
        fields.append((name, value.strip(" \t")))
    # Every line counts, a folded one too: as many as the stdlib reads, and no more.
    raise BadHeaders("Too many headers", too_large=True)


# RFC 3986's authority without userinfo: a name or IPv4 address, or an IP literal in brackets, then a port.
HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~%!$&'()*+,;=-]*)(?::[0-9]*)?")


def host_refusal(hosts: list[str], version: str) -> str | None:
    """Why the Host header makes the request unanswerable (RFC 9112 §3.2), or None.

    The request's URL, and from it the route and every ``Location`` and ``nextLink``, is built
    from the Host header: a "host" holding a path, a query or a fragment would route the request
    elsewhere than its target says, and point the links it gets back at another server.
    """
    if len(hosts) > 1:
        return "More than one Host header"
    if not hosts:
        # HTTP/1.0 and 0.9 may leave Host out; HTTP/1.1 must send it.
        return "No Host header" if version not in ("HTTP/0.9", "HTTP/1.0") else None
    if not HOST.fullmatch(hosts[0]):
        return f"Bad Host header ({hosts[0][:80]!r})"
    return None
