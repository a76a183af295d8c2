"""The Bicep checked against Microsoft's type definitions (``typecheck.py``), and that check has teeth.

The definitions are vendored in ``tests/infra/types`` so that a clean clone runs these tests on its own;
where the workplace's read-only reference copy sits beside the clone (``../shared``), the vendored
files must be byte-for-byte the same.
"""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import pytest

from tests.infra.bicep import BicepFile
from tests.infra.settings import code_settings, deployed_settings, readme_settings, unread_settings
from tests.infra.typecheck import TYPES, Checker, Types

ROOT = Path(__file__).resolve().parents[2]
# Beside the clone, or beside the folder of worktrees a clone is checked out in.
SHARED_TYPES = next(
    (
        folder / "shared" / "reference" / "bicep-types"
        for folder in (ROOT.parent, ROOT.parent.parent)
        if (folder / "shared" / "reference" / "bicep-types").is_dir()
    ),
    ROOT.parent / "shared" / "reference" / "bicep-types",
)


@pytest.fixture(scope="module")
def types() -> Types:
    return Types(TYPES)


@cache
def read_settings() -> frozenset[str]:
    return frozenset(code_settings(ROOT) | readme_settings(ROOT))


def problems(folder: Path, types: Types) -> list[str]:
    """Everything the checks find in a folder of templates: the type check and the settings' readers."""
    found = Checker(folder, types).run()
    read = set(read_settings())
    deployed = deployed_settings(BicepFile(folder / "app" / "api.bicep"))
    found += [f"app/api.bicep: setting {name} is read by nobody" for name in unread_settings(deployed, read)]
    return found


def test_the_templates_match_microsofts_type_definitions(types: Types) -> None:
    assert problems(ROOT / "infra", types) == []


def test_every_vendored_type_file_is_used(types: Types) -> None:
    used = Checker(ROOT / "infra", types).used_types
    needed = {types.files[name] for name in used if name in types.files}
    vendored = set(TYPES.rglob("types.json"))
    assert vendored == needed, f"vendored but unused: {sorted(map(str, vendored - needed))}"
    assert (TYPES / "LICENSE").is_file()


NO_REFERENCE = "no reference copy of the Bicep types to compare with (the maintainers' workspace has one)"


@pytest.mark.skipif(not SHARED_TYPES.is_dir(), reason=NO_REFERENCE)
def test_the_vendored_types_are_microsofts_unchanged() -> None:
    for path in [*TYPES.rglob("types.json"), TYPES / "LICENSE"]:
        original = SHARED_TYPES / path.relative_to(TYPES)
        assert original.is_file(), f"{path.relative_to(TYPES)} is not in {SHARED_TYPES}"
        assert path.read_bytes() == original.read_bytes(), f"{path.relative_to(TYPES)} differs from the reference"


