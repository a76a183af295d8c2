"""``PUT`` and ``GET /api/targets`` (issue 34): operators only, in Entra ID mode with the reviewer role; a function
key, which every flow holds, never declares or lists a target. Run through the Functions handlers and over HTTP."""

from __future__ import annotations

import dataclasses
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from oncegate import bootstrap
from oncegate.config import AuthMode, Settings
from oncegate.entrypoints.error_map import error_info
from oncegate.errors import NotFound
from tests.conftest import SQLITE_FILE
from tests.gate import Gate
from tests.http.client import Api
from tests.http.test_auth import principal_header
from tests.http.test_bearer import flow, reviewer
from tests.support.entra import LocalEntra

ERP = {
    "name": "erp",
    "baseUrl": "https://erp.example.com/api",
    "timeoutSeconds": 20,
    "lookupPath": "/orders?reference={reference}",
    "auth": "secret:X-Api-Key=oncegate-target-erp",
    "allowCidrs": ["10.20.0.0/16"],
    "honoursIdempotencyKey": True,
    "recordPointer": "/id",
    "keptHeaders": ["Location"],
}


@pytest.fixture
def entra_mode(service: Gate, local_entra: LocalEntra, tmp_path: Path) -> None:
    settings = Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "unused.db")})
    bootstrap.use_services(
        service.services, settings=dataclasses.replace(settings, auth=AuthMode.ENTRA, entra=local_entra.api)
    )


def stored(tmp_path: Path) -> list[str]:
    with closing(sqlite3.connect(tmp_path / SQLITE_FILE)) as database:
        return list(database.iterdump())


@pytest.mark.usefixtures("entra_mode")
def test_a_reviewer_declares_and_lists_targets_and_is_recorded_as_who_declared(
    api: Api, local_entra: LocalEntra
) -> None:
    declared = api.call("set_target", ERP, headers=reviewer(local_entra))
    listed = api.call("list_targets", headers=reviewer(local_entra))

    assert declared.status == 200
    assert declared.body["declaredBy"] == "ana@contoso.com"
    assert {name: declared.body[name] for name in ERP} == ERP
    assert listed.status == 200
    assert [target["name"] for target in listed.body["value"]] == ["erp"]
    assert listed.body["value"][0]["auth"] == "secret:X-Api-Key=oncegate-target-erp"


@pytest.mark.usefixtures("entra_mode")
def test_a_flow_token_may_neither_declare_nor_list_targets(api: Api, local_entra: LocalEntra, tmp_path: Path) -> None:
    before = stored(tmp_path)

    replies = [
        api.call("set_target", ERP, headers=flow(local_entra)),
        api.call("list_targets", headers=flow(local_entra)),
    ]

    assert [(reply.status, reply.code) for reply in replies] == [(403, "forbidden")] * 2
    assert stored(tmp_path) == before


@pytest.mark.usefixtures("entra_mode")
def test_a_refused_declaration_names_the_field_and_stores_nothing(
    api: Api, local_entra: LocalEntra, tmp_path: Path
) -> None:
    before = stored(tmp_path)

    refused = [
        api.call("set_target", {**ERP, "baseUrl": "https://169.254.169.254"}, headers=reviewer(local_entra)),
        api.call("set_target", {**ERP, "timeoutSeconds": 120}, headers=reviewer(local_entra)),
        api.call("set_target", {**ERP, "auth": "secret:X-Key=oncegate-key-secret"}, headers=reviewer(local_entra)),
        api.call("set_target", {**ERP, "secret": "s3cr3t"}, headers=reviewer(local_entra)),
    ]

    assert [(reply.status, reply.code, reply.targets) for reply in refused] == [
        (400, "invalid_request", ["baseUrl"]),
        (400, "invalid_request", ["timeoutSeconds"]),
        (400, "invalid_request", ["auth"]),
        (400, "invalid_request", ["secret"]),
    ]
    assert stored(tmp_path) == before


@pytest.mark.parametrize("forged", [{}, principal_header("ana@contoso.com", "OnceGate.Reviewer")])
def test_with_function_keys_no_key_declares_or_lists_a_target(api: Api, tmp_path: Path, forged: dict[str, str]) -> None:
    before = stored(tmp_path)

    replies = [api.call("set_target", ERP, headers=forged), api.call("list_targets", headers=forged)]

    assert [(reply.status, reply.code) for reply in replies] == [(403, "entra_required")] * 2
    assert stored(tmp_path) == before


def test_a_target_not_found_is_answered_naming_the_target_field() -> None:
    # The stores know records, not the wire: the edge names the field a Perform once names its target by.
    info = error_info(NotFound("No target is declared as erp.", record="target"))

    assert (info.code, [detail.target for detail in info.details]) == ("not_found", ["target"])
