"""The outbound adapter against a real stand-in target on loopback (issue 34).

Every refusal is checked the same way: the stand-in listens where the refused call would land had the
check not been made (loopback is allowed in these tests unless the test is about loopback), and it must
have read nothing. Names are resolved by a resolver the test points, as a hosts file would.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.config import Settings
from oncegate.domain.targets import Failure, Target, TargetAuth, TargetCall, TargetReply
from oncegate.outbound.target_secrets import identity_tokens, secret_reader
from oncegate.outbound.targets_http import HttpTargets
from tests.support.target_server import Answer, StandInTarget, tls_for

ORDER = b'{"reference": "PO-1"}'


@pytest.fixture
def stand_in() -> Iterator[StandInTarget]:
    with StandInTarget() as target:
        yield target


def declared(base_url: str, **changes: object) -> Target:
    return replace(Target(name="erp", base_url=base_url, timeout_seconds=5), **changes)  # type: ignore[arg-type]


def post(path: str = "/orders", **changes: object) -> TargetCall:
    call = TargetCall(method="POST", path=path, body=ORDER, idempotency_key="ik-1")
    return replace(call, **changes)  # type: ignore[arg-type]


class Hosts:
    """A resolver pointed by the test, counting its lookups; answers each name's addresses in turn."""

    def __init__(self, **names: Sequence[str]) -> None:
        self._names = {name.replace("_", "."): list(addresses) for name, addresses in names.items()}
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return self._names[host]


def test_a_call_reaches_the_target_once_with_the_idempotency_key(stand_in: StandInTarget) -> None:
    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url + "/api"), post())

    assert (reply.status, reply.failure, reply.sent) == (201, None, True)
    assert reply.body == b'{"id": "order-1", "reference": "PO-1"}'
    [received] = stand_in.received
    assert (received.method, received.path, received.body) == ("POST", "/api/orders", ORDER)
    assert received.header("Idempotency-Key") == "ik-1"
    assert received.header("Host") == f"127.0.0.1:{stand_in.port}"


def test_the_name_is_resolved_once_and_the_checked_address_is_the_one_connected(stand_in: StandInTarget) -> None:
    # A rebinding resolver: the checked answer first, a refused one for any later lookup.
    hosts = Hosts(orders_test=["127.0.0.1"], later=["10.0.0.1"])

    def rebinding(host: str, port: int) -> list[str]:
        return hosts(host if not hosts.lookups else "later", port)

    reply = HttpTargets(allow_loopback=True, resolve=rebinding).call(
        declared(f"http://orders.test:{stand_in.port}"), post()
    )

    assert reply.status == 201
    assert hosts.lookups == ["orders.test"]
    [received] = stand_in.received
    assert received.header("Host") == f"orders.test:{stand_in.port}"
    assert received.client == "127.0.0.1"


REFUSED_ADDRESSES = [
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "169.254.1.1",
    "169.254.169.254",
    "168.63.129.16",
    "0.0.0.1",
    "224.0.0.1",
    "fd00::1",
    "fe80::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::127.0.0.1",
    "64:ff9b::7f00:1",
    "64:ff9b:1::a00:1",
    "2002:7f00:1::1",
]


@pytest.fixture
def tls_target(tmp_path: Path) -> Iterator[tuple[StandInTarget, ssl.SSLContext]]:
    """The stand-in over TLS with a certificate for orders.test, and a client context that trusts it."""
    server, client = tls_for("orders.test", tmp_path)
    with StandInTarget(tls=server) as target:
        yield target, client


@pytest.mark.parametrize("address", REFUSED_ADDRESSES)
def test_a_name_that_resolves_to_a_refused_address_is_refused_and_nothing_is_sent(
    tls_target: tuple[StandInTarget, ssl.SSLContext], address: str
) -> None:
    # https, so that no rule of plain http hides the address check; the stand-in's own address comes second:
    # had the refused one been let through, the connection to it would fail and the next reach the stand-in.
    target, client = tls_target
    hosts = Hosts(orders_test=[address, "127.0.0.1"])

    reply = HttpTargets(allow_loopback=True, resolve=hosts, tls=client).call(
        declared(f"https://orders.test:{target.port}"), post()
    )

    assert (reply.failure, reply.sent) == (Failure.REFUSED, False)
    assert target.received == []


