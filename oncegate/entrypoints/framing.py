"""HTTP/1.1 as ``oncegate serve`` speaks it: one process's server, its connections' requests read, refused
by their framing, handed to the app's functions and answered.

The routes come from ``app.get_functions()`` of the very ``FunctionApp`` that Azure runs, and are
matched by the same matcher as the catch-all's 404 and 405 (``routes``), so there is no second
route table to drift. Function keys are not checked, as Core Tools does not check them locally either.

Every answer, refusals of the HTTP framing included, is in the app's error format: a body whose
length cannot be known is refused and its connection closed, never waited for. A body too large
is refused at its headers, and the rest of it read and thrown away (a bounded amount, for a bounded
time) before the connection closes, so that a client still sending reads the 413 (RFC 9112 §9.6).
The processes serving it, and their signals, are :mod:`oncegate.entrypoints.server`'s.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import io
import logging
import re
import socket
import sys
import time
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import azure.functions as func

from oncegate.entrypoints import holdings
from oncegate.entrypoints.error_map import refusal_code
from oncegate.entrypoints.handler_pool import DEFAULT_THREADS, PER_CONNECTION, HandlerPool
from oncegate.entrypoints.heads import HOST, BadHeaders, Headers, host_refusal, read_headers
from oncegate.entrypoints.holdings import BUSY_RETRY_SECONDS, BodyBudget, ConnectionCount
from oncegate.entrypoints.http import MAX_BULK_BODY_BYTES, body_limit, render, render_error
from oncegate.entrypoints.incoming import MAX_HEADER_LINE, Incoming
from oncegate.entrypoints.routes import FunctionRoute, function_routes, match
from oncegate.errors import InvalidRequest, NotFound, TooLarge
from oncegate.models import ErrorBody, ErrorInfo

logger = logging.getLogger(__name__)

ROUTE_PREFIX = "/api/"
# A body is framed by Content-Length only; these methods must declare one, even of 0.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# More digits than this cannot be under any route's body limit, and int() refuses 4,300 and more.
LENGTH_DIGITS = len(str(MAX_BULK_BODY_BYTES))
IDLE_SECONDS = 30
# After refusing a body as too large, how much of it, and for how long, is read and thrown away before
# the connection closes (RFC 9112 §9.6): enough for a body several times the limit, not for ever.
DISCARD_BYTES = 16 * 1024 * 1024
DISCARD_SECONDS = 5.0
# The most one read of a connection takes.
RECEIVE_BYTES = 65536


def dispatch(
    routes: Sequence[FunctionRoute], method: str, url: str, headers: dict[str, str], body: bytes
) -> func.HttpResponse:
    """Call the function whose route and method match, exactly as the Functions host would."""
    parts = urlsplit(url)
    if parts.path == ROUTE_PREFIX.rstrip("/"):
        parts = parts._replace(path=ROUTE_PREFIX)
    if not parts.path.startswith(ROUTE_PREFIX):
        return render_error(NotFound("Routes live under /api/, such as GET /api/health."))
    found = match(routes, method, parts.path[len(ROUTE_PREFIX) :].rstrip("/"))
    if found is None:
        return render_error(NotFound(f"No action is served at {parts.path}."))
    route, params = found
    request = func.HttpRequest(
        method,
        url,
        headers=headers,
        params=dict(parse_qsl(parts.query, keep_blank_values=True)) if parts.query else {},
        route_params={name: value or "" for name, value in params.groupdict().items()},
        body=body,
    )
    return route.function(request)


@functools.cache
def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


_dates: tuple[int, str] = (0, "")


def _date() -> str:
    """The Date header's value, made once a second."""
    global _dates
    now = int(time.time())
    if _dates[0] != now:
        _dates = (now, email.utils.formatdate(now, usegmt=True))
    return _dates[1]


# RFC 9112 §3.2.2's absolute form, an http or https URL with no userinfo and no fragment: its path and query.
_ABSOLUTE_FORM = re.compile(rf"(?i:https?)://(?=[^/?:]){HOST.pattern}(?P<rest>[/?][^#]*)?", re.DOTALL)


