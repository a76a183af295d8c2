"""What the Bicep under ``infra/`` must say, checked on its syntax tree (the Bicep CLI is not run here).

``test_typecheck.py`` checks the same files against Microsoft's type definitions; this file checks
OnceGate's own choices: roles and their scopes, the key secret, Entra mode, storage and the site.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from tree_sitter import Node

from oncegate.config import DEFAULT_TABLE_PREFIX, TABLE_PREFIX_PATTERN
from oncegate.domain.keys import MIN_SECRET_LENGTH
from oncegate.stores.tables import table_names
from tests.infra.bicep import (
    BicepFile,
    Declaration,
    Evaluator,
    Fail,
    call_name,
    literal,
    loop_variables,
    references,
    text,
    unwrap,
    walk,
)
from tests.infra.settings import describe_setting_value

GUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)

# Azure built-in role IDs (learn.microsoft.com/azure/role-based-access-control/built-in-roles), the
# same the Flex Consumption samples assign, the one resource type each is scoped to, and who holds it.
STORAGE = "Microsoft.Storage/storageAccounts"
TABLE_SERVICE = "Microsoft.Storage/storageAccounts/tableServices"
APP, OPERATORS = "the app's identity", "the operators' principal"
ROLES = {
    ("0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3", TABLE_SERVICE, APP): "Storage Table Data Contributor",
    ("b7e6dc6d-f1e8-4753-8033-0f276bb0955b", STORAGE, APP): "Storage Blob Data Owner",
    ("974c5e8b-45b9-4653-ba55-5f855dd0fb88", STORAGE, APP): "Storage Queue Data Contributor",
    ("3913510d-42f4-4e42-8a64-420c390055eb", "Microsoft.Insights/components", APP): "Monitoring Metrics Publisher",
    ("4633458b-17de-408a-b874-0445c86b69e6", "Microsoft.KeyVault/vaults/secrets", APP): "Key Vault Secrets User",
    ("76199698-9eea-4c19-bc75-cec21354c6b6", TABLE_SERVICE, OPERATORS): "Storage Table Data Reader",
}

# Every resource type and API version in use, and where it was checked besides Microsoft's type
# definitions (tests/infra/types, checked by test_typecheck.py).
QUICKSTART = (
    "Azure/azure-quickstart-templates quickstarts/microsoft.web/function-app-flex-managed-identities/main.bicep "
    "(official Flex Consumption sample with user-assigned identity)"
)
LEARN = "learn.microsoft.com/azure/templates/"
TYPES = "tests/infra/types (Azure/bicep-types-az generated definitions)"
API_VERSIONS = {
    "Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31": QUICKSTART,
    "Microsoft.Web/serverfarms@2024-04-01": QUICKSTART + "; FC1 / FlexConsumption, reserved: true",
    "Microsoft.Web/sites@2024-04-01": QUICKSTART + "; functionAppConfig as in azure-mgmt-web FunctionAppConfig",
    "Microsoft.Web/sites/config@2024-04-01": LEARN + "microsoft.web/2024-04-01/sites/config",
    "Microsoft.Web/sites/basicPublishingCredentialsPolicies@2024-04-01": TYPES + "; ftp and scm, allow: false",
    "Microsoft.Storage/storageAccounts@2023-05-01": QUICKSTART,
    "Microsoft.Storage/storageAccounts/blobServices@2023-05-01": QUICKSTART + " (declared nested there)",
    "Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01": QUICKSTART + " (declared nested there)",
    "Microsoft.Storage/storageAccounts/tableServices@2023-05-01": TYPES,
    "Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01": TYPES,
    "Microsoft.OperationalInsights/workspaces@2023-09-01": QUICKSTART,
    "Microsoft.Insights/components@2020-02-02": QUICKSTART + "; DisableLocalAuth",
    "Microsoft.Insights/workbooks@2023-06-01": TYPES + "; workbook.json, test_monitoring.py",
    "Microsoft.Insights/scheduledQueryRules@2023-12-01": TYPES + "; alerts/*.kql, test_monitoring.py",
    "Microsoft.Insights/actionGroups@2023-01-01": TYPES + "; location global, as every action group",
    "Microsoft.Authorization/roleAssignments@2022-04-01": QUICKSTART + "; Azure-Samples/fastapi-on-azure-functions",
    "Microsoft.KeyVault/vaults@2023-07-01": LEARN + "microsoft.keyvault/vaults",
    "Microsoft.KeyVault/vaults/secrets@2023-07-01": LEARN + "microsoft.keyvault/vaults/secrets",
    "Microsoft.Web/customApis@2016-06-01": LEARN + "microsoft.web/customapis; test_logic_app.py",
    "Microsoft.Web/connections@2016-06-01": LEARN + "microsoft.web/connections; test_logic_app.py",
    "Microsoft.Logic/workflows@2019-05-01": LEARN + "microsoft.logic/workflows; test_logic_app.py",
}

# What an output must never carry: a list*() key call, a connection string, a secret value.
LEAKS = re.compile(r"\blist\w*\(|connectionstring|\.properties\.value\b|\bsecretvalue\b", re.I)
KEY_SECRET_NAME = "oncegate-key-secret"


def resolved_text(file: BicepFile, node: Node, seen: set[str] | None = None) -> str:
    """The text of an expression followed by the values of the variables it names, transitively."""
    seen = set() if seen is None else seen
    parts = [text(node)]
    for reference in references(node):
        symbol = file.symbol(text(reference))
        if symbol is not None and symbol.keyword == "var" and symbol.name not in seen and symbol.value is not None:
            seen.add(symbol.name)
            parts.append(resolved_text(file, symbol.value, seen))
    return "\n".join(parts)


def role_assignments(bicep_files: list[BicepFile]) -> list[tuple[BicepFile, Declaration]]:
    return [
        (file, resource)
        for file in bicep_files
        for resource in file.declarations("resource")
        if resource.declared_type.startswith("Microsoft.Authorization/roleAssignments@")
    ]


def scope_symbol(file: BicepFile, assignment: Declaration) -> Declaration:
    scope = assignment.get("scope")
    assert scope is not None, f"{assignment.name} has no scope: it would land on the resource group"
    node = unwrap(scope)
    if node.type == "subscript_expression":  # keySecrets[i]: one of a collection
        node = node.named_children[0]
    symbol = file.symbol(text(node))
    assert symbol is not None, f"{assignment.name} is scoped to {text(scope)}"
    assert symbol.keyword == "resource", f"{assignment.name} is scoped to {text(scope)}"
    return symbol


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
        secure = {param.name for param in file.declarations("param") if param.has_decorator("secure")}
        for output in file.declarations("output"):
            assert output.value is not None
            shown = resolved_text(file, output.value)
            assert not LEAKS.search(shown), f"{file.path.name}: output {output.name} = {text(output.value)}"
            used = {text(reference) for reference in references(output.value)}
            assert not used & secure, f"{file.path.name}: output {output.name} shows {used & secure}"


def test_role_assignments_are_the_built_in_roles_each_on_its_own_resource(bicep_files: list[BicepFile]) -> None:
    granted = set()
    for file, assignment in role_assignments(bicep_files):
        scope = scope_symbol(file, assignment).declared_type.partition("@")[0]
        definition = assignment.get("properties", "roleDefinitionId")
        assert definition is not None
        shown = resolved_text(file, definition)
        loop = assignment.loop
        if loop is not None:
            shown += "\n" + resolved_text(file, loop)
        roles = {role.lower() for role in GUID.findall(shown)}
        assert len(roles) >= 1, f"{file.path.name}: {assignment.name} names no role"
        principal = assignment.texts("principalId")[0]
        principal_type = assignment.texts("principalType")[0]
        if principal == "principalId":
            holder = APP
            assert principal_type == "'ServicePrincipal'", f"{assignment.name}: {principal_type}"
        else:
            holder = OPERATORS
            assert (principal, principal_type) == ("operatorPrincipalId", "operatorPrincipalType")
            # Only when an operator is named: azd leaves AZURE_PRINCIPAL_ID empty in some pipelines.
            assert assignment.condition is not None
            assert text(assignment.condition) == "!empty(operatorPrincipalId)"
        granted |= {(role, scope, holder) for role in roles}
    assert granted == set(ROLES)


def test_no_other_role_or_guid_appears(bicep_files: list[BicepFile]) -> None:
    known = {role for role, _, _ in ROLES}
    for file in bicep_files:
        strays = {guid.lower() for guid in GUID.findall(file.text)} - known
        assert not strays, f"{file.path.name}: unknown role or GUID {strays}"
        assert file.target_scope == "resourceGroup", f"{file.path.name} deploys beyond its resource group"


def test_the_app_reads_only_its_key_secret_and_the_table_service(bicep: dict[str, BicepFile]) -> None:
    rbac = bicep["app/rbac.bicep"]
    secret = rbac.declaration("resource", "keySecret")
    assert secret.existing
    assert secret.declared_type.startswith("Microsoft.KeyVault/vaults/secrets@")
    assert secret.texts("name") == ["keySecretName"]
    table_service = rbac.declaration("resource", "tableService")
    assert table_service.existing
    assert table_service.texts("name") == ["'default'"]
    main = bicep["main.bicep"]
    name = main.declaration("module", "rbac").get("params", "keySecretName")
    assert name is not None
    assert Evaluator(main)(name) == KEY_SECRET_NAME


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
    assert storage.texts("allowSharedKeyAccess") == ["false"]
    assert storage.texts("allowBlobPublicAccess") == ["false"]
    assert storage.texts("minimumTlsVersion") == ["'TLS1_2'"]
    assert storage.texts("supportsHttpsTrafficOnly") == ["true"]


def test_application_insights_refuses_local_auth(bicep: dict[str, BicepFile]) -> None:
    component = bicep["core/monitor/monitoring.bicep"].declaration("resource", "applicationInsights")
    assert component.texts("DisableLocalAuth") == ["true"]


def test_tables_are_the_ones_the_code_names(main_bicep: BicepFile) -> None:
    prefix = main_bicep.declaration("param", "tablePrefix")
    assert prefix.value is not None
    assert literal(prefix.value) == DEFAULT_TABLE_PREFIX
    names = main_bicep.declaration("var", "tableNames").value
    assert names is not None
    assert tuple(Evaluator(main_bicep)(names)) == table_names(DEFAULT_TABLE_PREFIX)
    assert main_bicep.declaration("module", "storage").texts("tableNames") == ["tableNames"]
    longest = max(n for n in range(1, 100) if TABLE_PREFIX_PATTERN.fullmatch("A" * n))
    max_length = prefix.decorator("maxLength")
    assert max_length is not None
    assert max_length.value() == longest


def test_function_app_runs_python_3_11_on_flex_consumption_as_its_identity(
    main_bicep: BicepFile, bicep: dict[str, BicepFile]
) -> None:
    plan = main_bicep.declaration("resource", "plan")
    assert plan.texts("name")[-1] == "'FC1'"
    assert plan.texts("tier") == ["'FlexConsumption'"]
    assert plan.texts("reserved") == ["true"]
    site = bicep["app/api.bicep"].declaration("resource", "functionApp")
    assert site.texts("kind") == ["'functionapp,linux'"]
    # The identity, the deployment package's storage, and how the platform signs in to it.
    assert site.texts("type") == ["'UserAssigned'", "'blobContainer'", "'UserAssignedIdentity'"]
    assert site.texts("userAssignedIdentityResourceId") == ["identityId"]
    assert site.texts("keyVaultReferenceIdentity") == ["identityId"]
    assert site.texts("version") == ["'3.11'"]
    assert site.texts("httpsOnly") == ["true"]
    assert "'azd-service-name': 'api'" in main_bicep.declaration("module", "api").code


def test_basic_publishing_credentials_are_off(bicep: dict[str, BicepFile]) -> None:
    api = bicep["app/api.bicep"]
    policies = {
        resource.texts("name")[0]: resource
        for resource in api.declarations("resource")
        if resource.declared_type.startswith("Microsoft.Web/sites/basicPublishingCredentialsPolicies@")
    }
    assert set(policies) == {"'ftp'", "'scm'"}
    for policy in policies.values():
        assert policy.condition is None
        assert policy.loop is None
        assert policy.texts("parent") == ["functionApp"]
        assert policy.texts("allow") == ["false"]


def test_the_key_secret_is_a_key_vault_reference(bicep: dict[str, BicepFile]) -> None:
    api = bicep["app/api.bicep"]
    (value,) = describe_setting_value(api, "ONCEGATE_KEY_SECRET")
    assert value.endswith("?? '@Microsoft.KeyVault(SecretUri=${keySecretUri})'")
    vault = bicep["core/security/keyvault.bicep"].declaration("resource", "keyVault")
    assert vault.texts("enableRbacAuthorization") == ["true"]
    assert vault.texts("enableSoftDelete") == ["true"]
    assert vault.texts("enablePurgeProtection") == ["enablePurgeProtection ? true : null"]


def secret_resources(file: BicepFile) -> list[Declaration]:
    return [
        resource
        for resource in file.declarations("resource")
        if resource.declared_type.startswith("Microsoft.KeyVault/vaults/secrets@") and not resource.existing
    ]


def test_no_deployment_draws_or_generates_a_secret(bicep_files: list[BicepFile]) -> None:
    for file in bicep_files:
        calls = {call_name(node) for node in walk(file.root) if node.type == "call_expression"}
        # newGuid() and utcNow() are drawn again on every deployment.
        assert not calls & {"newGuid", "utcNow"}, f"{file.path.name} calls {calls & {'newGuid', 'utcNow'}}"
        for param in file.declarations("param"):
            metadata = param.decorator("metadata")
            if metadata is not None:
                assert "generate" not in json.dumps(metadata.value()), f"azd generates {param.name} on every new env"


def test_the_key_secret_is_written_only_when_a_value_is_given(bicep: dict[str, BicepFile]) -> None:
    vault = bicep["core/security/keyvault.bicep"]
    (secret,) = secret_resources(vault)
    assert [
        file for name, file in bicep.items() if secret_resources(file) and name != "core/security/keyvault.bicep"
    ] == []
    value = vault.declaration("param", "newKeySecret")
    assert value.has_decorator("secure")
    assert value.value is not None
    assert literal(value.value) == ""
    assert secret.texts("value") == ["newKeySecret"]
    assert secret.condition is not None
    for given, written in [("", False), ("x" * MIN_SECRET_LENGTH, True)]:
        assert Evaluator(vault, {"newKeySecret": given})(secret.condition) is written
    # Nothing reads the conditional resource: a redeploy, which does not declare it, still has the URI.
    assert [text(node) for node in references(vault.root) if text(node) == secret.name] == []
    uri = vault.declaration("output", "keySecretUri").value
    assert uri is not None
    assert text(uri) == "'${keyVault.properties.vaultUri}secrets/${keySecretName}'"


def test_main_writes_the_secret_only_from_new_key_secret(main_bicep: BicepFile) -> None:
    secret = main_bicep.declaration("param", "newKeySecret")
    assert secret.has_decorator("secure")
    assert secret.value is not None
    assert literal(secret.value) == ""
    assert not secret.has_decorator("metadata")
    given = main_bicep.declaration("module", "keyVault").get("params", "newKeySecret")
    assert given is not None
    assert Evaluator(main_bicep, {"newKeySecret": ""})(given) == ""
    good = "k" * MIN_SECRET_LENGTH
    assert Evaluator(main_bicep, {"newKeySecret": good})(given) == good
    with pytest.raises(Fail, match="at least 32"):
        Evaluator(main_bicep, {"newKeySecret": good[:-1]})(given)
    assert main_bicep.declaration("var", "keySecretName").code.endswith(f"'{KEY_SECRET_NAME}'")
    assert MIN_SECRET_LENGTH == 32, "the message and the check above say 32"


def test_entra_mode_refuses_to_deploy_without_a_client_id(main_bicep: BicepFile) -> None:
    given = main_bicep.declaration("module", "api").get("params", "entraClientId")
    assert given is not None
    with pytest.raises(Fail, match="entraClientId"):
        Evaluator(main_bicep, {"authMode": "entra", "entraClientId": ""})(given)
    client = "00000000-0000-0000-0000-000000000000"
    assert Evaluator(main_bicep, {"authMode": "entra", "entraClientId": client})(given) == client
    assert Evaluator(main_bicep, {"authMode": "key", "entraClientId": ""})(given) == ""
    # It is the value the app module sees: nothing passes the raw parameter around the check.
    api_params = main_bicep.declaration("module", "api").get("params")
    assert api_params is not None
    raw = [node for node in references(api_params) if text(node) == "entraClientId"]
    assert raw == []


# The settings an operator changes on the app, which a redeploy keeps: the key secrets and the pinned store id.
KEY_SECRET_SETTINGS = (
    "ONCEGATE_KEY_SECRET",
    "ONCEGATE_KEY_SECRET_NEXT",
    "ONCEGATE_KEY_SECRET_PREVIOUS",
    "ONCEGATE_STORE_ID",
)


def test_a_redeploy_keeps_the_key_secret_settings_the_app_has(bicep: dict[str, BicepFile]) -> None:
    api = bicep["app/api.bicep"]
    config = api.declaration("resource", "appSettingsConfig")
    # The key secret settings come last, so nothing in appSettings can override them, and only from there.
    assert config.texts("properties") == ["union(appSettings, keySecretSettings)"]
    appsettings_var = api.declaration("var", "appSettings").value
    assert appsettings_var is not None
    assert api.object_keys(appsettings_var) & set(KEY_SECRET_SETTINGS) == set()
    # What the app has now, read from the live site when the settings deploy.
    live = api.declaration("var", "liveSettings").value
    assert live is not None
    assert text(live) == "list('${functionApp.id}/config/appsettings', '2024-04-01').properties"
    settings = api.declaration("var", "keySecretSettings").value
    assert settings is not None
    uri = "https://kv.vault.azure.net/secrets/oncegate-key-secret"

    def deployed(live_settings: dict[str, str]) -> dict[str, str]:
        result = Evaluator(api, {"liveSettings": live_settings, "keySecretUri": uri})(settings)
        assert isinstance(result, dict)
        return result

    # The first deployment: a new site has none of them.
    first = deployed({})
    assert first == {
        "ONCEGATE_KEY_SECRET": f"@Microsoft.KeyVault(SecretUri={uri})",
        "ONCEGATE_KEY_SECRET_NEXT": "",
        "ONCEGATE_KEY_SECRET_PREVIOUS": "",
        "ONCEGATE_STORE_ID": "",
    }
    # A rotation's settings, set on the app by an operator, survive a redeploy from anywhere: every phase.
    new = "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/oncegate-key-secret-2)"
    phases = [
        {"ONCEGATE_KEY_SECRET": first["ONCEGATE_KEY_SECRET"], "ONCEGATE_KEY_SECRET_NEXT": new},
        {"ONCEGATE_KEY_SECRET": new, "ONCEGATE_KEY_SECRET_PREVIOUS": first["ONCEGATE_KEY_SECRET"]},
        {"ONCEGATE_KEY_SECRET": new, "ONCEGATE_KEY_SECRET_PREVIOUS": "", "ONCEGATE_STORE_ID": "3f2a9c1e5b7d4a60"},
    ]
    for phase in phases:
        live_settings = {**phase, "ONCEGATE_STORE": "tables"}
        kept = deployed(live_settings)
        assert {name: kept[name] for name in phase} == phase
        assert set(kept) == set(KEY_SECRET_SETTINGS)


def test_loop_variables_are_read(bicep_files: list[BicepFile]) -> None:
    # A sanity check of the reader: the loops of rbac.bicep and storage-account.bicep are seen.
    found = {name for file in bicep_files for name in loop_variables(file.root)}
    assert {"roleId", "tableName"} <= found


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
    excluded = settings.get("globalValidation", "excludedPaths")
    assert excluded is not None
    assert set(literal(excluded)) == anonymous == {f"/{prefix}/health"}
    assert settings.texts("requireAuthentication") == ["true"]
    assert settings.texts("unauthenticatedClientAction") == ["'Return401'"]
