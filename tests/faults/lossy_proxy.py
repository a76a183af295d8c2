"""An HTTP proxy in front of Azurite that loses one answer: the request reaches Table Storage, the client gets a 500.

Table Storage answers ``500 OperationTimedOut`` when a busy partition cannot finish in time, and
says the operation *may have succeeded*. The SDK retries a 500 even for a POST (an insert, an
entity-group transaction), so the store meets its own earlier write on the retry: a 409 or a
412 that no caller provoked. The proxy makes that happen at the Nth request after ``arm()``.
"""

from __future__ import annotations

import http.client
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.support.azurite import ACCOUNT, ACCOUNT_KEY, HOST

TIMED_OUT = (
    b'{"odata.error":{"code":"OperationTimedOut","message":{"lang":"en-US",'
    b'"value":"Operation could not be completed within the specified time."}}}'
)
# Hop-by-hop headers: the proxy sends its own framing.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class LossyProxy:
    """Forwards every request to Table Storage; while armed, the ``at``-th answer is replaced by a 500."""

    def __init__(self, upstream_connection_string: str) -> None:
        endpoint = dict(part.split("=", 1) for part in upstream_connection_string.split(";") if part)["TableEndpoint"]
        upstream = urlsplit(endpoint)
        self._upstream = (upstream.hostname or HOST, upstream.port or 80)
        self.calls: list[str] = []
        self.fired: str | None = None
        self._armed = False
        self._at = 0
        self._lock = threading.Lock()
        self._server = _Server((HOST, 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True)
        self._thread.start()
        port = self._server.server_address[1]
        self.connection_string = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"TableEndpoint=http://{HOST}:{port}/{ACCOUNT};"
        )

    def arm(self, at: int) -> None:
        with self._lock:
            self.calls, self.fired, self._armed, self._at = [], None, True, at

    def disarm(self) -> list[str]:
        with self._lock:
            self._armed = False
            return self.calls

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any, bytes]:
        connection = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            answer = (response.status, response.getheaders(), response.read())
        finally:
            connection.close()
        with self._lock:
            if not self._armed:
                return answer
            self.calls.append(f"{method} {_resource(path)}")
            if self.fired is not None or len(self.calls) != self._at:
                return answer
            self.fired = self.calls[-1]
        return 500, [("Content-Type", "application/json;odata=minimalmetadata")], TIMED_OUT


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client dropping its keep-alive connection is no fault of the proxy's.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _resource(path: str) -> str:
    """What a request addresses, without the keys: ``$batch``, one ``entity``, or a ``table`` (insert, query)."""
    last = urlsplit(path).path.rsplit("/", 1)[-1]
    if last == "$batch":
        return last
    return "entity" if "PartitionKey=" in last else "table"


def _handler(proxy: LossyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _relay(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
            status, answer_headers, answer = proxy.forward(self.command, self.path, headers, body)
            self.send_response(status)
            for name, value in answer_headers:
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_MERGE = _relay

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
