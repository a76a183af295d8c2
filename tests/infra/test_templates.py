"""What the Bicep under ``infra/`` must say, checked on its syntax tree (the Bicep CLI is not run here).

``test_typecheck.py`` checks the same files against Microsoft's type definitions; this file checks
OnceGate's own choices: roles and their scopes, the key secret, Entra mode, storage and the site.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tree_sitter import Node

from oncegate.config import DEFAULT_TABLE_PREFIX, TABLE_PREFIX_PATTERN, AuthMode
from oncegate.domain.keys import MIN_SECRET_LENGTH
from oncegate.domain.target_declarations import secret_setting
from oncegate.entrypoints.routes import function_routes
from oncegate.stores.tables.store import table_names
from tests.infra.bicep import (
    BicepFile,
    Declaration,
    Evaluator,
    Fail,
    call_name,
    deploy_module,
    literal,
    loop_variables,
    properties,
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
APP, OPERATORS, MARKER = "the app's identity", "the operators' principal", "the store's marker (azd: the deployer)"
ROLES = {
    ("0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3", TABLE_SERVICE, APP): "Storage Table Data Contributor",
    ("b7e6dc6d-f1e8-4753-8033-0f276bb0955b", STORAGE, APP): "Storage Blob Data Owner",
    ("3913510d-42f4-4e42-8a64-420c390055eb", "Microsoft.Insights/components", APP): "Monitoring Metrics Publisher",
    ("4633458b-17de-408a-b874-0445c86b69e6", "Microsoft.KeyVault/vaults/secrets", APP): "Key Vault Secrets User",
    ("76199698-9eea-4c19-bc75-cec21354c6b6", TABLE_SERVICE, OPERATORS): "Storage Table Data Reader",
    ("0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3", TABLE_SERVICE, MARKER): "Storage Table Data Contributor",
}

# Every role id the templates name, and Reader (built-in-roles/general), which they leave to a person.
ROLE_NAMES = {role: name for (role, _, _), name in ROLES.items()} | {"acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader"}

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
    "Microsoft.OperationalInsights/workspaces/tables@2023-09-01": LEARN
    + "microsoft.operationalinsights/workspaces/tables; retentionInDays 4-730, totalRetentionInDays 4-4383 in "
    + TYPES,
    "Microsoft.Insights/components@2020-02-02": QUICKSTART + "; DisableLocalAuth",
    "Microsoft.Insights/workbooks@2023-06-01": TYPES + "; workbook.json, test_monitoring.py",
    "Microsoft.Insights/scheduledQueryRules@2023-12-01": TYPES + "; alerts/*.kql, test_monitoring.py",
    "Microsoft.Insights/actionGroups@2023-01-01": TYPES + "; location global, as every action group",
    "Microsoft.Authorization/roleAssignments@2022-04-01": QUICKSTART + "; Azure-Samples/fastapi-on-azure-functions",
    "Microsoft.KeyVault/vaults@2023-07-01": LEARN + "microsoft.keyvault/vaults",
    "Microsoft.KeyVault/vaults/secrets@2023-07-01": LEARN + "microsoft.keyvault/vaults/secrets",
    "Microsoft.Web/customApis@2016-06-01": LEARN + "microsoft.web/customapis; test_logic_app.py",
    "Microsoft.Web/connections@2016-06-01": LEARN + "microsoft.web/connections; test_logic_app.py",
    "Microsoft.Insights/diagnosticSettings@2021-05-01-preview": LEARN
    + "microsoft.insights/diagnosticsettings (the one version; extension resource, scope on the audited one)",
    "Microsoft.Authorization/locks@2020-05-01": LEARN + "microsoft.authorization/locks (the latest stable version)",
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
            holder = OPERATORS if principal == "operatorPrincipalId" else MARKER
            kind = "operator" if holder == OPERATORS else "marker"
            assert (principal, principal_type) == (f"{kind}PrincipalId", f"{kind}PrincipalType")
            # Only when one is named: azd leaves AZURE_PRINCIPAL_ID empty in some pipelines.
            assert assignment.condition is not None
            assert text(assignment.condition) == f"!empty({kind}PrincipalId)"
        granted |= {(role, scope, holder) for role in roles}
    assert granted == set(ROLES)


HAND_ASSIGNMENT = re.compile(r"az role assignment create (?P<command>(?:\\\n|[^\n])*)")
HAND_SCOPES = {'"$STORAGE_ID"': STORAGE, '"$STORAGE_ID/tableServices/default"': TABLE_SERVICE}


def hand_assignments(document: Path) -> set[tuple[str, str]]:
    """The (role, resource type) pairs a document has an operator assign by hand to a person or a group."""
    found = set()
    for match in HAND_ASSIGNMENT.finditer(document.read_text(encoding="utf-8")):
        command = " ".join(match["command"].replace("\\\n", " ").split())
        role = re.search(r'--role "([^"]+)"', command)
        scope = re.search(r"--scope (\S+)", command)
        assert role is not None
        assert scope is not None
        if "$APP_IDENTITY" not in command and scope[1] in HAND_SCOPES:
            found.add((role[1], HAND_SCOPES[scope[1]]))
    return found


def test_no_role_the_template_gives_a_person_is_one_the_docs_give_by_hand(
    root: Path, bicep_files: list[BicepFile]
) -> None:
    """Azure refuses a second assignment of one role to one principal at one scope under another name
    (RoleAssignmentExists), so a role the template gives the deployer, or the operators' principal, where
    operations.md has a person give it to themselves by hand (*Claims in the Azure portal*) would stop
    that person's next deployment, and lifting it means lifting the account's delete lock."""
    by_hand = hand_assignments(root / "docs" / "operations.md")
    assert ("Reader", STORAGE) in by_hand  # the portal needs it to reach the tables
    given = set()
    for file, assignment in role_assignments(bicep_files):
        if assignment.texts("principalId") != ["principalId"]:  # the deployer or the operators
            definition = assignment.get("properties", "roleDefinitionId")
            assert definition is not None
            scope = scope_symbol(file, assignment).declared_type.partition("@")[0]
            names = {ROLE_NAMES[role.lower()] for role in GUID.findall(resolved_text(file, definition))}
            given |= {(name, scope) for name in names}
    assert given
    assert given & by_hand == set()


def test_the_docs_give_an_operators_group_reader_on_the_account_by_hand(root: Path) -> None:
    """Microsoft's "Choose how to authorize access to table data in the Azure portal": a data role on the tables
    and, to reach them at all, Reader on the storage account or above, which the template leaves to a person."""
    assert ("Reader", STORAGE) in hand_assignments(root / "docs" / "deploy.md")


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
    longest = max(n for n in range(1, 100) if re.fullmatch(TABLE_PREFIX_PATTERN, "A" * n))
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
    (secret,) = secret_resources(bicep["core/security/key-secret.bicep"])
    writers = [name for name, file in bicep.items() if secret_resources(file)]
    assert writers == ["core/security/key-secret.bicep"]
    value = vault.declaration("param", "newKeySecret")
    assert value.has_decorator("secure")
    assert value.value is not None
    assert literal(value.value) == ""
    assert secret.texts("value") == ["value"]
    # Written through one module, deployed only with a value; ARM checks its length there.
    for given, written in [("", False), ("x" * MIN_SECRET_LENGTH, True)]:
        deployed = deploy_module(vault, "keySecretEntry", {"newKeySecret": given, "keySecretName": KEY_SECRET_NAME})
        assert (deployed is not None) is written
    with pytest.raises(Fail, match="value is shorter than 32"):
        deploy_module(vault, "keySecretEntry", {"newKeySecret": "x" * (MIN_SECRET_LENGTH - 1)})
    assert MIN_SECRET_LENGTH == 32, "key-secret.bicep's @minLength says 32"


def test_the_first_deployment_pins_the_secret_version_it_writes(bicep: dict[str, BicepFile]) -> None:
    vault = bicep["core/security/keyvault.bicep"]
    uri = vault.declaration("output", "keySecretUri").value
    assert uri is not None
    # The version just written, else the secret's address alone (a redeploy reads nothing of the secret).
    assert text(uri) == "writesKeySecret ? writtenUri : unreadUri"
    assert set(resolved_text(vault, uri).splitlines()[1:]) == {
        "!empty(newKeySecret)",
        "keySecretEntry.outputs.uriWithVersion",
        "'${keyVault.properties.vaultUri}secrets/${keySecretName}/'",
    }
    written = bicep["core/security/key-secret.bicep"].declaration("output", "uriWithVersion").value
    assert written is not None
    assert text(written) == "keySecret.properties.secretUriWithVersion"
    # The app's reference is built from that URI as it is: ONCEGATE_KEY_SECRET names one version.
    (value,) = describe_setting_value(bicep["app/api.bicep"], "ONCEGATE_KEY_SECRET")
    assert value == "liveSettings.?ONCEGATE_KEY_SECRET ?? '@Microsoft.KeyVault(SecretUri=${keySecretUri})'"
    assert text(bicep["main.bicep"].declaration("module", "api").get("params", "keySecretUri") or uri) == (
        "keyVault.outputs.keySecretUri"
    )


READ = re.compile(r"\b(\w+)(?:\[\w+\])?\.(?:properties|outputs)\b")


def test_a_redeploy_neither_reads_the_first_key_secret_nor_grants_its_role_again(
    bicep: dict[str, BicepFile], main_bicep: BicepFile
) -> None:
    """After a rotation the first secret is retired: deploy.md removes the app's role on it and keeps the secret
    until no export lists it, then it may go. A redeploy (no newKeySecret) that read it would stop at
    ResourceNotFound from then on, and one that granted the role again would undo the runbook's removal."""
    vault = bicep["core/security/keyvault.bicep"]
    uri = vault.declaration("output", "keySecretUri").value
    assert uri is not None
    chosen = unwrap(uri)
    assert chosen.type == "ternary_expression", f"one of two values, by whether the secret is written: {text(uri)}"
    for given, first in [("", False), ("x" * MIN_SECRET_LENGTH, True)]:
        condition = chosen.child_by_field_name("condition")
        assert condition is not None
        writes = Evaluator(vault, {"newKeySecret": given})(condition)
        branch = chosen.child_by_field_name("consequence" if writes else "alternative")
        assert branch is not None
        read = set(READ.findall(resolved_text(vault, branch)))
        assert "keySecret" not in read, f"the output reads the secret itself: {resolved_text(vault, branch)}"
        assert ("keySecretEntry" in read) is first, read  # the version just written, pinned
    rbac = bicep["app/rbac.bicep"]
    assignment = rbac.declaration("resource", "keySecretAssignment")
    assert assignment.condition is not None, "the role on the first secret is granted on every deployment"
    for given, first in [("", False), ("x" * MIN_SECRET_LENGTH, True)]:
        params = deploy_module(main_bicep, "rbac", {"newKeySecret": given})
        assert params is not None
        assert Evaluator(rbac, params)(assignment.condition) is first


