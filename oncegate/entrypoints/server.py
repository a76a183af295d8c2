"""Serves the Azure Functions app locally, as Core Tools would, without Core Tools.

The routes come from ``app.get_functions()`` of the very ``FunctionApp`` that Azure runs, and are
matched by the same matcher as the catch-all's 404 and 405 (``routes``), so there is no second
route table to drift. Function keys are not checked, as Core Tools does not check them locally either.

Every answer, refusals of the HTTP framing included, is in the app's error format: a body whose
length cannot be known is refused and its connection closed, never waited for.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import azure.functions as func

from oncegate.entrypoints.http import MAX_BODY_BYTES, render, render_error
from oncegate.entrypoints.routes import FunctionRoute, function_routes, match
from oncegate.errors import InvalidRequest, NotFound, TooLarge
from oncegate.models import ErrorBody, ErrorInfo

logger = logging.getLogger(__name__)

ROUTE_PREFIX = "/api/"
# A body is framed by Content-Length only; these methods must declare one, even of 0.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# More digits than this cannot be under MAX_BODY_BYTES, and int() refuses 4,300 and more.
LENGTH_DIGITS = len(str(MAX_BODY_BYTES))
IDLE_SECONDS = 30


def dispatch(
    routes: Sequence[FunctionRoute], method: str, url: str, headers: dict[str, str], body: bytes
) -> func.HttpResponse:
    """Call the function whose route and method match, exactly as the Functions host would."""
    parts = urlsplit(url)
    if not parts.path.startswith(ROUTE_PREFIX):
        return render_error(NotFound("Routes live under /api."))
    found = match(routes, method, parts.path[len(ROUTE_PREFIX) :].rstrip("/"))
    if found is None:
        return render_error(NotFound(f"No action is served at {parts.path}."))
    route, params = found
    request = func.HttpRequest(
        method,
        url,
        headers=headers,
        params=dict(parse_qsl(parts.query, keep_blank_values=True)),
        route_params={name: value or "" for name, value in params.groupdict().items()},
        body=body,
    )
    return route.function(request)


def refusal_code(status: HTTPStatus) -> str:
    """The error code refusing a request that cannot be read as HTTP: ``invalid_request`` for 400, else the status.

    For example ``length_required`` (411) or ``not_implemented`` (501); ``errors`` lists every one.
    """
    return InvalidRequest.code if status is HTTPStatus.BAD_REQUEST else re.sub(r"\W+", "_", status.phrase.lower())


class _Handler(BaseHTTPRequestHandler):
    server: _AppServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle on, each response waits for a delayed ACK.
    disable_nagle_algorithm = True
    # A client that stops sending mid-request (or opens a connection and says nothing) would hold a
    # thread for ever; after this long without a byte its connection is closed (see make_server).
    timeout = IDLE_SECONDS

    def _serve(self) -> None:
        length = self._body_length()
        if length is None:
            return
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            # The client closed before sending all it declared: acting on a part would act on a guess.
            message = f"The body ended after {len(body)} of the {length} bytes Content-Length declared."
            self._refuse(render_error(InvalidRequest(message, target="Content-Length")))
            return
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
        response = dispatch(
            self.server.routes, self.command, f"http://{host}{self.path}", dict(self.headers.items()), body
        )
        self._send(response)

    # The methods RFC 9110 defines go to the app, which answers those no function takes with 405 and
    # Allow; any other method is unknown to the server, so the stdlib's 501 (see send_error) fits it.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
    do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = _serve

    def _body_length(self) -> int | None:
        """The declared length of the body, or None once the request is refused for its framing."""
        if self.headers.get("Transfer-Encoding") is not None:
            # Chunked bodies are refused, not decoded: the API's clients (the connector, the CLI, any
            # HTTP action) send Content-Length, bodies are at most 64 KiB, and RFC 9112 §6.3 lets a
            # server that wants a length answer 411. A chunk decoder would be more to get wrong.
            self.send_error(HTTPStatus.LENGTH_REQUIRED, "Send the body with a Content-Length, not chunked.")
            return None
        declared = self.headers.get_all("Content-Length")
        if declared is None:
            if self.command not in BODY_METHODS:
                return 0
            self.send_error(HTTPStatus.LENGTH_REQUIRED, f"{self.command} needs a Content-Length header.")
            return None
        return self._declared_length(declared)

    def _declared_length(self, declared: list[str]) -> int | None:
        value = declared[0].strip()
        if len(declared) > 1 or not (value.isascii() and value.isdigit()):
            # int() would take "-1", "+5", "1_0" and "²"; a read of -1 waits for the client to hang up.
            self._refuse(render_error(InvalidRequest("Give one Content-Length in digits.", target="Content-Length")))
            return None
        if len(value) > LENGTH_DIGITS or int(value) > MAX_BODY_BYTES:
            self._refuse(render_error(TooLarge(f"The request body is over {MAX_BODY_BYTES} bytes.", target="body")))
            return None
        return int(value)

    def handle_expect_100(self) -> bool:
        # Judge the declared body before inviting it, so that a refused one is never sent.
        return self._body_length() is not None and super().handle_expect_100()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (a bad request line, too long a header...) in the app's error format."""
        status = HTTPStatus(code)
        self.log_error("code %d, message %s", code, message)
        body = ErrorBody(error=ErrorInfo(code=refusal_code(status), message=message or status.description))
        self._refuse(render(status.value, body))

    def _refuse(self, response: func.HttpResponse) -> None:
        # What follows a refused request (its body, or a request line that did not parse) cannot be
        # trusted to start the next request, so the connection ends with this answer.
        if self.request_version == "HTTP/0.9":
            # Still the stdlib's default when the request line did not parse: answer with a status line.
            self.request_version = self.protocol_version
        self._send(response, close=True)

    def _send(self, response: func.HttpResponse, *, close: bool = False) -> None:
        payload = response.get_body() or b""
        self.send_response(response.status_code)
        for name, value in response.headers.items():
            if name.lower() != "content-length":
                self.send_header(name, value)
        if close:
            self.send_header("Connection", "close")
        # An answer to HEAD ends with its headers (RFC 9110 §9.3.2); a Content-Length there would
        # have to be the one GET would get, which is not known here.
        head = self.command == "HEAD"
        if not head:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head:
            self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


class _AppServer(ThreadingHTTPServer):
    daemon_threads = True
    # Flows fire in bursts; a deep accept queue keeps 32+ simultaneous callers from being refused.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], routes: Sequence[FunctionRoute], idle_seconds: float) -> None:
        handler = type("_IdleBoundHandler", (_Handler,), {"timeout": idle_seconds})
        super().__init__(address, handler)
        self.routes = routes


def make_server(
    app: func.FunctionApp, host: str = "127.0.0.1", port: int = 7071, *, idle_seconds: float = IDLE_SECONDS
) -> ThreadingHTTPServer:
    """A threaded HTTP server for ``app``; port 0 picks a free port (see ``server_address``).

    A connection that sends nothing for ``idle_seconds`` (mid-request, or between requests) is closed.
    """
    return _AppServer((host, port), function_routes(app), idle_seconds)
