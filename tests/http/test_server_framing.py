"""The local server's HTTP framing, over raw sockets: every refusal is an answer in the error format.

A request whose body cannot be framed (a bad or missing Content-Length, a chunked or too large
body) is refused and its connection closed; a method no function takes gets 405 with ``Allow``
and keeps the connection. Nothing hangs, and nothing closes without an answer. Each exchange is
bounded by the socket's timeout, never by a sleep.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import pytest

from oncegate.entrypoints.framing import DISCARD_BYTES
from oncegate.entrypoints.http import MAX_BODY_BYTES, MAX_BULK_BODY_BYTES
from oncegate.entrypoints.incoming import MAX_EMPTY_LINE_BYTES, MAX_HEADER_BYTES, Incoming
from oncegate.errors import NotFound
from oncegate.models import ClaimRequest, LookupRequest
from tests.gate import Gate
from tests.load.served import serving

TIMEOUT = 5
HEALTH = b"GET /api/health HTTP/1.1\r\nHost: test\r\n\r\n"


@dataclass(frozen=True)
class Answer:
    """One HTTP answer as read off the wire: status, headers with lower-case names, raw body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def error(self) -> dict[str, Any]:
        """The error of a body in the project's error format."""
        assert self.headers.get("content-type", "").startswith("application/json"), self
        error: dict[str, Any] = json.loads(self.body)["error"]
        assert {"code", "message"} <= error.keys(), error
        return error


@contextmanager
def connected(server: tuple[str, int]) -> Iterator[tuple[socket.socket, BinaryIO]]:
    with socket.create_connection(server, timeout=TIMEOUT) as sock, sock.makefile("rb") as reader:
        yield sock, reader


def read_answer(reader: BinaryIO, *, head: bool = False) -> Answer:
    """The next answer; an answer to HEAD ends with its headers (RFC 9110 §9.3.2)."""
    status_line = reader.readline()
    assert status_line, "the server closed the connection without an answer"
    headers = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if head else int(headers.get("content-length", "0"))
    return Answer(int(status_line.split()[1]), headers, reader.read(length))


def refused(server: tuple[str, int], raw: bytes) -> Answer:
    """The answer to ``raw``, after which the server must close the connection cleanly."""
    with connected(server) as (sock, reader):
        sock.sendall(raw)
        answer = read_answer(reader)
        assert answer.headers.get("connection") == "close", answer
        assert reader.read() == b"", "the connection stayed open after a framing error"
    return answer


def post(length_headers: bytes, body: bytes = b"") -> bytes:
    head = b"POST /api/claims HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
    return head + length_headers + b"\r\n" + body


@pytest.mark.parametrize(
    "length",
    [b"abc", b"-1", b"+5", b"0x10", b"1_0", b"5, 5", b"\xb2"],
    ids=["letters", "negative", "signed", "hex", "underscore", "list", "superscript-two"],
)
def test_a_content_length_that_is_not_a_decimal_number_is_a_400(local_server: tuple[str, int], length: bytes) -> None:
    # Headers are read as Latin-1, where "\xb2" is "²": str.isdigit() accepts it, int() does not.
    answer = refused(local_server, post(b"Content-Length: " + length + b"\r\n", b"{}"))

    assert answer.status == 400
    assert answer.error["code"] == "invalid_request"
    assert [detail["target"] for detail in answer.error["details"]] == ["Content-Length"]


def test_two_different_content_lengths_are_a_400(local_server: tuple[str, int]) -> None:
    answer = refused(local_server, post(b"Content-Length: 2\r\nContent-Length: 40\r\n", b"{}"))

    assert (answer.status, answer.error["code"]) == (400, "invalid_request")


def test_a_post_without_content_length_is_a_411(local_server: tuple[str, int]) -> None:
    answer = refused(local_server, post(b""))

    assert (answer.status, answer.error["code"]) == (411, "length_required")


def test_a_chunked_body_is_a_411_and_never_read_as_the_next_request(local_server: tuple[str, int]) -> None:
    # A server that ignored the chunks would read "2\r\n{}..." as the next request on this connection.
    answer = refused(local_server, post(b"Transfer-Encoding: chunked\r\n", b"2\r\n{}\r\n0\r\n\r\n"))

    assert (answer.status, answer.error["code"]) == (411, "length_required")