def test_main_writes_the_secret_only_from_new_key_secret(main_bicep: BicepFile) -> None:
    secret = main_bicep.declaration("param", "newKeySecret")
    assert secret.has_decorator("secure")
    assert secret.value is not None
    assert literal(secret.value) == ""
    assert not secret.has_decorator("metadata")
    good = "k" * MIN_SECRET_LENGTH
    for given in ("", good):
        deployed = deploy_module(main_bicep, "keyVault", {"newKeySecret": given})
        assert deployed is not None
        assert deployed["newKeySecret"] == given
    assert main_bicep.declaration("var", "keySecretName").code.endswith(f"'{KEY_SECRET_NAME}'")


def test_entra_mode_refuses_to_deploy_without_a_client_id(main_bicep: BicepFile) -> None:
    with pytest.raises(Fail, match="authMode-entra-needs-entraClientId: value is shorter than 1"):
        deploy_module(main_bicep, "entraClientIdRequired", {"authMode": "entra", "entraClientId": ""})
    client = "00000000-0000-0000-0000-000000000000"
    assert deploy_module(main_bicep, "entraClientIdRequired", {"authMode": "entra", "entraClientId": client})
    assert deploy_module(main_bicep, "entraClientIdRequired", {"authMode": "key", "entraClientId": ""}) is None
    # The app waits for the check: nothing of it deploys before the deployment is refused.
    depends = main_bicep.declaration("module", "api").get("dependsOn")
    assert depends is not None
    assert "entraClientIdRequired" in literal_names(depends)


