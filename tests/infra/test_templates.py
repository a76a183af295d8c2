"""What the Bicep under ``infra/`` must say, checked on its text (the Bicep CLI is not run here)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from oncegate.config import DEFAULT_TABLE_PREFIX, TABLE_PREFIX_PATTERN
from oncegate.stores.tables import table_names
from tests.infra.bicep import BicepFile

GUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)

# Azure built-in role IDs (learn.microsoft.com/azure/role-based-access-control/built-in-roles), the
# same the Flex Consumption samples assign, and the one resource type each may be scoped to.
STORAGE = "Microsoft.Storage/storageAccounts"
ROLES = {
    "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3": ("Storage Table Data Contributor", STORAGE),
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": ("Storage Blob Data Owner", STORAGE),
    "974c5e8b-45b9-4653-ba55-5f855dd0fb88": ("Storage Queue Data Contributor", STORAGE),
    "3913510d-42f4-4e42-8a64-420c390055eb": ("Monitoring Metrics Publisher", "Microsoft.Insights/components"),
    "4633458b-17de-408a-b874-0445c86b69e6": ("Key Vault Secrets User", "Microsoft.KeyVault/vaults"),
}

# Every resource type and API version in use, and where it was checked.
QUICKSTART = (
    "Azure/azure-quickstart-templates quickstarts/microsoft.web/function-app-flex-managed-identities/main.bicep "
    "(official Flex Consumption sample with user-assigned identity)"
)
LEARN = "learn.microsoft.com/azure/templates/"
SAME_PROVIDER = "the storage account's version (one version per provider); seen in public Bicep, not on Learn"
API_VERSIONS = {
    "Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31": QUICKSTART,
    "Microsoft.Web/serverfarms@2024-04-01": QUICKSTART + "; FC1 / FlexConsumption, reserved: true",
    "Microsoft.Web/sites@2024-04-01": QUICKSTART + "; functionAppConfig as in azure-mgmt-web FunctionAppConfig",
    "Microsoft.Web/sites/config@2024-04-01": LEARN + "microsoft.web/2024-04-01/sites/config",
    "Microsoft.Storage/storageAccounts@2023-05-01": QUICKSTART,
    "Microsoft.Storage/storageAccounts/blobServices@2023-05-01": QUICKSTART + " (declared nested there)",
    "Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01": QUICKSTART + " (declared nested there)",
    "Microsoft.Storage/storageAccounts/tableServices@2023-05-01": SAME_PROVIDER,
    "Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01": SAME_PROVIDER,
    "Microsoft.OperationalInsights/workspaces@2023-09-01": QUICKSTART,
    "Microsoft.Insights/components@2020-02-02": QUICKSTART + "; DisableLocalAuth",
    "Microsoft.Authorization/roleAssignments@2022-04-01": QUICKSTART + "; Azure-Samples/fastapi-on-azure-functions",
    "Microsoft.KeyVault/vaults@2023-07-01": LEARN + "microsoft.keyvault/vaults",
    "Microsoft.KeyVault/vaults/secrets@2023-07-01": LEARN + "microsoft.keyvault/vaults/secrets",
}

# What an output must never carry: a secure parameter, a list*() key call, a connection string, a secret value.
LEAKS = re.compile(r"\blist\w*\(|connectionstring|\.properties\.value\b|\bsecretvalue\b", re.I)


def test_every_parameter_is_described(bicep_files: list[BicepFile]) -> None:
    undescribed = [
        f"{file.path.name}:{param.line} {param.name}"
        for file in bicep_files
        for param in file.declarations("param")
        if not param.has_decorator("description")
    ]
    assert not undescribed


def test_outputs_reveal_no_secret(bicep_files: list[BicepFile]) -> None:
    for file in bicep_files:
        secure = [param.name for param in file.declarations("param") if param.has_decorator("secure")]
        for output in file.declarations("output"):
            assert not LEAKS.search(output.value), f"{file.path.name}: output {output.name} = {output.value}"
            for name in secure:
                assert not re.search(rf"\b{name}\b", output.value), f"{file.path.name}: {output.name} shows {name}"


def test_role_assignments_are_the_built_in_roles_each_on_its_own_resource(bicep_files: list[BicepFile]) -> None:
    granted = set()
    for file in bicep_files:
        resources = file.resources()
        for assignment in file.declarations("resource"):
            if "'Microsoft.Authorization/roleAssignments@" not in assignment.code:
                continue
            (scope,) = assignment.property_values("scope")
            assert scope in resources, f"{file.path.name}: {assignment.name} is scoped to {scope}, not a resource"
            assert assignment.property_values("principalType") == ["'ServicePrincipal'"]
            roles = set(GUID.findall(file.resolved(assignment.code)))
            assert roles, f"{file.path.name}: {assignment.name} names no role"
            granted |= {(role.lower(), resources[scope][0]) for role in roles}
    assert granted == {(role, scope) for role, (_, scope) in ROLES.items()}


def test_no_other_role_or_guid_appears(bicep_files: list[BicepFile]) -> None:
    for file in bicep_files:
        strays = {guid.lower() for guid in GUID.findall(file.code)} - ROLES.keys()
        assert not strays, f"{file.path.name}: unknown role or GUID {strays}"
        assert file.target_scope == "resourceGroup", f"{file.path.name} deploys beyond its resource group"


def test_resource_types_and_api_versions_are_the_verified_ones(bicep_files: list[BicepFile]) -> None:
    used = {f"{kind}@{version}" for file in bicep_files for kind, version, _ in file.resources().values()}
    assert used - API_VERSIONS.keys() == set(), "verify these against the docs, then add them to API_VERSIONS"
    assert API_VERSIONS.keys() - used == set(), "API_VERSIONS lists versions no longer used"


def test_modules_are_local_files_that_exist(bicep_files: list[BicepFile]) -> None:
    for file in bicep_files:
        for symbol, path in file.modules().items():
            assert ":" not in path, f"{file.path.name}: module {symbol} comes from a registry ({path})"
            assert (file.path.parent / path).is_file(), f"{file.path.name}: module {symbol} -> {path} is missing"


def test_storage_takes_no_shared_key_no_public_blob_and_no_old_tls(bicep: dict[str, BicepFile]) -> None:
    storage = bicep["core/storage/storage-account.bicep"].declaration("resource", "storage")
    assert storage.property_values("allowSharedKeyAccess") == ["false"]
    assert storage.property_values("allowBlobPublicAccess") == ["false"]
    assert storage.property_values("minimumTlsVersion") == ["'TLS1_2'"]
    assert storage.property_values("supportsHttpsTrafficOnly") == ["true"]


def test_application_insights_refuses_local_auth(bicep: dict[str, BicepFile]) -> None:
    component = bicep["core/monitor/monitoring.bicep"].declaration("resource", "applicationInsights")
    assert component.property_values("DisableLocalAuth") == ["true"]


def test_tables_are_the_ones_the_code_names(main_bicep: BicepFile) -> None:
    prefix = main_bicep.declaration("param", "tablePrefix")
    assert prefix.value == f"'{DEFAULT_TABLE_PREFIX}'"
    suffixes = re.findall(r"'\$\{tablePrefix\}(\w+)'", main_bicep.declaration("var", "tableNames").value)
    assert tuple(DEFAULT_TABLE_PREFIX + suffix for suffix in suffixes) == table_names(DEFAULT_TABLE_PREFIX)
    assert main_bicep.declaration("module", "storage").property_values("tableNames") == ["tableNames"]
    longest = max(n for n in range(1, 100) if TABLE_PREFIX_PATTERN.fullmatch("A" * n))
    assert f"@maxLength({longest})" in prefix.decorators


def test_function_app_runs_python_3_11_on_flex_consumption_as_its_identity(
    main_bicep: BicepFile, bicep: dict[str, BicepFile]
) -> None:
    plan = main_bicep.declaration("resource", "plan")
    assert plan.property_values("name")[-1] == "'FC1'"
    assert plan.property_values("tier") == ["'FlexConsumption'"]
    assert plan.property_values("reserved") == ["true"]
    site = bicep["app/api.bicep"].declaration("resource", "functionApp")
    assert site.property_values("kind") == ["'functionapp,linux'"]
    # The identity, the deployment package's storage, and how the platform signs in to it.
    assert site.property_values("type") == ["'UserAssigned'", "'blobContainer'", "'UserAssignedIdentity'"]
    assert site.property_values("userAssignedIdentityResourceId") == ["identityId"]
    assert site.property_values("keyVaultReferenceIdentity") == ["identityId"]
    assert site.property_values("version") == ["'3.11'"]
    assert site.property_values("httpsOnly") == ["true"]
    assert "'azd-service-name': 'api'" in main_bicep.declaration("module", "api").code


def test_the_key_secret_is_a_key_vault_reference(bicep: dict[str, BicepFile]) -> None:
    api = bicep["app/api.bicep"]
    settings = api.declaration("var", "appSettings")
    assert settings.property_values("ONCEGATE_KEY_SECRET") == ["'@Microsoft.KeyVault(SecretUri=${keySecretUri})'"]
    vault = bicep["core/security/keyvault.bicep"].declaration("resource", "keyVault")
    assert vault.property_values("enableRbacAuthorization") == ["true"]
    assert vault.property_values("enableSoftDelete") == ["true"]
    assert vault.property_values("enablePurgeProtection") == ["enablePurgeProtection ? true : null"]


def anonymous_routes(function_app: Path) -> set[str]:
    """Routes of ``function_app.py`` declared with ``auth_level=...AuthLevel.ANONYMOUS``."""
    routes = set()
    for node in ast.walk(ast.parse(function_app.read_text(encoding="utf-8"))):
        for decorator in getattr(node, "decorator_list", []):
            keywords = {keyword.arg: keyword.value for keyword in getattr(decorator, "keywords", [])}
            route, level = keywords.get("route"), keywords.get("auth_level")
            anonymous = isinstance(level, ast.Attribute) and level.attr == "ANONYMOUS"
            if anonymous and isinstance(route, ast.Constant) and isinstance(route.value, str):
                routes.add(route.value)
    return routes


def test_entra_protection_spares_only_the_anonymous_routes(root: Path, bicep: dict[str, BicepFile]) -> None:
    settings = bicep["app/api.bicep"].declaration("var", "entraAuthSettings")
    prefix = json.loads((root / "host.json").read_text(encoding="utf-8"))["extensions"]["http"]["routePrefix"]
    # The catch-all route answers 404/405 to anyone; behind Entra ID, strangers get 401 instead.
    anonymous = {f"/{prefix}/{route}" for route in anonymous_routes(root / "function_app.py") if "{" not in route}
    excluded = settings.code[settings.code.index("excludedPaths") :].split("]", 1)[0]
    assert set(re.findall(r"'([^']*)'", excluded)) == anonymous == {f"/{prefix}/health"}
    assert settings.property_values("requireAuthentication") == ["true"]
    assert settings.property_values("unauthenticatedClientAction") == ["'Return401'"]