def test_a_chunked_body_with_a_content_length_too_is_a_411(local_server: tuple[str, int]) -> None:
    answer = refused(local_server, post(b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", b"{}"))

    assert answer.status == 411


def test_a_body_over_the_limit_is_a_413_without_waiting_for_it(local_server: tuple[str, int]) -> None:
    # Only the headers and the first bytes are sent: an answer proves the body was never awaited.
    answer = refused(local_server, post(b"Content-Length: %d\r\n" % (100 * MAX_BODY_BYTES), b"{" * 1024))

    assert (answer.status, answer.error["code"]) == (413, "too_large")


def test_a_bulk_call_takes_a_body_of_100_items_and_no_more(local_server: tuple[str, int]) -> None:
    bulk = b"POST /api/claims/batch HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
    with connected(local_server) as (sock, reader):
        sock.sendall(bulk + b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (50 * MAX_BODY_BYTES))
        invited = read_answer(reader)
    over = refused(local_server, bulk + b"Content-Length: %d\r\n\r\n" % (MAX_BULK_BODY_BYTES + 1))
    single = refused(local_server, post(b"Content-Length: %d\r\n" % (50 * MAX_BODY_BYTES)))

    assert invited.status == 100
    assert (over.status, over.error["code"]) == (413, "too_large")
    assert str(MAX_BULK_BODY_BYTES) in over.error["message"]
    assert single.status == 413


def test_a_content_length_of_thousands_of_digits_is_a_413(local_server: tuple[str, int]) -> None:
    # int() refuses a string of 4,300 digits or more (CVE-2020-10735); the digits alone show it is too large.
    answer = refused(local_server, post(b"Content-Length: " + b"9" * 5000 + b"\r\n", b"{}"))

    assert (answer.status, answer.error["code"]) == (413, "too_large")


def test_a_body_over_the_limit_is_refused_before_100_continue(local_server: tuple[str, int]) -> None:
    answer = refused(local_server, post(b"Content-Length: %d\r\nExpect: 100-continue\r\n" % (MAX_BODY_BYTES + 1)))

    assert answer.status == 413


def test_a_body_within_the_limit_still_gets_100_continue(local_server: tuple[str, int]) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(post(b"Content-Length: 2\r\nExpect: 100-continue\r\n"))
        assert read_answer(reader).status == 100
        sock.sendall(b"{}")
        answer = read_answer(reader)

    assert (answer.status, answer.error["code"]) == (400, "invalid_request")


@pytest.mark.parametrize(
    "fields",
    [
        b"Connection: keep-alive, close\r\n",
        b"Connection: Upgrade,CLOSE\r\n",
        b"Connection: te\r\nConnection: close\r\n",
    ],
    ids=["list", "case", "two-fields"],
)
def test_close_among_the_connection_options_closes_after_the_answer(
    local_server: tuple[str, int], fields: bytes
) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: test\r\n" + fields + b"\r\n")
        answer = read_answer(reader)

        assert answer.status == 200
        # Kept open, this read would wait out the socket's timeout (the server's idle time is longer).
        assert reader.read() == b""


@pytest.mark.parametrize(("path", "allow"), [("claims", "GET, POST"), ("health", "GET")])
def test_head_is_a_405_with_allow_and_no_body_on_a_connection_kept_open(
    local_server: tuple[str, int], path: str, allow: str
) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(f"HEAD /api/{path} HTTP/1.1\r\nHost: test\r\n\r\n".encode() + HEALTH)
        head = read_answer(reader, head=True)
        # Had the HEAD answer carried a body, it would be read here in place of the next status line.
        after = read_answer(reader)

    assert (head.status, head.headers.get("allow")) == (405, allow)
    assert head.headers.get("content-type", "").startswith("application/json")
    assert after.status == 200


@pytest.mark.parametrize("method", ["OPTIONS", "TRACE"])
def test_options_and_trace_are_a_405_with_allow_in_the_error_format(local_server: tuple[str, int], method: str) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(f"{method} /api/claims HTTP/1.1\r\nHost: test\r\n\r\n".encode() + HEALTH)
        answer = read_answer(reader)
        after = read_answer(reader)

    assert (answer.status, answer.headers.get("allow")) == (405, "GET, POST")
    assert answer.error["code"] == "method_not_allowed"
    assert after.status == 200


def test_a_method_http_does_not_define_is_a_501_in_the_error_format(local_server: tuple[str, int]) -> None:
    answer = refused(local_server, b"PROPFIND /api/claims HTTP/1.1\r\nHost: test\r\n\r\n")

    assert (answer.status, answer.error["code"]) == (501, "not_implemented")


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /api/health HTTP/2.0\r\n\r\n", 505),
        (b"GET /api/health HTTP/1.1\r\nX-Long: " + b"x" * 70_000 + b"\r\n\r\n", 431),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
        # Digits Python's isdigit() takes but int() does not (the thread died without an answer).
        ("GET /api/health HTTP/1.\u00b2\r\n\r\n".encode("latin-1"), 400),
        # Folded lines count as lines: 1,600 of them made one 100 MB header, read in quadratic time.
        (b"GET /api/health HTTP/1.1\r\nX-Fold: a\r\n" + b" b\r\n" * 120 + b"\r\n", 431),
        (b"GET /api/health HTTP/1.1\r\n" + b"".join(b"X-%d: a\r\n" % n for n in range(101)) + b"\r\n", 431),
        # Held in memory while a slow client sends them: 64 KiB of fields in all, though no line is too long.
        (b"GET /api/health HTTP/1.1\r\n" + b"X-A: %b\r\nX-B: %b\r\n\r\n" % (b"a" * 40_000, b"b" * 40_000), 431),
        # A CR without its LF: a reader splitting on it would see a Content-Length the server did not.
        (b"POST /api/claims HTTP/1.1\r\nX-A: a\rContent-Length: 5\r\nContent-Length: 0\r\n\r\n", 400),
        (b"GET /api/health HTTP/1.1\r\nHost: test\r\nNo colon here\r\n\r\n", 400),
        # RFC 9110 §5.5: a NUL in a field, its name or its value, is refused (both were passed on to the app).
        (b"GET /api/health HTTP/1.1\r\nHost: test\r\nX-A: a\x00b\r\n\r\n", 400),
        (b"GET /api/health HTTP/1.1\r\nHost: test\r\nX\x00A: b\r\n\r\n", 400),
        # The URL is built from Host: a path in it would route the request elsewhere than its target.
        (b"GET /api/health HTTP/1.1\r\nHost: test/api/claims/x?\r\n\r\n", 400),
        (b"GET /api/health HTTP/1.1\r\nHost: test#\r\n\r\n", 400),
        (b"GET /api/health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET /api/health HTTP/1.1\r\n\r\n", 400),
    ],
    ids=[
        "request-line",
        "version",
        "header-line",
        "target",
        "unicode-digit",
        "folds",
        "fields",
        "fields-in-all",
        "bare-cr",
        "colon",
        "nul-in-value",
        "nul-in-name",
        "host-with-path",
        "host-with-fragment",
        "two-hosts",
        "no-host",
    ],
)
def test_a_request_the_parser_refuses_is_answered_in_the_error_format(
    local_server: tuple[str, int], raw: bytes, status: int
) -> None:
    answer = refused(local_server, raw)

    assert answer.status == status
    assert answer.error["message"]