def literal_names(node: Node) -> list[str]:
    return [text(item) for item in unwrap(node).named_children if item.type != "comment"]


# The settings an operator changes on the app, which a redeploy keeps: the key secrets and the pinned store id.
KEY_SECRET_SETTINGS = (
    "ONCEGATE_KEY_SECRET",
    "ONCEGATE_KEY_SECRET_NEXT",
    "ONCEGATE_KEY_SECRET_PREVIOUS",
    "ONCEGATE_STORE_ID",
)


def deploy_settings(api: BicepFile, live: dict[str, str], **params: Any) -> dict[str, str]:
    """The app settings a deployment of ``api.bicep`` writes, given what the app has now (``live``)."""
    given = dict.fromkeys(OPERATOR_PARAMETERS, "") | params
    deployment = {
        "liveSettings": live,
        "keySecretUri": "https://kv.vault.azure.net/secrets/oncegate-key-secret/0a1b2c3d4e5f",
        "tablesEndpoint": "https://st.table.core.windows.net",
        "identityClientId": "44444444-4444-4444-4444-444444444444",
        "authMode": "key",
        "entraClientId": "",
        "tablePrefix": "OnceGate",
        "keyVaultName": "kv-oncegate",
        **given,
    }
    properties = api.declaration("resource", "appSettingsConfig").get("properties")
    assert properties is not None
    settings = Evaluator(api, deployment).evaluate_partly(properties)
    assert isinstance(settings, dict)
    return settings


