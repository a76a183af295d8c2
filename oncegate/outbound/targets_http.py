"""The one way OnceGate reaches a target: :class:`HttpTargets`, the ``TargetCalls`` adapter (issue 34).

Each call goes through every check before a byte leaves, and answers what happened as a
:class:`~oncegate.domain.targets.TargetReply`, never an exception::

    base URL      https (http only to loopback with ONCEGATE_TARGETS_ALLOW_LOOPBACK=true); no user, query,
                  fragment or odd address spelling              ─┐
    path          normalised, kept under the base URL's path     │ refused: Failure.REFUSED,
    headers       the allow-list; the adapter adds Host,         │ nothing sent
                  Idempotency-Key and the target's auth          │
    secret, token read within the call's time                     │
    address       resolved once, within the call's time; every   │
                  address checked                               ─┘  (domain.target_addresses)
    connect       to the checked address itself, never a second lookup (DNS rebinding), TLS with the
                  name as SNI and certificate name              ── fails: NOT_CONNECTED, nothing sent
    send, answer  one request; a 3xx is the answer (no redirect followed); a 1xx with no final answer after
                  it, headers the target hung up inside, a body shorter than its Content-Length, or
                  a length that reads two ways are BROKEN; the body read up to ``max_response_bytes``;
                  the whole call within the target's ``timeout_seconds``, or the time
                  left of the deadline its claim records (``TargetCall.seconds_left``)
                                                                ── TIMEOUT, BROKEN, TOO_LARGE: sent,
                                                                   outcome unknown

``http.client`` reads no proxy settings from the environment, so ``HTTPS_PROXY`` cannot send a call
elsewhere. A watchdog shuts the call's socket at its deadline, whatever phase the call is in (connect, TLS
handshake, send, head or body, a body read until the target closes included): a target that accepts late,
then drips its handshake and its answer a byte at a time, is cut at the deadline as one that never answers
is; each phase's socket timeout is also the time left when it starts. The target's secret or token and the host
lookup count inside that time too: each runs on a thread of its own, and one that hangs (a vault, an identity
endpoint or a DNS server that never answers) is left behind at the deadline, nothing sent (REFUSED for a
secret or token, NOT_CONNECTED for the lookup). A thread left behind keeps its place until it ends: at most
``MAX_LOOKUPS`` lookups and ``MAX_CREDENTIAL_READS`` secret or token reads run at once per adapter, and a call
that finds them all taken is answered at once, nothing sent (NOT_CONNECTED, which a flow may retry).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, TypeVar, cast
from urllib.parse import urlsplit

from oncegate.domain.copies import frozen
from oncegate.domain.target_addresses import AddressRefused, IPAddress, check_cidr, refusal, written_address
from oncegate.domain.target_requests import RequestRefused, check_value, path_under, request_headers
from oncegate.domain.targets import TOO_LATE, Failure, Target, TargetAuth, TargetCall, TargetReply

logger = logging.getLogger(__name__)

# What of an answer is read: a target's answer is kept within the data limit, and the rest only proves it came.
MAX_RESPONSE_BYTES = 1_048_576
READ_CHUNK = 65_536
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
DEFAULT_PORTS = {"https": 443, "http": 80}
USER_AGENT = "OnceGate"
# How many host lookups, and how many secret or token reads, may run at once per adapter, those left behind by
# calls past their deadline included: the threads a hanging resolver, vault or identity endpoint can hold.
MAX_LOOKUPS = 16
MAX_CREDENTIAL_READS = 16

Resolver = Callable[[str, int], Sequence[str]]
Secrets = Callable[[str], str]
Tokens = Callable[[str], str]


class Unavailable(Exception):
    """A secret or token the call needs could not be had: nothing is sent (``Failure.REFUSED``)."""


class _Late(Exception):
    """The work did not end by the call's deadline; it goes on on its own thread, and its result is dropped."""


class _Full(Exception):
    """Every place for that work is taken (threads left behind by calls past their deadline): nothing was tried."""


Result = TypeVar("Result")