class _Writer(io.BufferedIOBase):
    """What a handler of the pool writes its answers with, on a socket that never blocks.

    An answer goes out in one send when the client reads as fast as it comes, as nearly always. What does not fit
    (a long answer to a client slower to read, or not reading) waits here, and the pool's selector sends it as the
    client takes it (:meth:`send`), without a thread: it is abandoned once the client has taken no byte of it for
    ``timeout`` seconds (:meth:`abandoned_at`), and dropped when the connection closes (``flush`` sends nothing).
    """

    def __init__(self, connection: socket.socket, timeout: float) -> None:
        self._connection = connection
        self._timeout = timeout
        self._pending = bytearray()
        self._progress = time.monotonic()
        self._shut_when_sent = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        whole = len(memoryview(data))
        if self._pending:
            self._pending += data
            return whole
        try:
            sent = self._connection.send(data)
        except BlockingIOError:
            sent = 0
        if sent < whole:
            self._pending += memoryview(data)[sent:]
            self._progress = time.monotonic()
        return whole

    def sending(self) -> bool:
        """Whether part of an answer waits for the client to take it."""
        return bool(self._pending)

    def send(self) -> bool:
        """Send what the client takes now, without waiting; whether all is sent. Raises ``OSError`` if it hung up."""
        while self._pending:
            try:
                sent = self._connection.send(self._pending)
            except BlockingIOError:
                return False
            if sent:
                self._progress = time.monotonic()
            del self._pending[:sent]
        if self._shut_when_sent:
            self._shut_when_sent = False
            self._connection.shutdown(socket.SHUT_WR)
        return True

    def abandoned_at(self) -> float:
        """The ``time.monotonic()`` at which what is left is abandoned, if the client takes none of it meanwhile."""
        return self._progress + self._timeout

    def shut_down_when_sent(self) -> None:
        """Close the sending side of the connection once all is sent (now, if it is)."""
        self._shut_when_sent = True
        self.send()