# The parameter of api.bicep (and main.bicep, and the azd value) behind each setting an operator may change.
OPERATOR_PARAMETERS = {
    "logLevel": "ONCEGATE_LOG_LEVEL",
    "sensitiveKeys": "ONCEGATE_SENSITIVE_KEYS",
    "sensitiveData": "ONCEGATE_SENSITIVE_DATA",
    "requireRegisteredFlows": "ONCEGATE_REQUIRE_REGISTERED_FLOWS",
    "unknownAlertMinutes": "ONCEGATE_UNKNOWN_ALERT_MINUTES",
    "bulkConcurrency": "ONCEGATE_BULK_CONCURRENCY",
    "retentionSchedule": "ONCEGATE_RETENTION_SCHEDULE",
    "attentionSchedule": "ONCEGATE_ATTENTION_SCHEDULE",
}


def test_a_redeploy_keeps_the_key_secret_settings_the_app_has(bicep: dict[str, BicepFile]) -> None:
    api = bicep["app/api.bicep"]
    config = api.declaration("resource", "appSettingsConfig")
    # The live settings first, then the template's, and the secrets' settings last, so nothing overrides them.
    assert config.texts("properties") == [
        "union(liveSettings, appSettings, operatorSettings, keySecretSettings, targetSecretSettings)"
    ]
    for name in ("appSettings", "operatorSettings"):
        value = api.declaration("var", name).value
        assert value is not None
        assert api.object_keys(value) & set(KEY_SECRET_SETTINGS) == set()
    live = api.declaration("var", "liveSettings").value
    assert live is not None
    assert text(live) == "list('${functionApp.id}/config/appsettings', '2024-04-01').properties"
    first = deploy_settings(api, {})
    pinned = "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/oncegate-key-secret/0a1b2c3d4e5f)"
    assert {name: first[name] for name in KEY_SECRET_SETTINGS} == {
        "ONCEGATE_KEY_SECRET": pinned,
        "ONCEGATE_KEY_SECRET_NEXT": "",
        "ONCEGATE_KEY_SECRET_PREVIOUS": "",
        "ONCEGATE_STORE_ID": "",
    }
    # A rotation's settings, set on the app by an operator, survive a redeploy from anywhere: every phase.
    new = "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/oncegate-key-secret-2/9f8e7d6c)"
    phases = [
        {"ONCEGATE_KEY_SECRET": pinned, "ONCEGATE_KEY_SECRET_NEXT": new},
        {"ONCEGATE_KEY_SECRET": new, "ONCEGATE_KEY_SECRET_PREVIOUS": pinned},
        {"ONCEGATE_KEY_SECRET": new, "ONCEGATE_KEY_SECRET_PREVIOUS": "", "ONCEGATE_STORE_ID": "3f2a9c1e5b7d4a60"},
    ]
    for phase in phases:
        kept = deploy_settings(api, {**first, **phase})
        assert {name: kept[name] for name in phase} == phase


def test_each_target_secret_is_a_key_vault_reference_the_app_reads_by_its_setting(
    bicep: dict[str, BicepFile], main_bicep: BicepFile
) -> None:
    names = ["oncegate-target-erp", "oncegate-target-ticketing-api"]

    settings = deploy_settings(bicep["app/api.bicep"], {}, targetSecretNames=names)

    assert {name: value for name, value in settings.items() if name.startswith("ONCEGATE_TARGET_SECRET_")} == {
        secret_setting(name): f"@Microsoft.KeyVault(VaultName=kv-oncegate;SecretName={name})" for name in names
    }
    # The app is granted each secret named, one by one, and the deployment stops on a name outside the prefix.
    rbac = bicep["app/rbac.bicep"]
    assert rbac.declaration("resource", "targetSecrets").existing
    scope = rbac.declaration("resource", "targetSecretAssignments").get("scope")
    assert scope is not None
    assert text(unwrap(scope)) == "targetSecrets[i]"
    stray = main_bicep.declaration("var", "strayTargetSecrets").value
    assert stray is not None
    for given, stops in ((names, []), ([*names, "oncegate-key-secret"], ["oncegate-key-secret"])):
        assert Evaluator(main_bicep, {"targetSecretNames": given})(stray) == stops


def test_revoking_a_target_removes_the_setting_a_deployment_keeps(bicep: dict[str, BicepFile], root: Path) -> None:
    """A deployment that no longer names a target secret keeps its setting (the live settings are merged in), so
    operations.md's *Revoking a target* deletes it, before the secret it refers to is deleted; it left the app a
    Key Vault reference to a deleted secret."""
    api = bicep["app/api.bicep"]
    setting = secret_setting("oncegate-target-erp")
    named = deploy_settings(api, {}, targetSecretNames=["oncegate-target-erp"])
    assert deploy_settings(api, named, targetSecretNames=[])[setting] == named[setting]
    runbook = (root / "docs" / "operations.md").read_text(encoding="utf-8").split("**Revoking a target**")[1]
    runbook = " ".join(runbook.split("\n## ")[0].replace("\\\n", " ").split())
    delete = f'az functionapp config appsettings delete --resource-group "$RG" --name "$APP" --setting-names {setting}'
    assert delete in runbook
    assert runbook.index(delete) < runbook.index("az keyvault secret delete --vault-name")


