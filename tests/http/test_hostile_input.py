"""Careless and hostile input over HTTP: each is a 400 in the error format, never a 500, a hang or a silent change.

Cursors and the trigger's state are sealed (forged, tampered, nested or borrowed ones are refused);
numbers must be finite and members unique in every body; an action refuses query parameters it
does not take, and any given more than once, except the function key (``code``), which the host reads.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from oncegate import bootstrap
from oncegate.config import Settings
from oncegate.cursors import CursorSeal
from oncegate.entrypoints import waits
from oncegate.entrypoints.operations.claims import WAIT_FOR_CLAIM
from oncegate.entrypoints.operations.perform import WAIT_FOR_PERFORM
from oncegate.errors import InvalidRequest
from oncegate.stores.paging import decode_cursor, encode_cursor
from tests.conftest import FakeClock
from tests.connector.spec import DEFINITIONS, load
from tests.gate import Gate
from tests.http.client import FUNCTIONS, Api, Reply
from tests.http.test_actions import claim_body, ok, open_conflict
from tests.http.test_inventory import register

# The base64 of 1,500 "[": 2,000 characters, under the 2,048 limit, and deeper than json's recursion.
NESTED = base64.urlsafe_b64encode(b"[" * 1500).decode()
LISTS: list[tuple[str, dict[str, str]]] = [
    ("list_conflicts", {}),
    ("list_claims_needing_attention", {"attention": "true"}),
    ("list_flows", {}),
    ("list_scopes", {}),
    ("list_flow_overlaps", {}),
]
LIST_IDS = [name for name, _ in LISTS]
POLL = "on_conflict_reported"


def refused(reply: Reply, target: str) -> None:
    """A 400 in the error format naming ``target``."""
    assert reply.status == 400, reply.body
    assert reply.code == "invalid_request", reply.body
    assert target in reply.targets, reply.body


def cursor_of(link: str, name: str = "cursor") -> str:
    return dict(parse_qsl(urlsplit(link).query))[name]


def two_pages(api: Api) -> dict[str, Any]:
    """The first page of a flow list that has a second."""
    for index in range(2):
        register(api, {"name": f"Flow {index}", "environment": "Default-contoso"})
    page = ok(api.call("list_flows", params={"top": "1"}))
    assert "nextLink" in page
    return page


# -- cursors and the trigger's state ----------------------------------------------------------------


@pytest.mark.parametrize(("name", "params"), LISTS, ids=LIST_IDS)
def test_a_deeply_nested_cursor_is_a_400_naming_it(api: Api, name: str, params: dict[str, str]) -> None:
    assert len(NESTED) == 2000

    refused(api.call(name, params={**params, "cursor": NESTED}), "cursor")


def test_a_deeply_nested_trigger_state_is_a_400_naming_it(api: Api) -> None:
    refused(api.call(POLL, params={"state": NESTED}), "state")


@pytest.mark.parametrize(("name", "params"), LISTS, ids=LIST_IDS)
def test_a_cursor_the_service_did_not_seal_is_refused(api: Api, name: str, params: dict[str, str]) -> None:
    forged = encode_cursor("", "")

    refused(api.call(name, params={**params, "cursor": forged}), "cursor")


def test_a_trigger_state_the_service_did_not_seal_is_refused(api: Api) -> None:
    forged = encode_cursor("2000-01-01T00:00:00.000000+00:00", "")

    refused(api.call(POLL, params={"state": forged}), "state")


def test_a_tampered_cursor_is_refused(api: Api) -> None:
    cursor = cursor_of(two_pages(api)["nextLink"])
    middle = len(cursor) // 2
    tampered = cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]

    refused(api.call("list_flows", params={"top": "1", "cursor": tampered}), "cursor")


def test_a_cursor_of_one_list_is_refused_by_another(api: Api) -> None:
    cursor = cursor_of(two_pages(api)["nextLink"])

    refused(api.call("list_scopes", params={"cursor": cursor}), "cursor")
    refused(api.call(POLL, params={"state": cursor}), "state")


def test_a_sealed_cursor_is_url_safe_short_and_pages_on(api: Api) -> None:
    first = two_pages(api)
    cursor = cursor_of(first["nextLink"])

    second = ok(api.call("list_flows", params=dict(parse_qsl(urlsplit(first["nextLink"]).query))))

    assert re.fullmatch(r"[A-Za-z0-9_.=-]{1,256}", cursor), cursor
    assert [flow["name"] for flow in first["value"] + second["value"]] == ["Flow 0", "Flow 1"]


def test_the_trigger_state_in_location_is_sealed_and_polls_on(api: Api, clock: FakeClock) -> None:
    waiting = api.call(POLL, params={"scope": "erp.create-order"})
    clock.advance(1)
    conflict_id = open_conflict(api, "ORDER-1")

    state = cursor_of(waiting.headers["location"], "state")
    delivered = api.call(POLL, params={"scope": "erp.create-order", "state": state})
    forged = state.replace(state[0], "B" if state[0] != "B" else "C", 1)

    assert waiting.status == 202
    assert (delivered.status, [c["conflictId"] for c in delivered.body["value"]]) == (200, [conflict_id])
    refused(api.call(POLL, params={"scope": "erp.create-order", "state": forged}), "state")


def test_an_unexpected_error_in_the_trigger_is_a_json_500(
    api: Api, service: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: Any) -> Any:
        raise RuntimeError("the store fell over in a way nobody expected")

    monkeypatch.setattr(service.services.conflicts, "poll_conflicts", broken)

    reply = api.call(POLL)

    assert (reply.status, reply.code) == (500, "internal_error")
    assert "fell over" not in reply.body["error"]["message"]


def test_decode_cursor_refuses_what_json_cannot_read_as_a_place() -> None:
    for cursor in [NESTED, base64.urlsafe_b64encode(b"9" * 5000).decode(), encode_cursor("a", "b")[:-3], "%%%"]:
        with pytest.raises(InvalidRequest):
            decode_cursor(cursor)
    with pytest.raises(InvalidRequest):
        decode_cursor(base64.urlsafe_b64encode(b'[["a"], "b"]').decode())


def test_a_seal_opens_only_under_the_same_secret_and_list() -> None:
    seal = CursorSeal.from_secret("s" * 40)
    sealed = seal.seal("abc=", "flows")

    assert CursorSeal.from_secret("s" * 40).open(sealed, "flows", target="cursor") == "abc="
    with pytest.raises(InvalidRequest):
        CursorSeal.from_secret("t" * 40).open(sealed, "flows", target="cursor")
    with pytest.raises(InvalidRequest):
        seal.open(sealed, "scopes", target="cursor")
    with pytest.raises(InvalidRequest):
        seal.open("abc=", "flows", target="cursor")


def test_a_built_service_seals_cursors_with_a_key_derived_from_its_secret(tmp_path: Path) -> None:
    secret = "k" * 40
    settings = Settings.from_environment(
        {"ONCEGATE_SQLITE_PATH": str(tmp_path / "oncegate.db"), "ONCEGATE_KEY_SECRET": secret}
    )
    bootstrap.use_services(None, settings=settings)
    try:
        sealed = bootstrap.get_cursor_seal().seal("abc=", "flows")
    finally:
        bootstrap.get_services().close()
        bootstrap.use_services(None)

    assert CursorSeal.from_secret(secret).open(sealed, "flows", target="cursor") == "abc="
    assert secret not in sealed


# -- numbers that are not finite ----------------------------------------------------------------------

NON_FINITE = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"]


@pytest.mark.parametrize("number", NON_FINITE)
def test_a_non_finite_number_in_result_data_is_a_400_and_nothing_changes(api: Api, number: str) -> None:
    answer = ok(api.call("check_and_claim", claim_body()))
    before = ok(api.call("get_claim", route={"claimId": answer["claimId"]}))
    raw = f'{{"claimToken": "{answer["claimToken"]}", "outcome": "succeeded", "data": {{"amount": {number}}}}}'

    reply = api.call("record_result", raw.encode(), route={"claimId": answer["claimId"]})

    refused(reply, "data.amount")
    assert ok(api.call("get_claim", route={"claimId": answer["claimId"]})) == before


@pytest.mark.parametrize(
    ("name", "raw", "target"),
    [
        ("check_and_claim", '{"scope": "s", "key": "k", "runId": "r", "payload": {"lines": [{"qty": 1e400}]}}',
         "payload.lines.0.qty"),
        ("report_conflict", '{"scope": "s", "key": "k", "runId": "r", "reason": "x", "details": {"d": NaN}}',
         "details.d"),
        ("set_scope", '{"scope": "s", "leaseSeconds": -Infinity}', "leaseSeconds"),
        ("lookup_claim", '{"scope": "s", "key": "k", "extra": [1, 2, 1E+999]}', "extra.2"),
    ],
    ids=["payload", "details", "lease", "unknown-field"],
)  # fmt: skip
def test_a_non_finite_number_anywhere_in_a_body_is_a_400_naming_its_field(
    api: Api, name: str, raw: str, target: str
) -> None:
    refused(api.call(name, raw.encode()), target)


# -- duplicate members --------------------------------------------------------------------------------


def test_a_duplicate_member_is_a_400_naming_it_and_nothing_is_claimed(api: Api) -> None:
    raw = b'{"scope": "erp.create-order", "key": "ORDER-A", "key": "ORDER-B", "runId": "run-1", "fingerprint": "v1"}'

    refused(api.call("check_and_claim", raw), "key")
    for key in ("ORDER-A", "ORDER-B"):
        assert api.call("lookup_claim", {"scope": "erp.create-order", "key": key}).status == 404


@pytest.mark.parametrize(
    ("raw", "target"),
    [
        ('"flow": {"name": "A", "name": "B", "environment": "E"}', "flow.name"),
        ('"payload": {"amount": 1, "amount": 2}', "payload.amount"),
        ('"payload": [{"sku": "A"}, {"sku": "A", "qty": 1, "sku": "B"}]', "payload.1.sku"),
    ],
    ids=["flow", "payload", "payload-list"],
)
def test_a_duplicate_member_deep_in_a_body_is_a_400_naming_it(api: Api, raw: str, target: str) -> None:
    body = '{"scope": "erp.create-order", "key": "ORDER-A", "runId": "run-1", ' + raw + "}"

    refused(api.call("check_and_claim", body.encode()), target)


# -- bodies that are not a JSON object ----------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b'{"scope": "\xff\xfe"}', b"[1, 2]", b"42", b'"text"', b"null", b"{", b"\xef\xbb\xbf{}"],
    ids=["not-utf-8", "array", "number", "string", "null", "truncated", "bom"],
)
def test_a_body_that_is_not_a_json_object_is_a_400(api: Api, raw: bytes) -> None:
    refused(api.call("lookup_claim", raw), "body")


# -- query parameters ---------------------------------------------------------------------------------


def refused_as_unknown(reply: Reply, name: str) -> None:
    refused(reply, name)
    assert "not a parameter" in reply.body["error"]["message"], reply.body


@pytest.mark.parametrize(
    ("name", "params", "unknown"),
    [
        ("list_flows", {"scope": "x"}, "scope"),
        ("list_flow_overlaps", {"status": "open"}, "status"),
        ("list_scopes", {"scope": "x"}, "scope"),
        ("list_conflicts", {"state": "x"}, "state"),
        ("list_claims_needing_attention", {"attention": "true", "status": "open"}, "status"),
        (POLL, {"cursor": "x"}, "cursor"),
        (POLL, {"top": "5"}, "top"),
        ("health", {"verbose": "1"}, "verbose"),
        ("list_conflicts", {"Scope": "erp.x"}, "Scope"),
    ],
    ids=["flows", "overlaps", "scopes", "conflicts", "attention", "poll-cursor", "poll-top", "health", "case"],
)
def test_an_unknown_query_parameter_is_a_400_naming_it(
    api: Api, name: str, params: dict[str, str], unknown: str
) -> None:
    refused_as_unknown(api.call(name, params=params), unknown)


def test_an_unknown_query_parameter_on_a_write_is_a_400_and_nothing_is_claimed(api: Api) -> None:
    reply = api.call("check_and_claim", claim_body(), params={"dryRun": "true"})

    refused_as_unknown(reply, "dryRun")
    assert api.call("lookup_claim", {"scope": "erp.create-order", "key": "ORDER-1001"}).status == 404


@pytest.mark.parametrize(
    ("name", "params", "repeated"),
    [
        ("list_flows", [("top", "5"), ("top", "500")], "top"),
        ("list_conflicts", [("cursor", ""), ("cursor", "x")], "cursor"),
        ("list_claims", [("reference", "SO-1"), ("reference", "SO-2")], "reference"),
        ("list_claims_needing_attention", [("attention", "true"), ("scope", "a"), ("scope", "b")], "scope"),
    ],
    ids=["top", "cursor", "reference", "scope"],
)
def test_a_query_parameter_given_twice_is_a_400_naming_it(
    api: Api, name: str, params: list[tuple[str, str]], repeated: str
) -> None:
    reply = api.call(name, params=params)

    refused(reply, repeated)
    assert "more than once" in reply.body["error"]["message"]


def test_the_function_key_given_twice_is_left_to_the_host(api: Api) -> None:
    ok(api.call("health", params=[("code", "a"), ("code", "b")]))


def test_the_function_key_in_code_is_taken_everywhere(api: Api) -> None:
    key = {"code": "the-function-key=="}
    answer = ok(api.call("check_and_claim", claim_body(), params=key))

    assert ok(api.call("get_claim", route={"claimId": answer["claimId"]}, params=key))
    assert ok(api.call("health", params=key))
    assert api.call(POLL, params=key).status == 202
    for name, params in LISTS:
        ok(api.call(name, params={**params, **key}))


def test_a_next_link_keeps_the_function_key_and_pages_on(api: Api) -> None:
    for index in range(2):
        register(api, {"name": f"Flow {index}", "environment": "Default-contoso"})

    first = ok(api.call("list_flows", params={"top": "1", "code": "k"}))
    second = ok(api.call("list_flows", params=dict(parse_qsl(urlsplit(first["nextLink"]).query))))

    assert cursor_of(first["nextLink"], "code") == "k"
    assert [flow["name"] for flow in first["value"] + second["value"]] == ["Flow 0", "Flow 1"]


def _function_serving(path: str, method: str) -> str:
    route = path.removeprefix("/api/")
    for name, function in FUNCTIONS.items():
        trigger: Any = function.get_trigger()
        methods = [str(getattr(verb, "value", verb)) for verb in trigger.methods or []]
        if trigger.route == route and method.upper() in methods:
            return str(name)
    raise AssertionError(f"no function serves {method} {path}")


CONNECTOR_VALUES = {"attention": "true", "scope": "erp.create-order", "top": "5", "status": "all"}
# Where a list reads a parameter of the same name otherwise (status is a claim's status here).
CONNECTOR_VALUES_BY_PATH = {
    "/api/claim-list": {
        "source": "shop-eu",
        "reference": "SO-1",
        "status": "succeeded",
        "since": "2026-12-01T00:00:00Z",
    }
}


def _connector_queries() -> list[tuple[str, str, list[str]]]:
    operations = set()
    for definition in DEFINITIONS.values():
        for path, item in load(definition)["paths"].items():
            for method, operation in item.items():
                names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
                if names:
                    operations.add((path, method, tuple(names)))
    return [(path, method, list(names)) for path, method, names in sorted(operations)]


@pytest.mark.parametrize(("path", "method", "names"), _connector_queries(), ids=lambda v: str(v))
def test_every_query_parameter_the_connector_sends_is_taken(api: Api, path: str, method: str, names: list[str]) -> None:
    name = _function_serving(path, method)
    known = {**CONNECTOR_VALUES, **CONNECTOR_VALUES_BY_PATH.get(path, {})}
    values = {param: known[param] for param in names if param in known}
    # A claim's own list (its history) is of a claim that exists.
    route = {"claimId": ok(api.call("check_and_claim", claim_body()))["claimId"]} if "{claimId}" in path else {}
    if path.endswith("/wait"):
        # The poll address of Check and claim (wait) takes the ticket its 202 answer handed out.
        location = api.call("check_and_claim", claim_body(run="run-2", wait=True)).headers["location"]
        values["ticket"] = dict(parse_qsl(urlsplit(location).query))["ticket"]
        if path.startswith("/api/perform/"):
            # Perform once's poll address takes only a ticket sealed for it: the same waiting run, sealed there.
            seal, claim_id = bootstrap.get_cursor_seal(), route["claimId"]
            waiting = waits.open_ticket(values["ticket"], WAIT_FOR_CLAIM.path(claimId=claim_id), seal)
            values["ticket"] = waits.seal(waiting, WAIT_FOR_PERFORM.path(claimId=claim_id), seal)

    assert api.call(name, route=route, params=values).status in (200, 202)
    for param in set(names) - set(values):
        reply = api.call(name, route=route, params={**values, param: "x"})  # a cursor or state: refused, not unknown
        refused(reply, param)
        assert "not a parameter" not in reply.body["error"]["message"]


@pytest.mark.parametrize("digits", [16, 4000], ids=["2^53", "4000-digits"])
def test_a_payload_integer_beyond_what_json_carries_is_a_400_saying_to_send_it_as_a_string(
    api: Api, digits: int
) -> None:
    number = 2**53 if digits == 16 else int("9" * digits)
    raw = json.dumps(claim_body(payload={"orderId": number})).encode()

    reply = api.call("check_and_claim", raw)

    refused(reply, "payload")
    message = reply.body["error"]["message"]
    assert "send it as a string" in message
    assert len(message) < 300  # the number is not quoted back
    assert api.call("lookup_claim", {"scope": "erp.create-order", "key": "ORDER-1001"}).status == 404