class _Bounded:
    """Blocking work each on a thread of its own, waited for until a deadline, at most ``limit`` at once.

    A thread that outlives its call's deadline keeps its place until its work ends, so work that hangs holds at
    most ``limit`` threads; while they are all taken, ``run`` raises ``_Full`` at once instead of starting another.
    """

    def __init__(self, limit: int, name: str) -> None:
        self.limit = limit
        self._places = threading.BoundedSemaphore(limit)
        self._name = name

    def run(self, work: Callable[[], Result], deadline: float) -> Result:
        if not self._places.acquire(blocking=False):
            raise _Full
        found: list[Result] = []
        raised: list[BaseException] = []
        done = threading.Event()

        def run_it() -> None:
            try:
                found.append(work())
            except BaseException as exc:  # handed to the caller, which raises it as the work did
                raised.append(exc)
            finally:
                self._places.release()
                done.set()

        try:
            threading.Thread(target=run_it, name=self._name, daemon=True).start()
        except BaseException:
            self._places.release()
            raise
        if not done.wait(max(0.0, deadline - time.monotonic())):
            raise _Late
        if raised:
            raise raised[0]
        return found[0]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives ``host``, once each, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@frozen
class _Prepared:
    """A call that passed every check but the address: where it goes and what it says."""

    scheme: str
    host: str
    port: int
    path: str
    headers: dict[str, str]


class _TooLarge(Exception):
    pass


class _Unresolved(Exception):
    pass