def test_a_second_deployment_changes_nothing_an_operator_set(bicep: dict[str, BicepFile]) -> None:
    api = bicep["app/api.bicep"]
    first = deploy_settings(api, {})
    # A new app gets OnceGate's defaults (oncegate/config.py reads the same when a setting is unset).
    assert {OPERATOR_PARAMETERS[p]: first[OPERATOR_PARAMETERS[p]] for p in OPERATOR_PARAMETERS} == {
        "ONCEGATE_LOG_LEVEL": "INFO",
        "ONCEGATE_SENSITIVE_KEYS": "reject",
        "ONCEGATE_SENSITIVE_DATA": "reject",
        "ONCEGATE_REQUIRE_REGISTERED_FLOWS": "false",
        "ONCEGATE_UNKNOWN_ALERT_MINUTES": "15",
        "ONCEGATE_BULK_CONCURRENCY": "8",
        "ONCEGATE_RETENTION_SCHEDULE": "0 30 2 * * *",
        "ONCEGATE_ATTENTION_SCHEDULE": "0 */15 * * * *",
    }
    # The operator changes settings on the app (docs/operations.md) and adds one the template does not own.
    on_the_app = {
        **first,
        "ONCEGATE_REQUIRE_REGISTERED_FLOWS": "true",
        "ONCEGATE_LOG_LEVEL": "DEBUG",
        "ONCEGATE_UNKNOWN_ALERT_MINUTES": "60",
        "ONCEGATE_RETENTION_SCHEDULE": "0 0 4 * * *",
        "ONCEGATE_STORE_ID": "3f2a9c1e5b7d4a60",
        "WEBSITE_TIME_ZONE": "UTC",
    }
    # Two parameter sets: an azd environment that sets nothing, and one that sets what the operator set.
    unset = deploy_settings(api, on_the_app)
    same = deploy_settings(
        api,
        on_the_app,
        requireRegisteredFlows="true",
        logLevel="DEBUG",
        unknownAlertMinutes="60",
        retentionSchedule="0 0 4 * * *",
    )
    assert unset == on_the_app
    assert same == on_the_app
    # A value the environment gives is the template's to write: it replaces the app's.
    assert (
        deploy_settings(api, on_the_app, requireRegisteredFlows="false")["ONCEGATE_REQUIRE_REGISTERED_FLOWS"] == "false"
    )


def test_every_operator_setting_is_a_parameter_fed_from_the_azd_environment(
    root: Path, bicep: dict[str, BicepFile]
) -> None:
    main, api = bicep["main.bicep"], bicep["app/api.bicep"]
    azd = json.loads((root / "infra" / "main.parameters.json").read_text(encoding="utf-8"))["parameters"]
    passed = main.declaration("module", "api").get("params")
    assert passed is not None
    for parameter, setting in OPERATOR_PARAMETERS.items():
        # Empty unless the environment gives a value: no default there, so an unset value keeps the app's.
        assert azd[parameter] == {"value": f"${{{setting}}}"}
        default = main.declaration("param", parameter).value
        assert default is not None
        assert literal(default) == ""
        assert text(unwrap(get_param(passed, parameter))) == parameter
        assert api.declaration("param", parameter).value is None, f"{parameter}: api.bicep takes it from main"


def get_param(params: Node, name: str) -> Node:
    (value,) = [value for key, _, value in properties(unwrap(params)) if key == name]
    return value


def test_the_app_identity_has_no_queue_role_and_the_host_no_queue_endpoint(bicep: dict[str, BicepFile]) -> None:
    for name, file in bicep.items():
        assert "queue" not in file.text.lower().replace("no queue", ""), f"{name} mentions a queue"


def of_type(file: BicepFile, prefix: str) -> list[Declaration]:
    return [r for r in file.declarations("resource") if r.declared_type.startswith(prefix)]


def test_storage_is_zone_redundant_by_default_and_locked(main_bicep: BicepFile, bicep: dict[str, BicepFile]) -> None:
    sku = main_bicep.declaration("param", "storageSku")
    assert sku.value is not None
    assert literal(sku.value) == "Standard_ZRS"
    allowed = sku.decorator("allowed")
    assert allowed is not None
    assert {"Standard_ZRS", "Standard_GZRS", "Standard_RAGZRS"} <= set(allowed.value())
    storage_file = bicep["core/storage/storage-account.bicep"]
    assert storage_file.declaration("resource", "storage").texts("name")[-1] == "skuName"
    first = deploy_module(main_bicep, "storage", {"newKeySecret": NEW_SECRET, "location": "swedencentral"})
    assert first is not None
    assert (first["skuName"], first["location"]) == ("Standard_ZRS", "swedencentral")
    locks = main_bicep.declaration("param", "deleteLocks")
    assert locks.value is not None
    assert literal(locks.value) is True
    for path, audited in [
        ("core/storage/storage-account.bicep", "storage"),
        ("core/security/keyvault.bicep", "keyVault"),
    ]:
        file = bicep[path]
        (lock,) = [
            r for r in file.declarations("resource") if r.declared_type.startswith("Microsoft.Authorization/locks@")
        ]
        assert lock.texts("scope") == [audited]
        assert lock.texts("level") == ["'CanNotDelete'"]
        assert lock.condition is not None
        assert text(lock.condition) == "deleteLock"
    plan = main_bicep.declaration("resource", "plan")
    assert plan.texts("zoneRedundant") == ["zoneRedundant"]


