"""A stand-in for the Azure Functions host's function-key check, in front of ``oncegate serve``'s server.

The host answers a request without the right key itself, with ``401`` and no body, before the app
sees it; the local server checks no keys. Tests that need the host's refusal put this in front
instead of replacing the app's own dispatch.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

KEY_HEADER = "x-functions-key"


@contextmanager
def functions_host(app: tuple[str, int], *, key: str) -> Iterator[str]:
    """The URL of a host on a free port that checks ``key`` and passes good requests on to ``app``."""

    class Host(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            given = self.headers.get(KEY_HEADER) or parse_qs(urlsplit(self.path).query).get("code", [""])[0]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if given != key:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            connection = http.client.HTTPConnection(*app, timeout=30)
            try:
                connection.request(self.command, self.path, body=body, headers=dict(self.headers))
                answer = connection.getresponse()
                payload = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            finally:
                connection.close()

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, *_: object) -> None:  # the tests read answers, not access logs
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Host)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()