class _Handler(BaseHTTPRequestHandler):
    server: AppServer
    raw_requestline: bytes
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle on, each response waits for a delayed ACK.
    disable_nagle_algorithm = True
    # A client that stops sending mid-request (or opens a connection and says nothing) would hold a
    # thread for ever; after this long without a byte its connection is closed (see make_server).
    timeout = IDLE_SECONDS

    @classmethod
    def opened(cls, request: socket.socket, client_address: Any, server: AppServer) -> _Handler:
        """A handler set up on one connection, whose requests a :class:`HandlerPool` answers one at a time."""
        handler = cls.__new__(cls)
        handler.request, handler.client_address, handler.server = request, client_address, server
        handler.setup()
        # The pool's threads never wait on this socket: a read takes what is there, and what a write cannot send
        # now is sent by the pool's selector as the client takes it (_Writer). A socket with a timeout would cost a poll
        # before every read and write, and two more system calls to switch to and from non-blocking reads.
        try:
            handler.connection.setblocking(False)
            handler.wfile = _Writer(handler.connection, float(handler.timeout or IDLE_SECONDS))
        except BaseException:
            handler._uncount()  # no pool answers it, so none finishes it; the server closes the socket
            raise
        return handler

    def setup(self) -> None:
        self._counted = True  # among the worker's connections (AppServer.process_request counted it)
        try:
            super().setup()
            # Requests are read into ``_incoming`` (without waiting, by the pool's selector), never from a file on
            # the socket: closed here, it would otherwise keep the socket open after the connection closes.
            self.rfile.close()
            self.rfile = io.BytesIO()
            self._incoming = Incoming(float(self.timeout or IDLE_SECONDS))
        except BaseException:
            # A handler whose setup fails is never finished (socketserver calls finish only after it): the count
            # goes back here, or the worker would turn connections away as busy for good once it had leaked them all.
            self._uncount()
            raise
        self.close_connection = False
        self._taken = 0  # what the request's body took of the worker's budget of large bodies (BodyBudget)

    def finish(self) -> None:
        self._give_body()  # closed while its body was awaited: the body's share of the budget goes back
        self._uncount()
        super().finish()

    def _uncount(self) -> None:
        """The connection no longer among the worker's: counted back once, however it ends."""
        if self._counted:
            self._counted = False
            self.server.connections.closed()

    def receive(self) -> bool:
        """Take what the client has sent, without waiting for more; whether the next step is due."""
        try:
            chunk: bytes | None = self.connection.recv(RECEIVE_BYTES)
        except BlockingIOError:
            chunk = None
        except OSError:
            chunk = b""  # reset by the client: what is in is all there will be
        if chunk is not None:
            self._incoming.take(chunk)
        return self._incoming.due()

    def due(self) -> bool:
        """Whether the next step can run now: a request sent behind the last is whole already, say."""
        return self._incoming.due()

    def due_at(self) -> float:
        """When the next step runs even without all it awaits (``time.monotonic()``)."""
        return self._incoming.due_at()

    def sending(self) -> bool:
        """Whether part of the last answer waits for the client to take it (the pool sends it: :class:`_Writer`)."""
        return isinstance(self.wfile, _Writer) and self.wfile.sending()

    def send(self) -> bool:
        """Send what the client takes of the rest of the last answer, without waiting; whether all is sent."""
        if isinstance(self.wfile, _Writer) and not self.wfile.send():
            return False
        self._incoming.answer_sent()
        return True

    def abandoned_at(self) -> float:
        """When the rest of the last answer is abandoned, its client having taken none of it meanwhile."""
        return self.wfile.abandoned_at() if isinstance(self.wfile, _Writer) else time.monotonic()

    def over(self) -> bool:
        """Whether the connection ends now: its last answer is sent (or it was refused, or is idle), and neither
        the body of a request nor the discard after a refusal is still awaited."""
        return self.close_connection and not (self._incoming.awaiting_body or self._incoming.discarding)

    def handle(self) -> None:
        """With a thread per connection (``threads=0``): wait in this thread for each step, then take it."""
        while True:
            self._wait_until_due()
            self.handle_one_request()
            if self.over():
                return

    def _wait_until_due(self) -> None:
        while not self._incoming.due():
            remaining = self._incoming.due_at() - time.monotonic()
            if remaining <= 0:
                return
            try:
                self.connection.settimeout(remaining)
                chunk = self.connection.recv(RECEIVE_BYTES)
            except TimeoutError:
                return
            except OSError:
                chunk = b""
            finally:
                with contextlib.suppress(OSError):
                    self.connection.settimeout(self.timeout)
            self._incoming.take(chunk)

    def handle_one_request(self) -> None:
        """Take the connection's next step, due or late: answer a request whose head (then body) is in, refuse
        one whose head or body took longer than the idle time, close an idle connection or end a discard."""
        incoming = self._incoming
        try:
            if incoming.discarding or incoming.idle:
                incoming.end()
                self.close_connection = True
            elif incoming.awaiting_body:
                self._answer_body()
            elif incoming.head_in:
                self._answer_head()
            else:
                self.requestline = self.command = ""
                self.request_version = self.protocol_version
                message = f"The request's head did not arrive within {self.timeout:g} s; send it whole, at once."
                self.send_error(HTTPStatus.REQUEST_TIMEOUT, message)
        except TimeoutError as exc:
            # An answer the client did not read for the idle time (as the stdlib's handler ends it).
            self.log_error("Request timed out: %r", exc)
            self.close_connection = True

    def _answer_head(self) -> None:
        """The stdlib's ``handle_one_request`` on a head already in, up to the body its method awaits."""
        self.rfile = io.BytesIO(self._incoming.head())
        self.raw_requestline = self.rfile.readline(MAX_HEADER_LINE + 1)
        if len(self.raw_requestline) > MAX_HEADER_LINE:
            self.requestline = self.request_version = self.command = ""
            self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
            return
        if not self.parse_request():
            return
        method = getattr(self, f"do_{self.command}", None)
        if method is None:
            self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({self.command!r})")
            return
        method()

    def _serve(self) -> None:
        length = self._body_length()
        if length is None:
            return
        self._incoming.await_body(self.rfile.tell(), length)
        if self._incoming.due():
            self._answer_body()
        # Else the body is awaited without a thread (HandlerPool), then answered by _answer_body.

    def _answer_body(self) -> None:
        body, length = self._incoming.body(), self._incoming.body_length
        if len(body) < length:
            # What the body took of the large bodies' budget goes back before the answer, as below.
            self._give_body()
        if len(body) < length and not self._incoming.closed:
            message = f"The body did not arrive within {self.timeout:g} s; send it whole, at once."
            self._refuse(render_error(InvalidRequest(message, target="body")))
            return
        if len(body) < length:
            # The client closed before sending all it declared: acting on a part would act on a guess.
            message = f"The body ended after {len(body)} of the {length} bytes Content-Length declared."
            self._refuse(render_error(InvalidRequest(message, target="Content-Length")))
            return
        self._incoming.next_request()
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
        response = dispatch(
            self.server.routes, self.command, f"http://{host}{self.path}", dict(self.headers.items()), body
        )
        # Before the answer: a client that reads it may send its next large body at once. A connection closed before
        # this point gives back what its body took as it closes (finish).
        self._give_body()
        self._send(response)

    # The methods RFC 9110 defines go to the app, which answers those no function takes with 405 and
    # Allow; any other method is unknown to the server, so the stdlib's 501 (see send_error) fits it.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
    do_HEAD = do_OPTIONS = do_TRACE = do_CONNECT = _serve

    def parse_request(self) -> bool:
        """The stdlib's parse of the request line, then the header section read by :func:`heads.read_headers`."""
        if not self._parse_request_line():
            return False
        try:
            self.headers = Headers([]) if self.request_version == "HTTP/0.9" else read_headers(self.rfile)  # type: ignore[assignment]
        except BadHeaders as refused:
            if refused.too_large:
                self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, str(refused))
            else:
                self.send_error(HTTPStatus.BAD_REQUEST, str(refused))
            return False
        refusal = host_refusal(self.headers.get_all("Host") or [], self.request_version)
        if refusal:
            self.send_error(HTTPStatus.BAD_REQUEST, refusal)
            return False
        # A list of options, in one field or several (RFC 9110 §7.6.1): "keep-alive, close" closes too.
        connection = {
            option.strip().lower() for field in self.headers.get_all("Connection") or [] for option in field.split(",")
        }
        if "close" in connection:
            self.close_connection = True
        elif "keep-alive" in connection:
            self.close_connection = False
        expect = (self.headers.get("Expect") or "").lower()
        if expect == "100-continue" and self.request_version >= "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def _parse_request_line(self) -> bool:
        """Method, target and version, refused as the stdlib refuses them (its parse, up to the headers)."""
        self.command = None  # type: ignore[assignment]
        self.request_version = version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) >= 3 and words[-1] == "HTTP/1.1":
            # Nearly every request: kept alive unless its Connection header says otherwise, no number to parse.
            self.close_connection = False
            self.request_version = words[-1]
        elif len(words) >= 3:
            version = words[-1]
            number = version[5:].split(".") if version.startswith("HTTP/") else []
            if len(number) != 2 or not all(part.isascii() and part.isdigit() and len(part) <= 10 for part in number):
                self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request version ({version!r})")
                return False
            if (int(number[0]), int(number[1])) >= (2, 0):
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Invalid HTTP version ({version[5:]})")
                return False
            self.close_connection = (int(number[0]), int(number[1])) < (1, 1)
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({self.requestline!r})")
            return False
        if len(words) == 2 and words[0] != "GET":
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad HTTP/0.9 request type ({words[0]!r})")
            return False
        self.command, self.path = words[:2]
        if not self.path.startswith("/"):
            absolute = _ABSOLUTE_FORM.fullmatch(self.path)
            if absolute is None:
                # The URL is the Host header's authority then the target: "@evil/api/..." would name another host
                # for every link, "[zz]/api/..." is no URL at all (urlsplit raised, the connection closed unanswered).
                message = f"Bad request target ({self.path[:80]!r}); send a path, such as /api/health"
                self.send_error(HTTPStatus.BAD_REQUEST, message)
                return False
            # RFC 9112 §3.2.2: a server must accept the absolute form. Its path and query are served; the links
            # are still built from the Host header, checked like every other (see heads.host_refusal).
            self.path = "/" + (absolute["rest"] or "").removeprefix("/")
        # As the stdlib does (gh-87389): a target of "//host/..." must not read as another host.
        if self.path.startswith("//"):
            self.path = "/" + self.path.lstrip("/")
        return True

    def _body_length(self) -> int | None:
        """The declared length of the body, or None once the request is refused for its framing."""
        if self.headers.get("Transfer-Encoding") is not None:
            # Chunked bodies are refused, not decoded: the API's clients (the connector, the CLI, any
            # HTTP action) send Content-Length, bodies are at most 64 KiB (6.5 MiB for a bulk call), and
            # RFC 9112 §6.3 lets a server that wants a length answer 411. A chunk decoder would be more
            # to get wrong.
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
        limit = body_limit(urlsplit(self.path).path.removeprefix(ROUTE_PREFIX))
        if len(value) > LENGTH_DIGITS or int(value) > limit:
            self._refuse(render_error(TooLarge(f"The request body is over {limit} bytes.", target="body")))
        elif not self._take_body(int(value)):
            message = "The server holds as many large bodies as it takes: send this one again after Retry-After."
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE, message)
        else:
            return int(value)
        if (self.headers.get("Expect") or "").lower() != "100-continue":
            self._discard_body()
        return None

    def _take_body(self, length: int) -> bool:
        """Whether the worker's budget of large bodies takes this request's (once: a 100-continue asks twice)."""
        if not self._taken:
            self._taken = self.server.bodies.take(length)
        return self._taken >= 0

    def _give_body(self) -> None:
        if self._taken > 0:
            self.server.bodies.give(self._taken)
        self._taken = 0

    def _discard_body(self) -> None:
        """Throw away what the client is still sending, up to a bound, so that it reads the refusal.

        Closed at once, the connection would be reset by the bytes that keep arriving, and a client
        still sending (http.client sends the whole body before it reads) would see a broken pipe or a
        reset instead of the 413. RFC 9112 §9.6: close the writing side first, then keep reading.
        The reading is the pool's, without a thread, and the connection closes once it is done.
        A client that asked ``Expect: 100-continue`` sends no body after a refusal: nothing to wait for.
        """
        with contextlib.suppress(OSError):
            if isinstance(self.wfile, _Writer):
                self.wfile.shut_down_when_sent()  # the pool sends the refusal first, as the client takes it
            else:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_WR)
        # The connection ends with the discard's own step (handle_one_request), not with this answer (see over).
        self._incoming.discard(self.rfile.tell(), DISCARD_BYTES, self.server.discard_seconds)

    def handle_expect_100(self) -> bool:
        # Judge the declared body before inviting it, so that a refused one is never sent.
        return self._body_length() is not None and super().handle_expect_100()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's own refusals (a bad request line, too long a header...) in the app's error format."""
        status = HTTPStatus(code)
        self.log_error("code %d, message %s", code, message)
        body = ErrorBody(error=ErrorInfo(code=refusal_code(status), message=message or status.description))
        busy = status is HTTPStatus.SERVICE_UNAVAILABLE
        self._refuse(render(status.value, body, {"Retry-After": str(BUSY_RETRY_SECONDS)} if busy else None))

    def _refuse(self, response: func.HttpResponse) -> None:
        # What follows a refused request (its body, or a request line that did not parse) cannot be
        # trusted to start the next request, so the connection ends with this answer.
        self._incoming.end()
        if self.request_version == "HTTP/0.9":
            # Still the stdlib's default when the request line did not parse: answer with a status line.
            self.request_version = self.protocol_version
        self._send(response, close=True)

    def _send(self, response: func.HttpResponse, *, close: bool = False) -> None:
        """The whole answer in one write: status line, headers and body."""
        payload = response.get_body() or b""
        status = response.status_code
        self.log_request(status)
        if self.request_version == "HTTP/0.9":
            # A simple request gets a simple answer: the body alone (as the stdlib answers one).
            self.wfile.write(payload)
            return
        lines = [f"{self.protocol_version} {status} {_phrase(status)}", f"Server: {self.version_string()}"]
        lines.append(f"Date: {_date()}")
        lines.extend(f"{name}: {value}" for name, value in response.headers.items() if name.lower() != "content-length")
        if close:
            lines.append("Connection: close")
            self.close_connection = True
        # An answer to HEAD ends with its headers (RFC 9110 §9.3.2); a Content-Length there would
        # have to be the one GET would get, which is not known here.
        head = self.command == "HEAD"
        if not head:
            lines.append(f"Content-Length: {len(payload)}")
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "strict") + (b"" if head else payload))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        # The access line is DEBUG: at INFO it cost a claim a tenth of its time, and says what telemetry says.
        if logger.isEnabledFor(logging.DEBUG):
            super().log_request(code, size)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def log_error(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


class AppServer(ThreadingHTTPServer):
    """With ``threads``, a :class:`HandlerPool` of that many answers every connection; with 0, each has a thread."""

    daemon_threads = True
    # Flows fire in bursts; a deep accept queue keeps 32+ simultaneous callers from being refused.
    request_queue_size = 256

    def __init__(
        self,
        address: tuple[str, int],
        routes: Sequence[FunctionRoute],
        idle_seconds: float,
        *,
        threads: int = DEFAULT_THREADS,
        discard_seconds: float = DISCARD_SECONDS,
        stop_seconds: float | None = None,
        bind_and_activate: bool = True,
    ) -> None:
        handler: type[_Handler] = type("_IdleBoundHandler", (_Handler,), {"timeout": idle_seconds})
        super().__init__(address, handler, bind_and_activate=bind_and_activate)
        self.handler = handler
        self.routes = routes
        self.discard_seconds = discard_seconds
        self.idle_seconds = idle_seconds
        self.stop_seconds = idle_seconds if stop_seconds is None else stop_seconds
        self.bodies = BodyBudget()
        self.connections = ConnectionCount(holdings.MAX_CONNECTIONS)
        sweep_seconds = min(idle_seconds, discard_seconds)
        self.pool = HandlerPool(threads, sweep_seconds) if threads != PER_CONNECTION else None

    def handle_error(self, request: Any, client_address: Any) -> None:
        """With a thread per connection: a client that went away before its answer is logged as the pool logs it."""
        failure = sys.exc_info()[1]
        if isinstance(failure, ConnectionError | TimeoutError):
            logger.info("a client of the local server went away before its answer was sent: %r", failure)
            return
        logger.exception("a request failed in the local server")

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.connections.open():
            _turn_away(request)
            self.shutdown_request(request)
            return
        if self.pool is None:
            try:
                super().process_request(request, client_address)
            except BaseException:
                # Its thread never started (the process at its limit of threads): no handler finishes it to give its
                # place back; the server closes the socket.
                self.connections.closed()
                raise
            return
        self.pool.add(self.handler.opened(request, client_address, self))

    def server_close(self) -> None:
        if self.pool is not None:
            # Each thread ends the request it is answering, as a thread per connection would (daemon, not waited for).
            self.pool.close(timeout=self.stop_seconds)
        super().server_close()


def _turn_away(request: socket.socket) -> None:
    """Answer a connection the worker cannot hold ``503 server_busy``, without reading it, as far as the socket takes
    it now (a client still sending may see its connection reset instead: busy all the same)."""
    message = "The server holds as many connections as it takes: connect again after Retry-After."
    status = HTTPStatus.SERVICE_UNAVAILABLE
    body = ErrorBody(error=ErrorInfo(code=refusal_code(status), message=message))
    payload = body.model_dump_json(by_alias=True, exclude_none=True).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
        f"Retry-After: {BUSY_RETRY_SECONDS}\r\nConnection: close\r\nContent-Length: {len(payload)}\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        request.setblocking(False)
        request.send(head.encode("latin-1") + payload)


def make_server(
    app: func.FunctionApp,
    host: str = "127.0.0.1",
    port: int = 7071,
    *,
    idle_seconds: float = IDLE_SECONDS,
    listener: socket.socket | None = None,
    threads: int = DEFAULT_THREADS,
    discard_seconds: float = DISCARD_SECONDS,
    stop_seconds: float | None = None,
) -> ThreadingHTTPServer:
    """A threaded HTTP server for ``app``; port 0 picks a free port (see ``server_address``).

    With ``listener``, it accepts on that bound and listening socket instead (``serve_in_workers``).
    A connection that sends nothing for ``idle_seconds`` between requests is closed; a request whose head, or
    whose body, takes longer than that as a whole is refused (408, 400) and its connection closed.
    ``threads`` handler threads answer every connection's requests (0: a thread per connection). After a 413,
    what the client still sends is read and thrown away for at most ``discard_seconds``. Once closed, it waits at
    most ``stop_seconds`` (``idle_seconds`` when left out) for the threads still answering.
    """
    routes = function_routes(app)
    options: dict[str, Any] = {"threads": threads, "discard_seconds": discard_seconds, "stop_seconds": stop_seconds}
    if listener is None:
        return AppServer((host, port), routes, idle_seconds, **options)
    server = AppServer(listener.getsockname()[:2], routes, idle_seconds, **options, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    return server
