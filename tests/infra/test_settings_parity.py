"""The app settings the Bicep deploys and the settings the code reads, kept in step.

Every ``ONCEGATE_*`` setting the code or the README's configuration table names is deployed by
``infra/app/api.bicep`` or is listed below as local-only, with the reason; every setting the Bicep
deploys is read by the code, by a library the code uses, or by the Functions platform. A setting on
one side only fails here instead of in Azure.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.infra.bicep import BicepFile

SETTING = re.compile(r"\bONCEGATE_[A-Z][A-Z0-9_]*\b")
README_ROW = re.compile(r"^\|\s*`(ONCEGATE_[A-Z0-9_]+)`", re.M)

# Read by the code, deliberately not deployed.
LOCAL_ONLY = {
    "ONCEGATE_SQLITE_PATH": "the embedded SQLite store runs locally only; Azure runs ONCEGATE_STORE=tables",
    "ONCEGATE_TABLES_CONNECTION_STRING": (
        "Azurite in development; in Azure the identity signs in at ONCEGATE_TABLES_ENDPOINT, "
        "and the code refuses both at once"
    ),
    **dict.fromkeys(
        (
            "ONCEGATE_URL",
            "ONCEGATE_FUNCTION_KEY",
            "ONCEGATE_TENANT_ID",
            "ONCEGATE_CLIENT_ID",
            "ONCEGATE_API_SCOPE",
            "ONCEGATE_CLIENT_SECRET",
            "ONCEGATE_TOKEN_CACHE",
        ),
        "read by the oncegate command on an operator's machine, never by the app",
    ),
}
# Deployed for a library the code uses.
READ_BY_LIBRARIES = {
    "AZURE_CLIENT_ID": "azure-identity's DefaultAzureCredential: the user-assigned identity to sign in to tables with",
}
# Deployed for the Functions host and its Application Insights integration.
PLATFORM_PREFIXES = ("AzureWebJobsStorage__", "APPLICATIONINSIGHTS_")


def code_settings(root: Path) -> set[str]:
    """``ONCEGATE_*`` names in the string literals of the app's source (docstrings and messages included)."""
    names: set[str] = set()
    for path in [root / "function_app.py", *sorted((root / "oncegate").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(SETTING.findall(node.value))
    return names


def readme_settings(root: Path) -> set[str]:
    return set(README_ROW.findall((root / "README.md").read_text(encoding="utf-8")))


def deployed_settings(api: BicepFile) -> set[str]:
    """Keys of the site's ``appsettings`` config: the only place the Bicep sets app settings."""
    (config,) = [
        statement
        for statement in api.declarations("resource")
        if "'Microsoft.Web/sites/config@" in statement.code and statement.property_values("name") == ["'appsettings'"]
    ]
    (variable,) = config.property_values("properties")
    return set(api.declaration("var", variable).object_keys())


def test_settings_are_set_nowhere_else(bicep: dict[str, BicepFile]) -> None:
    for name, file in bicep.items():
        if name != "app/api.bicep":
            assert "appsettings" not in file.code.lower(), f"{name} sets app settings"
    assert not bicep["app/api.bicep"].declaration("resource", "functionApp").property_values("appSettings")


def test_every_setting_the_code_reads_is_deployed_or_local_only(root: Path, bicep: dict[str, BicepFile]) -> None:
    deployed = deployed_settings(bicep["app/api.bicep"])
    read = code_settings(root) | readme_settings(root)
    assert read, "found no ONCEGATE_* setting in the code"
    missing = sorted(read - deployed - LOCAL_ONLY.keys())
    assert not missing, f"read by the code but not deployed by infra/app/api.bicep: {missing}"


def test_every_deployed_setting_has_a_reader(root: Path, bicep: dict[str, BicepFile]) -> None:
    read = code_settings(root) | readme_settings(root)
    unread = sorted(
        name
        for name in deployed_settings(bicep["app/api.bicep"])
        if name not in read | READ_BY_LIBRARIES.keys() and not name.startswith(PLATFORM_PREFIXES)
    )
    assert not unread, f"deployed but read by nobody: {unread}"


def test_local_only_settings_are_read_and_not_deployed(root: Path, bicep: dict[str, BicepFile]) -> None:
    read = code_settings(root) | readme_settings(root)
    deployed = deployed_settings(bicep["app/api.bicep"])
    for name in LOCAL_ONLY:
        assert name in read, f"{name} is no longer read: drop it from LOCAL_ONLY"
        assert name not in deployed, f"{name} is local-only but deployed"