def test_loopback_is_refused_without_the_operator_setting(stand_in: StandInTarget, tmp_path: Path) -> None:
    server, client = tls_for("orders.test", tmp_path)
    with StandInTarget(tls=server) as tls_target:
        hosts = Hosts(orders_test=["127.0.0.1"])
        base = f"https://orders.test:{tls_target.port}"

        refused = HttpTargets(resolve=hosts, tls=client).call(declared(base), post())
        allowed = HttpTargets(allow_loopback=True, resolve=hosts, tls=client).call(declared(base), post())

        assert refused.failure is Failure.REFUSED
        assert allowed.status == 201
        assert len(tls_target.received) == 1


def test_https_speaks_tls_to_the_name_not_the_address(tmp_path: Path) -> None:
    server, client = tls_for("orders.test", tmp_path)
    with StandInTarget(tls=server) as target:
        named = HttpTargets(allow_loopback=True, resolve=Hosts(orders_test=["127.0.0.1"]), tls=client)
        by_address = HttpTargets(allow_loopback=True, tls=client)

        assert named.call(declared(f"https://orders.test:{target.port}"), post()).status == 201
        # The certificate names orders.test: a connection that checked it against 127.0.0.1 fails before sending.
        failed = by_address.call(declared(f"https://127.0.0.1:{target.port}"), post())
        assert (failed.failure, failed.sent) == (Failure.NOT_CONNECTED, False)
        assert len(target.received) == 1


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1", "017700000001", "127.1", "127.0.1", "[::ffff:127.0.0.1]"],
)
def test_an_address_spelled_oddly_in_the_base_url_is_refused_and_nothing_is_sent(
    stand_in: StandInTarget, host: str
) -> None:
    # The system's resolver reads each of these as 127.0.0.1, where the stand-in listens.
    reply = HttpTargets(allow_loopback=True).call(declared(f"http://{host}:{stand_in.port}"), post())

    assert reply.failure is Failure.REFUSED
    assert stand_in.received == []


def test_plain_http_is_refused_without_the_operator_setting(stand_in: StandInTarget) -> None:
    reply = HttpTargets().call(declared(stand_in.base_url), post())

    assert reply.failure is Failure.REFUSED
    assert stand_in.received == []


def test_plain_http_goes_only_to_loopback_even_with_the_setting(stand_in: StandInTarget) -> None:
    hosts = Hosts(orders_test=["8.8.8.8"])

    reply = HttpTargets(allow_loopback=True, resolve=hosts).call(declared("http://orders.test"), post())

    assert reply.failure is Failure.REFUSED


def test_a_declared_cidr_opens_a_private_address_but_never_the_platform(stand_in: StandInTarget) -> None:
    hosts = Hosts(erp_internal=["10.1.2.3"], metadata_internal=["169.254.169.254"])
    adapter = HttpTargets(resolve=hosts)
    private = declared("https://erp.internal", allow_cidrs=("10.0.0.0/8",), timeout_seconds=1)
    metadata = declared("https://metadata.internal", allow_cidrs=("169.254.0.0/16",))

    # Allowed, so the adapter tries to connect (nothing listens there in the test network): not a refusal.
    assert adapter.call(private, post()).failure is Failure.NOT_CONNECTED
    assert adapter.call(metadata, post()).failure is Failure.REFUSED


def test_a_redirect_is_the_answer_and_is_never_followed(stand_in: StandInTarget) -> None:
    with StandInTarget() as elsewhere:
        stand_in.script(Answer(status=302, headers={"Location": elsewhere.base_url + "/steal"}, commit=False))

        reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

        assert reply.status == 302
        assert reply.headers["Location"] == elsewhere.base_url + "/steal"
        assert len(stand_in.received) == 1
        assert elsewhere.received == []


