"""A stand-in target on loopback: a real HTTP server in a thread that records every request (issue 34).

It plays an order system. Each request it reads is kept in :attr:`StandInTarget.received` before it
answers, whatever it answers, so a test can say "nothing was sent" (``received == []``) or "called once".
A ``POST`` (or any method but ``GET``/``HEAD``) commits a record, as a target that acts would, unless the
answer scripted for it says not to; a ``GET`` on the look-up route finds records by ``reference`` (the
JSON body's ``reference``) or by the request's ``Idempotency-Key``::

    with StandInTarget() as target:
        target.script(Answer(status=201))                    # the next request's answer
        target.script(Answer(late=True))                     # commit, then hold the answer until release()
        target.script(Answer(status=503, commit=False))      # refuse without acting
        ...
        target.base_url                                      # http://127.0.0.1:PORT
        target.received                                      # every request, in order
        target.records                                       # what the target made

With no answer scripted a request gets :attr:`StandInTarget.default` (201 with the record as JSON for a
write, the look-up's answer for a ``GET`` on it, 404 elsewhere). A ``late`` answer waits, without a timer,
until the test calls :meth:`StandInTarget.release` (or the server stops), so the caller's own time bound is
what ends the call. ``honours_idempotency_key=True`` makes a write under a key already used answer the
record made first instead of a new one, as a target that honours ``Idempotency-Key`` does.

Look-up routes: ``GET {prefix}?reference=R`` and ``GET {prefix}/by-key/K`` (``prefix`` is ``/orders`` by
default): 200 with the record, or 404. Tests declare a target's ``lookupPath`` as
``/orders?reference={reference}`` or ``/orders/by-key/{idempotencyKey}``.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

READ_METHODS = ("GET", "HEAD")


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What the stand-in does with one request.

    ``status``/``headers``/``body``: the answer (``body`` None: the record as JSON for a write, else empty).
    ``commit``: whether a write makes a record before answering. ``late``: hold the answer until
    :meth:`StandInTarget.release`. ``hang_up``: read the request, then close the connection without a
    word (a reset). ``body_bytes``: answer that many bytes of body (a huge answer), streamed. ``drip``:
    send the body a byte at a time, waiting this many seconds before each (an answer that never ends in time).
    ``raw``: write these bytes as the whole answer, as they are, then close the connection (an answer no HTTP
    server library writes: headers cut short, lengths that disagree).
    """

    status: int = 201
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    commit: bool = True
    late: bool = False
    hang_up: bool = False
    body_bytes: int | None = None
    drip: float | None = None
    raw: bytes | None = None


@dataclass(frozen=True)
class Received:
    """One request as the stand-in read it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client: str

    def header(self, name: str) -> str | None:
        """The header's value, whatever the case of its name; None when absent."""
        return next((value for key, value in self.headers.items() if key.lower() == name.lower()), None)


@dataclass(frozen=True)
class Record:
    """A record the target made: its id, the reference the body named and the key the request carried."""

    record_id: str
    reference: str | None
    idempotency_key: str | None

    def as_json(self) -> bytes:
        return json.dumps({"id": self.record_id, "reference": self.reference}).encode()