def test_a_path_outside_api_says_where_routes_live(local_server: tuple[str, int]) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET /claims HTTP/1.1\r\nHost: test\r\n\r\n")
        answer = read_answer(reader)

    assert (answer.status, answer.error["message"]) == (404, "Routes live under /api/, such as GET /api/health.")


def test_a_body_cut_short_by_the_client_is_a_400_and_nothing_is_claimed(
    local_server: tuple[str, int], wired: Gate
) -> None:
    # A complete JSON object, but shorter than declared, then the client stops sending.
    body = b'{"scope":"s","key":"SO-cut","runId":"r"}'
    with connected(local_server) as (sock, reader):
        sock.sendall(post(b"Content-Length: %d\r\n" % (len(body) + 20), body))
        sock.shutdown(socket.SHUT_WR)
        answer = read_answer(reader)

    assert answer.status == 400
    assert answer.error["details"][0]["target"] == "Content-Length"
    with pytest.raises(NotFound):
        wired.lookup(LookupRequest(scope="s", key="SO-cut"))


def test_a_client_that_stops_mid_request_is_disconnected_after_the_idle_time() -> None:
    with serving(idle_seconds=0.2) as address, connected(address) as (sock, reader):
        sock.sendall(post(b"Content-Length: 100\r\n", b'{"scope":'))
        # Bounded by the socket's own timeout: the server says why and closes well before it.
        refused = read_answer(reader)
        assert (refused.status, refused.error["details"][0]["target"]) == (400, "body")
        assert reader.read() == b""