NEW_SECRET = "k" * MIN_SECRET_LENGTH


def test_a_redeploy_keeps_the_storage_accounts_live_sku_and_region(main_bicep: BicepFile) -> None:
    # The failover runbook converts the account (az storage account update --sku Standard_GZRS), or a
    # failover moves it to the paired region as LRS; the next azd up, from any clone, leaves both as they are.
    live = main_bicep.declaration("resource", "liveStorage")
    assert live.existing
    assert live.declared_type == "Microsoft.Storage/storageAccounts@2023-05-01"
    assert text(live.get("name") or live.node) == "storageAccountName"
    module = main_bicep.declaration("module", "storage")
    assert text(module.get("params", "name") or module.node) == "storageAccountName"
    for storage_sku in ("Standard_ZRS", "Standard_LRS"):
        redeployed = deploy_module(main_bicep, "storage", {"storageSku": storage_sku, "location": "swedencentral"})
        assert redeployed is not None
        assert redeployed["skuName"] == "<deployment: liveStorage.sku.name>"
        assert redeployed["location"] == "<deployment: liveStorage.location>"
    # Only the first deployment (the one given newKeySecret) reads the parameters.
    first = deploy_module(main_bicep, "storage", {"newKeySecret": NEW_SECRET, "storageSku": "Standard_GZRS"})
    assert first is not None
    assert first["skuName"] == "Standard_GZRS"


# Regions that offer Flex Consumption (Microsoft's functions-quickstart-python-http-azd, infra/main.bicep,
# less its early-access region eastus2euap), and which of them lack zone-redundant storage
# (learn.microsoft.com/azure/storage/common/redundancy-regions-zrs, standard general-purpose v2).
FLEX_REGIONS = {
    "australiaeast", "australiasoutheast", "brazilsouth", "canadacentral", "centralindia", "centralus", "eastasia",
    "eastus", "eastus2", "francecentral", "germanywestcentral", "italynorth", "japaneast", "koreacentral",
    "northcentralus", "northeurope", "norwayeast", "southafricanorth", "southcentralus", "southeastasia",
    "southindia", "spaincentral", "swedencentral", "uaenorth", "uksouth", "ukwest", "westcentralus", "westeurope",
    "westus", "westus2", "westus3",
}  # fmt: skip
WITHOUT_ZRS = {"australiasoutheast", "northcentralus", "southindia", "ukwest", "westcentralus", "westus"}


def test_only_flex_consumption_regions_are_allowed(main_bicep: BicepFile) -> None:
    location = main_bicep.declaration("param", "location")
    allowed = location.decorator("allowed")
    assert allowed is not None
    assert set(allowed.value()) == FLEX_REGIONS


def test_a_new_zone_redundant_account_in_a_region_without_zones_stops_naming_a_region_that_works(
    main_bicep: BicepFile,
) -> None:
    neighbours = Evaluator(main_bicep)(main_bicep.declaration("var", "regionsWithoutZones").value or main_bicep.root)
    assert set(neighbours) == WITHOUT_ZRS
    assert set(neighbours.values()) <= FLEX_REGIONS - WITHOUT_ZRS, "each names a region with Flex and ZRS"
    for region, neighbour in neighbours.items():
        for sku in ("Standard_ZRS", "Standard_GZRS", "Standard_RAGZRS"):
            given = {"newKeySecret": NEW_SECRET, "location": region, "storageSku": sku}
            with pytest.raises(Fail, match=f"^no-zones-in-{region}-use-{neighbour}: value is shorter than 1$"):
                deploy_module(main_bicep, "zonesRequired", given)
        # Locally redundant storage there is a choice the operator made: it deploys.
        given = {"newKeySecret": NEW_SECRET, "location": region, "storageSku": "Standard_LRS"}
        assert deploy_module(main_bicep, "zonesRequired", given) is None
    for region in FLEX_REGIONS - WITHOUT_ZRS:
        given = {"newKeySecret": NEW_SECRET, "location": region, "storageSku": "Standard_ZRS"}
        assert deploy_module(main_bicep, "zonesRequired", given) is None
    # A redeploy keeps the account it has, wherever it is: no guard.
    assert deploy_module(main_bicep, "zonesRequired", {"location": "ukwest", "storageSku": "Standard_ZRS"}) is None


