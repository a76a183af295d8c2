"""What a new user reads in the first hour (issue 13): each answer says what is true, names what it is about,
and nothing the user never sent or saw (a digest, a NUL, an attempt a made-up token names)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest

from oncegate import bootstrap
from oncegate.bootstrap import build_services
from oncegate.config import ConfigError, Settings
from oncegate.errors import StoreUnavailable
from tests.conftest import FakeClock
from tests.http.client import FUNCTIONS, Api, ServerApi
from tests.http.test_actions import claim_body, ok

FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}


# -- the store, named ------------------------------------------------------------------------------


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "here" / "oncegate.db")})


def test_health_names_where_the_store_is(api: Api, settings: Settings) -> None:
    services = build_services(settings)
    bootstrap.use_services(services, settings=settings)
    try:
        answer = ok(api.call("health"))
    finally:
        services.close()

    assert (answer["store"], answer["storeLocation"]) == ("sqlite", str(settings.sqlite_path.resolve()))
    assert answer["status"] == "ok"


def test_a_store_that_does_not_answer_is_a_503_naming_it(
    api: Api, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = build_services(settings)
    bootstrap.use_services(services, settings=settings)

    def down() -> None:
        raise StoreUnavailable("the SQLite store is unavailable: disk I/O error")

    monkeypatch.setattr(services.store, "ping", down)
    try:
        reply = api.call("health")
    finally:
        services.close()

    assert (reply.status, reply.code) == (503, "store_unavailable")
    assert reply.body["error"]["message"] == (
        f"The sqlite store at {settings.sqlite_path.resolve()} does not answer: "
        "the SQLite store is unavailable: disk I/O error"
    )


def test_a_store_that_cannot_be_reached_while_it_is_built_is_named(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.from_environment(
        {
            "ONCEGATE_STORE": "tables",
            "ONCEGATE_KEY_SECRET": "s" * 40,
            "ONCEGATE_TABLES_CONNECTION_STRING": "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0",
        }
    )

    def unreachable(_: Settings) -> Any:
        raise StoreUnavailable("Table Storage is unavailable: ServiceRequestError")

    monkeypatch.setattr(bootstrap, "build_store", unreachable)
    bootstrap.use_services(None, settings=settings)

    reply = api.call("health")

    assert (reply.status, reply.code) == (503, "store_unavailable")
    message = reply.body["error"]["message"]
    assert message.startswith("The store (tables at https://acct.table.core.windows.net, tables OnceGate*) does not")
    assert "c2VjcmV0" not in message


@pytest.mark.parametrize("value", ["garbage", "AccountName=acct", "AccountKey=c2VjcmV0;x"])
def test_a_malformed_connection_string_is_a_config_error_naming_the_setting_not_its_value(value: str) -> None:
    environment = {"ONCEGATE_STORE": "tables", "ONCEGATE_KEY_SECRET": "s" * 40}

    with pytest.raises(ConfigError) as refused:
        Settings.from_environment({**environment, "ONCEGATE_TABLES_CONNECTION_STRING": value})

    assert refused.value.setting == "ONCEGATE_TABLES_CONNECTION_STRING"
    assert value not in str(refused.value)
    assert "c2VjcmV0" not in str(refused.value)


def test_the_store_location_never_holds_a_secret() -> None:
    settings = Settings.from_environment(
        {
            "ONCEGATE_STORE": "tables",
            "ONCEGATE_KEY_SECRET": "s" * 40,
            "ONCEGATE_TABLES_CONNECTION_STRING": "TableEndpoint=https://acct.table.core.windows.net/;"
            "SharedAccessSignature=sv=2024-01-01&sig=c2VjcmV0",
        }
    )

    assert settings.store_location == "https://acct.table.core.windows.net"


# -- messages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["hello", "1.madeuptokenmadeuptoken", "7.x"])
def test_a_token_that_does_not_verify_says_it_does_not_match(api: Api, clock: FakeClock, token: str) -> None:
    first = ok(api.call("check_and_claim", claim_body(leaseSeconds=60)))
    clock.advance(61)
    ok(api.call("check_and_claim", claim_body(run="run-2")))  # attempt 2 reconciles attempt 1

    body = {"claimToken": token, "outcome": "succeeded"}
    reply = api.call("record_result", body, route={"claimId": first["claimId"]})

    assert (reply.status, reply.code) == (409, "stale_claim")
    message = reply.body["error"]["message"]
    assert message.startswith("This claim token does not match this claim: attempt 2 now holds it")
    assert "from attempt" not in message
    assert token not in message


@pytest.mark.parametrize("lease", [300, 45, 61])
def test_the_in_progress_reason_says_the_same_wait_as_retry_after_seconds(api: Api, lease: int) -> None:
    ok(api.call("check_and_claim", claim_body(leaseSeconds=lease)))

    answer = ok(api.call("check_and_claim", claim_body(run="run-2")))

    assert answer["decision"] == "in_progress"
    assert f"retry in {answer['retryAfterSeconds']} s" in answer["reason"]


def test_the_catch_all_names_the_path_as_sent_not_the_hosts_route_parameter() -> None:
    request = func.HttpRequest("GET", "http://localhost:7071/api/", body=b"", route_params={"path": "\u0000"})

    reply = FUNCTIONS["unknown_route"].get_user_function()(request)

    assert json.loads(reply.get_body())["error"]["message"] == "No action is served at /api/."


@pytest.mark.parametrize(("path", "message"), [("/", "Routes live under /api/"), ("/api", "No action is served at")])
def test_the_local_server_points_a_lost_caller_to_api(local_server: tuple[str, int], path: str, message: str) -> None:
    reply = ServerApi(local_server).request("GET", path)

    assert (reply.status, reply.code) == (404, "not_found")
    assert reply.body["error"]["message"].startswith(message)
    assert "\u0000" not in reply.body["error"]["message"]


def test_a_wrong_conflict_status_names_every_allowed_value(api: Api) -> None:
    reply = api.call("list_conflicts", params={"status": "closed"})

    assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", ["status"])
    assert reply.body["error"]["message"] == "status must be open, resolved or all, not 'closed'."


def test_a_lookup_miss_names_the_scope_and_no_digest(api: Api) -> None:
    reply = api.call("lookup_claim", {"scope": "ERP.Create-Order", "key": "ORDER-404"})

    assert (reply.status, reply.code) == (404, "not_found")
    assert reply.body["error"]["message"] == "No claim has this key in the scope erp.create-order."


def test_a_sensitive_key_on_lookup_does_not_say_nothing_was_stored(api: Api) -> None:
    reply = api.call("lookup_claim", {"scope": "erp.create-order", "key": "ana@contoso.com"})

    assert (reply.status, reply.code) == (400, "sensitive_key")
    assert "stored" not in reply.body["error"]["message"]


def test_after_a_review_a_blocked_claim_no_longer_asks_a_person_to_act(api: Api) -> None:
    answer = ok(api.call("check_and_claim", claim_body()))
    claim_id = answer["claimId"]
    failed = {"claimToken": answer["claimToken"], "outcome": "failed", "retryable": False, "error": "bad VAT"}
    ok(api.call("record_result", failed, route={"claimId": claim_id}))
    before = ok(api.call("check_and_claim", claim_body(run="run-2")))
    ok(api.call("review_claim", {"reviewer": "ana@contoso.com"}, route={"claimId": claim_id}))

    after = ok(api.call("check_and_claim", claim_body(run="run-3")))

    assert before["decision"] == after["decision"] == "blocked"
    assert before["reason"].endswith("(bad VAT): a person must act.")
    assert after["reason"] == (
        "Attempt 1 failed and was marked not retryable (bad VAT): ana@contoso.com reviewed it and the key stays "
        "blocked: stop."
    )


def test_a_snake_case_field_is_refused_like_any_unknown_field(api: Api) -> None:
    body = {"scope": "erp.create-order", "key": "ORDER-1", "payload": 1, "run_id": "run-1", "flow": FLOW}

    reply = api.call("check_and_claim", body)

    assert (reply.status, reply.code) == (400, "invalid_request")
    assert sorted(reply.targets) == ["runId", "run_id"]
