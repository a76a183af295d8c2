"""Connections and policies: a function key (or Entra ID) and the host of any deployment."""

from __future__ import annotations

import re
from typing import Any

from PIL import Image

from tests.connector.spec import CONNECTOR, DEFINITIONS, PROPERTIES, load, operations


def connection_parameters(properties: dict[str, Any]) -> dict[str, Any]:
    parameters: dict[str, Any] = properties["properties"]["connectionParameters"]
    return parameters


def policies(properties: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {policy["templateId"]: policy for policy in properties["properties"]["policyTemplateInstances"]}


def test_host_comes_from_the_connection(any_properties: dict[str, Any]) -> None:
    host = connection_parameters(any_properties)["functionAppHost"]
    assert host["type"] == "string"
    assert host["uiDefinition"]["constraints"]["required"] == "true"
    template = policies(any_properties)["dynamichosturl"]["parameters"]["x-ms-apimTemplateParameter.urlTemplate"]
    assert template == "https://@connectionParameters('functionAppHost')"
    assert "x-ms-apimTemplate-operationName" not in policies(any_properties)["dynamichosturl"]["parameters"]


def test_policies_name_existing_parameters_and_operations(any_properties: dict[str, Any]) -> None:
    operation_ids = {op.id for op in operations(load(DEFINITIONS["key"]))}
    names = set(connection_parameters(any_properties))
    for policy in any_properties["properties"]["policyTemplateInstances"]:
        parameters = policy["parameters"]
        assert set(parameters.get("x-ms-apimTemplate-operationName", [])) <= operation_ids, policy["title"]
        for value in parameters.values():
            assert set(re.findall(r"@connectionParameters\('([^']+)'\)", str(value))) <= names, policy["title"]


def test_every_list_pages_through_the_gateway(any_properties: dict[str, Any]) -> None:
    paging = policies(any_properties)["updatenextlink"]["parameters"]
    pageable = [op.id for op in operations(load(DEFINITIONS["key"])) if "x-ms-pageable" in op.spec]
    assert paging["x-ms-apimTemplate-operationName"] == pageable
    assert paging["x-ms-apimTemplateParameter.nextLinkPropertyName"] == "nextLink"


def test_function_key_connection() -> None:
    properties = load(PROPERTIES["key"])
    key = connection_parameters(properties)["api_key"]
    assert key["type"] == "securestring"
    assert key["uiDefinition"]["constraints"]["clearText"] is False
    scheme = load(DEFINITIONS["key"])["securityDefinitions"]["api_key"]
    assert scheme == {"type": "apiKey", "in": "header", "name": "x-functions-key"}


def test_entra_id_connection() -> None:
    properties = load(PROPERTIES["entra"])
    settings = connection_parameters(properties)["token"]["oAuthSettings"]
    assert settings["identityProvider"] == "aad"
    assert settings["customParameters"]["resourceUri"]["value"]
    assert load(DEFINITIONS["entra"])["securityDefinitions"]["oauth2_auth"]["type"] == "oauth2"
    # Behind App Service authentication the functions are anonymous: no function key travels beside the token.
    assert "setheader" not in policies(properties)
    assert "functionKey" not in connection_parameters(properties)


def test_no_secret_is_committed(any_properties: dict[str, Any]) -> None:
    token = connection_parameters(any_properties).get("token", {}).get("oAuthSettings", {})
    assert "clientSecret" not in token
    assert token.get("clientId", "<<").startswith("<<")


def test_icon_is_230_pixels_on_the_brand_colour() -> None:
    colours = {load(path)["properties"]["iconBrandColor"] for path in PROPERTIES.values()}
    (colour,) = colours
    assert re.fullmatch(r"#[0-9a-f]{6}", colour)
    assert colour not in ("#ffffff", "#fff")
    with Image.open(CONNECTOR / "icon.png") as icon:
        assert icon.format == "PNG"
        assert icon.size == (230, 230)
        rgb = icon.convert("RGB")
        brand = tuple(int(colour[index : index + 2], 16) for index in (1, 3, 5))
        for corner in ((0, 0), (229, 0), (0, 229), (229, 229)):
            assert rgb.getpixel(corner) == brand, corner
        assert (255, 255, 255) in {colour for _, colour in rgb.getcolors(maxcolors=230 * 230) or []}
