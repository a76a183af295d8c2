"""The certification rules of the Power Platform Swagger validator, one test each, on both definitions.

The validator itself is not public; each test is named after the rule it stands in for and checks
what the rule's published message says. Rules that need the service (schema counts and depth,
restricted words beyond the title, English-only values) are listed in connector/README.md.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from tests.connector.spec import METHODS, operations, schemas

ALLOWED_CATEGORIES = {
    "AI",
    "Business Management",
    "Business Intelligence",
    "Collaboration",
    "Commerce",
    "Communication",
    "Content and Files",
    "Finance",
    "Data",
    "Human Resources",
    "Internet of Things",
    "IT Operations",
    "Lifestyle and Entertainment",
    "Marketing",
    "Productivity",
    "Sales and CRM",
    "Security",
    "Social Media",
    "Website",
}
MAX_CATEGORIES = 2
SUPPORTED_MIME_TYPES = {"application/json", "text/plain", "multipart/form-data", "application/x-www-form-urlencoded"}
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")


def metadata(doc: dict[str, Any]) -> dict[str, str]:
    return {item["propertyName"]: item["propertyValue"] for item in doc.get("x-ms-connector-metadata", [])}


def template_variables(path: str) -> set[str]:
    return set(re.findall(r"\{([^}]+)\}", path))


# -- document -----------------------------------------------------------------------------------


def test_specification_version_incorrect(any_definition: dict[str, Any]) -> None:
    assert any_definition["swagger"] == "2.0"


def test_host_name_not_valid(any_definition: dict[str, Any]) -> None:
    host = any_definition["host"]
    assert re.fullmatch(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:\d+)?", host), f"{host!r} is not a bare host name"


def test_base_path_not_valid(any_definition: dict[str, Any]) -> None:
    assert any_definition["basePath"].startswith("/")


def test_schemes_array_empty(any_definition: dict[str, Any]) -> None:
    assert any_definition["schemes"]
    assert set(any_definition["schemes"]) <= {"https"}, "SchemeNotValid: https only"


def test_mime_type_not_valid(any_definition: dict[str, Any]) -> None:
    declared = set(any_definition["consumes"]) | set(any_definition["produces"])
    for op in operations(any_definition):
        declared |= set(op.spec.get("consumes", [])) | set(op.spec.get("produces", []))
    assert declared <= SUPPORTED_MIME_TYPES


# -- operations -----------------------------------------------------------------------------------


def test_operation_id_required(any_definition: dict[str, Any]) -> None:
    assert [op.path for op in operations(any_definition) if not op.spec.get("operationId")] == []


def test_operation_id_not_unique(any_definition: dict[str, Any]) -> None:
    ids = [op.id for op in operations(any_definition)]
    assert len(ids) == len(set(ids))


def test_operation_id_sanitized(any_definition: dict[str, Any]) -> None:
    # Only letters and digits, so the sanitised id is the id; PascalCase as the repository asks.
    assert [op.id for op in operations(any_definition) if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", op.id)] == []


def test_operation_must_have_response(any_definition: dict[str, Any]) -> None:
    assert [op.id for op in operations(any_definition) if not op.spec.get("responses")] == []


def test_operation_should_have_successful_response(any_definition: dict[str, Any]) -> None:
    missing = [op.id for op in operations(any_definition) if not any(s.startswith("2") for s in op.spec["responses"])]
    assert missing == []


ERROR_BODY = {"$ref": "#/definitions/ErrorBody"}


def test_every_operation_has_a_default_error_response_with_the_error_body(any_definition: dict[str, Any]) -> None:
    # Issue 13: a maker branches on error.code whatever the status, so the default answer declares the body too.
    missing = [
        op.id
        for op in operations(any_definition)
        if op.spec["responses"].get("default", {}).get("schema") != ERROR_BODY
    ]
    assert missing == []


def test_each_success_has_its_schema_and_each_error_the_error_body(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        for status, response in op.spec["responses"].items():
            if status.startswith("2"):
                assert response.get("schema") != ERROR_BODY, f"{op.id} {status}"
            else:
                assert response.get("schema") == ERROR_BODY, f"{op.id} {status}"


def test_known_errors_are_listed_with_the_error_body(any_definition: dict[str, Any]) -> None:
    entra = "oauth2_auth" in any_definition["securityDefinitions"]
    for op in operations(any_definition):
        errors = {status for status in op.spec["responses"] if status[0] in "45"}
        assert errors, f"{op.id} lists its known errors"
        assert errors <= {"400", "401", "403", "404", "409", "413", "503"}, op.id
        # With Entra ID the app itself refuses a caller (401) or a missing role (403), in its error body.
        signs_in = entra and op.id != "GetHealth"
        assert ({"401", "403"} <= errors) is signs_in, op.id
        assert not ({"401", "403"} & errors) or signs_in, op.id
    body = any_definition["definitions"]["ErrorBody"]
    assert set(body["properties"]["error"]["properties"]) == {"code", "message", "details"}
    assert set(body["properties"]["error"]["required"]) == {"code", "message"}


def test_operation_summary_too_long_and_restricted_characters_in_summary(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        summary = op.spec["summary"]
        assert len(summary) <= 80, op.id
        assert re.fullmatch(r"[A-Za-z0-9 ()]+", summary), f"{op.id}: {summary!r} has restricted characters"
        # Microsoft's connector string guidance: a summary ends in a letter or digit, never ")" (issue 25).
        assert summary[-1].isalnum(), f"ValueMustEndWithAlphanumeric: {summary!r}"


def test_summary_and_description_differ(any_definition: dict[str, Any]) -> None:
    assert [op.id for op in operations(any_definition) if op.spec["summary"] == op.spec["description"]] == []


def test_operation_path_template_matches_path_parameters(any_definition: dict[str, Any]) -> None:
    # OperationMissingPathParameter and PathParameterNotDefinedInTemplate.
    for op in operations(any_definition):
        declared = {param["name"] for param in op.spec.get("parameters", []) if param["in"] == "path"}
        assert declared == template_variables(op.path), op.id


def test_path_redefined(any_definition: dict[str, Any]) -> None:
    lowered = [path.lower() for path in any_definition["paths"]]
    assert len(lowered) == len(set(lowered))


def _partially_duplicate(first: str, second: str) -> bool:
    """Two templates of one length where each segment is equal, or a variable on at least one side."""
    a, b = first.strip("/").split("/"), second.strip("/").split("/")
    return (
        first != second and len(a) == len(b) and all(x == y or "{" in x or "{" in y for x, y in zip(a, b, strict=True))
    )


def test_partial_duplicate_operation_path(any_definition: dict[str, Any]) -> None:
    ops = operations(any_definition)
    clashes = [
        f"{first.method.upper()} {first.path} ~ {second.path}"
        for index, first in enumerate(ops)
        for second in ops[index + 1 :]
        if first.method == second.method and _partially_duplicate(first.path, second.path)
    ]
    assert clashes == []


# -- parameters -----------------------------------------------------------------------------------


def test_path_parameter_must_be_required(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        for param in op.spec.get("parameters", []):
            if param["in"] == "path":
                assert param.get("required") is True, f"{op.id} {param['name']}"


def test_path_parameter_missing_encoding(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        for param in op.spec.get("parameters", []):
            if param["in"] == "path":
                assert param.get("x-ms-url-encoding") == "single", f"{op.id} {param['name']}"


def test_query_parameter_encoding_not_supported(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        for param in op.spec.get("parameters", []):
            if param["in"] == "query":
                assert "x-ms-url-encoding" not in param, f"{op.id} {param['name']}"


def test_body_or_form_data_parameter_in_fetch_operation_not_allowed(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        if op.method == "get":
            assert all(param["in"] not in ("body", "formData") for param in op.spec.get("parameters", [])), op.id


def test_connection_id_parameter_not_allowed(any_definition: dict[str, Any]) -> None:
    names = [param["name"] for op in operations(any_definition) for param in op.spec.get("parameters", [])]
    assert "connectionId" not in names


def test_operation_parameters_contain_duplicate_parameter(any_definition: dict[str, Any]) -> None:
    for op in operations(any_definition):
        keys = [(param["name"], param["in"]) for param in op.spec.get("parameters", [])]
        assert len(keys) == len(set(keys)), op.id
        assert [location for _, location in keys].count("body") <= 1, op.id


def test_internal_parameter_with_default_is_required(any_definition: dict[str, Any]) -> None:
    # InternalPropertyWithDefaultOptional / PropertyMustBeRequired: an optional internal default is never sent.
    for op in operations(any_definition):
        for param in op.spec.get("parameters", []):
            if param.get("x-ms-visibility") == "internal" and "default" in param:
                assert param.get("required") is True, f"{op.id} {param['name']}"


def test_internal_parameter_without_default_is_not_required(any_definition: dict[str, Any]) -> None:
    # A required internal parameter needs a default: the designer never asks the maker for it (issue 33: the
    # ticket of WaitForClaim, which only the engine's polls of a Location address send).
    for op in operations(any_definition):
        for param in op.spec.get("parameters", []):
            if param.get("x-ms-visibility") == "internal" and param.get("required"):
                assert "default" in param, f"{op.id} {param['name']}"


# -- schemas --------------------------------------------------------------------------------------


def test_array_has_no_items(any_definition: dict[str, Any]) -> None:
    arrays = [where for where, node in schemas(any_definition) if node.get("type") == "array" and not node.get("items")]
    params = [
        f"{op.id} {param['name']}"
        for op in operations(any_definition)
        for param in op.spec.get("parameters", [])
        if param.get("type") == "array" and not param.get("items")
    ]
    assert arrays + params == []


def test_required_property_array_empty(any_definition: dict[str, Any]) -> None:
    assert [where for where, node in schemas(any_definition) if node.get("required") == []] == []


def test_required_property_definition_missing(any_definition: dict[str, Any]) -> None:
    for where, node in schemas(any_definition):
        assert set(node.get("required", [])) <= set(node.get("properties", {})), where


def test_required_property_not_on_object(any_definition: dict[str, Any]) -> None:
    assert [
        where for where, node in schemas(any_definition) if "required" in node and node.get("type") != "object"
    ] == []


def test_additional_property_not_allowed_adjacent_to_ref(any_definition: dict[str, Any]) -> None:
    assert [where for where, node in schemas(any_definition) if "$ref" in node and len(node) > 1] == []


def test_schema_reference_not_valid_or_not_found(any_definition: dict[str, Any]) -> None:
    for where, node in schemas(any_definition):
        if "$ref" in node:
            ref = node["$ref"]
            assert ref.startswith("#/definitions/"), where
            assert ref.removeprefix("#/definitions/") in any_definition["definitions"], where


def test_no_swagger_2_incompatible_keywords(any_definition: dict[str, Any]) -> None:
    # Swagger 2.0 has no anyOf/oneOf/nullable and no null type: what the generator must translate away.
    for where, node in schemas(any_definition):
        assert not {"anyOf", "oneOf", "not", "nullable", "$defs", "const"} & set(node), where
        assert node.get("type") in (None, "object", "array", "string", "integer", "number", "boolean"), where


def test_enum_values_extension(any_definition: dict[str, Any]) -> None:
    # InvalidEnumValuesExtensionValue, DuplicateEnumValuesInExtension, MissingEnumValuesDisplayName.
    nodes = list(schemas(any_definition)) + [
        (f"{op.id} {param['name']}", param) for op in operations(any_definition) for param in op.spec["parameters"]
    ]
    for where, node in nodes:
        if "x-ms-enum-values" in node:
            values = [item["value"] for item in node["x-ms-enum-values"]]
            assert values == node["enum"], where
            assert all(item.get("displayName") for item in node["x-ms-enum-values"]), where


def test_min_and_max_are_consistent(any_definition: dict[str, Any]) -> None:
    nodes = list(schemas(any_definition)) + [
        (f"{op.id} {param['name']}", param) for op in operations(any_definition) for param in op.spec["parameters"]
    ]
    for where, node in nodes:
        assert node.get("minLength", 0) <= node.get("maxLength", float("inf")), where
        assert node.get("minimum", float("-inf")) <= node.get("maximum", float("inf")), where
        if "pattern" in node:
            re.compile(node["pattern"])  # PatternShouldBeValidRegularExpression


def test_invalid_next_link_name_value(any_definition: dict[str, Any]) -> None:
    pageable = [op for op in operations(any_definition) if "x-ms-pageable" in op.spec]
    assert pageable
    for op in pageable:
        name = op.spec["x-ms-pageable"]["nextLinkName"]
        assert name in ("nextLink", "@odata.nextLink"), op.id
        schema = any_definition["definitions"][op.spec["responses"]["200"]["schema"]["$ref"].rsplit("/", 1)[-1]]
        assert name in schema["properties"], f"{op.id} returns its next link in {name}"


# -- security ---------------------------------------------------------------------------------------


def test_security_requirement_must_be_defined(any_definition: dict[str, Any]) -> None:
    requirements = list(any_definition.get("security", []))
    requirements += [req for op in operations(any_definition) for req in op.spec.get("security", [])]
    assert requirements
    defined = any_definition["securityDefinitions"]
    for requirement in requirements:
        for name, scopes in requirement.items():
            assert name in defined, name
            assert scopes == [], "SecurityRequirementMustHaveEmptyValue"


# -- metadata ---------------------------------------------------------------------------------------


def test_connector_metadata_properties_missing(any_package: dict[str, Any]) -> None:
    # The publisher's pages are in the package for the gallery (test_publisher.py), not in the committed files.
    found = metadata(any_package)
    assert {"Website", "Privacy policy", "Categories"} <= set(found)
    for name in ("Website", "Privacy policy"):
        parts = urlsplit(found[name])
        assert parts.scheme == "https", f"UrlNotValid: {name}"
        assert parts.netloc, f"UrlNotValid: {name}"


def test_invalid_connector_category(any_definition: dict[str, Any]) -> None:
    categories = metadata(any_definition)["Categories"].split(";")
    assert set(categories) <= ALLOWED_CATEGORIES


def test_too_many_connector_categories(any_definition: dict[str, Any]) -> None:
    assert 1 <= len(metadata(any_definition)["Categories"].split(";")) <= MAX_CATEGORIES


def test_contact_email_not_valid(any_package: dict[str, Any]) -> None:
    email = any_package["info"]["contact"]["email"]
    assert EMAIL.fullmatch(email), email
    assert email.isascii()


def test_title_rules(any_definition: dict[str, Any]) -> None:
    title = any_definition["info"]["title"]
    assert len(title) <= 30
    assert not re.search(r"\b(api|connector)\b", title, re.IGNORECASE)
    assert title[-1].isalnum()


def test_connector_description_length(any_definition: dict[str, Any]) -> None:
    assert 30 <= len(any_definition["info"]["description"]) <= 500


def test_only_known_methods_are_used(any_definition: dict[str, Any]) -> None:
    for path, item in any_definition["paths"].items():
        assert set(item) <= set(METHODS) | {"parameters"}, path
        assert "$ref" not in item, "PathItemRefNotSuppored"
