"""Every rejection over HTTP: its status, its error code and the field it names; and it changes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from azure.functions.decorators.http import HttpTrigger

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.domain.sensitive import SensitivePolicy
from oncegate.errors import NotFound
from oncegate.models import LookupRequest
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.http.client import FUNCTIONS, Api, Reply, ServerApi, succeed

CLAIM: dict[str, Any] = {
    "scope": "erp.create-order",
    "key": "ORDER-1001",
    "fingerprint": "v1",
    "runId": "run-1",
    "flow": {"name": "Create ERP order", "environment": "Default-contoso"},
}
TOKEN = "<the claim's token>"
RESULT: dict[str, Any] = {"claimToken": TOKEN, "outcome": "succeeded", "targetRecordId": "SO-1"}
CONFLICT: dict[str, Any] = {**CLAIM, "reason": "the ERP holds another amount"}
RESOLVE: dict[str, Any] = {"decision": "dismiss", "reviewer": "ops@contoso"}
CLAIM_ROUTES = {"record_result", "release_claim", "renew_claim"}
CATCH_ALL = "unknown_route"
POST_ROUTES = ["check_and_claim", "lookup_claim", *sorted(CLAIM_ROUTES), "report_conflict", "resolve_conflict"]


def changed(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``body`` with ``fields`` set; a field set to ``...`` is left out."""
    merged = {**body, **fields}
    return {name: value for name, value in merged.items() if value is not ...}


def send(api: Api, name: str, body: Any, held: tuple[str, str]) -> Reply:
    """Call ``name`` for the held claim (or a conflict id nobody has), with the real token in place of TOKEN."""
    claim_id, token = held
    if isinstance(body, dict) and body.get("claimToken") == TOKEN:
        body = {**body, "claimToken": token}
    if name in CLAIM_ROUTES:
        return api.call(name, body, route={"claimId": claim_id})
    return api.call(name, body, route={"conflictId": "a" * 24} if name == "resolve_conflict" else None)


