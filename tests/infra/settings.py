"""The app settings: those the code reads, and those ``infra/app/api.bicep`` deploys.

Every ``ONCEGATE_*`` setting the code or the documents' settings tables name is deployed by
``infra/app/api.bicep`` or is listed below as local-only, with the reason; every setting the Bicep
deploys is read by the code, by a library the code uses, or by the Functions platform (by its exact
name: a misspelt platform setting is read by nobody, and the host falls back to something else).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.infra.bicep import BicepFile, string_value, text

SETTING = re.compile(r"\bONCEGATE_[A-Z][A-Z0-9_]*\b")
README_ROW = re.compile(r"^\|\s*`(ONCEGATE_[A-Z0-9_]+)`", re.M)

# Read by the code, deliberately not deployed.
LOCAL_ONLY = {
    "ONCEGATE_SQLITE_PATH": "the embedded SQLite store runs locally only; Azure runs ONCEGATE_STORE=tables",
    "ONCEGATE_SERVE_THREADS": "the handler threads of oncegate serve, the local server; Azure runs the Functions host",
    "ONCEGATE_TABLES_CONNECTION_STRING": (
        "Azurite in development; in Azure the identity signs in at ONCEGATE_TABLES_ENDPOINT, "
        "and the code refuses both at once"
    ),
    "ONCEGATE_TARGETS_ALLOW_LOOPBACK": "plain http and loopback targets, for local development and tests only",
    "ONCEGATE_TARGET_SECRET_": (
        "the prefix of a target secret's setting: each is deployed from targetSecretNames (targetSecretSettings)"
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
# Deployed for the Functions host, by their documented names: host storage through an identity
# (learn.microsoft.com/azure/azure-functions/functions-reference, "Connecting to host storage with an
# identity" and "Common properties for identity-based connections") and Application Insights
# (learn.microsoft.com/azure/azure-functions/functions-app-settings).
PLATFORM_SETTINGS = {
    *(
        f"AzureWebJobsStorage__{name}"
        for name in (
            "accountName",
            "blobServiceUri",
            "queueServiceUri",
            "tableServiceUri",
            "credential",
            "clientId",
            "managedIdentityResourceId",
        )
    ),
    "APPLICATIONINSIGHTS_CONNECTION_STRING",
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    # The largest request body the host takes in (functions-app-settings, FUNCTIONS_REQUEST_BODY_SIZE_LIMIT).
    "FUNCTIONS_REQUEST_BODY_SIZE_LIMIT",
}


def code_settings(root: Path) -> set[str]:
    """``ONCEGATE_*`` names in the string literals of the app's source (docstrings and messages included)."""
    names: set[str] = set()
    for path in [root / "function_app.py", *sorted((root / "oncegate").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(SETTING.findall(node.value))
    return names


# The settings tables: the README's local settings, and every setting in docs/operations.md.
SETTINGS_TABLES = ("README.md", "docs/operations.md")


def readme_settings(root: Path) -> set[str]:
    return {name for doc in SETTINGS_TABLES for name in README_ROW.findall((root / doc).read_text(encoding="utf-8"))}


def appsettings_resources(api: BicepFile) -> list[str]:
    """Symbols of the site's ``appsettings`` config resources: the only place the Bicep sets app settings."""
    found = []
    for resource in api.declarations("resource"):
        name = resource.get("name")
        config = resource.declared_type.startswith("Microsoft.Web/sites/config@")
        if config and name is not None and string_value(name) == "appsettings":
            found.append(resource.name)
    return found


def deployed_settings(api: BicepFile) -> set[str]:
    """Every setting the ``appsettings`` config may set: through variables, ``union()`` and ``?:``."""
    (symbol,) = appsettings_resources(api)
    value = api.declaration("resource", symbol).get("properties")
    assert value is not None, f"{symbol} has no properties"
    return api.object_keys(value)


def unread_settings(deployed: set[str], read: set[str]) -> list[str]:
    """Deployed settings nobody reads: not the code, a library, nor the platform by that exact name."""
    return sorted(name for name in deployed if name not in read | READ_BY_LIBRARIES.keys() | PLATFORM_SETTINGS)


def describe_setting_value(api: BicepFile, name: str) -> list[str]:
    """The expressions a deployed setting may take, as written."""
    (symbol,) = appsettings_resources(api)
    value = api.declaration("resource", symbol).get("properties")
    assert value is not None
    return [text(node) for node in api.object_values(value, name)]