def test_a_hundred_header_lines_are_read(local_server: tuple[str, int]) -> None:
    fields = b"Host: test\r\nX-Fold: a\r\n b\r\n" + b"".join(b"X-%d: a\r\n" % n for n in range(97))
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET /api/health HTTP/1.1\r\n" + fields + b"\r\n")
        assert read_answer(reader).status == 200


@pytest.mark.parametrize(
    "host", [b"test", b"localhost:7071", b"127.0.0.1:7071", b"[::1]:7071", b"func-app.azurewebsites.net"]
)
def test_a_host_that_is_an_authority_is_answered(local_server: tuple[str, int], host: bytes) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        assert read_answer(reader).status == 200


def test_http_1_0_may_leave_host_out(local_server: tuple[str, int]) -> None:
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET /api/health HTTP/1.0\r\n\r\n")
        assert read_answer(reader).status == 200


def test_the_links_a_list_answers_point_at_the_host_asked(local_server: tuple[str, int], wired: Gate) -> None:
    for number in range(3):
        wired.check_and_claim(ClaimRequest(scope="s", key=f"SO-host-{number}", runId="r"))
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET /api/claim-list?status=in_progress&top=1 HTTP/1.1\r\nHost: gate.example:8443\r\n\r\n")
        answer = read_answer(reader)

    assert answer.status == 200, answer
    assert json.loads(answer.body)["nextLink"].startswith("http://gate.example:8443/api/claim-list?")