INVALID: list[tuple[str, str, Any, str]] = [
    # (case, function, body, the target the error names)
    ("no-scope", "check_and_claim", changed(CLAIM, scope=...), "scope"),
    ("no-key", "check_and_claim", changed(CLAIM, key=...), "key"),
    ("no-run-id", "check_and_claim", changed(CLAIM, runId=...), "runId"),
    (
        "flow-without-environment",
        "check_and_claim",
        changed(CLAIM, flow={"name": "Create ERP order"}),
        "flow.environment",
    ),
    ("scope-with-a-slash", "check_and_claim", changed(CLAIM, scope="erp/create order"), "scope"),
    ("scope-non-ascii", "check_and_claim", changed(CLAIM, scope="erp.créer"), "scope"),
    ("scope-too-long", "check_and_claim", changed(CLAIM, scope="s" * 65), "scope"),
    ("key-blank", "check_and_claim", changed(CLAIM, key=" \t "), "key"),
    ("key-too-long-after-trimming", "check_and_claim", changed(CLAIM, key=" " + "k" * 513 + " "), "key"),
    ("key-a-number", "check_and_claim", changed(CLAIM, key=1001), "key"),
    ("payload-and-fingerprint", "check_and_claim", changed(CLAIM, payload={"amount": 1}), "fingerprint"),
    ("fingerprint-too-long", "check_and_claim", changed(CLAIM, fingerprint="f" * 129), "fingerprint"),
    ("payload-not-canonical", "check_and_claim", changed(CLAIM, fingerprint=..., payload={"n": 2**60}), "payload"),
    ("lease-below-15", "check_and_claim", changed(CLAIM, leaseSeconds=14), "leaseSeconds"),
    ("lease-above-86400", "check_and_claim", changed(CLAIM, leaseSeconds=86401), "leaseSeconds"),
    ("lease-not-a-number", "check_and_claim", changed(CLAIM, leaseSeconds="soon"), "leaseSeconds"),
    ("lease-fractional", "check_and_claim", changed(CLAIM, leaseSeconds=60.5), "leaseSeconds"),
    ("unknown-field", "check_and_claim", changed(CLAIM, priority="high"), "priority"),
    ("misspelt-field", "check_and_claim", changed(CLAIM, runId=..., run_ID="run-1"), "run_ID"),
    ("nan", "check_and_claim", b'{"scope": "erp.create-order", "key": "K", "runId": "r", "payload": NaN}', "payload"),
    (
        "infinity",
        "check_and_claim",
        b'{"scope": "erp.create-order", "key": "K", "runId": "r", "payload": -Infinity}',
        "payload",
    ),
    ("malformed-json", "check_and_claim", b'{"scope": "erp.create-order", ', "body"),
    ("array-body", "check_and_claim", b"[]", "body"),
    ("string-body", "check_and_claim", b'"ORDER-1001"', "body"),
    ("empty-body", "check_and_claim", b"", "body"),
    ("not-utf8", "check_and_claim", b'{"scope": "\xff"}', "body"),
    ("lone-surrogate-key", "check_and_claim", changed(CLAIM, key="\ud800"), "key"),
    ("lookup-key-too-long", "lookup_claim", {"scope": "erp.create-order", "key": "k" * 513}, "key"),
    ("lookup-with-run-id", "lookup_claim", {"scope": "erp.create-order", "key": "K", "runId": "r"}, "runId"),
    ("result-bad-outcome", "record_result", changed(RESULT, outcome="done"), "outcome"),
    ("result-no-token", "record_result", changed(RESULT, claimToken=...), "claimToken"),
    ("result-no-outcome", "record_result", changed(RESULT, outcome=...), "outcome"),
    ("result-retryable-maybe", "record_result", changed(RESULT, retryable="maybe"), "retryable"),
    ("result-unknown-field", "record_result", changed(RESULT, status="succeeded"), "status"),
    ("release-no-token", "release_claim", {"reason": "cancelled"}, "claimToken"),
    ("heartbeat-lease-below-15", "renew_claim", {"claimToken": TOKEN, "leaseSeconds": 10}, "leaseSeconds"),
    ("heartbeat-lease-above-86400", "renew_claim", {"claimToken": TOKEN, "leaseSeconds": 86401}, "leaseSeconds"),
    ("report-no-reason", "report_conflict", changed(CONFLICT, reason=...), "reason"),
    ("report-payload-and-fingerprint", "report_conflict", changed(CONFLICT, payload=[1]), "fingerprint"),
    ("resolve-bad-decision", "resolve_conflict", changed(RESOLVE, decision="merge"), "decision"),
    ("resolve-no-reviewer", "resolve_conflict", changed(RESOLVE, reviewer=...), "reviewer"),
]


