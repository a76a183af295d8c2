"""ONCEGATE_AUTH: function keys ignore the principal header; Entra ID mode trusts it and checks app roles."""

from __future__ import annotations

import base64
import dataclasses
import http.client
import importlib.util
import json
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from azure.functions.decorators.http import HttpTrigger

import function_app
from oncegate import bootstrap
from oncegate.config import AuthMode, Settings
from oncegate.service.claims import ClaimService
from tests.http.client import FUNCTIONS

NAME_TYPE = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn"
ROLE_TYPE = "http://schemas.microsoft.com/ws/2008/06/identity/claims/role"


def principal_header(name: str, *roles: str) -> dict[str, str]:
    """The header App Service authentication sets for a signed-in caller."""
    claims = [{"typ": NAME_TYPE, "val": name}, *({"typ": "roles", "val": role} for role in roles)]
    document = {"auth_typ": "aad", "name_typ": NAME_TYPE, "role_typ": ROLE_TYPE, "claims": claims}
    return {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(json.dumps(document).encode()).decode()}


def call(name: str, body: Any = None, *, headers: dict[str, str] | None = None, **route: str) -> tuple[int, Any]:
    trigger: Any = FUNCTIONS[name].get_trigger()
    request = func.HttpRequest(
        str(trigger.methods[0].value),
        f"http://localhost:7071/api/{str(trigger.route).format(**route)}",
        headers={"Content-Type": "application/json", **(headers or {})},
        route_params=route,
        body=b"" if body is None else json.dumps(body).encode(),
    )
    response: func.HttpResponse = FUNCTIONS[name].get_user_function()(request)
    return response.status_code, json.loads(response.get_body() or b"null")


def open_conflict(headers: dict[str, str] | None = None) -> str:
    base = {"scope": "erp.create-order", "key": "ORDER-7", "flow": {"name": "A", "environment": "Prod"}}
    assert call("check_and_claim", {**base, "runId": "r1", "fingerprint": "v1"}, headers=headers)[0] == 200
    status, answer = call("check_and_claim", {**base, "runId": "r2", "fingerprint": "v2"}, headers=headers)
    assert (status, answer["decision"]) == (200, "conflict")
    return str(answer["conflictId"])


@pytest.fixture
def entra(service: ClaimService, tmp_path: Path) -> None:
    settings = Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "unused.db")})
    bootstrap.use_service(service, settings=dataclasses.replace(settings, auth=AuthMode.ENTRA))


FLOW = principal_header("flow-app", "OnceGate.Flow")
REVIEWER = principal_header("ana@contoso.com", "OnceGate.Reviewer")


def test_key_mode_ignores_a_forged_principal_and_records_the_body_reviewer() -> None:
    conflict_id = open_conflict()
    forged = principal_header("mallory@evil.example", "OnceGate.Reviewer")
    body = {"decision": "dismiss", "reviewer": "ana@contoso.com"}

    status, resolved = call("resolve_conflict", body, headers=forged, conflictId=conflict_id)

    assert status == 200
    assert resolved["resolution"]["reviewer"] == "ana@contoso.com"


def test_key_mode_needs_a_reviewer_in_the_body_even_with_a_principal_header() -> None:
    conflict_id = open_conflict()

    status, error = call("resolve_conflict", {"decision": "dismiss"}, headers=REVIEWER, conflictId=conflict_id)

    assert (status, error["error"]["code"]) == (400, "invalid_request")
    assert [detail["target"] for detail in error["error"]["details"]] == ["reviewer"]
    assert call("get_conflict", conflictId=conflict_id)[1]["status"] == "open"


def test_key_mode_over_http_ignores_a_forged_principal(local_server: tuple[str, int]) -> None:
    conflict_id = open_conflict()
    connection = http.client.HTTPConnection(*local_server, timeout=30)
    body = json.dumps({"decision": "keep_original", "reviewer": "ana@contoso.com"})
    forged = principal_header("mallory@evil.example", "OnceGate.Reviewer")
    connection.request("POST", f"/api/conflicts/{conflict_id}/resolve", body=body, headers=forged)
    reply = json.loads(connection.getresponse().read())
    connection.close()

    assert reply["resolution"]["reviewer"] == "ana@contoso.com"


@pytest.mark.usefixtures("entra")
@pytest.mark.parametrize(
    "headers",
    [{}, {"X-MS-CLIENT-PRINCIPAL": "not base64 at all!"}, {"X-MS-CLIENT-PRINCIPAL": base64.b64encode(b"[1]").decode()}],
    ids=["absent", "not-base64", "not-a-principal"],
)
def test_entra_mode_answers_401_without_a_readable_principal_and_stores_nothing(
    headers: dict[str, str], service: ClaimService
) -> None:
    body = {"scope": "erp.create-order", "key": "ORDER-8", "runId": "r1"}

    status, error = call("check_and_claim", body, headers=headers)

    assert (status, error["error"]["code"]) == (401, "unauthorized")
    status, _ = call("lookup_claim", {"scope": "erp.create-order", "key": "ORDER-8"}, headers=FLOW)
    assert status == 404