class HttpTargets:
    """``TargetCalls`` over ``http.client``: one connection per call, to the address that was checked.

    ``resolve`` maps a host name to its addresses (the system's resolver by default; tests point it);
    ``secrets`` reads a target secret by name and ``tokens`` gets an access token for an audience, each
    raising ``Unavailable``; ``tls`` is the TLS context (the system's trust by default).
    """

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        resolve: Resolver = system_resolver,
        secrets: Secrets | None = None,
        tokens: Tokens | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        tls: ssl.SSLContext | None = None,
        max_lookups: int = MAX_LOOKUPS,
        max_credential_reads: int = MAX_CREDENTIAL_READS,
    ) -> None:
        self._allow_loopback = allow_loopback
        self._resolve = resolve
        self._secrets = secrets
        self._tokens = tokens
        self._max_response_bytes = max_response_bytes
        self._tls = tls
        self._lookups = _Bounded(max_lookups, "oncegate-target-lookup")
        self._credential_reads = _Bounded(max_credential_reads, "oncegate-target-credential")

    def call(self, target: Target, request: TargetCall) -> TargetReply:
        """Send ``request`` to ``target`` once, or refuse it; see the module's docstring for each failure."""
        seconds = target.timeout_seconds if request.seconds_left is None else request.seconds_left
        if seconds <= 0:
            return TOO_LATE
        deadline = time.monotonic() + min(seconds, target.timeout_seconds)
        try:
            prepared = self._prepare(target, request, deadline)
            addresses = self._addresses(target, prepared, deadline)
        except (RequestRefused, AddressRefused, Unavailable) as exc:
            logger.warning("Refused a call to target %s: %s", target.name, exc)
            return TargetReply(failure=Failure.REFUSED, reason=str(exc))
        except _Unresolved as exc:
            return TargetReply(failure=Failure.NOT_CONNECTED, reason=str(exc))
        watchdog = _Watchdog(deadline)
        try:
            connection = self._connect(prepared, addresses, deadline, watchdog)
            if isinstance(connection, TargetReply):
                return connection
            return self._exchange(connection, prepared, request, deadline, watchdog)
        finally:
            watchdog.stop()

    # -- before anything is sent --------------------------------------------------------------

    def _prepare(self, target: Target, request: TargetCall, deadline: float) -> _Prepared:
        parts = urlsplit(target.base_url)
        host = parts.hostname or ""
        if parts.scheme not in DEFAULT_PORTS or not host or parts.username is not None or parts.query:
            raise AddressRefused(f"the base URL of {target.name} is not https://host[:port][/path]")
        if parts.scheme == "http" and not self._allow_loopback:
            raise AddressRefused("plain http is refused (ONCEGATE_TARGETS_ALLOW_LOOPBACK is off)")
        if request.method not in METHODS:
            raise RequestRefused(f"the method {request.method!r} is not one OnceGate sends", field="method")
        path = path_under(parts.path, request.path)
        port = parts.port or DEFAULT_PORTS[parts.scheme]
        headers = request_headers(request.headers, target)
        if not any(name.lower() == "user-agent" for name in headers):
            headers["User-Agent"] = USER_AGENT
        headers["Host"] = _host_header(host, port, parts.scheme)
        if request.idempotency_key is not None:
            check_value("Idempotency-Key", request.idempotency_key)
            headers["Idempotency-Key"] = request.idempotency_key
        headers.update(self._auth(target, deadline))
        return _Prepared(parts.scheme, host, port, path, headers)

    def _auth(self, target: Target, deadline: float) -> dict[str, str]:
        """The target's secret or token as its header, read within the call's time (a vault or an identity endpoint
        that hangs is left behind at the deadline); nothing for a target without auth."""
        if not target.auth_headers:
            return {}
        try:
            return self._credential_reads.run(lambda: self._read_auth(target), deadline)
        except _Late:
            raise Unavailable(f"the secret or token of {target.name} was not read within the target's time") from None
        except _Full:
            raise Unavailable(
                f"{self._credential_reads.limit} reads of secrets or tokens are under way, none ended: try again"
            ) from None

    def _read_auth(self, target: Target) -> dict[str, str]:
        if target.auth is TargetAuth.IDENTITY and target.auth_value:
            if self._tokens is None:
                raise Unavailable("no identity is configured to get a token for the target")
            return {"Authorization": f"Bearer {self._tokens(target.auth_value)}"}
        secret = target.secret
        if secret is not None:
            if self._secrets is None:
                raise Unavailable(f"no way to read the secret {secret[1]} is configured")
            value = self._secrets(secret[1])
            try:
                check_value(secret[0], value)
            except RequestRefused:
                raise Unavailable(f"the secret {secret[1]} holds CR, LF or a character outside visible ASCII") from None
            return {secret[0]: value}
        return {}

    def _addresses(self, target: Target, prepared: _Prepared, deadline: float) -> list[IPAddress]:
        """The host's addresses, resolved once and every one checked: one refused address refuses the call."""
        written = written_address(prepared.host)
        try:
            texts = [str(written)] if written is not None else self._lookup(prepared.host, prepared.port, deadline)
        except OSError as exc:
            raise _Unresolved(f"{prepared.host} could not be resolved: {exc}") from exc
        if not texts:
            raise _Unresolved(f"{prepared.host} has no address")
        allowed = tuple(check_cidr(cidr) for cidr in target.allow_cidrs)
        addresses = [ipaddress.ip_address(text.split("%", 1)[0]) for text in texts]
        for address in addresses:
            reason = refusal(address, allowed=allowed, allow_loopback=self._allow_loopback)
            if reason is not None:
                raise AddressRefused(f"{prepared.host} is at {reason}" if written is None else reason)
            if prepared.scheme == "http" and not address.is_loopback:
                raise AddressRefused(f"plain http only to loopback, and {prepared.host} is at {address}")
        return addresses

    def _lookup(self, host: str, port: int, deadline: float) -> Sequence[str]:
        """The resolver's answer, waited for until the call's deadline and no longer.

        The resolver runs on a thread of its own: one that hangs (a DNS server that never answers) is left to end
        on its own, and what it finds after the deadline is dropped. Nothing was sent, so the call is NOT_CONNECTED;
        so it is, at once, while ``MAX_LOOKUPS`` lookups are under way.
        """
        try:
            return self._lookups.run(lambda: self._resolve(host, port), deadline)
        except _Late:
            raise _Unresolved(f"{host} was not resolved within the target's time") from None
        except _Full:
            raise _Unresolved(
                f"{host} was not looked up: {self._lookups.limit} host lookups are under way, none ended; try again"
            ) from None

    def _connect(
        self, prepared: _Prepared, addresses: list[IPAddress], deadline: float, watchdog: _Watchdog
    ) -> _PinnedConnection | TargetReply:
        reason = "no address answered"
        for address in addresses:
            if deadline - time.monotonic() <= 0 or watchdog.fired:
                reason = f"{prepared.host} was not connected to within the target's time"
                break
            connection = _PinnedConnection(address, prepared, deadline=deadline, watchdog=watchdog, tls=self._tls)
            try:
                connection.connect()
            except (OSError, ssl.SSLError) as exc:
                watchdog.close(connection)
                reason = f"{prepared.host} ({address}) did not take the connection: {exc}"
                continue
            return connection
        return TargetReply(failure=Failure.NOT_CONNECTED, reason=reason)

    # -- once something may have been sent -----------------------------------------------------

    def _exchange(
        self,
        connection: _PinnedConnection,
        prepared: _Prepared,
        request: TargetCall,
        deadline: float,
        watchdog: _Watchdog,
    ) -> TargetReply:
        response: _Response | None = None
        try:
            connection.putrequest(request.method, prepared.path, skip_host=True, skip_accept_encoding=True)
            for name, value in prepared.headers.items():
                connection.putheader(name, value)
            body = (
                request.body
                if request.body is not None
                else (b"" if request.method in ("POST", "PUT", "PATCH") else None)
            )
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            response = connection.getresponse()
            if watchdog.fired:
                # http.client takes the end of the stream for the end of the headers: the watchdog's cut is no answer.
                raise TimeoutError
            if response.head_cut:
                # http.client takes the end of the stream for the end of the headers. A target that hung up inside
                # them sent no whole answer, whatever its status line said: it may have acted.
                return TargetReply(failure=Failure.BROKEN, reason="the target hung up inside its headers")
            if response.status < 200:
                # http.client skips a 100; any other 1xx (101 Switching Protocols, 103 Early Hints) it takes for the
                # answer. It is not one: the request was sent and no final answer came.
                return TargetReply(
                    failure=Failure.BROKEN, reason=f"the target answered {response.status} and no final answer"
                )
            ambiguous = _ambiguous_length(response)
            if ambiguous is not None:
                # http.client reads the first Content-Length (or Transfer-Encoding over it); a target or a proxy on
                # the way may have read another answer.
                return TargetReply(failure=Failure.BROKEN, reason=ambiguous)
            body = self._read(response, deadline)
            if watchdog.fired:
                raise TimeoutError
            return TargetReply(status=response.status, headers=_headers(response), body=body)
        except _TooLarge:
            return TargetReply(
                failure=Failure.TOO_LARGE, reason=f"the answer was over {self._max_response_bytes} bytes"
            )
        except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
            if watchdog.fired or time.monotonic() >= deadline or isinstance(exc, TimeoutError):
                return TargetReply(failure=Failure.TIMEOUT, reason="no whole answer within the target's time")
            return TargetReply(failure=Failure.BROKEN, reason=f"the connection broke before a whole answer: {exc}")
        finally:
            # The watchdog first: once stopped it shuts nothing, so a socket number closed here and taken again by
            # another call is never shut by this one's watchdog.
            watchdog.stop()
            if response is not None:
                response.close()  # an answer read until the target closes holds the socket after the connection
            connection.close()

    def _read(self, response: http.client.HTTPResponse, deadline: float) -> bytes:
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > self._max_response_bytes:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read(READ_CHUNK):
            size += len(chunk)
            if size > self._max_response_bytes:
                raise _TooLarge
            if time.monotonic() >= deadline:
                raise TimeoutError
            chunks.append(chunk)
        if response.length:
            # http.client's read of a part ends quietly at the end of the stream, short of the length declared.
            raise http.client.IncompleteRead(b"".join(chunks), response.length)
        return b"".join(chunks)