@pytest.mark.parametrize(("name", "body", "target"), [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_an_invalid_request_is_a_400_naming_the_field(
    api: Api, held: tuple[str, str], name: str, body: Any, target: str
) -> None:
    reply = send(api, name, body, held)

    assert reply.status == 400, reply.body
    assert reply.code == "invalid_request"
    assert reply.body["error"]["message"]
    assert target in reply.targets


@pytest.mark.parametrize(
    ("params", "target"),
    [({"top": "0"}, "top"), ({"top": "201"}, "top"), ({"top": "ten"}, "top"), ({"status": "closed"}, "status"),
     ({"scope": "erp/x"}, "scope"), ({"cursor": "not-a-cursor"}, "cursor")],
    ids=["top-0", "top-201", "top-ten", "bad-status", "bad-scope", "bad-cursor"],
)  # fmt: skip
def test_a_bad_conflict_list_query_is_a_400_naming_the_parameter(api: Api, params: dict[str, str], target: str) -> None:
    reply = api.call("list_conflicts", params=params)

    assert (reply.status, reply.code) == (400, "invalid_request")
    assert target in reply.targets


# -- 413 ------------------------------------------------------------------------------------------


def test_a_body_over_64_kib_is_a_413(api: Api, held: tuple[str, str]) -> None:
    filler = "x" * (64 * 1024)

    reply = send(
        api, "check_and_claim", changed(CLAIM, key="ORDER-big", fingerprint=..., payload={"text": filler}), held
    )

    assert (reply.status, reply.code, reply.targets) == (413, "too_large", ["body"])


def test_data_over_16_kib_is_a_413_and_the_claim_is_unchanged(api: Api, held: tuple[str, str]) -> None:
    before = api.call("get_claim", route={"claimId": held[0]}).body

    reply = send(api, "record_result", changed(RESULT, data={"text": "x" * (16 * 1024)}), held)

    assert (reply.status, reply.code, reply.targets) == (413, "too_large", ["data"])
    assert api.call("get_claim", route={"claimId": held[0]}).body == before


def test_data_of_just_under_16_kib_is_accepted(api: Api, held: tuple[str, str]) -> None:
    data = {"text": "x" * (16 * 1024 - 20)}

    reply = send(api, "record_result", changed(RESULT, data=data), held)

    assert (reply.status, reply.body["data"]) == (200, data)


def test_details_over_8_kib_is_a_413(api: Api, held: tuple[str, str]) -> None:
    reply = send(api, "report_conflict", changed(CONFLICT, details={"text": "x" * (8 * 1024)}), held)

    assert (reply.status, reply.code, reply.targets) == (413, "too_large", ["details"])


# -- 404 and 405 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "route", "body"),
    [
        ("get_claim", {"claimId": "a" * 52}, None),
        ("get_claim", {"claimId": "not-a-claim-id"}, None),
        ("record_result", {"claimId": "a" * 52}, {"claimToken": "1.x", "outcome": "succeeded"}),
        ("release_claim", {"claimId": "a" * 52}, {"claimToken": "1.x"}),
        ("renew_claim", {"claimId": "a" * 52}, {"claimToken": "1.x"}),
        ("get_conflict", {"conflictId": "a" * 24}, None),
        ("get_conflict", {"conflictId": "A" * 24}, None),
        ("resolve_conflict", {"conflictId": "a" * 24}, RESOLVE),
        ("lookup_claim", None, {"scope": "erp.create-order", "key": "ORDER-never-claimed"}),
        ("report_conflict", None, changed(CONFLICT, key="ORDER-never-claimed")),
    ],
    ids=[
        "claim", "malformed-claim-id", "result", "release", "heartbeat", "conflict", "malformed-conflict-id",
        "resolve", "lookup", "report-without-claim",
    ],
)  # fmt: skip
def test_what_does_not_exist_is_a_404(api: Api, name: str, route: dict[str, str] | None, body: Any) -> None:
    reply = api.call(name, body, route=route)

    assert (reply.status, reply.code) == (404, "not_found")
    assert reply.body["error"]["message"]


@pytest.mark.parametrize("path", ["nope", "claims/lookup/extra", "v2/claims"])
def test_an_unknown_route_is_a_json_404(api: Api, path: str) -> None:
    reply = api.call("unknown_route", route={"path": path}, method="GET")

    assert (reply.status, reply.code) == (404, "not_found")


def test_a_path_outside_api_is_a_json_404_from_the_local_server(local_server: tuple[str, int]) -> None:
    reply = ServerApi(local_server).request("GET", "/claims")

    assert (reply.status, reply.code) == (404, "not_found")


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("DELETE", "claims", "GET, POST"),
        ("GET", "claims/" + "a" * 52 + "/result", "POST"),
        ("PUT", "conflicts", "GET, POST"),
        ("POST", "health", "GET"),
        ("PATCH", "claims/" + "a" * 52, "GET"),
    ],
)
def test_a_wrong_method_on_a_known_path_is_a_405_with_allow(api: Api, method: str, path: str, allow: str) -> None:
    reply = api.call("unknown_route", route={"path": path}, method=method)

    assert (reply.status, reply.code) == (405, "method_not_allowed")
    assert reply.headers["allow"] == allow


