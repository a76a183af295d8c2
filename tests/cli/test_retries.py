"""The command against a service that answers "not now" (429, 503): reads asked again, changes sent once.

A read answered 503 ``store_unavailable`` (Retry-After: 5) or 429 (Azure's front end, busy) failed at
once, exit 3 or 2, where one more request a few seconds later was answered. Now a read is asked again
after the Retry-After the answer gave, three times in all; a call that changes something is sent once,
whatever it was answered, so that the command never does a side effect twice. Waits are counted by
replacing :func:`oncegate.cli.client.pause`, not slept.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.cli import client as client_module
from oncegate.cli.client import Client, Unreachable
from oncegate.domain.keys import KeyHasher
from oncegate.stores.port import ClaimStore
from tests.cli.conftest import Oncegate, Seen
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.http.client import ServerApi
from tests.http.test_actions import ok, open_conflict

OUTAGE = "the SQLite store is unavailable: disk I/O error"


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The seconds the command waited before each request it sent again."""
    waited: list[float] = []
    monkeypatch.setattr(client_module, "pause", waited.append)
    return waited


@pytest.fixture
def faults(open_store: Callable[[], ClaimStore], clock: FakeClock) -> FaultyStore:
    """The service of the local server over a store whose calls fail when armed."""
    store = FaultyStore(open_store(), Fault.BEFORE)
    bootstrap.use_services(Gate(store, KeyHasher(KEY_SECRET), clock=clock).services)
    return store


def test_a_read_answered_503_is_asked_again_after_its_retry_after(
    oncegate: Oncegate, faults: FaultyStore, waits: list[float], seen: list[Seen]
) -> None:
    faults.arm(1, message=OUTAGE)

    run = oncegate("scopes", "list")

    assert run.code == 0, run.err
    assert waits == [5]
    assert [request.method for request in seen] == ["GET", "GET"]
    assert run.err.splitlines() == ["store_unavailable: asking again in 5 s (2 of 3)"]


def test_a_lasting_outage_is_asked_three_times_then_exit_3(
    oncegate: Oncegate, faults: FaultyStore, waits: list[float], seen: list[Seen]
) -> None:
    faults.arm(1, lasting=True, message=OUTAGE)

    run = oncegate("--json", "claims", "lookup", "--scope", "erp.create-order", "--key", "SO-1")

    assert run.code == 3
    assert (waits, len(seen)) == ([5, 5], 3)
    assert json.loads(run.out)["error"]["code"] == "store_unavailable"
    assert run.err.splitlines()[-1] == f"store_unavailable: {OUTAGE} (retry after 5 s)"


def test_a_change_answered_503_is_sent_once(
    api: ServerApi, oncegate: Oncegate, faults: FaultyStore, waits: list[float], seen: list[Seen]
) -> None:
    conflict_id = open_conflict(api, "SO-1")
    seen.clear()
    faults.arm(1, lasting=True, message=OUTAGE)

    run = oncegate("conflicts", "resolve", conflict_id, "--decision", "dismiss", "--reviewer", "ana@contoso.com")

    assert (run.code, waits) == (3, [])
    assert [(request.method, request.url.split("?")[0].rsplit("/", 1)[-1]) for request in seen] == [("POST", "resolve")]
    faults.disarm()
    assert ok(api.call("get_conflict", route={"conflictId": conflict_id}))["status"] == "open"


class Busy:
    """A front end answering ``answers`` in turn (status, headers, body), then the last one again."""

    def __init__(self, answers: list[tuple[int, dict[str, str], Any]]) -> None:
        self.answers = answers
        self.requests: list[str] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        front = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.answer()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.answer()

            do_PUT = do_POST

            def answer(self) -> None:
                front.requests.append(f"{self.command} {self.path}")
                status, headers, body = front.answers[min(len(front.requests), len(front.answers)) - 1]
                raw = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(raw))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


