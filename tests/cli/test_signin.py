"""``--entra``: the token cache on disk, the cache before any prompt, and the header sent; MSAL is a fake here.

Nothing here reaches Microsoft Entra ID: the fake stands in for the MSAL application the
factory would make.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from oncegate.cli import main
from oncegate.cli.client import SignInError, Unreachable
from oncegate.cli.signin import (
    EntraSettings,
    TokenCache,
    access_token,
    app_scope,
    load_cache,
    save_cache,
)
from tests.cli.conftest import Oncegate, Run, Seen

SCOPE = "api://11111111-2222-3333-4444-555555555555/user_impersonation"
ACCOUNT = {"home_account_id": "ana.contoso", "username": "ana@contoso.com"}
SIGN_IN = ["--entra", "--tenant", "contoso.onmicrosoft.com", "--client-id", "cli-app", "--api-scope", SCOPE]


class FakeMsal:
    """An MSAL application that answers from what the test set up and records what it was asked."""

    def __init__(self, *, cached: str | None = None, token: str = "fresh-token", error: str | None = None) -> None:
        self.cached = cached
        self.token = token
        self.error = error
        self.calls: list[tuple[str, Any]] = []
        self.settings: EntraSettings | None = None
        self.cache: TokenCache | None = None

    def factory(self, settings: EntraSettings, cache: TokenCache) -> FakeMsal:
        self.settings, self.cache = settings, cache
        return self

    def _issued(self) -> dict[str, Any]:
        # A token from Entra ID changes the cache, as MSAL's own cache marks itself.
        assert self.cache is not None
        self.cache.has_state_changed = True
        if self.error:
            return {"error": self.error, "error_description": "AADSTS70000: the user declined."}
        return {"access_token": self.token, "token_type": "Bearer"}

    def get_accounts(self) -> list[dict[str, Any]]:
        self.calls.append(("get_accounts", None))
        return [ACCOUNT] if self.cached else []

    def acquire_token_silent(self, scopes: list[str], account: dict[str, Any]) -> dict[str, Any] | None:
        self.calls.append(("acquire_token_silent", scopes))
        return {"access_token": self.cached} if account == ACCOUNT and self.cached else None

    def initiate_device_flow(self, scopes: list[str]) -> dict[str, Any]:
        self.calls.append(("initiate_device_flow", scopes))
        return {"user_code": "ABCD-EFGH", "message": "To sign in, use a web browser to open the page ... ABCD-EFGH"}

    def acquire_token_by_device_flow(self, flow: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("acquire_token_by_device_flow", flow["user_code"]))
        return self._issued()

    def acquire_token_for_client(self, scopes: list[str]) -> dict[str, Any]:
        self.calls.append(("acquire_token_for_client", scopes))
        return self._issued()


def settings(tmp_path: Path) -> EntraSettings:
    return EntraSettings(tenant="contoso", client_id="cli-app", scope=SCOPE, cache_path=tmp_path / "cache.json")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_person_signs_in_with_a_device_code_once_and_the_cache_is_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeMsal()
    where = settings(tmp_path)

    token = access_token(where, fake.factory)

    assert token == "fresh-token"
    assert [name for name, _ in fake.calls] == [
        "get_accounts",
        "initiate_device_flow",
        "acquire_token_by_device_flow",
    ]
    assert ("initiate_device_flow", [SCOPE]) in fake.calls
    assert "ABCD-EFGH" in capsys.readouterr().err
    assert mode(where.cache_path) == 0o600


def test_a_cached_token_is_used_without_a_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeMsal(cached="cached-token")

    token = access_token(settings(tmp_path), fake.factory)

    assert token == "cached-token"
    assert fake.calls == [("get_accounts", None), ("acquire_token_silent", [SCOPE])]
    assert capsys.readouterr().err == ""


def test_an_account_whose_token_cannot_be_refreshed_signs_in_again(tmp_path: Path) -> None:
    fake = FakeMsal(cached="expired")
    fake.acquire_token_silent = lambda scopes, account: None  # type: ignore[method-assign]

    token = access_token(settings(tmp_path), fake.factory)

    assert token == "fresh-token"
    assert [name for name, _ in fake.calls][-2:] == ["initiate_device_flow", "acquire_token_by_device_flow"]


def test_with_a_client_secret_automation_uses_client_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONCEGATE_CLIENT_SECRET", "s3cret")
    resolved = EntraSettings.resolve(tenant="contoso", client_id="automation-app", scope=SCOPE, environ=os.environ)
    fake = FakeMsal(token="app-token")

    token = access_token(resolved, fake.factory)

    assert token == "app-token"
    assert fake.settings is not None
    assert (fake.settings.client_secret, fake.settings.client_id) == ("s3cret", "automation-app")
    assert fake.calls == [("acquire_token_for_client", ["api://11111111-2222-3333-4444-555555555555/.default"])]


def test_a_cache_file_others_can_read_is_restricted_before_it_is_read(tmp_path: Path) -> None:
    where = settings(tmp_path)
    access_token(where, FakeMsal().factory)
    os.chmod(where.cache_path, 0o644)

    load_cache(where.cache_path)

    assert mode(where.cache_path) == 0o600


def test_writing_the_cache_restricts_a_wider_file_before_any_token_is_in_it(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    path.write_text("{}", encoding="utf-8")
    os.chmod(path, 0o666)

    save_cache(load_cache(tmp_path / "none-yet.json"), path)

    assert mode(path) == 0o600


def test_a_refused_sign_in_is_a_sign_in_error(tmp_path: Path) -> None:
    with pytest.raises(SignInError, match="authorization_declined: AADSTS70000"):
        access_token(settings(tmp_path), FakeMsal(error="authorization_declined").factory)


def test_entra_id_out_of_reach_is_unreachable(tmp_path: Path) -> None:
    fake = FakeMsal()

    def refused(scopes: list[str]) -> dict[str, Any]:
        raise ConnectionError("Connection refused")

    fake.initiate_device_flow = refused  # type: ignore[method-assign]

    with pytest.raises(Unreachable, match=r"login\.microsoftonline\.com/contoso"):
        access_token(settings(tmp_path), fake.factory)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("api://abc/user_impersonation", "api://abc/.default"),
        ("api://abc/.default", "api://abc/.default"),
        ("api://abc", "api://abc/.default"),
        ("abc", "abc/.default"),
        ("https://contoso.com/oncegate/Claims.Read", "https://contoso.com/oncegate/.default"),
    ],
)
def test_client_credentials_ask_for_the_apis_default_scope(scope: str, expected: str) -> None:
    assert app_scope(scope) == expected


def test_the_cli_sends_the_bearer_token_and_no_function_key(
    oncegate: Oncegate, seen: list[Seen], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONCEGATE_FUNCTION_KEY", "not-for-an-entra-deployment")
    fake = FakeMsal(token="cli-token")

    run: Run = oncegate(*SIGN_IN, "health", app_factory=fake.factory)

    assert run.code == 0, run.err
    assert seen[-1].headers["authorization"] == "Bearer cli-token"
    assert "x-functions-key" not in seen[-1].headers
    assert fake.settings is not None
    assert (fake.settings.tenant, fake.settings.client_id, fake.settings.scope) == (
        "contoso.onmicrosoft.com",
        "cli-app",
        SCOPE,
    )


def test_the_sign_in_settings_come_from_the_environment(
    oncegate: Oncegate, seen: list[Seen], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONCEGATE_TENANT_ID", "contoso")
    monkeypatch.setenv("ONCEGATE_CLIENT_ID", "cli-app")
    monkeypatch.setenv("ONCEGATE_API_SCOPE", SCOPE)
    fake = FakeMsal(token="env-token")

    run = oncegate("--entra", "health", app_factory=fake.factory)

    assert run.code == 0, run.err
    assert seen[-1].headers["authorization"] == "Bearer env-token"
    assert fake.settings is not None
    assert fake.settings.cache_path == Path(os.environ["ONCEGATE_TOKEN_CACHE"])


def test_a_refused_sign_in_is_exit_2_and_sends_nothing(oncegate: Oncegate, seen: list[Seen]) -> None:
    run = oncegate(*SIGN_IN, "health", app_factory=FakeMsal(error="authorization_declined").factory)

    assert run.code == 2
    assert run.err.splitlines()[-1].startswith("Microsoft Entra ID gave no token: authorization_declined: ")
    assert seen == []


def test_no_sign_in_for_a_deployment_the_token_would_reach_in_clear(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeMsal()

    code = main(["--url", "http://oncegate.example.com", *SIGN_IN, "health"], app_factory=fake.factory)

    assert code == 2
    assert capsys.readouterr().err.startswith("Refusing to send credentials to oncegate.example.com over plain http")
    assert (fake.settings, fake.calls) == (None, [])


def test_a_function_key_and_entra_are_one_or_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--key", "k", *SIGN_IN, "health"], app_factory=FakeMsal().factory)

    assert stopped.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
