"""What of a flow's request may reach a target: the path under the base URL, and the headers (issue 34).

A flow names a path, never a URL. :func:`path_under` normalises it and keeps it under the base URL's
path; :func:`request_headers` lets through only the headers on the allow-list. Both raise
``RequestRefused`` naming what was refused. Perform once checks a flow's request with :func:`refused` before it
claims anything (a 400 naming the path or the header: the same request would be refused every time, so a claim
failed by it would fail the same way for ever); the adapter checks again before it sends, and answers a refusal as
``Failure.REFUSED``, nothing sent.

Paths: ASCII only; one ``/`` first (``//host`` is a URL); ``\\``, ``@``, a fragment, an encoded ``/`` or
``\\`` (``%2f``, ``%5c``), IIS's ``%u``, control characters and spaces are refused; ``//`` further on is one
``/``; ``.`` and ``..`` segments, also written ``%2e``, are resolved, and a path that climbs above the base
URL's path is refused; a dot segment with parameters (``..;``, ``..%3b``) or encoded twice (``%252e``), and
a ``/`` or ``\\`` encoded twice, are refused. The query is kept as written (no spaces, ``\\`` or ``#``).

Headers: the names on :data:`ALLOWED_HEADERS` and any ``X-`` name not on :data:`FORBIDDEN_HEADERS`; never
``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Cookie``, ``Proxy-*``, ``Authorization`` or
``Idempotency-Key`` (the adapter sets the last two itself), nor the header that carries the target's secret;
no value with anything but visible ASCII, spaces and tabs (no CR, LF, NUL, NEL or U+2028).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from oncegate.domain.targets import Target

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
# \Z, not $: $ also matches before a final newline, and "X-Trace\n" is no token.
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
# A value is visible ASCII, spaces and tabs: no CR, LF, NUL, no other control, no NEL or U+2028 a reader may
# take for a line's end, nothing latin-1 cannot write.
UNSAFE_VALUE = re.compile(r"[^\t\x20-\x7e]")
# Characters a path may never hold, written or percent-encoded: they change which host or path is meant.
# %u is IIS's own encoding (%u002e is a dot): never a way to write what the checks here would refuse.
UNSAFE_PATH = re.compile(r"[\\@#\s\x00-\x1f\x7f]|%(2f|5c|00|40|23|0a|0d|09|u)", re.IGNORECASE)
UNSAFE_QUERY = re.compile(r"[#\s\x00-\x1f\x7f\\]")
DOT = re.compile(r"^(\.|%2e)+$", re.IGNORECASE)
MAX_PATH = 2048


class RequestRefused(ValueError):
    """Part of a flow's request that may not reach the target; ``field`` names it (``path``, ``headers.NAME``)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def path_under(base_path: str, path: str) -> str:
    """``path`` (with its query) under ``base_path``, normalised; raises ``RequestRefused`` (``path``)."""
    if not path.startswith("/") or path.startswith("//"):
        raise RequestRefused(
            "the path must start with one / (a path under the target's base URL, never a URL)", field="path"
        )
    if not path.isascii():
        raise RequestRefused("the path holds a character outside ASCII (percent-encode it)", field="path")
    if len(path) > MAX_PATH:
        raise RequestRefused(f"the path is longer than {MAX_PATH} characters", field="path")
    route, _, query = path.partition("?")
    if UNSAFE_PATH.search(route) or UNSAFE_QUERY.search(query):
        raise RequestRefused(
            "the path holds \\, @, #, a space, a control character, an encoded / or \\, or %u", field="path"
        )
    segments: list[str] = []
    for segment in route.split("/"):
        decoded = _decoded(segment)
        if "/" in decoded or "\\" in decoded:
            raise RequestRefused("the path holds a / or \\ encoded more than once", field="path")
        if segment == "":
            continue
        dots = decoded.split(";", 1)[0]
        if dots and set(dots) == {"."}:
            if not DOT.match(segment):
                # "..;" is ".." to some servers (Tomcat's path parameters), "%252e%252e" to one that decodes twice.
                raise RequestRefused(
                    "the path holds a dot segment with parameters (..;) or encoded more than once", field="path"
                )
            if unquote(segment) == "..":
                if not segments:
                    raise RequestRefused("the path climbs above the target's base URL", field="path")
                segments.pop()
            elif unquote(segment) != ".":
                raise RequestRefused("the path holds a segment of dots only", field="path")
            continue
        segments.append(segment)
    base = "/".join(part for part in base_path.split("/") if part)
    joined = "/" + "/".join(filter(None, (base, *segments)))
    if route.endswith("/") and segments:
        joined += "/"
    return f"{joined}?{query}" if query else joined


def _decoded(segment: str) -> str:
    """``segment`` percent-decoded until it no longer changes: what a target that decodes more than once reads."""
    for _ in range(8):
        once = unquote(segment)
        if once == segment:
            break
        segment = once
    return segment


def check_value(name: str, value: str) -> None:
    """Raises ``RequestRefused`` (``headers``) when ``value`` holds anything but visible ASCII, spaces and tabs;
    the message names the header, never the value."""
    if UNSAFE_VALUE.search(value):
        raise RequestRefused(
            f"the header {name} holds CR, LF, a control character or a character outside ASCII", field=f"headers.{name}"
        )


def request_headers(headers: Mapping[str, str], target: Target) -> dict[str, str]:
    """The headers a flow may send ``target``, as given; raises ``RequestRefused`` (``headers.NAME``) naming the
    first that is not allowed, or that the target's auth fills."""
    filled = {name.lower() for name in target.auth_headers}
    for name, value in headers.items():
        lowered = name.lower()
        if not TOKEN.match(name):
            raise RequestRefused(f"the header name {name!r} is not an HTTP token", field="headers")
        forbidden = lowered in FORBIDDEN_HEADERS or lowered.startswith(FORBIDDEN_PREFIXES)
        if forbidden or not (lowered in ALLOWED_HEADERS or lowered.startswith("x-")):
            raise RequestRefused(f"the header {name} is not one a flow may send a target", field=f"headers.{name}")
        if lowered in filled:
            raise RequestRefused(
                f"the header {name} carries the target's secret; a flow may not send it", field=f"headers.{name}"
            )
        check_value(name, value)
    return dict(headers)


def refused(target: Target, path: str, headers: Mapping[str, str]) -> None:
    """Raises ``RequestRefused`` naming the first part of a flow's request that ``target`` would never be sent: its
    path, or a header."""
    path_under(urlsplit(target.base_url).path, path)
    request_headers(headers, target)