# -- 409 ------------------------------------------------------------------------------------------


def test_a_stale_token_is_a_409_stale_claim(api: Api, clock: FakeClock) -> None:
    first = api.call("check_and_claim", changed(CLAIM, leaseSeconds=60)).body
    clock.advance(61)
    second = api.call("check_and_claim", changed(CLAIM, runId="run-2")).body
    assert second["decision"] == "reconcile"

    reply = succeed(api, first)

    assert (reply.status, reply.code, reply.targets) == (409, "stale_claim", ["claimToken"])
    assert api.call("get_claim", route={"claimId": first["claimId"]}).body["status"] == "in_progress"


def test_resolving_another_way_and_accepting_a_busy_claim_are_409s(api: Api) -> None:
    first = api.call("check_and_claim", CLAIM).body
    conflict_id = api.call("check_and_claim", changed(CLAIM, runId="run-2", fingerprint="v2")).body["conflictId"]
    route = {"conflictId": conflict_id}

    busy = api.call("resolve_conflict", changed(RESOLVE, decision="accept_new"), route=route)
    succeed(api, first)
    dismissed = api.call("resolve_conflict", RESOLVE, route=route)
    again = api.call("resolve_conflict", changed(RESOLVE, decision="keep_original"), route=route)

    assert (busy.status, busy.code) == (409, "claim_busy")
    assert dismissed.status == 200
    assert (again.status, again.code) == (409, "conflict_resolved")


# -- rejected requests change nothing -------------------------------------------------------------


def test_a_rejected_result_leaves_the_claim_and_its_history_unchanged(api: Api, held: tuple[str, str]) -> None:
    before = api.call("get_claim", route={"claimId": held[0]}).body

    rejections = [
        send(api, "record_result", changed(RESULT, outcome="done"), held),
        send(api, "record_result", changed(RESULT, retryable="maybe", outcome="failed"), held),
        send(api, "release_claim", {"claimToken": TOKEN, "reason": "r" * 1025}, held),
        send(api, "renew_claim", {"claimToken": TOKEN, "leaseSeconds": 5}, held),
    ]

    assert [reply.status for reply in rejections] == [400] * len(rejections)
    assert api.call("get_claim", route={"claimId": held[0]}).body == before


def test_a_rejected_claim_stores_no_claim(api: Api) -> None:
    lookup = {"scope": "erp.create-order", "key": "ORDER-rejected"}
    for body in (
        changed(CLAIM, key="ORDER-rejected", leaseSeconds=5),
        changed(CLAIM, key="ORDER-rejected", payload={"a": 1}),
        changed(CLAIM, key="ORDER-rejected", color="red"),
    ):
        assert api.call("check_and_claim", body).status == 400

    assert api.call("lookup_claim", lookup).status == 404
    assert api.call("list_conflicts", params={"status": "all"}).body == {"value": []}


def test_a_rejected_conflict_report_opens_no_conflict(api: Api, held: tuple[str, str]) -> None:
    assert send(api, "report_conflict", changed(CONFLICT, fingerprint="v2", reason=...), held).status == 400
    assert send(api, "report_conflict", changed(CONFLICT, fingerprint="v2", details="x" * 9000), held).status == 413

    assert api.call("list_conflicts", params={"status": "all"}).body == {"value": []}


# -- no input is a 500 ----------------------------------------------------------------------------

