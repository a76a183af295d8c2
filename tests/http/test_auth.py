"""ONCEGATE_AUTH: the functions' gate in each mode, and function keys ignoring a forged principal header.

Entra ID mode, where the app validates bearer tokens itself, is tested in ``test_bearer``.
"""

from __future__ import annotations

import base64
import http.client
import importlib.util
import json
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from azure.functions.decorators.http import HttpTrigger

import function_app
from tests.http.client import FUNCTIONS

NAME_TYPE = "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn"
ROLE_TYPE = "http://schemas.microsoft.com/ws/2008/06/identity/claims/role"


def principal_header(name: str, *roles: str) -> dict[str, str]:
    """The header App Service authentication sets for a signed-in caller: anyone can forge it."""
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


def auth_levels(monkeypatch: pytest.MonkeyPatch, mode: str, tmp_path: Path) -> dict[str, str]:
    """Import function_app afresh, as the host would, and read each function's authorization level."""
    monkeypatch.setenv("ONCEGATE_AUTH", mode)
    monkeypatch.setenv("ONCEGATE_ENTRA_TENANT_ID", "contoso.onmicrosoft.com")
    monkeypatch.setenv("ONCEGATE_ENTRA_CLIENT_ID", "11111111-2222-3333-4444-555555555555")
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


def test_entra_mode_functions_are_anonymous_to_the_host_as_the_app_checks_the_token(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert set(auth_levels(monkeypatch, "entra", tmp_path).values()) == {"ANONYMOUS"}