# (file under infra/, text written there, what replaces it, what the check must then say)
PLANTED = {
    "misspelt property": (
        "core/storage/storage-account.bicep",
        "allowSharedKeyAccess: false",
        "allowSharedKeyAcess: false",
        "properties.allowSharedKeyAcess: no such property (did you mean allowSharedKeyAccess?)",
    ),
    "misspelt host setting": (
        "app/api.bicep",
        "AzureWebJobsStorage__credential: 'managedidentity'",
        "AzureWebJobsStorage__credentiels: 'managedidentity'",
        "setting AzureWebJobsStorage__credentiels is read by nobody",
    ),
    "API version that does not exist": (
        "core/storage/storage-account.bicep",
        "'Microsoft.Storage/storageAccounts@2023-05-01' = {",
        "'Microsoft.Storage/storageAccounts@2023-05-02' = {",
        "no API version 2023-05-02 in Microsoft's type definitions",
    ),
    "missing module parameter": (
        "main.bicep",
        "    tablePrefix: tablePrefix\n",
        "",
        "module api (app/api.bicep): parameter tablePrefix (no default) is not given",
    ),
    "wrong enum value": (
        "core/storage/storage-account.bicep",
        "publicAccess: 'None'",
        "publicAccess: 'Private'",
        "properties.publicAccess: 'Private' is not one of ['Container', 'Blob', 'None']",
    ),
    "enum value in the wrong case": (
        "core/security/keyvault.bicep",
        "name: 'standard'",
        "name: 'Standard'",
        "'Standard' is not one of ['standard', 'premium'] (wrong case: 'standard')",
    ),
    "property name in the wrong case": (
        "core/monitor/monitoring.bicep",
        "DisableLocalAuth: true",
        "disableLocalAuth: true",
        "properties.disableLocalAuth: wrong case, the property is DisableLocalAuth",
    ),
    "required property missing": (
        "core/security/keyvault.bicep",
        "    tenantId: subscription().tenantId\n",
        "",
        "properties: required property tenantId missing",
    ),
    "read-only property written": (
        "app/api.bicep",
        "    httpsOnly: true\n",
        "    httpsOnly: true\n    defaultHostName: name\n",
        "properties.defaultHostName: read-only property",
    ),
    "string where an integer goes": (
        "core/monitor/monitoring.bicep",
        "retentionInDays: 30",
        "retentionInDays: '30'",
        "properties.retentionInDays: '30' is a string, the property takes int",
    ),
    "unknown module parameter": (
        "main.bicep",
        "    newKeySecret: newKeySecret\n",
        "    newKeySecret: newKeySecret\n    keySecretValue: newKeySecret\n",
        "keyvault.bicep has no parameter keySecretValue",
    ),
    "module parameter of the wrong type": (
        "main.bicep",
        "    instanceMemoryMB: instanceMemoryMB\n",
        "    instanceMemoryMB: '2048'\n",
        "parameter instanceMemoryMB: '2048' is a string, the parameter is a int",
    ),
    "module parameter out of bounds": (
        "main.bicep",
        "    maximumInstanceCount: maximumInstanceCount\n",
        "    maximumInstanceCount: 10\n",
        "parameter maximumInstanceCount: 10 breaks @minValue(40)",
    ),
    "parameter bounds wider than the property's": (
        "core/monitor/monitoring.bicep",
        "@maxValue(730)\n@description('Days the audit tables can be queried.')",
        "@maxValue(1000)\n@description('Days the audit tables can be queried.')",
        "properties.retentionInDays: parameter auditRetentionDays takes 1000, above the property's maxValue 730",
    ),
    "module parameter not allowed": (
        "main.bicep",
        "    tablePrefix: tablePrefix\n    authMode: authMode\n",
        "    tablePrefix: tablePrefix\n    authMode: 'Entra'\n",
        "parameter authMode: 'Entra' is not one of ['key', 'entra']",
    ),
    "secret passed to a parameter that is not secure": (
        "core/security/keyvault.bicep",
        "@secure()\n@description('A new value for the secret",
        "@description('A new value for the secret",
        "a @secure() value passed to a parameter that is not @secure()",
    ),
    "module output that does not exist": (
        "main.bicep",
        "api.outputs.defaultHostName",
        "api.outputs.defaultHostname",
        "module api: api.bicep has no output defaultHostname",
    ),
    "resource property read in the wrong case": (
        "app/api.bicep",
        "applicationInsights.properties.ConnectionString",
        "applicationInsights.properties.connectionString",
        "applicationInsights.properties.connectionString: wrong case, the property is ConnectionString",
    ),
    "resource property that does not exist": (
        "app/api.bicep",
        "var endpoints = storage.properties.primaryEndpoints",
        "var endpoints = storage.properties.primaryEndpoint",
        "storage.properties.primaryEndpoint: no such property of Microsoft.Storage/storageAccounts@2023-05-01",
    ),
    "undeclared symbol": (
        "app/api.bicep",
        "serverFarmId: planId",
        "serverFarmId: planID",
        "'planID' is not declared in api.bicep",
    ),
    "child under the wrong parent": (
        "core/storage/storage-account.bicep",
        "    parent: tableServices\n",
        "    parent: blobServices\n",
        "parent is a Microsoft.Storage/storageAccounts/blobServices, "
        "not a Microsoft.Storage/storageAccounts/tableServices",
    ),
    "app setting that is not a string": (
        "app/api.bicep",
        "ONCEGATE_STORE: 'tables'",
        "ONCEGATE_STORE: 15",
        "properties.ONCEGATE_STORE: 15 is a int, the property takes string",
    ),
    "module output wired to a parameter of another type": (
        "main.bicep",
        "    maximumInstanceCount: maximumInstanceCount\n",
        "    maximumInstanceCount: storage.outputs.name\n",
        "parameter maximumInstanceCount: storage.outputs.name is a string, the parameter is a int",
    ),
    "resource property wired to a parameter of another type": (
        "main.bicep",
        "    instanceMemoryMB: instanceMemoryMB\n",
        "    instanceMemoryMB: apiIdentity.properties.clientId\n",
        "parameter instanceMemoryMB: apiIdentity.properties.clientId is a string, the parameter is a int",
    ),
    "output of the wrong type": (
        "core/monitor/monitoring.bicep",
        "output applicationInsightsName string = applicationInsights.name",
        "output applicationInsightsName int = applicationInsights.name",
        "output applicationInsightsName: the value is a string, the output a int",
    ),
    "parameter default not allowed": (
        "main.bicep",
        "param instanceMemoryMB int = 2048",
        "param instanceMemoryMB int = 1024",
        "param instanceMemoryMB: the default: 1024 is not one of [2048, 4096]",
    ),
    "existing resource under a name its type cannot have": (
        "app/rbac.bicep",
        "  parent: storage\n  name: 'default'\n",
        "  parent: storage\n  name: 'tables'\n",
        "resource tableService (Microsoft.Storage/storageAccounts/tableServices@2023-05-01) existing: "
        "name: 'tables' is not 'default'",
    ),
    "unknown child resource name": (
        "core/storage/storage-account.bicep",
        "resource tableServices 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {\n  parent: storage\n"
        "  name: 'default'",
        "resource tableServices 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {\n  parent: storage\n"
        "  name: 'tables'",
        ": name: 'tables' is not 'default'",
    ),
}


@pytest.mark.parametrize("name", list(PLANTED))
def test_a_planted_error_is_caught(name: str, tmp_path: Path, types: Types) -> None:
    relative, written, replacement, expected = PLANTED[name]
    folder = tmp_path / "infra"
    shutil.copytree(ROOT / "infra", folder)
    target = folder / relative
    source = target.read_text(encoding="utf-8")
    assert source.count(written) == 1, f"the text to plant over is not once in {relative}: {written!r}"
    target.write_text(source.replace(written, replacement), encoding="utf-8")
    found = problems(folder, types)
    assert any(expected in problem for problem in found), f"{name} not caught; found {found}"
