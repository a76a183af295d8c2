"""A poll address of Perform once goes back only to the signed-in caller it was handed to (Entra ID mode).

Check and claim's poll refuses a ticket polled by another signed-in caller; Perform once's poll answered it, the
target's kept response included, to any caller holding the flow role who came by the address (a run's history
shows it). Run through the app's functions and over HTTP through the local server, on both stores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from oncegate import bootstrap
from oncegate.config import AuthMode, Settings
from oncegate.domain.targets import Target
from tests.gate import Gate
from tests.http.client import Api, FunctionsApi, Reply, ServerApi
from tests.perform.calls import perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.entra import LocalEntra
from tests.support.target_server import Answer, StandInTarget

FLOW = "OnceGate.Flow"


@pytest.fixture(params=["functions", "server"])
def signed_in_api(
    request: pytest.FixtureRequest, service: Gate, local_entra: LocalEntra, tmp_path: Path
) -> Iterator[Api]:
    """The app in Entra ID mode over the Perform once suite's service, through either door."""
    settings = Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "unused.db")})
    entra = dataclasses.replace(settings, auth=AuthMode.ENTRA, entra=local_entra.api)
    bootstrap.use_services(service.services, settings=entra)
    yield ServerApi(request.getfixturevalue("local_server")) if request.param == "server" else FunctionsApi()
    bootstrap.use_services(None)


@pytest.fixture
def slow_erp(declared: Declared, erp: Target) -> Target:
    return declared.declare(with_target(erp, timeout_seconds=30))


def caller(entra: LocalEntra, app: str) -> dict[str, str]:
    """A flow's application, signed in as itself."""
    return {"Authorization": f"Bearer {entra.token(entra.claims(FLOW, azp=app, oid=app))}"}


def poll(api: Api, location: str, headers: dict[str, str]) -> Reply:
    parts = urlsplit(location)
    route = {"claimId": parts.path.split("/")[-2]}
    return api.call("wait_for_perform", route=route, params=dict(parse_qsl(parts.query)), headers=headers)


def perform(api: Api, headers: dict[str, str], **fields: Any) -> Reply:
    return api.call("perform_once", perform_body(**fields), headers=headers)


def test_a_perform_poll_address_is_refused_to_another_signed_in_caller(
    signed_in_api: Api, local_entra: LocalEntra, slow_erp: Target, stand_in: StandInTarget
) -> None:
    holder, waiter, other = (caller(local_entra, app) for app in ("app-holder", "app-waiter", "app-other"))
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(perform, signed_in_api, holder, run="run-1")
        stand_in.wait_for(1)
        asked = perform(signed_in_api, waiter, run="run-2", wait=True, maxWaitSeconds=600)
        while_held = poll(signed_in_api, asked.headers["location"], other)
        stand_in.release()
        assert held.result(timeout=30).body["decision"] == "performed"
    by_other = poll(signed_in_api, asked.headers["location"], other)
    by_waiter = poll(signed_in_api, asked.headers["location"], waiter)

    assert (asked.status, asked.body["decision"]) == (202, "in_progress")
    for refused in (while_held, by_other):
        assert (refused.status, refused.code, refused.targets) == (400, "invalid_request", ["ticket"]), refused
    assert (by_waiter.status, by_waiter.body["decision"]) == (200, "duplicate")
    assert by_waiter.body["targetRecordId"] == "order-1"
    assert len(stand_in.writes()) == 1
