"""The overhead of Perform once over calling the target directly (issue 34), both on loopback in one run.

A minimal HTTP server on 127.0.0.1 answers every POST ``201`` with a small JSON record. Call by call,
interleaved, the same process makes one Perform once in process on SQLite (the request model in, the
answer out: the claim, the call recorded before it is sent, the call through the outbound adapter, the
outcome recorded) and one bare ``http.client`` POST of the same body to the same server on a new
connection, as the adapter opens one per call. Wall time per call, medians of rounds; the figure is the
ratio, and the service's own time is the difference. Issue 34 sets no bound; ``≤ 5x`` is kept as a guard.
"""

from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.rig import Rig, new_key
from bench.targets import Target
from oncegate.domain.targets import Target as Declared
from oncegate.entrypoints import http as pipeline
from oncegate.entrypoints.operations import BY_NAME, Call
from oncegate.models.perform import PerformRequest
from tests.gate import Gate

TARGET = "bench-orders"


class _Orders(BaseHTTPRequestHandler):
    """Answers every POST 201 with the record it made, as small an order system as HTTP allows."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b'{"id":"order-1"}'
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def order_server() -> Iterator[tuple[str, int]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Orders)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _request(key: str) -> dict[str, Any]:
    return {
        "scope": "bench.create-order",
        "key": key,
        "runId": "run-1",
        "flow": {"name": "Create order", "environment": "bench"},
        "reference": key,
        "target": TARGET,
        "method": "POST",
        "path": "/orders",
        "body": {"reference": key, "amount": 10},
    }


def _bare(address: tuple[str, int], body: bytes) -> int:
    connection = http.client.HTTPConnection(*address, timeout=10)
    try:
        connection.request("POST", "/orders", body=body, headers={"Content-Type": "application/json"})
        reply = connection.getresponse()
        reply.read()
        return reply.status
    finally:
        connection.close()


def measure(rig: Rig, *, rounds: int, calls: int) -> tuple[float, float]:
    """Seconds of one Perform once in process (SQLite) and of one bare POST to the same server, interleaved."""
    with order_server() as address:
        service: Gate = rig.service("sqlite", "cost-perform", targets_allow_loopback=True)
        service.store.save_target(
            Declared(
                name=TARGET, base_url=f"http://{address[0]}:{address[1]}", timeout_seconds=10, record_pointer="/id"
            )
        )

        def perform(key: str) -> None:
            request = PerformRequest.model_validate(_request(key))
            answer = pipeline.answer(BY_NAME["perform_once"], service.services, Call(body=request))
            assert answer.decision == "performed", answer

        for _ in range(10):  # the first calls read what an instance then keeps
            key = new_key()
            perform(key)
            _bare(address, json.dumps(_request(key)["body"]).encode())

        def one_round() -> tuple[float, float]:
            performed = bare = 0.0
            for _ in range(calls):
                key = new_key()
                body = json.dumps(_request(key)["body"]).encode()
                began = time.perf_counter()
                perform(key)
                performed += time.perf_counter() - began
                began = time.perf_counter()
                assert _bare(address, body) == 201
                bare += time.perf_counter() - began
            return performed / calls, bare / calls

        pairs = [one_round() for _ in range(rounds)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def judged(figure: tuple[float, float]) -> Target:
    performed, bare = figure
    return Target(
        "Perform once in process (SQLite, request model in, answer out) / a bare `http.client` POST to the same "
        "loopback server",
        f"{performed / bare:.1f}x ({performed * 1e3:,.2f} / {bare * 1e3:,.2f} ms; "
        f"the service's own {(performed - bare) * 1e3:,.2f} ms)",
        "≤ 5x",
        performed <= 5 * bare,
    )
