"""The Azure Developer CLI files: ``azure.yaml`` and ``infra/main.parameters.json``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from oncegate.domain.keys import MIN_SECRET_LENGTH
from tests.infra.bicep import BicepFile


def test_azure_yaml_deploys_this_folder_as_the_api_function(root: Path) -> None:
    project = yaml.safe_load((root / "azure.yaml").read_text(encoding="utf-8"))
    assert project["services"] == {"api": {"project": ".", "language": "python", "host": "function"}}


def test_parameters_file_feeds_main_bicep(root: Path, main_bicep: BicepFile) -> None:
    document = json.loads((root / "infra" / "main.parameters.json").read_text(encoding="utf-8"))
    values = {name: entry["value"] for name, entry in document["parameters"].items()}
    params = {param.name: param for param in main_bicep.declarations("param")}
    assert values.keys() <= params.keys()
    assert values["environmentName"] == "${AZURE_ENV_NAME}"
    assert values["location"] == "${AZURE_LOCATION}"
    unfed = [name for name, param in params.items() if not param.value and name not in values]
    # azd generates what it is told to, and asks for nothing else.
    assert [name for name in unfed if not any("type: 'generate'" in d for d in params[name].decorators)] == []


def test_the_key_secret_is_generated_once_never_per_deployment(
    bicep_files: list[BicepFile], main_bicep: BicepFile
) -> None:
    # A newGuid() default is drawn again on every deployment, and a new secret orphans every claim.
    assert all("newGuid(" not in file.code for file in bicep_files)
    secret = main_bicep.declaration("param", "keySecret")
    assert secret.value == ""
    assert secret.has_decorator("secure")
    assert f"@minLength({MIN_SECRET_LENGTH})" in secret.decorators
    (metadata,) = [decorator for decorator in secret.decorators if decorator.startswith("@metadata(")]
    length = re.search(r"length:\s*(\d+)", metadata)
    assert length
    assert int(length.group(1)) >= MIN_SECRET_LENGTH
