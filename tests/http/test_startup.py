"""A bad setting never leaves the app without functions: one CRITICAL line at import, then 503 naming it.

Each case imports ``function_app.py`` afresh, as the Functions host does at start-up, with one
missing, contradictory or unresolved setting. The import succeeds and loads every function;
health and every action answer ``503 not_configured`` with the setting as the error's target,
called directly and over HTTP through the local server.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import azure.functions as func
import pytest
from azure.functions.decorators.http import HttpTrigger

import function_app
from oncegate.entrypoints.framing import make_server
from tests.http.client import FUNCTIONS

UNRESOLVED = "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/oncegate-key-secret)"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
BAD_SETTINGS = {
    "unknown-store": ({"ONCEGATE_STORE": "bogus"}, "ONCEGATE_STORE"),
    "tables-without-secret": (
        {"ONCEGATE_STORE": "tables", "ONCEGATE_TABLES_CONNECTION_STRING": "UseDevelopmentStorage=true"},
        "ONCEGATE_KEY_SECRET",
    ),
    "tables-without-endpoint": (
        {"ONCEGATE_STORE": "tables", "ONCEGATE_KEY_SECRET": "s" * 40},
        "ONCEGATE_TABLES_ENDPOINT",
    ),
    "tables-malformed-connection-string": (
        {"ONCEGATE_STORE": "tables", "ONCEGATE_KEY_SECRET": "s" * 40, "ONCEGATE_TABLES_CONNECTION_STRING": "garbage"},
        "ONCEGATE_TABLES_CONNECTION_STRING",
    ),
    "short-secret": ({"ONCEGATE_KEY_SECRET": "too-short"}, "ONCEGATE_KEY_SECRET"),
    "unresolved-key-vault-reference": (
        {"ONCEGATE_STORE": "tables", "ONCEGATE_TABLES_ENDPOINT": "https://st.table.core.windows.net"}
        | {"ONCEGATE_KEY_SECRET": UNRESOLVED},
        "ONCEGATE_KEY_SECRET",
    ),
    "bad-prefix": ({"ONCEGATE_TABLE_PREFIX": "1-bad"}, "ONCEGATE_TABLE_PREFIX"),
    "unknown-auth": ({"ONCEGATE_AUTH": "password"}, "ONCEGATE_AUTH"),
    "require-registered-not-true-or-false": (
        {"ONCEGATE_REQUIRE_REGISTERED_FLOWS": "yes"},
        "ONCEGATE_REQUIRE_REGISTERED_FLOWS",
    ),
    "unknown-alert-zero": ({"ONCEGATE_UNKNOWN_ALERT_MINUTES": "0"}, "ONCEGATE_UNKNOWN_ALERT_MINUTES"),
    "unknown-alert-not-a-number": ({"ONCEGATE_UNKNOWN_ALERT_MINUTES": "15m"}, "ONCEGATE_UNKNOWN_ALERT_MINUTES"),
    "entra-without-tenant": ({"ONCEGATE_AUTH": "entra"}, "ONCEGATE_ENTRA_TENANT_ID"),
    "entra-multi-tenant": (
        {"ONCEGATE_AUTH": "entra", "ONCEGATE_ENTRA_TENANT_ID": "common", "ONCEGATE_ENTRA_CLIENT_ID": CLIENT_ID},
        "ONCEGATE_ENTRA_TENANT_ID",
    ),
    "entra-without-client-id": (
        {"ONCEGATE_AUTH": "entra", "ONCEGATE_ENTRA_TENANT_ID": "contoso.onmicrosoft.com"},
        "ONCEGATE_ENTRA_CLIENT_ID",
    ),
    "entra-keys-over-plain-http": (
        {"ONCEGATE_AUTH": "entra", "ONCEGATE_ENTRA_TENANT_ID": "contoso.onmicrosoft.com"}
        | {"ONCEGATE_ENTRA_CLIENT_ID": CLIENT_ID, "ONCEGATE_ENTRA_AUTHORITY": "http://login.example.com"},
        "ONCEGATE_ENTRA_AUTHORITY",
    ),
}


def set_environment(monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], tmp_path: Path) -> None:
    """Only ``environment``'s ONCEGATE_* settings, and the SQLite store in this test's folder."""
    for name in os.environ:
        if name.startswith("ONCEGATE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "oncegate.db"))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)


def import_fresh_function_app() -> ModuleType:
    """Run function_app.py again as the Functions host would at start-up, apart from the module tests use."""
    spec = importlib.util.spec_from_file_location("function_app_at_startup", Path(function_app.__file__))
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loaded_functions(module: ModuleType) -> dict[str, Any]:
    """Every function the app loaded, by name, as the host indexes them (once: the app refuses a second call)."""
    return {str(function.get_function_name()): function for function in module.app.get_functions()}


def http_functions(module: ModuleType) -> dict[str, Any]:
    return {
        name: function
        for name, function in loaded_functions(module).items()
        if isinstance(function.get_trigger(), HttpTrigger)
    }


def call(function: Any) -> tuple[int, dict[str, Any]]:
    """Call one HTTP function as the host would, route parameters filled in."""
    trigger = function.get_trigger()
    route = {"claimId": "a" * 52, "conflictId": "a" * 24}
    request = func.HttpRequest(
        str(trigger.methods[0].value),
        f"http://localhost:7071/api/{str(trigger.route).format(**route)}",
        headers={"Content-Type": "application/json"},
        route_params=route,
        body=json.dumps({"scope": "s", "key": "k", "runId": "r"}).encode(),
    )
    response: func.HttpResponse = function.get_user_function()(request)
    return response.status_code, json.loads(response.get_body())


def assert_not_configured(status: int, body: dict[str, Any], setting: str) -> None:
    assert (status, body["error"]["code"]) == (503, "not_configured")
    assert setting in body["error"]["message"]
    assert [detail["target"] for detail in body["error"]["details"]] == [setting]


Serve = Callable[[ModuleType], tuple[str, int]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Serves an app over HTTP as ``oncegate serve`` does, on a free port; answers its address."""
    servers: list[Any] = []

    def start(module: ModuleType) -> tuple[str, int]:
        server = make_server(module.app, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        host, port = server.server_address[:2]
        return str(host), int(port)

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def over_http(address: tuple[str, int], method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection(*address, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


@pytest.mark.parametrize(("environment", "setting"), BAD_SETTINGS.values(), ids=BAD_SETTINGS.keys())
def test_a_bad_setting_loads_every_function_logs_one_critical_line_and_answers_503_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    environment: dict[str, str],
    setting: str,
) -> None:
    set_environment(monkeypatch, environment, tmp_path)

    with caplog.at_level(logging.DEBUG):
        module = import_fresh_function_app()

    errors = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert [record.levelno for record in errors] == [logging.CRITICAL]
    assert setting in errors[0].getMessage()
    loaded = loaded_functions(module)
    assert set(loaded) == set(FUNCTIONS)  # the timer functions included
    for name, function in loaded.items():
        if isinstance(function.get_trigger(), HttpTrigger) and name != "unknown_route":
            assert_not_configured(*call(function), setting)


@pytest.mark.parametrize(
    ("environment", "setting"),
    [BAD_SETTINGS[case] for case in ("unresolved-key-vault-reference", "unknown-auth", "entra-without-tenant")],
    ids=["unresolved-key-vault-reference", "unknown-auth", "entra-without-tenant"],
)
def test_over_http_health_and_an_action_answer_503_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serve: Serve, environment: dict[str, str], setting: str
) -> None:
    set_environment(monkeypatch, environment, tmp_path)
    address = serve(import_fresh_function_app())

    claim = json.dumps({"scope": "erp.create-order", "key": "ORDER-1", "runId": "r1"}).encode()
    assert_not_configured(*over_http(address, "GET", "/api/health"), setting)
    assert_not_configured(*over_http(address, "POST", "/api/claims", claim), setting)
    assert_not_configured(*over_http(address, "POST", "/api/conflicts/" + "a" * 24 + "/resolve", b"{}"), setting)


def test_a_sqlite_path_under_a_file_is_503_naming_the_setting_not_a_500(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serve: Serve
) -> None:
    # Found by an outside test: the database's folder could not be made and the answer was 500 internal_error.
    (tmp_path / "a-file").write_text("")
    set_environment(monkeypatch, {"ONCEGATE_SQLITE_PATH": str(tmp_path / "a-file" / "oncegate.db")}, tmp_path)
    address = serve(import_fresh_function_app())

    status, body = over_http(address, "GET", "/api/health")

    assert_not_configured(status, body, "ONCEGATE_SQLITE_PATH")
    assert "which is a file" in body["error"]["message"]


def test_a_sqlite_path_naming_a_folder_is_503_naming_the_setting_and_leaves_the_folder_as_it_was(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, serve: Serve
) -> None:
    # Found by an outside test: ONCEGATE_SQLITE_PATH=.oncegate (the folder, not the file in it) answered 503
    # store_unavailable, as if to retry, and the store made the folder "readable by its owner only": mode 0600,
    # a folder nobody could enter any more.
    folder = tmp_path / "store-folder"
    folder.mkdir(mode=0o755)
    set_environment(monkeypatch, {"ONCEGATE_SQLITE_PATH": str(folder)}, tmp_path)
    address = serve(import_fresh_function_app())

    claim = json.dumps({"scope": "erp.create-order", "key": "ORDER-1", "runId": "r1"}).encode()
    status, body = over_http(address, "POST", "/api/claims", claim)

    assert_not_configured(status, body, "ONCEGATE_SQLITE_PATH")
    assert f"is the folder {folder}" in body["error"]["message"]
    assert folder.stat().st_mode & 0o777 == 0o755


def auth_levels(module: ModuleType) -> dict[str, str]:
    return {
        name: str(function.get_trigger().auth_level.value).upper() for name, function in http_functions(module).items()
    }


@pytest.mark.parametrize(
    ("environment", "actions"),
    [
        (BAD_SETTINGS["unknown-auth"][0], "FUNCTION"),
        (BAD_SETTINGS["short-secret"][0], "FUNCTION"),
        ({**BAD_SETTINGS["short-secret"][0], "ONCEGATE_AUTH": "entra"}, "ANONYMOUS"),
        (BAD_SETTINGS["entra-without-tenant"][0], "ANONYMOUS"),
    ],
    ids=["auth-unreadable", "key-mode", "entra-mode-other-setting-bad", "entra-mode-entra-setting-bad"],
)
def test_with_a_bad_setting_the_gate_follows_oncegate_auth_if_it_reads_and_is_function_keys_if_not(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, environment: dict[str, str], actions: str
) -> None:
    set_environment(monkeypatch, environment, tmp_path)

    levels = auth_levels(import_fresh_function_app())

    assert {level for name, level in levels.items() if name not in ("health", "unknown_route")} == {actions}
    assert (levels["health"], levels["unknown_route"]) == ("ANONYMOUS", "ANONYMOUS")


def test_good_settings_import_cleanly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    set_environment(monkeypatch, {}, tmp_path)

    with caplog.at_level(logging.WARNING):
        module = import_fresh_function_app()

    assert caplog.records == []
    status, health = call(http_functions(module)["health"])
    assert (status, health["status"]) == (200, "ok")