@pytest.mark.usefixtures("entra")
def test_entra_mode_needs_an_app_role() -> None:
    no_role = principal_header("someone@contoso.com")

    status, error = call("check_and_claim", {"scope": "s", "key": "k", "runId": "r"}, headers=no_role)

    assert (status, error["error"]["code"]) == (403, "forbidden")
    assert "OnceGate.Flow" in error["error"]["message"]


@pytest.mark.usefixtures("entra")
def test_entra_mode_lets_only_reviewers_resolve_and_records_the_signed_in_reviewer() -> None:
    conflict_id = open_conflict(FLOW)
    body = {"decision": "keep_original", "reviewer": "somebody-else@contoso.com"}

    refused, error = call("resolve_conflict", body, headers=FLOW, conflictId=conflict_id)
    status, resolved = call("resolve_conflict", body, headers=REVIEWER, conflictId=conflict_id)

    assert (refused, error["error"]["code"]) == (403, "forbidden")
    assert status == 200
    assert resolved["resolution"]["reviewer"] == "ana@contoso.com"


@pytest.mark.usefixtures("entra")
def test_entra_mode_lets_only_reviewers_review_a_failure_and_records_the_signed_in_reviewer() -> None:
    base = {"scope": "erp.create-order", "key": "ORDER-9", "runId": "r1", "fingerprint": "v1"}
    claimed = call("check_and_claim", base, headers=FLOW)[1]
    result = {"claimToken": claimed["claimToken"], "outcome": "failed", "retryable": False}
    assert call("record_result", result, headers=FLOW, claimId=claimed["claimId"])[0] == 200
    body = {"reviewer": "somebody-else@contoso.com", "note": "ERP refused the customer"}

    refused, error = call("review_claim", body, headers=FLOW, claimId=claimed["claimId"])
    reviewed, claim = call("review_claim", body, headers=REVIEWER, claimId=claimed["claimId"])

    assert (refused, error["error"]["code"]) == (403, "forbidden")
    assert (reviewed, claim["reviewer"]) == (200, "ana@contoso.com")


@pytest.mark.usefixtures("entra")
def test_entra_mode_reviewers_may_do_what_flows_do_and_health_stays_anonymous() -> None:
    status, answer = call("check_and_claim", {"scope": "s", "key": "k", "runId": "r"}, headers=REVIEWER)

    assert (status, answer["decision"]) == (200, "proceed")
    assert call("health")[0] == 200


@pytest.mark.usefixtures("entra")
def test_entra_mode_lets_only_reviewers_change_the_inventory() -> None:
    flow = {"name": "Create ERP order", "environment": "Default-contoso", "enabled": False}

    refused = [
        call(name, body, headers=FLOW)[0] for name, body in (("register_flow", flow), ("set_scope", {"scope": "s"}))
    ]
    registered, _ = call("register_flow", flow, headers=REVIEWER)
    scoped, _ = call("set_scope", {"scope": "s"}, headers=REVIEWER)
    status, flows = call("list_flows", headers=FLOW)

    assert refused == [403, 403]
    assert (registered, scoped, status) == (200, 200, 200)
    assert [(item["name"], item["enabled"]) for item in flows["value"]] == [("Create ERP order", False)]
    assert call("list_scopes", headers=FLOW)[0] == call("list_flow_overlaps", headers=FLOW)[0] == 200


def auth_levels(monkeypatch: pytest.MonkeyPatch, mode: str, tmp_path: Path) -> dict[str, str]:
    """Import function_app afresh, as the host would, and read each function's authorization level."""
    monkeypatch.setenv("ONCEGATE_AUTH", mode)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "oncegate.db"))
    spec = importlib.util.spec_from_file_location("function_app_auth", Path(function_app.__file__))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {
        str(function.get_function_name()): str(function.get_trigger().auth_level.value).upper()
        for function in module.app.get_functions()
        if isinstance(function.get_trigger(), HttpTrigger)
    }


def test_key_mode_checks_function_keys_on_every_action_but_health(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    levels = auth_levels(monkeypatch, "key", tmp_path)

    actions = {name: level for name, level in levels.items() if name not in ("health", "unknown_route")}
    assert set(actions.values()) == {"FUNCTION"}
    assert (levels["health"], levels["unknown_route"]) == ("ANONYMOUS", "ANONYMOUS")


def test_entra_mode_leaves_the_gate_to_app_service_authentication(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert set(auth_levels(monkeypatch, "entra", tmp_path).values()) == {"ANONYMOUS"}