@pytest.mark.parametrize(
    "path",
    [
        "/../admin",
        "/orders/../../admin",
        "/%2e%2e/admin",
        "/.%2E/admin",
        "/%2E%2e",
        "/...",
        "/..;/admin",
        "/orders/..;x=1/..;/admin",
        "/.;/orders",
        "//evil.example/orders",
        "\\\\evil.example\\orders",
        "/orders\\..\\..\\admin",
        "/orders@evil.example",
        "/orders%40evil.example",
        "/a%2f..%2f..%2fadmin",
        "/a%5c..",
        "orders",
        "http://evil.example/orders",
        "/orders#fragment",
        "/orders HTTP/1.1\r\nHost: evil.example",
        "/orders%0d%0aX: y",
        "/orders\x00",
    ],
)
def test_a_path_that_escapes_or_smuggles_is_refused_and_nothing_is_sent(stand_in: StandInTarget, path: str) -> None:
    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url + "/api"), post(path))

    assert reply.failure is Failure.REFUSED
    assert stand_in.received == []


def test_a_path_is_normalised_under_the_base_path(stand_in: StandInTarget) -> None:
    adapter = HttpTargets(allow_loopback=True)

    adapter.call(declared(stand_in.base_url + "/api"), post("/orders/./a//b/%2e%2e/c?x=1&y=%2F"))

    assert [request.path for request in stand_in.received] == ["/api/orders/a/c?x=1&y=%2F"]


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "evil.example"},
        {"host": "evil.example"},
        {"Content-Length": "0"},
        {"Transfer-Encoding": "chunked"},
        {"Cookie": "session=1"},
        {"Proxy-Authorization": "Basic eA=="},
        {"Proxy-Connection": "keep-alive"},
        {"Authorization": "Bearer stolen"},
        {"Idempotency-Key": "mine"},
        {"X-Forwarded-For": "10.0.0.1"},
        {"X-MS-Client-Principal": "e30="},
        {"Connection": "close"},
        {"Via": "1.1 proxy"},
        {"X-Note": "a\r\nHost: evil.example"},
        {"X-Note": "a\nb"},
        {"X Note": "a"},
        {"X-Note:": "a"},
    ],
)
def test_a_forbidden_header_is_refused_and_nothing_is_sent(stand_in: StandInTarget, headers: dict[str, str]) -> None:
    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post(headers=headers))

    assert reply.failure is Failure.REFUSED
    assert stand_in.received == []


def test_allowed_headers_pass_and_the_adapter_sets_its_own(stand_in: StandInTarget) -> None:
    headers = {"Accept": "application/json", "Content-Type": "application/json", "X-Correlation-Id": "c-1"}

    HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post(headers=headers))

    [received] = stand_in.received
    assert {name: received.header(name) for name in headers} == headers
    assert received.header("Idempotency-Key") == "ik-1"
    assert received.header("Authorization") is None


def test_a_target_secret_is_read_by_name_and_sent_in_its_header(stand_in: StandInTarget, tmp_path: Path) -> None:
    secret = "s3cr3t-value-from-the-vault"
    read = secret_reader(environ={"ONCEGATE_TARGET_SECRET_ERP_API": secret}, folder=tmp_path)
    target = declared(stand_in.base_url, auth=TargetAuth.SECRET, auth_value="X-Api-Key=oncegate-target-erp-api")

    HttpTargets(allow_loopback=True, secrets=read).call(target, post())

    assert stand_in.received[0].header("X-Api-Key") == secret


def test_a_secret_that_cannot_be_read_sends_nothing(stand_in: StandInTarget, tmp_path: Path) -> None:
    read = secret_reader(environ={}, folder=tmp_path)
    target = declared(stand_in.base_url, auth=TargetAuth.SECRET, auth_value="X-Api-Key=oncegate-target-erp-api")

    reply = HttpTargets(allow_loopback=True, secrets=read).call(target, post())

    assert reply.failure is Failure.REFUSED
    assert "ONCEGATE_TARGET_SECRET_ERP_API" in (reply.reason or "")
    assert stand_in.received == []


