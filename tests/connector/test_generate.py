"""The committed definitions are exactly what the generator makes from the app and its models: they cannot drift."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from oncegate.models import ClaimRequest, ClaimResponse, ClaimView, ConflictView
from tests.connector.spec import CONNECTOR, DEFINITIONS, REPO
from tools.connector import build as generator
from tools.connector import schemas
from tools.connector.operations import OPERATIONS


def test_regenerating_changes_nothing() -> None:
    assert generator.main(["--check", "--connector-dir", str(CONNECTOR)]) == 0


def test_check_command_runs_from_the_repository_root() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools.connector", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_check_fails_on_a_stale_file_and_writing_fixes_it(tmp_path: Path) -> None:
    assert generator.main(["--connector-dir", str(tmp_path)]) == 0
    for variant in DEFINITIONS.values():
        assert (tmp_path / variant.relative_to(CONNECTOR)).read_text(encoding="utf-8") == variant.read_text(
            encoding="utf-8"
        )
    stale = tmp_path / "apiDefinition.swagger.json"
    stale.write_text(stale.read_text(encoding="utf-8").replace("Check and claim", "Check"), encoding="utf-8")
    assert generator.main(["--check", "--connector-dir", str(tmp_path)]) == 1
    assert generator.main(["--connector-dir", str(tmp_path)]) == 0
    assert generator.main(["--check", "--connector-dir", str(tmp_path)]) == 0


def test_variants_differ_only_in_their_security(definition: dict[str, Any]) -> None:
    entra = generator.build("entra")
    assert entra["securityDefinitions"]["oauth2_auth"]["type"] == "oauth2"
    assert definition["securityDefinitions"]["api_key"] == {"type": "apiKey", "in": "header", "name": "x-functions-key"}
    for document in (definition, entra):
        del document["securityDefinitions"], document["security"]
    # ...and in the sign-in refusals that the app itself answers with Entra ID (401, 403).
    for item in entra["paths"].values():
        for spec in item.values():
            spec["responses"] = {
                status: answer for status, answer in spec["responses"].items() if status not in ("401", "403")
            }
    assert definition == entra


@pytest.mark.parametrize("model", [ClaimRequest, ClaimResponse, ClaimView, ConflictView])
def test_every_model_field_is_in_its_definition(definition: dict[str, Any], model: type[BaseModel]) -> None:
    wire_names = {field.alias or name for name, field in model.model_fields.items()}
    assert set(definition["definitions"][model.__name__]["properties"]) == wire_names
    required = {field.alias or name for name, field in model.model_fields.items() if field.is_required()}
    assert set(definition["definitions"][model.__name__].get("required", [])) == required


def test_a_field_without_designer_text_stops_the_generator() -> None:
    class Extended(ClaimResponse):
        retry_count: int = 0

    with pytest.raises(KeyError, match=r"Extended\.retryCount has no designer text"):
        schemas.model_definition("Extended", Extended, "serialization")


def test_an_enum_value_without_display_name_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    names = {enum: dict(values) for enum, values in schemas.ENUM_NAMES.items()}
    del names[next(enum for enum in names if enum.__name__ == "Decision")]["blocked"]
    monkeypatch.setattr(schemas, "ENUM_NAMES", names)
    with pytest.raises(KeyError, match="enum Decision needs a display name"):
        generator.build()


def test_paths_are_the_routes_of_the_app() -> None:
    moved = [
        replace(route, route="claims/{claimId}/record") if route.name == "record_result" else route
        for route in generator.app_routes()
    ]
    served = {operation.designer.operation_id: (route, method) for route, method, operation in generator.served(moved)}
    assert served["RecordResult"] == ("claims/{claimId}/record", "post")
    assert served["GetClaim"] == ("claims/{claimId}", "get")


def test_a_function_without_an_operation_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(OPERATIONS, "get_claim")
    with pytest.raises(KeyError, match=r"function_app\.get_claim has no operation"):
        generator.build()


def test_an_operation_of_no_function_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(OPERATIONS, "fetch_claim", OPERATIONS["get_claim"])
    with pytest.raises(KeyError, match="OPERATIONS names fetch_claim, which is no function of function_app"):
        generator.build()


def test_a_union_swagger_cannot_express_stops_the_generator() -> None:
    class Either(BaseModel):
        value: int | str

    with pytest.raises(ValueError, match="cannot express"):
        schemas.model_definition("Either", Either, "validation")


def test_optional_fields_are_flattened_and_absent_values_are_left_out(definition: dict[str, Any]) -> None:
    token = definition["definitions"]["ClaimResponse"]["properties"]["claimToken"]
    assert token["type"] == "string"
    assert "claimToken" not in definition["definitions"]["ClaimResponse"]["required"]
    payload = definition["definitions"]["ClaimRequest"]["properties"]["payload"]
    assert "type" not in payload, "any JSON value"


def test_the_generator_is_not_deployed() -> None:
    assert "tools/" in (REPO / ".funcignore").read_text(encoding="utf-8").splitlines()
