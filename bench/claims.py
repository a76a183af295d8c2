"""Claims per second on each store, single-threaded: through the service and over HTTP.

Both stores are measured in the same run, side by side, so the ratio between them means
more than either figure on a noisy machine. Run with ``make bench``.
"""

from __future__ import annotations

import http.client
import json
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import function_app
from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.entrypoints.server import make_server
from oncegate.models import ClaimRequest
from oncegate.service.claims import ClaimService
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from oncegate.stores.tables import TableStore
from tests.support.azurite import Azurite

CLAIMS = 300
ROUNDS = 3
SECRET = "bench-secret-" + "x" * 32


def _request(key: str, run: str) -> dict[str, object]:
    return {"scope": "bench.claims", "key": key, "runId": run, "payload": {"amount": 10, "key": key}}


def _rate(action: Callable[[str], object]) -> float:
    keys = [f"SO-{uuid.uuid4().hex}" for _ in range(CLAIMS)]
    started = time.perf_counter()
    for key in keys:
        action(key)
    return CLAIMS / (time.perf_counter() - started)


def measure_service(service: ClaimService) -> float:
    return _rate(lambda key: service.check_and_claim(ClaimRequest.model_validate(_request(key, "r1"))))


@contextmanager
def served(service: ClaimService) -> Iterator[int]:
    bootstrap.use_service(service)
    server = make_server(function_app.app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        bootstrap.use_service(None)


def measure_http(service: ClaimService) -> float:
    with served(service) as port:
        connection = http.client.HTTPConnection("127.0.0.1", port)

        def claim(key: str) -> None:
            connection.request(
                "POST", "/api/claims", json.dumps(_request(key, "r1")), {"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            assert json.loads(response.read())["decision"] == "proceed"

        rate = _rate(claim)
        connection.close()
    return rate


def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        azurite = Azurite(Path(workdir))
        azurite.start()
        try:
            stores: dict[str, Callable[[], ClaimStore]] = {
                "sqlite": lambda: SqliteStore(Path(workdir) / f"{uuid.uuid4().hex}.db"),
                "tables": lambda: TableStore.from_connection_string(
                    azurite.connection_string, prefix="B" + uuid.uuid4().hex[:8]
                ),
            }
            results: dict[tuple[str, str], list[float]] = {}
            for _ in range(ROUNDS):
                for name, make in stores.items():
                    service = ClaimService(make(), KeyHasher(SECRET))
                    results.setdefault((name, "service"), []).append(measure_service(service))
                    results.setdefault((name, "http"), []).append(measure_http(service))
                    service.store.close()
        finally:
            azurite.stop()
    print(f"New claims per second, single-threaded, median of {ROUNDS} rounds of {CLAIMS}:")
    for (name, path), rates in sorted(results.items()):
        print(f"  {name:7} {path:8} {statistics.median(rates):8.0f}/s")
    for path in ("service", "http"):
        ratio = [s / t for s, t in zip(results[("sqlite", path)], results[("tables", path)], strict=True)]
        print(f"  sqlite/tables ratio ({path}), median of pairs: {statistics.median(ratio):.2f}")


if __name__ == "__main__":
    main()