def test_a_local_secret_file_readable_by_others_is_refused(stand_in: StandInTarget, tmp_path: Path) -> None:
    (tmp_path / "oncegate-target-erp-api").write_text("local-secret")
    (tmp_path / "oncegate-target-erp-api").chmod(0o644)
    read = secret_reader(environ={}, folder=tmp_path)
    target = declared(stand_in.base_url, auth=TargetAuth.SECRET, auth_value="X-Api-Key=oncegate-target-erp-api")
    adapter = HttpTargets(allow_loopback=True, secrets=read)

    assert adapter.call(target, post()).failure is Failure.REFUSED
    (tmp_path / "oncegate-target-erp-api").chmod(0o600)
    assert adapter.call(target, post()).status == 201
    assert [request.header("X-Api-Key") for request in stand_in.received] == ["local-secret"]


def test_a_local_secret_file_on_windows_is_read_though_its_mode_says_others_may_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/operations.md, *Targets for Perform once*: "Locally, write the secret to target-secrets/... mode 0600".
    Windows has no group and other bits: its st_mode says 0o666 of every writable file (as the key-secret file's
    check knows), so every target secret file was refused there, "readable by others: chmod 600 it", which no
    Windows operator can do; each Perform once naming the target answered failed."""
    (tmp_path / "oncegate-target-erp-api").write_text("local-secret")
    (tmp_path / "oncegate-target-erp-api").chmod(0o666)  # what Windows reports of the file
    read = secret_reader(environ={}, folder=tmp_path)

    with monkeypatch.context() as windows:
        windows.setattr(os, "name", "nt")
        assert read("oncegate-target-erp-api") == "local-secret"


def test_an_identity_target_gets_a_bearer_token_for_its_audience(stand_in: StandInTarget) -> None:
    audiences: list[str] = []

    def tokens(audience: str) -> str:
        audiences.append(audience)
        return "token-for-" + audience

    target = declared(stand_in.base_url, auth=TargetAuth.IDENTITY, auth_value="api://erp")
    HttpTargets(allow_loopback=True, tokens=tokens).call(target, post())

    assert audiences == ["api://erp"]
    assert stand_in.received[0].header("Authorization") == "Bearer token-for-api://erp"


@pytest.mark.parametrize("status", [200, 202, 302, 400, 404, 408, 409, 429, 500, 503])
def test_every_status_is_the_answer(stand_in: StandInTarget, status: int) -> None:
    stand_in.script(Answer(status=status, body=b'{"detail": "x"}', commit=False))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.status, reply.failure, reply.body) == (status, None, b'{"detail": "x"}')


def test_an_answer_later_than_the_timeout_is_a_timeout_after_sending(stand_in: StandInTarget) -> None:
    stand_in.script(Answer(late=True))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url, timeout_seconds=1), post())

    assert (reply.failure, reply.sent) == (Failure.TIMEOUT, True)
    assert len(stand_in.records) == 1  # the target acted: the outcome is unknown, not failed


def test_an_answer_dripping_past_the_timeout_is_cut_at_the_deadline(stand_in: StandInTarget) -> None:
    # Each byte comes within any per-read timeout: only a bound on the whole call ends it in time.
    stand_in.script(Answer(status=200, body=b"x" * 40, drip=0.25))

    started = time.monotonic()
    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url, timeout_seconds=1), post())

    assert (reply.failure, reply.sent) == (Failure.TIMEOUT, True)
    assert time.monotonic() - started < 3  # the whole answer would take 10 s


def test_a_call_given_less_time_than_the_targets_ends_when_that_time_is_up(stand_in: StandInTarget) -> None:
    # What is left of the deadline its claim records, when the writes before the call took part of the target's time.
    stand_in.script(Answer(late=True))

    with stand_in.released():
        started = time.monotonic()
        reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post(seconds_left=0.3))
        took = time.monotonic() - started

    assert (reply.failure, reply.sent) == (Failure.TIMEOUT, True)
    assert took < 2.5  # the target's own time is 5 s


@pytest.mark.parametrize("left", [0.0, -3.5])
def test_a_call_with_no_time_left_is_not_sent(stand_in: StandInTarget, left: float) -> None:
    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post(seconds_left=left))

    assert (reply.failure, reply.sent) == (Failure.NOT_CONNECTED, False)
    assert reply.reason is not None
    assert "deadline" in reply.reason
    assert stand_in.received == []


@pytest.mark.parametrize("left", [30.0, None])
def test_a_call_never_has_more_than_the_targets_time(stand_in: StandInTarget, left: float | None) -> None:
    stand_in.script(Answer(late=True))

    with stand_in.released():
        started = time.monotonic()
        reply = HttpTargets(allow_loopback=True).call(
            declared(stand_in.base_url, timeout_seconds=1), post(seconds_left=left)
        )
        took = time.monotonic() - started

    assert reply.failure is Failure.TIMEOUT
    assert took < 5


def test_a_connection_broken_after_the_request_was_read_is_broken(stand_in: StandInTarget) -> None:
    stand_in.script(Answer(hang_up=True))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.failure, reply.sent) == (Failure.BROKEN, True)
    assert len(stand_in.received) == 1


@pytest.mark.parametrize("declared_length", [True, False])
def test_an_answer_over_the_bound_is_too_large(stand_in: StandInTarget, declared_length: bool) -> None:
    # A Content-Length over the bound is refused at once; a body that grows past it, while it is read.
    size = 10_000_000 if declared_length else 4_096
    stand_in.script(Answer(status=200, body_bytes=size))
    adapter = HttpTargets(allow_loopback=True, max_response_bytes=1_000 if not declared_length else 1_048_576)

    reply = adapter.call(declared(stand_in.base_url), post())

    assert (reply.failure, reply.sent) == (Failure.TOO_LARGE, True)


def test_a_connection_refused_is_not_connected_and_nothing_sent() -> None:
    reply = HttpTargets(allow_loopback=True).call(declared(f"http://127.0.0.1:{_closed_port()}"), post())

    assert (reply.failure, reply.sent) == (Failure.NOT_CONNECTED, False)


def test_proxy_settings_in_the_environment_are_ignored(
    stand_in: StandInTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("NO_PROXY", "")

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert reply.status == 201
    assert len(stand_in.received) == 1


def test_an_unknown_method_is_refused(stand_in: StandInTarget) -> None:
    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post(method="CONNECT"))

    assert reply.failure is Failure.REFUSED
    assert stand_in.received == []


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_app_wires_the_adapter_with_the_local_secrets_folder(
    stand_in: StandInTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "target-secrets"
    folder.mkdir()
    (folder / "oncegate-target-erp").write_text("from-the-local-file\n")
    (folder / "oncegate-target-erp").chmod(0o600)
    settings = Settings.from_environment(
        {"ONCEGATE_SQLITE_PATH": str(tmp_path / "oncegate.db"), "ONCEGATE_TARGETS_ALLOW_LOOPBACK": "true"}
    )
    target = declared(stand_in.base_url, auth=TargetAuth.SECRET, auth_value="X-Api-Key=oncegate-target-erp")

    reply = bootstrap.target_calls(settings).call(target, post())

    assert reply.status == 201
    assert stand_in.received[0].header("X-Api-Key") == "from-the-local-file"


def test_an_identity_that_gets_no_token_sends_nothing(stand_in: StandInTarget) -> None:
    class NoToken:
        def get_token(self, scope: str) -> object:
            raise RuntimeError("no identity here")

    target = declared(stand_in.base_url, auth=TargetAuth.IDENTITY, auth_value="api://erp")

    reply = HttpTargets(allow_loopback=True, tokens=identity_tokens(NoToken())).call(target, post())

    assert reply.failure is Failure.REFUSED
    assert stand_in.received == []


def test_an_ipv6_target_is_reached_at_its_address_with_a_bracketed_host() -> None:
    with StandInTarget(host="::1") as target:
        reply = HttpTargets(allow_loopback=True).call(declared(target.base_url), post())
        refused = HttpTargets().call(declared(f"https://[::1]:{target.port}"), post())

        assert reply.status == 201
        assert refused.failure is Failure.REFUSED
        assert [request.header("Host") for request in target.received] == [f"[::1]:{target.port}"]


# -- answers that are no whole answer, and a lookup that hangs --------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\n",
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n",
        b"HTTP/1.1 201 Created\r\nLocation: /orders/order-1",
    ],
    ids=["after-the-status-line", "after-a-header", "inside-a-header"],
)
def test_a_target_that_hangs_up_inside_its_headers_is_an_unknown_outcome_never_its_status(
    stand_in: StandInTarget, raw: bytes
) -> None:
    # The target made the order, then closed the connection before its head's blank line: no whole answer came.
    stand_in.script(Answer(raw=raw))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.status, reply.failure, reply.sent) == (None, Failure.BROKEN, True)
    assert reply.reason == "the target hung up inside its headers"
    assert len(stand_in.records) == 1


@pytest.mark.parametrize(
    "lengths",
    [
        b"Content-Length: 2\r\nContent-Length: 26\r\n",
        b"Content-Length: 2, 26\r\n",
        b"Content-Length: 2\r\nContent-Length: +2\r\n",
        b"Content-Length: two\r\n",
    ],
    ids=["two-headers", "one-header-two-values", "a-spelling-of-the-same", "not-a-number"],
)
def test_an_answer_whose_content_lengths_disagree_is_an_unknown_outcome(
    stand_in: StandInTarget, lengths: bytes
) -> None:
    # Read by the first length, this is a 200 with "{}"; read by the second, it is another answer altogether.
    body = b'{}{"error":"not created"}'
    stand_in.script(Answer(raw=b"HTTP/1.1 200 OK\r\n" + lengths + b"\r\n" + body))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.status, reply.failure, reply.sent) == (None, Failure.BROKEN, True)
    assert reply.reason == "the answer's Content-Length headers disagree or are not a number"


def test_an_answer_with_content_length_beside_transfer_encoding_is_an_unknown_outcome(stand_in: StandInTarget) -> None:
    # Read as chunked (as http.client does), this is a 200 with "{}"; read by its length, a 200 with "2\r\n".
    stand_in.script(
        Answer(raw=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    )

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.status, reply.failure, reply.sent) == (None, Failure.BROKEN, True)
    assert reply.reason == "the answer gives both Content-Length and Transfer-Encoding"


def test_a_body_cut_short_of_its_content_length_is_an_unknown_outcome(stand_in: StandInTarget) -> None:
    # The target said 40 bytes, sent 2 and hung up: "{}" is not its answer.
    stand_in.script(Answer(raw=b"HTTP/1.1 201 Created\r\nContent-Length: 40\r\n\r\n{}"))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.status, reply.failure, reply.sent) == (None, Failure.BROKEN, True)
    assert reply.reason == "the connection broke before a whole answer: IncompleteRead(2 bytes read, 38 more expected)"
    assert len(stand_in.records) == 1


def test_content_length_headers_that_agree_are_read_as_one(stand_in: StandInTarget) -> None:
    stand_in.script(Answer(raw=b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"))

    reply = HttpTargets(allow_loopback=True).call(declared(stand_in.base_url), post())

    assert (reply.status, reply.failure, reply.body) == (201, None, b"{}")


def test_a_host_lookup_that_hangs_ends_at_the_calls_deadline_and_nothing_is_sent(stand_in: StandInTarget) -> None:
    asked, let_go = threading.Event(), threading.Event()

    def hanging(host: str, port: int) -> list[str]:
        asked.set()
        let_go.wait()
        return ["127.0.0.1"]

    replies: list[TargetReply] = []
    adapter = HttpTargets(allow_loopback=True, resolve=hanging)
    target = declared(f"http://orders.test:{stand_in.port}", timeout_seconds=1)
    caller = threading.Thread(target=lambda: replies.append(adapter.call(target, post())), daemon=True)
    started = time.monotonic()
    caller.start()
    try:
        assert asked.wait(timeout=10)
        caller.join(timeout=10)
        ended_in_time = not caller.is_alive()
        elapsed = time.monotonic() - started
    finally:
        let_go.set()  # the resolver answers at last, after the call gave up on it
        caller.join(timeout=10)

    assert ended_in_time, "the call waited for the resolver past its deadline"
    assert elapsed < 3  # the target's time is 1 s
    [reply] = replies
    assert (reply.failure, reply.sent) == (Failure.NOT_CONNECTED, False)
    assert reply.reason == "orders.test was not resolved within the target's time"
    assert stand_in.received == []


class Hanging:
    """A resolver, vault or identity endpoint that never answers until the test lets it go; counts who asked."""

    def __init__(self) -> None:
        self.asked = 0
        self.let_go = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, *_: object) -> Any:
        with self._lock:
            self.asked += 1
        self.let_go.wait(timeout=30)
        return ["127.0.0.1"]

    def token(self, audience: str) -> str:
        self(audience)
        return "late-token"

    def secret(self, name: str) -> str:
        self(name)
        return "late-secret"


def calls_at_once(adapter: HttpTargets, target: Target, count: int) -> tuple[list[TargetReply], float]:
    """``count`` calls on threads of their own, all started at once; their replies and the slowest's time."""
    replies: list[TargetReply] = []
    started = time.monotonic()
    callers = [threading.Thread(target=lambda: replies.append(adapter.call(target, post()))) for _ in range(count)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=10)
    assert not any(caller.is_alive() for caller in callers), "a call waited past its deadline"
    return replies, time.monotonic() - started


def ended(name: str) -> None:
    """Waits for the adapter's threads of ``name`` (left behind by calls past their deadline) to end."""
    for thread in [thread for thread in threading.enumerate() if thread.name == name]:
        thread.join(timeout=10)


def test_host_lookups_that_hang_hold_at_most_the_cap_of_threads_and_a_call_past_it_fails_at_once(
    stand_in: StandInTarget,
) -> None:
    resolver = Hanging()
    adapter = HttpTargets(allow_loopback=True, resolve=resolver, max_lookups=2)
    target = declared(f"http://orders.test:{stand_in.port}", timeout_seconds=1)
    try:
        # Two calls give up on their lookups at their deadline; the lookups' threads go on, holding both places.
        late, _ = calls_at_once(adapter, target, 2)
        started = time.monotonic()
        full = adapter.call(target, post())
        full_took = time.monotonic() - started
    finally:
        resolver.let_go.set()
    ended("oncegate-target-lookup")
    again = adapter.call(target, post())

    assert [(reply.failure, reply.sent) for reply in late] == [(Failure.NOT_CONNECTED, False)] * 2
    assert (full.failure, full.sent) == (Failure.NOT_CONNECTED, False)
    assert full.reason == "orders.test was not looked up: 2 host lookups are under way, none ended; try again"
    assert full_took < 0.5, "a call that found every place taken waited"
    assert resolver.asked == 3  # the two left behind, and the one after they ended; never a third thread at once
    assert again.status == 201
    assert len(stand_in.received) == 1