@pytest.fixture
def busy() -> Iterator[Callable[[list[tuple[int, dict[str, str], Any]]], tuple[str, Busy]]]:
    servers: list[ThreadingHTTPServer] = []

    def serve(answers: list[tuple[int, dict[str, str], Any]]) -> tuple[str, Busy]:
        front = Busy(answers)
        server = ThreadingHTTPServer(("127.0.0.1", 0), front.handler())
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", front

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_429_of_the_front_end_is_waited_out_as_its_retry_after_date_says(
    api: ServerApi, oncegate: Oncegate, waits: list[float], busy: Any
) -> None:
    health = ok(api.call("health"))
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    url, front = busy([(429, {"Retry-After": later}, None), (429, {}, None), (200, {}, health)])

    run = oncegate("--url", url, "--json", "health")

    assert run.code == 0, run.err
    assert json.loads(run.out) == health
    assert len(front.requests) == 3
    # The date is 30 s away (less the time taken to get here); no Retry-After is one second.
    assert 25 < waits[0] <= 30
    assert waits[1:] == [1]


def test_a_change_answered_429_is_sent_once_and_exit_3(oncegate: Oncegate, waits: list[float], busy: Any) -> None:
    url, front = busy([(429, {"Retry-After": "1"}, None)])

    run = oncegate("--url", url, "flows", "register", "--name", "Create ERP order", "--environment", "Default")

    assert (run.code, waits, front.requests) == (3, [], ["PUT /api/flows"])


def test_a_retry_after_longer_than_a_minute_is_not_waited(oncegate: Oncegate, waits: list[float], busy: Any) -> None:
    url, front = busy([(503, {"Retry-After": "3600"}, None)])

    run = oncegate("--url", url, "health")

    assert (run.code, waits, len(front.requests)) == (3, [], 1)


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that takes connections and requests and never answers: a service stuck on its store."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        taken: list[socket.socket] = []
        accepting = threading.Thread(target=lambda: taken.append(listening.accept()[0]), daemon=True)
        accepting.start()
        yield f"http://127.0.0.1:{listening.getsockname()[1]}"
        accepting.join(timeout=5)
        for connection in taken:
            connection.close()


def test_a_change_the_service_took_and_never_answered_says_it_may_be_done(silent: str) -> None:
    client = Client(silent, timeout=0.5)

    with pytest.raises(Unreachable) as unanswered:
        client.resolve_conflict("c" * 24, decision="dismiss", reviewer="ana", note=None)

    said = str(unanswered.value)
    assert said.startswith(f"{silent} took the request but did not answer within 0.5 s")
    assert "may have been done: look (claims show, conflicts show) before running it again" in said
    assert "Is the service running" not in said


def test_a_lookup_the_service_took_and_never_answered_is_said_slow_and_nothing_done(silent: str) -> None:
    """A lookup is a read sent as a POST (the key travels in the body): it changes nothing, and was said to have
    maybe done what it asked, as a change is."""
    client = Client(silent, timeout=0.5)

    with pytest.raises(Unreachable) as unanswered:
        client.lookup_claim("erp.create-order", "SO-1")

    assert str(unanswered.value) == (
        f"{silent} took the request but did not answer within 0.5 s: the service or its store is slow."
    )


def test_the_services_own_503_without_retry_after_is_answered_at_once(
    oncegate: Oncegate, waits: list[float], busy: Any
) -> None:
    """``not_configured`` (a setting, the key secret, a store refused or half restored) comes with no Retry-After:
    waiting a second mends none of them, and the command waited twice and said it was asking again."""
    refusal = {"error": {"code": "not_configured", "message": "The store is being restored.", "details": []}}
    url, front = busy([(503, {}, refusal), (200, {}, None)])

    run = oncegate("--url", url, "claims", "show", "c" * 52)

    assert (run.code, waits, len(front.requests)) == (3, [], 1)
    assert run.err.splitlines() == ["not_configured: The store is being restored."]