# Flex Consumption regions without a paired region, so without geo-redundant storage (GRS, GZRS, their RA-
# forms): learn.microsoft.com/azure/reliability/regions-paired (nonpaired regions) and .../storage/common/
# redundancy-regions-gzrs, which lists neither. Each has zones, so Standard_ZRS is offered there.
WITHOUT_PAIR = {"italynorth", "spaincentral"}
GEO_SKUS = ("Standard_GRS", "Standard_RAGRS", "Standard_GZRS", "Standard_RAGZRS")


def test_a_new_geo_redundant_account_in_a_region_without_a_pair_stops_naming_a_region_that_works(
    main_bicep: BicepFile,
) -> None:
    # A geo-redundant SKU in a nonpaired region passed the zones guard (the region has zones) and failed at
    # the storage account, after the identity, the plan and the workspace were made.
    neighbours = Evaluator(main_bicep)(main_bicep.declaration("var", "regionsWithoutPair").value or main_bicep.root)
    assert set(neighbours) == WITHOUT_PAIR
    assert set(neighbours.values()) <= FLEX_REGIONS - WITHOUT_ZRS - WITHOUT_PAIR, "each offers Flex, ZRS and GZRS"
    for region, neighbour in neighbours.items():
        for sku in GEO_SKUS:
            given = {"newKeySecret": NEW_SECRET, "location": region, "storageSku": sku}
            with pytest.raises(Fail, match=f"^no-paired-region-for-{region}-use-{neighbour}: value is shorter than 1$"):
                deploy_module(main_bicep, "zonesRequired", given)
        # Zone-redundant storage, the default, is offered there: it deploys.
        given = {"newKeySecret": NEW_SECRET, "location": region, "storageSku": "Standard_ZRS"}
        assert deploy_module(main_bicep, "zonesRequired", given) is None
    for region in FLEX_REGIONS - WITHOUT_ZRS - WITHOUT_PAIR:
        given = {"newKeySecret": NEW_SECRET, "location": region, "storageSku": "Standard_GZRS"}
        assert deploy_module(main_bicep, "zonesRequired", given) is None
    # A redeploy keeps the account it has, wherever it is: no guard.
    assert deploy_module(main_bicep, "zonesRequired", {"location": "italynorth", "storageSku": "Standard_GRS"}) is None


def test_the_region_guard_runs_before_anything_is_created(main_bicep: BicepFile) -> None:
    # ARM starts whatever depends on nothing at once: every resource and module must wait for the guard,
    # directly (dependsOn) or through what it reads or waits for. Exempt: the guard itself, the other guard
    # (it deploys nothing) and the existing account (read, never written).
    deployed = {s.name: s for s in main_bicep.statements if s.keyword in ("resource", "module")}
    waits = {
        name: {text(node) for node in references(statement.node)} & set(deployed)
        for name, statement in deployed.items()
    }

    def after_guard(name: str, seen: frozenset[str] = frozenset()) -> bool:
        return "zonesRequired" in waits[name] or any(
            after_guard(other, seen | {name}) for other in waits[name] - seen - {name}
        )

    exempt = {
        "zonesRequired",
        "entraClientIdRequired",
        "targetSecretsPrefixed",
        "attentionScheduleDaily",
        "liveStorage",
    }
    early = sorted(name for name in deployed if name not in exempt and not after_guard(name))
    assert early == [], f"may start before the region guard: {early}"


def test_the_audit_trail_is_kept_90_days_and_may_be_archived(
    main_bicep: BicepFile, bicep: dict[str, BicepFile]
) -> None:
    monitoring = bicep["core/monitor/monitoring.bicep"]
    tables = monitoring.declaration("resource", "auditRetention")
    assert tables.declared_type.startswith("Microsoft.OperationalInsights/workspaces/tables@")
    assert tables.texts("parent") == ["logAnalytics"]
    assert Evaluator(monitoring)(monitoring.declaration("var", "auditTables").value or monitoring.root) == [
        "AzureDiagnostics",  # Key Vault's AuditEvent, the diagnostic setting's default destination
        "StorageTableLogs",  # the table service's StorageWrite and StorageDelete
    ]
    retention = main_bicep.declaration("param", "auditRetentionDays")
    assert retention.value is not None
    assert literal(retention.value) >= 90
    total = main_bicep.declaration("param", "auditTotalRetentionDays")
    assert total.value is not None
    properties_node = tables.get("properties")
    assert properties_node is not None
    for given, expected in [
        ({}, (90, 90)),
        ({"auditRetentionDays": 180}, (180, 180)),
        ({"auditTotalRetentionDays": 2555}, (90, 2555)),  # seven years, most of it long-term retention
        ({"auditRetentionDays": 365, "auditTotalRetentionDays": 30}, (365, 365)),
    ]:
        passed = deploy_module(main_bicep, "monitoring", given)
        assert passed is not None
        kept = Evaluator(monitoring, passed)(properties_node)
        assert (kept["retentionInDays"], kept["totalRetentionInDays"]) == expected
    # The rest of the workspace (the app's telemetry) keeps its 30 days.
    assert monitoring.declaration("resource", "logAnalytics").texts("retentionInDays") == ["30"]