class _HeadLines:
    """The answer's stream while its head is read: notes a line the stream ended before its line break."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.ended = False

    def readline(self, limit: int = -1) -> bytes:
        line = self.raw.readline(limit)
        # A line over the limit also lacks its break, and http.client refuses it itself (LineTooLong).
        self.ended = self.ended or not line.endswith(b"\n")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class _Response(http.client.HTTPResponse):
    """An answer that knows whether its head ended with its blank line or with the connection (``head_cut``)."""

    head_cut = False

    def begin(self) -> None:
        lines = _HeadLines(self.fp)
        self.fp = cast(Any, lines)
        try:
            super().begin()
        finally:
            if self.fp is not None:  # None once begin closed the answer
                self.fp = cast(Any, lines.raw)
        self.head_cut = lines.ended


class _PinnedConnection(http.client.HTTPConnection):
    """A connection to one checked address, speaking TLS to the host's name when the scheme is https."""

    response_class = _Response

    def __init__(
        self,
        address: IPAddress,
        prepared: _Prepared,
        *,
        deadline: float,
        watchdog: _Watchdog,
        tls: ssl.SSLContext | None,
    ) -> None:
        super().__init__(str(address), prepared.port)
        self._address = address
        self._prepared = prepared
        self._deadline = deadline
        self._watchdog = watchdog
        self._tls = tls if tls is not None else ssl.create_default_context() if prepared.scheme == "https" else None

    def getresponse(self) -> _Response:
        response = super().getresponse()
        assert isinstance(response, _Response), "the connection makes its answers as _Response"
        return response

    def connect(self) -> None:
        """Connect, then shake hands, each with the time left as its socket's timeout, under the call's watchdog."""
        family = socket.AF_INET6 if self._address.version == 6 else socket.AF_INET
        raw = socket.socket(family, socket.SOCK_STREAM)
        self._watchdog.watch(raw)
        try:
            raw.settimeout(_time_left(self._deadline))
            raw.connect((str(self._address), self.port))
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is None:
                self.sock = raw
                return
            # The TLS socket takes the raw one's descriptor: the watchdog watches it before the handshake starts, and
            # the handshake gets the time left after the connect (ssl keeps one deadline for the handshake as a whole).
            wrapped = self._tls.wrap_socket(raw, server_hostname=self._prepared.host, do_handshake_on_connect=False)
            self._watchdog.watch(wrapped)
            try:
                wrapped.settimeout(_time_left(self._deadline))
                wrapped.do_handshake()
            except BaseException:
                wrapped.close()
                raise
            self.sock = wrapped
        except BaseException:
            raw.close()
            raise


