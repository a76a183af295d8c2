"""The app settings the Bicep deploys and the settings the code reads, kept in step (``settings.py``).

A setting on one side only fails here instead of in Azure.
"""

from __future__ import annotations

import re
from pathlib import Path

from oncegate.entrypoints.parse import MAX_BULK_BODY_BYTES
from tests.infra.bicep import BicepFile, string_value
from tests.infra.settings import (
    LOCAL_ONLY,
    code_settings,
    deployed_settings,
    readme_settings,
    unread_settings,
)


def test_settings_are_set_nowhere_else(bicep: dict[str, BicepFile]) -> None:
    for name, file in bicep.items():
        if name != "app/api.bicep":
            assert "appsettings" not in file.text.lower(), f"{name} sets app settings"
    assert not bicep["app/api.bicep"].declaration("resource", "functionApp").values("appSettings")


def test_every_setting_the_code_reads_is_deployed_or_local_only(root: Path, bicep: dict[str, BicepFile]) -> None:
    deployed = deployed_settings(bicep["app/api.bicep"])
    read = code_settings(root) | readme_settings(root)
    assert read, "found no ONCEGATE_* setting in the code"
    missing = sorted(read - deployed - LOCAL_ONLY.keys())
    assert not missing, f"read by the code but not deployed by infra/app/api.bicep: {missing}"


def test_every_deployed_setting_has_a_reader(root: Path, bicep: dict[str, BicepFile]) -> None:
    read = code_settings(root) | readme_settings(root)
    unread = unread_settings(deployed_settings(bicep["app/api.bicep"]), read)
    assert not unread, f"deployed but read by nobody: {unread}"


def test_local_only_settings_are_read_and_not_deployed(root: Path, bicep: dict[str, BicepFile]) -> None:
    read = code_settings(root) | readme_settings(root)
    deployed = deployed_settings(bicep["app/api.bicep"])
    for name in LOCAL_ONLY:
        assert name in read, f"{name} is no longer read: drop it from LOCAL_ONLY"
        assert name not in deployed, f"{name} is local-only but deployed"


def test_the_deploy_guide_names_every_setting_the_deployment_sets(root: Path, bicep: dict[str, BicepFile]) -> None:
    """docs/deploy.md, step 4, lists the app's settings "from the deployment"; ONCEGATE_BULK_CONCURRENCY, deployed
    and an operator's setting (step 3's table), was missing from it."""
    guide = (root / "docs" / "deploy.md").read_text(encoding="utf-8")
    table = guide.split("## 4. Publish the code", 1)[1].split("Check it answers", 1)[0]
    named = [name for row in re.findall(r"^\| (.*?) \|", table, re.M) for name in re.findall(r"`([^`]+)`", row)]
    prefixes = [name.split("<")[0].rstrip("*") for name in named if name.endswith(("*", ">"))]
    deployed = deployed_settings(bicep["app/api.bicep"]) | {"ONCEGATE_TARGET_SECRET_"}

    unnamed = sorted(name for name in deployed if name not in named and not name.startswith(tuple(prefixes)))

    assert not unnamed, f"deployed by infra/app/api.bicep but not in docs/deploy.md, step 4: {unnamed}"


def test_the_host_takes_in_every_body_the_app_answers_and_no_more_than_a_little_over(
    bicep: dict[str, BicepFile],
) -> None:
    """The Functions host reads a whole request body before the app's limits refuse it: left at its default (100 MB),
    a caller sending 100 MB held that much of an instance's memory. Its limit stays over the app's bulk limit, so
    every body the app refuses is refused by the app's own 413, which names the limit, and near it."""
    (value,) = bicep["app/api.bicep"].declaration("var", "appSettings").values("FUNCTIONS_REQUEST_BODY_SIZE_LIMIT")
    host_limit = int(string_value(value) or "0")

    assert MAX_BULK_BODY_BYTES < host_limit <= 2 * MAX_BULK_BODY_BYTES
