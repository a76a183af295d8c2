"""The connector's files are valid OpenAPI 2.0 and valid against the Power Platform repository's schemas.

The schemas are vendored in ``tests/connector/schemas`` so that a clean clone runs these tests on its own;
where the workplace's reference copy sits beside the clone (``../shared``), they must be byte-for-byte the same.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi

from tests.connector.spec import CONNECTOR, SCHEMAS, SHARED_SCHEMAS, load_schema

VENDORED = ("apiDefinition.swagger.schema.json", "paconn-apiProperties.schema.json", "paconn-settings.schema.json")


def errors(schema: dict[str, Any], document: Any, validator: type[jsonschema.protocols.Validator]) -> list[str]:
    checker = validator(schema, format_checker=validator.FORMAT_CHECKER)
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message[:300]}" for error in checker.iter_errors(document)
    ]


def test_definition_is_valid_openapi_2(any_definition: dict[str, Any]) -> None:
    validate_openapi(any_definition)


def test_definition_is_valid_against_the_repository_schema(any_definition: dict[str, Any]) -> None:
    schema = load_schema("apiDefinition.swagger.schema.json")
    assert errors(schema, any_definition, jsonschema.Draft4Validator) == []


def test_repository_schema_catches_a_broken_definition(definition: dict[str, Any]) -> None:
    # Guards the test above: the schema is live, not trivially passing after the comments were stripped.
    broken = copy.deepcopy(definition)
    broken["paths"]["/api/claims"]["post"]["x-ms-visibility"] = "hidden"
    schema = load_schema("apiDefinition.swagger.schema.json")
    assert errors(schema, broken, jsonschema.Draft4Validator)


def test_properties_are_valid_against_the_repository_schema(any_properties: dict[str, Any]) -> None:
    schema = load_schema("paconn-apiProperties.schema.json")
    assert errors(schema, any_properties, jsonschema.Draft7Validator) == []


def test_repository_schema_catches_broken_properties(any_properties: dict[str, Any]) -> None:
    broken = copy.deepcopy(any_properties)
    broken["properties"]["policyTemplateInstances"][0]["parameters"] = {}
    schema = load_schema("paconn-apiProperties.schema.json")
    assert errors(schema, broken, jsonschema.Draft7Validator)


def test_readme_settings_example_is_valid_against_the_repository_schema() -> None:
    readme = (CONNECTOR / "README.md").read_text(encoding="utf-8")
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", readme, re.DOTALL)]
    (settings,) = [block for block in blocks if "apiProperties" in block]
    schema = load_schema("paconn-settings.schema.json")
    assert errors(schema, settings, jsonschema.Draft7Validator) == []
    assert (CONNECTOR / settings["apiDefinition"]).is_file()
    assert (CONNECTOR / settings["apiProperties"]).is_file()
    assert (CONNECTOR / settings["icon"]).is_file()


def test_the_vendored_schemas_are_all_there_with_their_licence() -> None:
    assert sorted(path.name for path in SCHEMAS.iterdir()) == sorted([*VENDORED, "LICENSE", "README.md"])


NO_REFERENCE = "no reference copy of the Power Platform schemas to compare with (the maintainers' workspace has one)"


@pytest.mark.skipif(not SHARED_SCHEMAS.is_dir(), reason=NO_REFERENCE)
@pytest.mark.parametrize("name", [*VENDORED, "LICENSE"])
def test_the_vendored_schemas_are_the_reference_copy_unchanged(name: str) -> None:
    assert (SCHEMAS / name).read_bytes() == (SHARED_SCHEMAS / name).read_bytes(), f"{name} differs from the reference"
