"""The Entra ID path of docs/deploy.md: the ``az ad`` commands in the order Azure CLI accepts them.

No tenant here: this checks the commands' shapes. A delegated permission is granted to a service
principal, so ``az ad app permission grant --id X --api Y`` needs ``az ad sp create`` for X and for Y
before it (Azure CLI refuses otherwise); the registrations are single-tenant, so the Entra connector's
``apiProperties.json`` must not sign people in at ``common`` (AADSTS50194).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)


def az_commands(markdown: str) -> list[list[str]]:
    """Every ``az`` command of the shell blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in BLOCK.findall(markdown):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            if not re.match(r"\s*(az ad |[A-Z_]+=\$\(az ad )", line):
                continue  # az rest with a JSON body over several lines, and other tools
            words = shlex.split(re.sub(r"^\s*[A-Z_]+=\$\(", "", line), comments=True)
            commands.append([word.rstrip(")") for word in words])
    return commands


def option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_a_service_principal_exists_before_each_grant() -> None:
    commands = az_commands((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8"))
    created: set[str] = set()
    grants = 0
    for words in commands:
        if words[:4] == ["az", "ad", "sp", "create"]:
            assert words[4:] == ["--id", option(words, "--id")], f"az ad sp create takes --id only: {words}"
            created.add(option(words, "--id"))
        if words[:5] == ["az", "ad", "app", "permission", "grant"]:
            grants += 1
            for needed in (option(words, "--id"), option(words, "--api")):
                assert needed in created, f"no az ad sp create --id {needed} before {' '.join(words)}"
            assert option(words, "--scope") == "user_impersonation"
    assert grants >= 1, "docs/deploy.md grants no permission: the check above checked nothing"


def test_the_registrations_are_single_tenant_and_the_connector_signs_in_at_the_tenant() -> None:
    commands = az_commands((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8"))
    audiences = {option(w, "--sign-in-audience") for w in commands if w[:4] == ["az", "ad", "app", "create"]}
    assert audiences == {"AzureADMyOrg"}
    properties = json.loads((ROOT / "connector" / "entra" / "apiProperties.json").read_text(encoding="utf-8"))
    oauth = properties["properties"]["connectionParameters"]["token"]["oAuthSettings"]
    tenant = oauth["customParameters"]["tenantId"]["value"]
    assert tenant not in ("common", "organizations", "consumers"), "a single-tenant registration refuses it"
    assert tenant.startswith("<<"), "a placeholder the deployer fills in"
    assert "tenant" in tenant.lower()
    assert "TENANT_ID=$(az account show --query tenantId --output tsv)" in (ROOT / "docs" / "deploy.md").read_text(
        encoding="utf-8"
    )
