"""What of a flow's request may reach a target: the path under the base URL, and the headers (issue 34).

A flow names a path, never a URL. :func:`path_under` normalises it and keeps it under the base URL's
path; :func:`request_headers` lets through only the headers on the allow-list. Both raise
``RequestRefused`` naming what was refused; the adapter answers that as ``Failure.REFUSED``, nothing sent.

Paths: one ``/`` first (``//host`` is a URL); ``\\``, ``@``, a fragment, an encoded ``/`` or ``\\`` (``%2f``,
``%5c``), control characters and spaces are refused; ``//`` further on is one ``/``; ``.`` and ``..`` segments,
also written ``%2e``, are resolved, and a path that climbs above the base URL's path is refused. The query is
kept as written (no spaces, ``\\`` or ``#``).

Headers: the names on :data:`ALLOWED_HEADERS` and any ``X-`` name not on :data:`FORBIDDEN_HEADERS`; never
``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Cookie``, ``Proxy-*``, ``Authorization`` or
``Idempotency-Key`` (the adapter sets the last two itself), and no value with CR, LF or NUL.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

ALLOWED_HEADERS = frozenset(
    {
        "accept",
        "accept-language",
        "content-type",
        "content-language",
        "if-match",
        "if-none-match",
        "if-unmodified-since",
        "prefer",
        "user-agent",
    }
)
# Refused by name even where the rule above would let them through: framing, credentials, the caller's address.
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "cookie",
        "authorization",
        "idempotency-key",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "expect",
        "keep-alive",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
        "x-http-method-override",
        "x-method-override",
        "x-original-url",
        "x-rewrite-url",
    }
)
FORBIDDEN_PREFIXES = ("proxy-", "x-forwarded-", "x-ms-")
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
UNSAFE_VALUE = re.compile(r"[\r\n\x00]")
# Characters a path may never hold, written or percent-encoded: they change which host or path is meant.
UNSAFE_PATH = re.compile(r"[\\@#\s\x00-\x1f\x7f]|%(2f|5c|00|40|23|0a|0d|09)", re.IGNORECASE)
UNSAFE_QUERY = re.compile(r"[#\s\x00-\x1f\x7f\\]")
DOT = re.compile(r"^(\.|%2e)+$", re.IGNORECASE)
MAX_PATH = 2048


class RequestRefused(ValueError):
    """Part of a flow's request that may not reach the target; ``field`` names it (``path``, ``headers``)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def path_under(base_path: str, path: str) -> str:
    """``path`` (with its query) under ``base_path``, normalised; raises ``RequestRefused`` (``path``)."""
    if not path.startswith("/") or path.startswith("//"):
        raise RequestRefused(
            "the path must start with one / (a path under the target's base URL, never a URL)", field="path"
        )
    if len(path) > MAX_PATH:
        raise RequestRefused(f"the path is longer than {MAX_PATH} characters", field="path")
    route, _, query = path.partition("?")
    if UNSAFE_PATH.search(route) or UNSAFE_QUERY.search(query):
        raise RequestRefused(
            "the path holds \\, @, #, a space, a control character or an encoded / or \\", field="path"
        )
    segments: list[str] = []
    for segment in route.split("/"):
        if ";" in segment and DOT.match(segment.split(";", 1)[0]):
            # "..;" is ".." to some servers (Tomcat's path parameters): never a way above the base URL.
            raise RequestRefused("the path holds a dot segment with parameters (..;)", field="path")
        if segment == "" or (DOT.match(segment) and unquote(segment) == "."):
            continue
        if DOT.match(segment) and unquote(segment) == "..":
            if not segments:
                raise RequestRefused("the path climbs above the target's base URL", field="path")
            segments.pop()
            continue
        if DOT.match(segment):
            raise RequestRefused("the path holds a segment of dots only", field="path")
        segments.append(segment)
    base = "/".join(part for part in base_path.split("/") if part)
    joined = "/" + "/".join(filter(None, (base, *segments)))
    if route.endswith("/") and segments:
        joined += "/"
    return f"{joined}?{query}" if query else joined


def request_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers a flow may send a target, as given; raises ``RequestRefused`` (``headers``) naming the first
    that is not allowed."""
    for name, value in headers.items():
        lowered = name.lower()
        if not TOKEN.match(name):
            raise RequestRefused(f"the header name {name!r} is not an HTTP token", field="headers")
        forbidden = lowered in FORBIDDEN_HEADERS or lowered.startswith(FORBIDDEN_PREFIXES)
        if forbidden or not (lowered in ALLOWED_HEADERS or lowered.startswith("x-")):
            raise RequestRefused(f"the header {name} is not one a flow may send a target", field="headers")
        if UNSAFE_VALUE.search(value):
            raise RequestRefused(f"the header {name} holds CR, LF or NUL", field="headers")
    return dict(headers)