class _Watchdog:
    """Shuts every socket of one call at the call's deadline, which ends the connect, handshake, read or write
    under way whatever the phase.

    It keeps its own reference to each socket: ``http.client`` drops the connection's socket as soon as it sees an
    answer read until the target closes, and the answer goes on reading from it. ``stop`` ends the watch; after it,
    nothing is shut.
    """

    def __init__(self, deadline: float) -> None:
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._over = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._cut)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def close(self, connection: http.client.HTTPConnection) -> None:
        """Close a connection given up on while the watch goes on, never while its socket is being shut."""
        with self._lock:
            connection.close()

    def stop(self) -> None:
        with self._lock:
            self._over = True
        self._timer.cancel()

    def _cut(self) -> None:
        with self._lock:
            if self._over:
                return
            self.fired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    # The plain socket's shutdown, on the descriptor, for a TLS socket too: ssl's own would drop its TLS state under
    # a read in progress on the caller's thread.
    with contextlib.suppress(OSError):  # closed already, or its descriptor handed to the TLS socket: nothing to cut
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _time_left(deadline: float) -> float:
    """The time left until ``deadline``, as a socket's timeout; none left is a timeout (a timeout of 0 would not
    block at all)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the target's time ran out")
    return left


def _host_header(host: str, port: int, scheme: str) -> str:
    named = f"[{host}]" if ":" in host else host
    return named if port == DEFAULT_PORTS[scheme] else f"{named}:{port}"


def _ambiguous_length(response: http.client.HTTPResponse) -> str | None:
    """Why the answer's length can be read two ways, or None: Content-Length headers that do not all say the same
    decimal number, or a Content-Length beside Transfer-Encoding, which a sender must never send (RFC 9112 6.2)."""
    given = response.headers.get_all("Content-Length") or []
    lengths = {part.strip() for value in given for part in value.split(",")}
    if len(lengths) > 1 or not all(length.isdigit() for length in lengths):
        return "the answer's Content-Length headers disagree or are not a number"
    if lengths and response.headers.get("Transfer-Encoding") is not None:
        return "the answer gives both Content-Length and Transfer-Encoding"
    return None


def _headers(response: http.client.HTTPResponse) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in response.getheaders():
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers
