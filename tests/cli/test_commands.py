"""``oncegate`` against a running service: each command's text and JSON output, and its exit status."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.cli import client as client_module
from oncegate.cli import main
from oncegate.domain.keys import KeyHasher
from oncegate.stores.port import ClaimStore
from tests.cli.conftest import FUNCTION_KEY, Oncegate, Run, Seen
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.http.client import ServerApi, succeed
from tests.http.test_actions import claim_body, ok, open_conflict
from tests.support.functions_host import functions_host

KEY = "shop-eu/SO-1001"
UNKNOWN_CLAIM = "a" * 52


def claimed(api: ServerApi, key: str = KEY) -> dict[str, Any]:
    """A claim whose attempt succeeded with target record ERP-778812."""
    answer = ok(api.call("check_and_claim", claim_body(key=key)))
    ok(succeed(api, answer, targetRecordId="ERP-778812", data={"lines": 2}))
    return answer


def test_claims_show_prints_the_claim_and_its_history(api: ServerApi, oncegate: Oncegate) -> None:
    claim_id = claimed(api)["claimId"]

    run = oncegate("claims", "show", claim_id)

    assert run.code == 0, run.err
    assert claim_id in run.out
    assert "succeeded (attempt 1)" in run.out
    assert "ERP-778812" in run.out
    assert "run-1, flow Create ERP order (Default-contoso)" in run.out
    assert "History (2)" in run.out
    assert "proceed" in run.out


def test_claims_show_gives_the_first_page_of_a_long_history_and_all_of_it_with_all_pages(
    api: ServerApi, oncegate: Oncegate
) -> None:
    claim_id = claimed(api)["claimId"]
    for index in range(50):
        flow = {"name": f"Flow {index}", "environment": "Default-contoso"}
        ok(api.call("check_and_claim", claim_body(key=KEY, run=f"run-{index}", flow=flow)))
    for index in range(3):
        ok(api.call("check_and_claim", claim_body(key=KEY, run=f"run-again-{index}")))

    first = oncegate("claims", "show", claim_id)
    whole = oncegate("claims", "show", claim_id, "--all-pages", "--json")

    assert first.code == whole.code == 0, first.err + whole.err
    assert "History (50)" in first.out
    assert "More history than shown: add --all-pages." in first.err + first.out
    history = json.loads(whole.out)["history"]
    assert [entry.get("count") for entry in history][-1] == 3
    assert len(history) == 2 + 50 + 1
    assert "historyNextLink" not in json.loads(whole.out)


def test_claims_lookup_sends_the_business_key_in_the_body_only(
    api: ServerApi, oncegate: Oncegate, seen: list[Seen]
) -> None:
    claim_id = claimed(api)["claimId"]
    seen.clear()

    run = oncegate("claims", "lookup", "--scope", "erp.create-order", "--key", KEY)

    assert run.code == 0, run.err
    assert claim_id in run.out
    assert [(request.method, request.url.split("/api/")[1]) for request in seen] == [("POST", "claims/lookup")]


@pytest.mark.parametrize("command", ["show", "find"])
def test_claims_json_is_the_services_answer(api: ServerApi, oncegate: Oncegate, command: str) -> None:
    claim_id = claimed(api)["claimId"]
    by_id = ["claims", "show", claim_id]
    by_key = ["claims", "find", "--scope", "erp.create-order", "--key", KEY]

    run = oncegate(*(by_id if command == "show" else by_key), "--json")

    assert run.code == 0, run.err
    assert json.loads(run.out) == ok(api.call("get_claim", route={"claimId": claim_id}))


def test_conflicts_list_follows_next_link_to_the_last_page(
    api: ServerApi, oncegate: Oncegate, clock: FakeClock, seen: list[Seen]
) -> None:
    opened = []
    for index in range(5):
        opened.append(open_conflict(api, f"ORDER-{index}"))
        clock.advance(1)
    seen.clear()

    run = oncegate("--json", "conflicts", "list", "--top", "2", "--all-pages")

    assert run.code == 0, run.err
    assert [conflict["conflictId"] for conflict in json.loads(run.out)["value"]] == opened
    assert "nextLink" not in json.loads(run.out)
    assert [request.url.split("/api/")[1].split("?")[0] for request in seen] == ["conflicts"] * 3
    assert {request.headers.get("x-functions-key") for request in seen} == {FUNCTION_KEY}


def test_conflicts_list_without_all_pages_shows_one_page_and_says_there_is_more(
    api: ServerApi, oncegate: Oncegate
) -> None:
    opened = [open_conflict(api, f"ORDER-{index}") for index in range(3)]
    first_page = ok(api.call("list_conflicts", params={"status": "open", "top": "2"}))

    text = oncegate("conflicts", "list", "--top", "2")
    raw = oncegate("conflicts", "list", "--top", "2", "--json")

    assert text.code == raw.code == 0
    rows = text.out.splitlines()
    assert rows[0].split() == ["CONFLICT", "CREATED", "STATUS", "SCOPE", "FOUND", "BY", "RUN", "REASON"]
    assert [row.split()[0] for row in rows[1:]] == [conflict["conflictId"] for conflict in first_page["value"]]
    assert set(opened) > {row.split()[0] for row in rows[1:]}
    assert "--all-pages" in text.err
    assert json.loads(raw.out) == first_page


def test_conflicts_list_filters_by_status_and_scope(api: ServerApi, oncegate: Oncegate) -> None:
    open_conflict(api, "MAIL-1", scope="mail.send-invoice")

    resolved = oncegate("conflicts", "list", "--status", "resolved")
    other_scope = oncegate("conflicts", "list", "--scope", "erp.create-order")
    every = oncegate("conflicts", "list", "--status", "all", "--scope", "mail.send-invoice")

    assert (resolved.code, resolved.out) == (0, "No resolved conflicts.\n")
    assert (other_scope.code, other_scope.out) == (0, "No open conflicts.\n")
    assert "mail.send-invoice" in every.out


def test_conflicts_show_then_resolve_and_the_service_has_it_resolved(api: ServerApi, oncegate: Oncegate) -> None:
    conflict_id = open_conflict(api, "ORDER-7")

    shown = oncegate("conflicts", "show", conflict_id, "--json")
    decision = ["--decision", "keep_original", "--reviewer", "ana@contoso.com", "--note", "rounding in the shop"]
    resolved = oncegate("conflicts", "resolve", conflict_id, *decision)
    after = ok(api.call("get_conflict", route={"conflictId": conflict_id}))

    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["status"] == "open"
    assert resolved.code == 0, resolved.err
    assert "keep_original" in resolved.out
    assert "rounding in the shop" in resolved.out
    assert after["status"] == "resolved"
    assert after["resolution"]["decision"] == "keep_original"
    assert after["resolution"]["reviewer"] == "ana@contoso.com"
    assert after["resolution"]["note"] == "rounding in the shop"


def test_health(api: ServerApi, oncegate: Oncegate) -> None:
    text = oncegate("health")
    raw = oncegate("health", "--json")

    assert text.code == raw.code == 0
    assert text.out.split() == ["Status", "ok", "Store", "sqlite", "Version", ok(api.call("health"))["version"]]
    assert json.loads(raw.out) == ok(api.call("health"))


def test_health_says_when_the_service_runs_with_another_key_secret(
    api: ServerApi, oncegate: Oncegate, open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    api.call("check_and_claim", {"scope": "erp", "key": "SO-1", "runId": "run-1"})
    bootstrap.use_services(Gate(open_store(), KeyHasher("another-secret-" + "z" * 32), clock=clock).services)

    answer = oncegate("health")

    assert answer.code != 0
    assert "not_configured" in answer.err
    assert "ONCEGATE_KEY_SECRET" in answer.err


def test_the_deployment_and_function_key_come_from_the_environment(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], seen: list[Seen]
) -> None:
    monkeypatch.setenv("ONCEGATE_URL", url + "/api/")
    monkeypatch.setenv("ONCEGATE_FUNCTION_KEY", "from-the-environment")

    code = main(["health"])

    assert code == 0, capsys.readouterr().err
    assert [request.headers.get("x-functions-key") for request in seen] == ["from-the-environment"]


# -- errors -------------------------------------------------------------------------------------


def test_an_unknown_claim_is_exit_2_with_the_services_error_said_once(oncegate: Oncegate) -> None:
    run = oncegate("claims", "show", UNKNOWN_CLAIM)

    assert run.code == 2
    assert run.out == ""
    assert run.err.startswith("not_found: ")
    # The error's one detail (claimId) repeats its message: printed once, not twice.
    assert (len(run.err.splitlines()), run.err.count(UNKNOWN_CLAIM)) == (1, 1)


def test_an_invalid_request_names_its_field_and_the_option_that_sent_it(oncegate: Oncegate) -> None:
    run = oncegate("flows", "register", "--name", "", "--environment", "Default-contoso")

    assert run.code == 2
    assert run.err.startswith("invalid_request: ")
    assert "(name)" in run.err
    assert run.err.splitlines()[1:] == ["  --name: String should have at least 1 character"]


def test_an_error_with_several_details_lists_each(oncegate: Oncegate) -> None:
    run = oncegate("flows", "register", "--name", "x" * 300, "--environment", "y" * 300)

    assert run.code == 2
    assert run.err.splitlines()[1:] == [
        "  --name: String should have at most 256 characters",
        "  --environment: String should have at most 256 characters",
    ]


@pytest.mark.parametrize("argv", [["--top", "0"], ["--top", "201"], ["--top", "many"]])
def test_a_page_size_out_of_range_is_bad_usage_naming_the_range(
    argv: list[str], oncegate: Oncegate, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        oncegate("conflicts", "list", *argv)

    assert exited.value.code == 2
    assert "--top: give a whole number from 1 to 200" in capsys.readouterr().err


def test_resolving_a_resolved_conflict_another_way_is_exit_2(api: ServerApi, oncegate: Oncegate) -> None:
    conflict_id = open_conflict(api, "ORDER-8")
    oncegate("conflicts", "resolve", conflict_id, "--decision", "dismiss", "--reviewer", "ana")

    run = oncegate("conflicts", "resolve", conflict_id, "--decision", "keep_original", "--reviewer", "ana")

    assert run.code == 2
    assert run.err.startswith("conflict_resolved: ")


def test_without_entra_the_reviewer_is_required(
    api: ServerApi, oncegate: Oncegate, seen: list[Seen], capsys: pytest.CaptureFixture[str]
) -> None:
    conflict_id = open_conflict(api, "ORDER-9")
    sent = len(seen)

    with pytest.raises(SystemExit) as exited:
        oncegate("conflicts", "resolve", conflict_id, "--decision", "dismiss")

    assert exited.value.code == 2
    assert "error: --reviewer is required: who decided, such as --reviewer ana@contoso.com" in capsys.readouterr().err
    assert len(seen) == sent
    assert ok(api.call("get_conflict", route={"conflictId": conflict_id}))["status"] == "open"


def test_a_store_outage_is_exit_3_with_retry_after(
    oncegate: Oncegate, open_store: Callable[[], ClaimStore], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = FaultyStore(open_store(), Fault.BEFORE)
    bootstrap.use_services(Gate(faults, KeyHasher(KEY_SECRET), clock=clock).services)
    faults.arm(1, lasting=True, message="the SQLite store is unavailable: disk I/O error")
    # Health only reads: asked again after each Retry-After (tests/cli/test_retries.py), counted here, not slept.
    monkeypatch.setattr(client_module, "pause", lambda seconds: None)

    run = oncegate("health")

    assert run.code == 3
    assert run.err.splitlines()[-1] == (
        "store_unavailable: the SQLite store is unavailable: disk I/O error (retry after 5 s)"
    )


def test_a_rejected_function_key_is_exit_2_with_a_hint(
    local_server: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    # What the Functions host answers for a wrong key, before the app sees the request: 401 and no body.
    with functions_host(local_server, key="the-right-key") as url:
        right = main(["--url", url, "--key", "the-right-key", "conflicts", "list"])
        capsys.readouterr()
        code = main(["--url", url, "--key", "a-wrong-key", "conflicts", "list"])
    run = Run(code, *capsys.readouterr())

    assert right == 0
    assert run.code == 2
    assert run.err.startswith("HTTP 401: Unauthorized: ")
    assert "ONCEGATE_FUNCTION_KEY" in run.err


def test_a_service_that_is_down_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port any more: the connection is refused at once.

    code = main(["--url", f"http://127.0.0.1:{port}", "health"])

    err = capsys.readouterr().err
    assert code == 3
    assert err.startswith(f"Cannot reach http://127.0.0.1:{port}: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "example.com", "health"], "--url must be the function app's address"),
        (["--url", "https://example.com/api/claims", "health"], "--url must be the function app's address"),
        (["--url", "http://example.com", "--key", "k", "health"], "Refusing to send credentials to example.com"),
        (["--entra", "--tenant", "contoso", "health"], "--entra needs --client-id"),
    ],
)
def test_bad_settings_are_exit_2_before_any_request(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(argv)

    assert code == 2
    assert capsys.readouterr().err.startswith(message)


@pytest.mark.parametrize(
    ("argv", "url", "message"),
    [
        (["health"], "127.0.0.1:7071", "ONCEGATE_URL must be the function app's address"),
        (["--url", "127.0.0.1:7071", "health"], "http://127.0.0.1:7071", "--url must be the function app's address"),
    ],
)
def test_a_bad_address_names_where_it_came_from_and_what_it_lacks(
    argv: list[str], url: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONCEGATE_URL", url)

    code = main(argv)

    assert code == 2
    assert (
        capsys.readouterr().err
        == f"{message}, like https://<function app host>, not '127.0.0.1:7071' (http:// or https:// comes first).\n"
    )


def test_conflicts_name_the_changed_parts_never_their_values(api: ServerApi, oncegate: Oncegate) -> None:
    order = {"Amount": 120.5, "Lines": [{"Qty": 1}, {"Qty": 2}, {"Qty": 3}]}
    ok(succeed(api, ok(api.call("check_and_claim", claim_body(key="ORDER-8", payload=order))), targetRecordId="E-1"))
    changed = {"Amount": 987.25, "Lines": [{"Qty": 1}, {"Qty": 2}, {"Qty": 4444}]}
    conflict_id = ok(api.call("check_and_claim", claim_body(key="ORDER-8", run="run-2", payload=changed)))["conflictId"]

    listed = oncegate("conflicts", "list")
    shown = oncegate("conflicts", "show", conflict_id)

    assert listed.code == shown.code == 0, listed.err + shown.err
    assert "Changed: /Amount" in listed.out
    assert re.search(r"^Changed parts\s+/Amount, /Lines/2/Qty$", shown.out, re.MULTILINE)
    for value in ("987.25", "4444"):
        assert value not in listed.out + shown.out
