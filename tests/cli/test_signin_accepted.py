"""``--entra`` asks for tokens the app accepts: the local server runs in Entra ID mode against a local tenant.

MSAL is a fake that answers as Entra ID would: a token whose audience is the API the requested
scope names, a v1 token carrying the App ID URI and a v2 token the API's client id.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.cli.signin import EntraSettings, TokenCache
from oncegate.config import AuthMode, Settings
from tests.cli.conftest import Oncegate, Seen
from tests.gate import Gate
from tests.support.entra import CLI_APP_ID, CLIENT_ID, TENANT_ID, LocalEntra

DELEGATED_SCOPE = f"api://{CLIENT_ID}/user_impersonation"


class IssuingMsal:
    """An MSAL application whose tokens are signed by the local tenant for the scope they were asked for."""

    def __init__(self, entra: LocalEntra, role: str, version: str) -> None:
        self.entra, self.role, self.version = entra, role, version
        self.scopes: list[str] = []

    def factory(self, settings: EntraSettings, cache: TokenCache) -> IssuingMsal:
        return self

    def get_accounts(self) -> list[dict[str, Any]]:
        return []

    def acquire_token_silent(self, scopes: list[str], account: dict[str, Any]) -> dict[str, Any] | None:
        return None

    def initiate_device_flow(self, scopes: list[str]) -> dict[str, Any]:
        self.scopes = scopes
        return {"user_code": "ABCD-EFGH", "message": "To sign in, enter ABCD-EFGH"}

    def acquire_token_by_device_flow(self, flow: dict[str, Any]) -> dict[str, Any]:
        return {"access_token": self._token(self.scopes), "token_type": "Bearer"}

    def acquire_token_for_client(self, scopes: list[str]) -> dict[str, Any]:
        return {"access_token": self._token(scopes), "token_type": "Bearer"}

    def _token(self, scopes: list[str]) -> str:
        (scope,) = scopes
        resource = scope.rpartition("/")[0]  # api://<client id>/user_impersonation or /.default
        audience = resource if self.version == "1.0" else resource.removeprefix("api://")
        claims = self.entra.claims(self.role, version=self.version, aud=audience)
        return self.entra.token(claims)


@pytest.fixture(autouse=True)
def entra_mode(service: Gate, local_entra: LocalEntra, tmp_path: Path) -> None:
    settings = Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "unused.db")})
    bootstrap.use_services(
        service.services, settings=dataclasses.replace(settings, auth=AuthMode.ENTRA, entra=local_entra.api)
    )


def sign_in(scope: str) -> list[str]:
    return ["--entra", "--tenant", TENANT_ID, "--client-id", CLI_APP_ID, "--api-scope", scope]


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_a_person_signed_in_with_a_device_code_is_let_in(
    oncegate: Oncegate, seen: list[Seen], local_entra: LocalEntra, version: str
) -> None:
    msal = IssuingMsal(local_entra, "OnceGate.Reviewer", version)

    run = oncegate(*sign_in(DELEGATED_SCOPE), "conflicts", "list", app_factory=msal.factory)

    assert run.code == 0, run.err
    assert msal.scopes == [DELEGATED_SCOPE]
    assert seen[-1].headers["authorization"].startswith("Bearer ey")


def test_automation_with_client_credentials_is_let_in(
    oncegate: Oncegate, local_entra: LocalEntra, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONCEGATE_CLIENT_SECRET", "s3cret")
    msal = IssuingMsal(local_entra, "OnceGate.Flow", "2.0")

    run = oncegate(*sign_in(DELEGATED_SCOPE), "conflicts", "list", app_factory=msal.factory)

    assert run.code == 0, run.err


def test_a_token_for_another_api_is_refused_and_the_command_says_why(
    oncegate: Oncegate, local_entra: LocalEntra
) -> None:
    msal = IssuingMsal(local_entra, "OnceGate.Reviewer", "1.0")

    run = oncegate(*sign_in("api://another-api/user_impersonation"), "conflicts", "list", app_factory=msal.factory)

    assert run.code != 0
    assert "not meant for this API" in run.err