def test_the_audit_trail_goes_to_the_workspace(main_bicep: BicepFile, bicep: dict[str, BicepFile]) -> None:
    expected = {
        "core/security/keyvault.bicep": ("keyVault", {"AuditEvent"}),
        "core/storage/storage-account.bicep": ("tableServices", {"StorageWrite", "StorageDelete"}),
    }
    for path, (scope, categories) in expected.items():
        file = bicep[path]
        (setting,) = [
            r
            for r in file.declarations("resource")
            if r.declared_type.startswith("Microsoft.Insights/diagnosticSettings@")
        ]
        assert setting.condition is None, f"{path}: the audit trail is not optional"
        assert setting.texts("scope") == [scope]
        assert setting.texts("workspaceId") == ["logAnalyticsWorkspaceId"]
        logs = setting.get("properties", "logs")
        assert logs is not None
        assert {entry["category"] for entry in literal(logs) if entry["enabled"]} == categories
    for module in ("storage", "keyVault", "workbook"):
        given = main_bicep.declaration("module", module).get("params", "logAnalyticsWorkspaceId")
        assert given is not None
        assert text(given) == "monitoring.outputs.logAnalyticsWorkspaceId"


def test_loop_variables_are_read(bicep_files: list[BicepFile]) -> None:
    # A sanity check of the reader: the loops of rbac.bicep and storage-account.bicep are seen.
    found = {name for file in bicep_files for name in loop_variables(file.root)}
    assert {"tableName"} <= found


def anonymous_routes() -> set[str]:
    """Routes of the app's functions that the host lets anyone call, with function keys (the app as tests load it)."""
    import function_app  # reads the settings at import, so only once a test needs the app

    # In entra mode the host lets every request through to the app, which checks the token itself.
    assert function_app.auth_mode is AuthMode.KEY
    return {route.route for route in function_routes(function_app.app) if route.anonymous}


def test_entra_protection_spares_only_the_anonymous_routes(root: Path, bicep: dict[str, BicepFile]) -> None:
    settings = bicep["app/api.bicep"].declaration("var", "entraAuthSettings")
    prefix = json.loads((root / "host.json").read_text(encoding="utf-8"))["extensions"]["http"]["routePrefix"]
    # The catch-all route answers 404/405 to anyone; behind Entra ID, strangers get 401 instead.
    anonymous = {f"/{prefix}/{route}" for route in anonymous_routes() if "{" not in route}
    excluded = settings.get("globalValidation", "excludedPaths")
    assert excluded is not None
    assert set(literal(excluded)) == anonymous == {f"/{prefix}/health"}
    assert settings.texts("requireAuthentication") == ["true"]
    assert settings.texts("unauthenticatedClientAction") == ["'Return401'"]


def test_deploy_md_says_what_the_templates_do(root: Path, bicep_files: list[BicepFile]) -> None:
    # Slips issue 35 found: the docs asked for a Bicep that reads fail(), which no template calls; said a
    # first deployment without the secret stops at the role assignment (the vault module's output stops it,
    # and nothing after that module deploys); and had the app restart onto a stray secret version, which
    # the pinned reference never hands it.
    calls = {call_name(node) for file in bicep_files for node in walk(file.root) if node.type == "call_expression"}
    assert "fail" not in calls
    deploy = (root / "docs" / "deploy.md").read_text(encoding="utf-8")
    mentions = [line for line in deploy.splitlines() if "fail()" in line]
    assert len(mentions) == 1, mentions
    assert "use no `fail()`" in mentions[0]
    prose = " ".join(deploy.split())
    assert "stops at the role assignment" not in prose
    assert "the vault module reads the vault's current `oncegate-key-secret`" not in prose
    assert "so the storage module reads the account's live SKU and region" in prose
    assert "A redeploy reads nothing of `oncegate-key-secret` and grants nothing on it" in prose
    # A redeploy grants nothing on the secret, so the value is cleared only once the first deployment succeeded:
    # a first run that stopped half-way is run again with it, not as a redeploy.
    assert 'azd up && azd env set ONCEGATE_NEW_KEY_SECRET ""' in deploy
    assert '\nazd env set ONCEGATE_NEW_KEY_SECRET ""\n' not in deploy
    assert "once it restarts on the new value" not in prose
