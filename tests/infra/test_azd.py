"""The Azure Developer CLI files: ``azure.yaml`` and ``infra/main.parameters.json``.

No value is generated on every run: a generated parameter (azd's ``generate`` metadata, a
``$(...)`` command substitution) would be drawn again by ``azd up`` from another clone, machine or
pipeline, and a new key secret orphans every claim. The secret comes from ``ONCEGATE_NEW_KEY_SECRET``
on the first deployment only (docs/deploy.md).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.infra.bicep import BicepFile, literal

# What azd substitutes in main.parameters.json: ${NAME} or ${NAME=default}, from the environment.
SUBSTITUTION = re.compile(r"^\$\{([A-Z][A-Z0-9_]*)(=[^}]*)?\}$")


@pytest.fixture(scope="module")
def parameters(root: Path) -> dict[str, Any]:
    document = json.loads((root / "infra" / "main.parameters.json").read_text(encoding="utf-8"))
    values: dict[str, Any] = {name: entry["value"] for name, entry in document["parameters"].items()}
    return values


def test_azure_yaml_deploys_this_folder_as_the_api_function(root: Path) -> None:
    project = yaml.safe_load((root / "azure.yaml").read_text(encoding="utf-8"))
    assert project["services"] == {"api": {"project": ".", "language": "python", "host": "function"}}
    # Three hooks: before provisioning, the refusal of a leftover first deployment's key secret
    # (tests/infra/test_first_deployment.py); before the code is published, the store's mark and pinned id
    # (tests/infra/test_store_mark.py); after it, the Logic Apps connection (tests/infra/test_postdeploy.py).
    # None that could make up or rewrite a secret on the way.
    assert project["hooks"] == {
        "preprovision": {
            "posix": {"shell": "sh", "run": "python3 -m tools.first_deployment"},
            "windows": {"shell": "pwsh", "run": "python -m tools.first_deployment"},
        },
        "postprovision": {
            "posix": {"shell": "sh", "run": "python3 -m tools.store_mark"},
            "windows": {"shell": "pwsh", "run": "python -m tools.store_mark"},
        },
        "postdeploy": {
            "posix": {"shell": "sh", "run": "python3 -m tools.logicapps_connection"},
            "windows": {"shell": "pwsh", "run": "python -m tools.logicapps_connection"},
        },
    }
    assert all("hooks" not in service for service in project["services"].values())


def test_parameters_file_feeds_main_bicep(parameters: dict[str, Any], main_bicep: BicepFile) -> None:
    params = {param.name: param for param in main_bicep.declarations("param")}
    assert parameters.keys() <= params.keys()
    assert parameters["environmentName"] == "${AZURE_ENV_NAME}"
    assert parameters["location"] == "${AZURE_LOCATION}"
    # azd asks for nothing: every parameter it does not feed has a default.
    unfed = [name for name, param in params.items() if param.value is None and name not in parameters]
    assert unfed == []


def test_every_value_comes_from_the_environment_and_none_is_generated(
    parameters: dict[str, Any], main_bicep: BicepFile
) -> None:
    for name, value in parameters.items():
        assert isinstance(value, str), f"{name}: {value!r} is not a string"
        assert SUBSTITUTION.match(value), f"{name}: {value!r} is not ${{NAME}}"
        assert "$(" not in value, f"{name}: a command substitution runs on every azd up"
    for param in main_bicep.declarations("param"):
        metadata = param.decorator("metadata")
        azd = literal(metadata.arguments[0]).get("azd", {}) if metadata else {}
        assert azd.get("type") != "generate", f"azd generates {param.name} for every new environment"


def test_the_key_secret_is_given_once_by_the_operator(parameters: dict[str, Any], main_bicep: BicepFile) -> None:
    # An environment value with no default: empty unless the operator sets it for the first deployment.
    assert parameters["newKeySecret"] == "${ONCEGATE_NEW_KEY_SECRET}"
    secret = main_bicep.declaration("param", "newKeySecret")
    assert secret.has_decorator("secure")
    assert secret.value is not None
    assert literal(secret.value) == ""


def test_the_deployer_is_wired_as_the_azd_templates_do(parameters: dict[str, Any], main_bicep: BicepFile) -> None:
    # Azure-Samples/functions-quickstart-python-http-azd: principalId from AZURE_PRINCIPAL_ID, empty by default.
    assert parameters["principalId"] == "${AZURE_PRINCIPAL_ID}"
    assert parameters["principalType"] == "${AZURE_PRINCIPAL_TYPE=User}"
    principal = main_bicep.declaration("param", "principalId")
    assert principal.value is not None
    assert literal(principal.value) == ""
    kind = main_bicep.declaration("param", "principalType")
    allowed = kind.decorator("allowed")
    assert allowed is not None
    assert set(allowed.value()) == {"User", "Group", "ServicePrincipal"}
    assert parameters["entraClientId"] == "${ONCEGATE_ENTRA_CLIENT_ID}"
    # The deployer marks the store (azure.yaml's postprovision hook): the same principal, empty by default.
    assert parameters["storeMarkerPrincipalId"] == "${AZURE_PRINCIPAL_ID}"
    assert parameters["storeMarkerPrincipalType"] == "${AZURE_PRINCIPAL_TYPE=User}"
    marker = main_bicep.declaration("param", "storeMarkerPrincipalId")
    assert marker.value is not None
    assert literal(marker.value) == ""


def test_docs_name_every_parameter_and_the_environment_values(
    root: Path, parameters: dict[str, Any], main_bicep: BicepFile
) -> None:
    deploy = (root / "docs" / "deploy.md").read_text(encoding="utf-8")
    params = [param.name for param in main_bicep.declarations("param")]
    missing = [name for name in params if not re.search(rf"\b{name}\b", deploy)]
    assert missing == [], f"docs/deploy.md does not name {missing}"
    names = {match.group(1) for value in parameters.values() if (match := SUBSTITUTION.match(value))}
    undocumented = sorted(name for name in names if name not in deploy and not name.startswith("AZURE_ENV"))
    assert undocumented == [], f"docs/deploy.md does not name the azd values {undocumented}"