class StandInTarget:
    """A real HTTP server on 127.0.0.1 (or ``::1`` with ``host="::1"``), one thread per connection."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        lookup_prefix: str = "/orders",
        honours_idempotency_key: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.lookup_prefix = lookup_prefix
        self.honours_idempotency_key = honours_idempotency_key
        self.received: list[Received] = []
        self.records: list[Record] = []
        self._scripted: deque[Answer] = deque()
        self._changed = threading.Condition()
        self._released = threading.Event()
        server_class = _Server6 if ":" in host else _Server
        self._server = server_class((host, 0), _Handler)
        self._server.target = self
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.port: int = self._server.server_address[1]
        self.host = host
        # serve_forever looks for shutdown() every poll interval, so the test's teardown waits up to that long: at
        # 50 ms the outbound tests' 150 stand-ins spent 5 s of the run shutting down. The per-test servers of
        # tests/support and tests/faults poll every 5 ms; those that live a whole session keep 50 ms.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.005,), name="stand-in-target", daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (``https`` with ``tls``; brackets around an IPv6 host)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __enter__(self) -> StandInTarget:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def script(self, *answers: Answer) -> None:
        """Answer the next requests so, in order; after them, :meth:`default`."""
        with self._changed:
            self._scripted.extend(answers)

    def release(self) -> None:
        """Let every ``late`` answer go, now and from now on."""
        self._released.set()

    @contextmanager
    def released(self) -> Iterator[None]:
        """The held answers go however the block ends, before the calls holding them are waited for."""
        try:
            yield
        finally:
            self.release()

    def wait_for(self, count: int, *, timeout: float = 10.0) -> list[Received]:
        """Block until at least ``count`` requests were read (each is recorded before its answer)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.received) >= count, timeout=timeout):
                raise AssertionError(f"the stand-in target read {len(self.received)} requests, not {count}")
            return list(self.received)

    def writes(self) -> list[Received]:
        """The requests that could have acted: every method but GET and HEAD."""
        with self._changed:
            return [request for request in self.received if request.method not in READ_METHODS]

    # -- what the handler calls ---------------------------------------------------------------

    def _receive(self, request: Received) -> Answer:
        with self._changed:
            self.received.append(request)
            self._changed.notify_all()
            if self._scripted:
                return self._scripted.popleft()
        return self.default(request)

    def default(self, request: Received) -> Answer:
        """The answer when none is scripted: a write commits (201), a look-up finds, anything else is 404."""
        if request.method not in READ_METHODS:
            return Answer(status=201)
        found = self.look_up(request.path)
        if found is None:
            return Answer(status=404, body=b'{"error":"not found"}', commit=False)
        return Answer(status=200, body=found.as_json(), commit=False)

    def look_up(self, path: str) -> Record | None:
        """The record a look-up path names, if the target made one."""
        parts = urlsplit(path)
        with self._changed:
            if parts.path == self.lookup_prefix:
                wanted = parse_qs(parts.query).get("reference", [None])[0]
                return next((record for record in self.records if record.reference == wanted), None)
            if parts.path.startswith(self.lookup_prefix + "/by-key/"):
                key = parts.path.rsplit("/", 1)[-1]
                return next((record for record in self.records if record.idempotency_key == key), None)
        return None

    def _commit(self, request: Received) -> Record:
        key = request.header("Idempotency-Key")
        with self._changed:
            if self.honours_idempotency_key and key is not None:
                made = next((record for record in self.records if record.idempotency_key == key), None)
                if made is not None:
                    return made
            record = Record(f"order-{len(self.records) + 1}", _reference(request.body), key)
            self.records.append(record)
            return record


def tls_for(host_name: str, folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a self-signed certificate for ``host_name``, and a client context trusting only it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host_name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host_name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "target.crt", folder / "target.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def _reference(body: bytes) -> str | None:
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return None
    reference = parsed.get("reference") if isinstance(parsed, dict) else None
    return reference if isinstance(reference, str) else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    target: StandInTarget


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads :attr:`StandInTarget.received` instead."""

    def _serve(self) -> None:
        target = self.server.target
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        request = Received(self.command, self.path, dict(self.headers.items()), body, self.client_address[0])
        answer = target._receive(request)
        record = target._commit(request) if answer.commit and request.method not in READ_METHODS else None
        if answer.hang_up:
            self._hang_up()
            return
        if answer.late:
            target._released.wait()
        if answer.raw is not None:
            self.close_connection = True
            self.wfile.write(answer.raw)
            return
        payload = answer.body if answer.body is not None else (record.as_json() if record else b"")
        size = answer.body_bytes if answer.body_bytes is not None else len(payload)
        try:
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if answer.drip is not None:
                self._drip(payload, answer.drip)
            elif answer.body_bytes is None:
                self.wfile.write(payload)
            else:
                self._stream(answer.body_bytes)
        except OSError:
            self.close_connection = True  # the caller stopped reading (a bound, a timeout): nothing to tell

    def _stream(self, size: int) -> None:
        chunk = b"x" * 65536
        while size > 0:
            self.wfile.write(chunk[:size])
            size -= len(chunk)

    def _drip(self, payload: bytes, pause: float) -> None:
        released = self.server.target._released
        for byte in payload:
            # The pause is the answer's own pace, not a wait for the test: release() ends it at once.
            if released.wait(pause):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()

    def _hang_up(self) -> None:
        """Close with a reset: the caller sees the connection break after its request was read."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _serve
