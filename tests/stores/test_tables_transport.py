"""The store's transport reads the environment's proxy and CA bundle once, when the store opens (issue 36).

azure-core's ``requests`` transport merged the environment into every request, scanning ``os.environ`` each
time; the store now reads what an operator behind a proxy sets (``HTTP(S)_PROXY``, ``NO_PROXY``,
``REQUESTS_CA_BUNDLE``) once and hands it to the SDK client. These tests run a recording forward proxy on
loopback in front of Azurite.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
import requests.utils

from oncegate.stores.tables import transport
from oncegate.stores.tables.store import TableStore
from tests.support import records
from tests.support.azurite import Azurite, ExternalTables, TableStoreFactory

pytestmark = pytest.mark.azurite

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


class Forwarding(BaseHTTPRequestHandler):
    """A plain-HTTP forward proxy: each request line names the whole URL; the request goes on as sent."""

    protocol_version = "HTTP/1.1"  # keeps the client's connection open, as a real proxy does
    seen: list[str]

    def _forward(self) -> None:
        self.seen.append(self.path)
        target = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {name: value for name, value in self.headers.items() if name.lower() != "proxy-connection"}
        upstream = http.client.HTTPConnection(target.hostname or "", target.port, timeout=30)
        upstream.request(self.command, self.path.split(target.netloc, 1)[1], body=body, headers=headers)
        answer = upstream.getresponse()
        content = answer.read()
        self.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)
        upstream.close()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_MERGE = _forward

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[tuple[str, list[str]]]:
    """A forward proxy's address, and the URLs it forwarded."""
    seen: list[str] = []
    handler = type("Recording", (Forwarding,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def local(azurite: Azurite | ExternalTables) -> str:
    if "127.0.0.1" not in azurite.connection_string:
        pytest.skip("the proxy forwards plain HTTP on loopback: run against the suite's Azurite")
    return azurite.connection_string


def test_a_store_opened_behind_a_proxy_sends_through_it(
    local: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch, table_store_factory: TableStoreFactory
) -> None:
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", address)

    store = TableStore.from_connection_string(local, prefix=table_store_factory.prefix)
    claim = records.claim()
    store.create_claim(claim, records.event(claim.claim_id))

    assert store.get_claim(claim.claim_id).claim_id == claim.claim_id
    assert any(url.endswith("/$batch") for url in seen)
    assert any(f"(PartitionKey='{claim.claim_id}',RowKey='claim')" in url for url in seen)
    store.close()


def test_no_proxy_naming_the_endpoint_sends_directly(
    local: str, proxy: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch, table_store_factory: TableStoreFactory
) -> None:
    address, seen = proxy
    monkeypatch.setenv("HTTP_PROXY", address)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")

    store = TableStore.from_connection_string(local, prefix=table_store_factory.prefix)
    claim = records.claim()
    store.create_claim(claim, records.event(claim.claim_id))

    assert seen == []
    store.close()


def test_the_environment_is_read_when_the_store_opens_not_per_request(
    local: str, monkeypatch: pytest.MonkeyPatch, table_store_factory: TableStoreFactory
) -> None:
    store = TableStore.from_connection_string(local, prefix=table_store_factory.prefix)
    scans: list[str] = []
    environ_proxies = requests.utils.get_environ_proxies

    def scanned(url: str, no_proxy: str | None = None) -> dict[str, str]:
        scans.append(url)
        return environ_proxies(url, no_proxy)

    monkeypatch.setattr(requests.utils, "get_environ_proxies", scanned)
    # A proxy set after the store opened (a dead port) is not taken: the next start reads it.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")

    claims = [records.claim() for _ in range(3)]
    for claim in claims:
        store.create_claim(claim, records.event(claim.claim_id))
        store.get_claim(claim.claim_id)

    assert scans == []
    store.close()


def test_a_ca_bundle_is_the_transports_own_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/corporate-root.pem")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.contoso.example:3128")

    options = transport.client_options("https://account.table.core.windows.net")

    assert options["transport"].connection_config.verify == "/etc/ssl/corporate-root.pem"
    assert options["proxies"] == {"https": "http://proxy.contoso.example:3128"}
