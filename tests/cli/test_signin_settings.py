"""``--entra`` with a tenant setting that cannot name a tenant: refused before any sign-in, naming the setting.

A tenant pasted as the sign-in URL, or typed with a space, went into MSAL's authority address; without a
network MSAL said ``Cannot reach Microsoft Entra ID at https://login.microsoftonline.com/https://login...``
(exit 3, as if the network were at fault), with one it failed on Entra ID's answer. The app refuses the same
values in ``ONCEGATE_ENTRA_TENANT_ID``; the command now refuses them in ``--tenant`` and ``ONCEGATE_TENANT_ID``.
"""

from __future__ import annotations

import os

import pytest

from tests.cli.conftest import Oncegate, Run, Seen
from tests.cli.test_signin import SCOPE, FakeMsal

NOT_TENANTS = ("https://login.microsoftonline.com/contoso.onmicrosoft.com", "con toso", "contoso/")


def health_signed_in(oncegate: Oncegate, tenant: str, fake: FakeMsal) -> Run:
    """``oncegate --entra --tenant TENANT ... health``, signing in through ``fake``."""
    return oncegate(
        "--entra",
        "--tenant",
        tenant,
        "--client-id",
        "cli-app",
        "--api-scope",
        SCOPE,
        "health",
        app_factory=fake.factory,
    )


@pytest.mark.parametrize("tenant", NOT_TENANTS)
def test_a_tenant_option_that_names_no_tenant_is_exit_2_naming_it(
    oncegate: Oncegate, seen: list[Seen], tenant: str
) -> None:
    fake = FakeMsal(token="never")

    run = health_signed_in(oncegate, tenant, fake)

    assert run.code == 2
    assert run.err.splitlines() == [
        "--tenant (ONCEGATE_TENANT_ID) must be the tenant's id (a GUID) or domain, such as contoso.onmicrosoft.com, "
        f"not {tenant!r}."
    ]
    assert (fake.settings, fake.calls, seen) == (None, [], [])
    assert not os.path.exists(os.environ["ONCEGATE_TOKEN_CACHE"])


def test_a_tenant_setting_that_names_no_tenant_is_refused_as_the_option(
    oncegate: Oncegate, seen: list[Seen], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONCEGATE_TENANT_ID", "https://login.microsoftonline.com/contoso")
    fake = FakeMsal(token="never")

    run = oncegate("--entra", "--client-id", "cli-app", "--api-scope", SCOPE, "health", app_factory=fake.factory)

    assert run.code == 2
    assert "--tenant (ONCEGATE_TENANT_ID) must be the tenant's id" in run.err
    assert (fake.calls, seen) == ([], [])


@pytest.mark.parametrize("tenant", ["contoso.onmicrosoft.com", "11111111-2222-3333-4444-555555555555", "organizations"])
def test_a_tenant_id_or_domain_signs_in(oncegate: Oncegate, tenant: str) -> None:
    fake = FakeMsal(token="fresh-token")

    run = health_signed_in(oncegate, tenant, fake)

    assert run.code == 0, run.err
    assert fake.settings is not None
    assert fake.settings.authority == f"https://login.microsoftonline.com/{tenant}"