@pytest.mark.parametrize("auth", ["secret", "identity"])
def test_a_secret_or_token_read_that_hangs_ends_at_the_calls_deadline_and_past_the_cap_at_once(
    stand_in: StandInTarget, auth: str
) -> None:
    reader = Hanging()
    if auth == "secret":
        adapter = HttpTargets(allow_loopback=True, secrets=reader.secret, max_credential_reads=2)
        target = declared(stand_in.base_url, auth=TargetAuth.SECRET, auth_value="X-Api-Key=oncegate-target-erp")
    else:
        adapter = HttpTargets(allow_loopback=True, tokens=reader.token, max_credential_reads=2)
        target = declared(stand_in.base_url, auth=TargetAuth.IDENTITY, auth_value="api://erp")
    target = replace(target, timeout_seconds=1)
    try:
        late, took = calls_at_once(adapter, target, 2)
        started = time.monotonic()
        full = adapter.call(target, post())
        full_took = time.monotonic() - started
    finally:
        reader.let_go.set()
    ended("oncegate-target-credential")
    again = adapter.call(target, post())

    assert took < 3, "a call waited for its secret or token past its deadline (the target's time is 1 s)"
    assert [(reply.failure, reply.sent) for reply in late] == [(Failure.REFUSED, False)] * 2
    assert late[0].reason == "the secret or token of erp was not read within the target's time"
    assert (full.failure, full.sent) == (Failure.REFUSED, False)
    assert full.reason == "2 reads of secrets or tokens are under way, none ended: try again"
    assert full_took < 0.5
    assert reader.asked == 3
    assert again.status == 201
    assert len(stand_in.received) == 1