@pytest.mark.parametrize("attempt", range(6))
def test_a_client_sending_a_large_body_reads_the_413_on_an_idle_server(
    local_server: tuple[str, int], attempt: int
) -> None:
    """Issue 27: closed at once, the connection was reset under a client still sending (5 tries in 6)."""
    body = b'{"scope": "erp.create-order", "key": "' + b"x" * (3 * 1024 * 1024) + b'"}'
    connection = http.client.HTTPConnection(*local_server, timeout=TIMEOUT)
    try:
        connection.request("POST", "/api/claims", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
    finally:
        connection.close()

    assert (response.status, answer["error"]["code"]) == (413, "too_large")


def sent_until_closed(sock: socket.socket, declared: int) -> int:
    """How many body bytes went out before the server closed the connection (or all of them)."""
    sent = 0
    try:
        while sent < declared:
            sent += sock.send(b"x" * 65536)
    except (ConnectionResetError, BrokenPipeError):
        pass
    return sent


def test_what_is_discarded_after_a_413_is_bounded(local_server: tuple[str, int]) -> None:
    # More than the server reads after a refusal: it closes once it has read its bound, not at the body's end.
    declared = 4 * DISCARD_BYTES
    with connected(local_server) as (sock, reader):
        sock.sendall(post(b"Content-Length: %d\r\n" % declared))
        answer = read_answer(reader)
        sent = sent_until_closed(sock, declared)

    assert answer.status == 413
    assert DISCARD_BYTES <= sent < declared


def test_a_client_that_stalls_after_a_413_holds_the_server_no_longer_than_the_discard_time() -> None:
    """The discard ends at its time bound even when the client neither sends the rest nor hangs up: with one
    handler thread, the next caller is served as soon as that bound passes, not when the stalled client gives up."""
    with serving(threads=1, discard_seconds=0.3) as address, connected(address) as (stalled, reader):
        stalled.sendall(post(b"Content-Length: %d\r\n" % (MAX_BULK_BODY_BYTES * 2), b"x" * 1024))
        assert read_answer(reader).status == 413
        began = time.monotonic()
        with connected(address) as (sock, other):
            sock.sendall(HEALTH)
            answer = read_answer(other)
        waited = time.monotonic() - began

    assert answer.status in (200, 503)
    # Served once the 0.3 s bound passed (the connection's TIMEOUT of 5 s would fail the read otherwise).
    assert waited < TIMEOUT - 1


def test_a_body_trickled_slower_than_the_idle_time_is_refused_and_frees_the_handler() -> None:
    """A byte every 0.1 s never lets a read wait the idle time (0.5 s here), yet the body as a whole may take no
    longer: it is refused, and with one handler thread the next caller is served right after."""
    stop = threading.Event()
    with serving(threads=1, idle_seconds=0.5) as address:
        with connected(address) as (slow, reader):
            slow.sendall(post(b"Content-Length: 1000\r\n"))

            def trickle() -> None:
                with contextlib.suppress(OSError):
                    while not stop.wait(0.1):  # the pace of the slow client, not a wait for the server
                        slow.send(b"x")

            trickler = threading.Thread(target=trickle, daemon=True)
            trickler.start()
            try:
                refused = read_answer(reader)
            finally:
                stop.set()
                trickler.join(timeout=5)
        with connected(address) as (sock, other):
            sock.sendall(HEALTH)
            served = read_answer(other)

    assert refused.status == 400
    assert refused.error["details"][0]["target"] == "body"
    assert served.status in (200, 503)


@pytest.mark.parametrize(
    "target",
    [
        b"[::1/api/health",
        b"x@[zz]/api/health",
        b"@gate.example/api/health",
        b"http://evil@gate.example/api/health",
        b"http://[zz]/api/health",
        b"http:///api/health",
        b"http://:8443/api/health",
        b"http://gate.example/api/health#top",
        b"ftp://gate.example/api/health",
        b"http:/api/health",
    ],
    ids=[
        "bracket-unclosed",
        "bracket-not-an-address",
        "userinfo",
        "absolute-form-userinfo",
        "absolute-form-bracket-not-an-address",
        "absolute-form-no-host",
        "absolute-form-port-alone",
        "absolute-form-fragment",
        "absolute-form-not-http",
        "absolute-form-one-slash",
    ],
)
def test_a_target_that_is_not_a_path_is_a_400_and_never_names_another_host(
    local_server: tuple[str, int], target: bytes
) -> None:
    # The URL is Host's authority then the target: "[zz]/api/health" made no URL (the connection closed unanswered,
    # a traceback logged) and "@gate.example/api/health" was answered as if gate.example had been asked.
    answer = refused(local_server, b"GET " + target + b" HTTP/1.1\r\nHost: test\r\n\r\n")

    assert (answer.status, answer.error["code"]) == (400, "invalid_request"), answer


@pytest.mark.parametrize(
    "target",
    [b"http://127.0.0.1:7071/api/health", b"HTTPS://gate.example/api/health", b"http://[::1]:7071/api/health/"],
)
def test_an_absolute_form_target_is_served_by_its_path(local_server: tuple[str, int], target: bytes) -> None:
    # RFC 9112 §3.2.2: a server must accept the absolute form (a client talking to it as to a proxy sends it).
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: test\r\n\r\n")
        answer = read_answer(reader)
        assert answer.status == 200, answer
        assert json.loads(answer.body)["status"] in ("ok", "degraded")
        # The connection is kept, as for an origin-form target.
        sock.sendall(HEALTH)
        assert read_answer(reader).status == 200


@pytest.mark.parametrize("target", [b"http://gate.example", b"http://gate.example?top=5"])
def test_an_absolute_form_target_without_a_path_is_the_root(local_server: tuple[str, int], target: bytes) -> None:
    # "http://host" is the path "/" (RFC 9112 §3.2.1): answered where routes live, never closed unanswered.
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: test\r\n\r\n")
        answer = read_answer(reader)

    assert (answer.status, answer.error["message"]) == (404, "Routes live under /api/, such as GET /api/health.")


def test_an_absolute_form_target_keeps_its_query_and_links_name_the_host_header(
    local_server: tuple[str, int], wired: Gate
) -> None:
    for number in range(3):
        wired.check_and_claim(ClaimRequest(scope="s", key=f"SO-absolute-{number}", runId="r"))
    target = b"http://elsewhere.example/api/claim-list?status=in_progress&top=1"
    with connected(local_server) as (sock, reader):
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: gate.example:8443\r\n\r\n")
        answer = read_answer(reader)

    assert answer.status == 200, answer
    listed = json.loads(answer.body)
    assert len(listed["value"]) == 1
    # The Host header, checked as every Host is, names the server for links; the target's authority is not used.
    assert listed["nextLink"].startswith("http://gate.example:8443/api/claim-list?")


def test_an_absolute_form_body_is_held_to_its_routes_limit(local_server: tuple[str, int]) -> None:
    # The limit is the target's path's: a bulk call's body is invited, a single claim's refused.
    head = b"POST http://test/api/%b HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
    with connected(local_server) as (sock, reader):
        sock.sendall(head % (b"claims/batch", 50 * MAX_BODY_BYTES))
        invited = read_answer(reader)
    over = refused(local_server, head % (b"claims", 50 * MAX_BODY_BYTES))

    assert invited.status == 100
    assert (over.status, over.error["code"]) == (413, "too_large")


@pytest.mark.parametrize("before", [b"\r\n", b"\n", b"\r\n\r\n"], ids=["crlf", "lf", "two-crlf"])
def test_empty_lines_before_a_request_line_are_ignored(local_server: tuple[str, int], before: bytes) -> None:
    # RFC 9112 §2.2: a server should ignore at least one empty line before a request line (a client may send a CRLF
    # after a body). It read the empty line as a request line of no words and closed the connection unanswered.
    claim = json.dumps({"scope": "s", "key": "SO-crlf", "runId": "r"}).encode()
    with connected(local_server) as (sock, reader):
        sock.sendall(before + HEALTH + post(b"Content-Length: %d\r\n" % len(claim), claim) + before + HEALTH)
        answers = [read_answer(reader).status for _ in range(3)]

    assert answers == [200, 200, 200]


def test_empty_lines_alone_never_restart_the_idle_time() -> None:
    # Else a client sending a CRLF every 29 s would hold its connection for ever.
    incoming = Incoming(30.0)
    idle_until = incoming.due_at()
    for chunk in (b"\r\n", b"\n", b"\r", b"\n"):
        incoming.take(chunk)

    assert (incoming.idle, incoming.due(), incoming.due_at()) == (True, False, idle_until)
    incoming.take(HEALTH)
    assert (incoming.due(), incoming.head()) == (True, HEALTH)


def test_empty_lines_past_a_request_lines_bytes_end_the_connection(local_server: tuple[str, int]) -> None:
    # Dropped one at a time, unbounded, empty lines were read for the whole idle time (30 s) as fast as a client sent
    # them: 4 ms of the leader's CPU for each 64 KiB, 16 MB/s of nothing but empty lines holding a core.
    incoming = Incoming(30.0)
    incoming.take(b"\r\n" * (MAX_EMPTY_LINE_BYTES // 2))
    assert (incoming.idle, incoming.due()) == (True, False)
    incoming.take(b"\n")
    assert incoming.due()

    flood = b"\r\n" * MAX_EMPTY_LINE_BYTES
    with connected(local_server) as (sock, reader):
        with contextlib.suppress(OSError):  # closed while the flood was still being sent
            sock.sendall(flood)
        # Closed unanswered, as a request line of no words is, within the socket's timeout (not the idle time).
        assert reader.read() == b""


def test_fields_of_exactly_64_kib_are_read_however_the_empty_line_arrives() -> None:
    # A head is held to MAX_HEADER_BYTES of fields, its empty line not among them: read whole it was answered, while
    # the empty line's CR arriving in a read before its LF counted as a field's byte, and the same head was a 431.
    request_line = b"GET /api/health HTTP/1.1\r\n"
    fields = b"Host: test\r\nX-Pad: " + b"a" * (MAX_HEADER_BYTES - 21) + b"\r\n"
    assert len(fields) == MAX_HEADER_BYTES
    head = request_line + fields + b"\r\n"

    heads = []
    for chunks in ([head], [request_line + fields, b"\r\n"], [request_line + fields + b"\r", b"\n"]):
        incoming = Incoming(30.0)
        for chunk in chunks:
            incoming.take(chunk)
        heads.append((incoming.due(), incoming.head()))

    assert heads == [(True, head)] * 3


def test_a_head_sent_a_byte_a_read_is_searched_whole_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The search for a head come whole looks through every byte in: tried on each read of a request line trickled a
    # byte at a time, it made the head's reading quadratic (a 64 KiB request line: 2.5 s of CPU, the scan's 0.03 s).
    searches = []
    whole_head = Incoming._whole_head

    def counted(incoming: Incoming, data: bytearray) -> bool:
        searches.append(len(data))
        return whole_head(incoming, data)

    monkeypatch.setattr(Incoming, "_whole_head", counted)
    head = b"GET /api/health?" + b"a" * 2000 + b" HTTP/1.1\r\nHost: test\r\n\r\n"
    incoming = Incoming(30.0)
    for at in range(len(head)):
        incoming.take(head[at : at + 1])

    assert (incoming.due(), incoming.head()) == (True, head)
    assert len(searches) == 1