JUNK = [
    b"",
    b"null",
    b"0",
    b"true",
    b"[]",
    b'"text"',
    b"{",
    b"}{",
    b"\xff\xfe\x00{",
    b"\xef\xbb\xbf{}",
    b"[" * 40_000,
    b'{"a": ' * 5_000,
    b'{"scope": NaN}',
    b'{"key": "\\ud800", "scope": "s", "runId": "r"}',
    b'{"scope": {}, "key": [], "runId": 1, "flow": "f", "claimToken": 5, "decision": null}',
    b'{"scope": "s", "key": "k", "runId": "r", "payload": 1e999}',
    b'{"scope": "s", "key": "k", "runId": "r", "payload": ' + b"9" * 5_000 + b"}",
    b'{"scope": "s", "key": "k", "runId": "r", "payload": ' + b"[" * 900 + b"]" * 900 + b"}",
    b'{"scope": "s", "key": "k", "runId": "r\\u0000", "flow": {"name": "\\u0000", "environment": " "}}',
    b'{"scope": "s", "key": "k", "runId": "r", "leaseSeconds": 1e400}',
    b'{"claimToken": "", "outcome": "succeeded", "data": ' + b"[" * 900 + b"]" * 900 + b"}",
    b'{"claimToken": "1.x", "outcome": "failed", "retryable": null, "error": null}',
    b'{"decision": "dismiss", "reviewer": "' + b"r" * 300 + b'"}',
    b"x" * (64 * 1024 + 1),
]


@pytest.mark.parametrize("name", POST_ROUTES)
def test_no_junk_body_gets_a_500(api: Api, held: tuple[str, str], name: str) -> None:
    failures = []
    for junk in JUNK:
        reply = send(api, name, junk, held)
        if reply.status >= 500 or (reply.status >= 400 and "error" not in reply.body):
            failures.append((junk[:60], reply.status, reply.body))

    assert failures == []


# -- what nobody expected is a JSON 500 ------------------------------------------------------------

ACTIONS = sorted(
    name
    for name, function in FUNCTIONS.items()
    if isinstance(function.get_trigger(), HttpTrigger) and name != CATCH_ALL
)


@pytest.mark.parametrize("name", ACTIONS)
def test_every_action_answers_an_unexpected_failure_with_a_json_500(
    api: Api, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each function hands its request to http.respond, the one place that renders what nobody expected.
    def broken() -> Gate:
        raise RuntimeError("the wiring fell over in a way nobody expected")

    monkeypatch.setattr(bootstrap, "services_built", None)  # the pipeline builds them again, and that fails
    monkeypatch.setattr(bootstrap, "get_services", broken)

    reply = api.call(name, route={"claimId": "a" * 52, "conflictId": "a" * 24})

    assert (reply.status, reply.code) == (500, "internal_error")
    assert "fell over" not in reply.body["error"]["message"]


def test_a_key_with_personal_data_is_a_400_sensitive_key_that_stores_nothing(api: Api, service: Gate) -> None:
    body = {"scope": "erp.create-order", "key": "11010519491231002X", "runId": "run-1"}

    refused = api.call("check_and_claim", body)

    assert (refused.status, refused.code, refused.targets) == (400, "sensitive_key", ["key"])
    assert "11010519491231002X" not in json.dumps(refused.body)
    unchecked = Gate(service.store, KeyHasher(KEY_SECRET), sensitive_keys=SensitivePolicy.OFF)
    with pytest.raises(NotFound):
        unchecked.lookup(LookupRequest(scope="erp.create-order", key="11010519491231002X"))


def test_result_data_with_personal_data_is_a_400_sensitive_data_naming_the_field(
    api: Api, service: Gate, held: tuple[str, str]
) -> None:
    claim_id, _ = held
    before = service.get_claim(claim_id)
    data = {"customer": {"id": "C-100234", "phone": "+34\u00a0612\u00a0345\u00a0678"}, "lines": ["ana%40contoso.com"]}

    refused = send(api, "record_result", {**RESULT, "data": data}, held)

    assert (refused.status, refused.code) == (400, "sensitive_data")
    assert refused.targets == ["data.customer.phone", "data.lines.0"]
    assert "612" not in json.dumps(refused.body)
    assert "contoso" not in json.dumps(refused.body)
    assert "Nothing was stored" in refused.body["error"]["message"]
    assert service.get_claim(claim_id) == before
    assert service.get_claim(claim_id).status.value == "in_progress"
