"""Logic Apps in one step: ``infra/app/logicapps.bicep`` and the sample workflow it deploys.

``test_typecheck.py`` checks the module against Microsoft's type definitions, as it checks every
template. This file checks what the module deploys: the connector is the generated definition (the
variant ``authMode`` names) pointed at this app, the connection's function key is read at deployment
and goes nowhere else, and the workflow is ``connector/samples/workflow.json`` as it is, whole: every
decision has its case, ``runAfter`` and every expression name only actions that have run by then and
parameters the definition declares; and it runs (``wdl.py``, against the app in this process): the
same order twice gives one ``proceed`` and one ``duplicate``, and each decision takes its case.
The bulk import, ``connector/samples/bulk-workflow.json``, deployed beside it, is held to the same
checks, to the recipe's shape (passes over the rows still to do; per page Select, Check and claim many
sent again whole while an item was not answered, a case per decision, For each row to create, Select,
Record results) and runs a 1,000-row import in 21 connector calls; ``test_bulk_workflow.py`` runs it
with faults. ``tests/connector/test_samples.py``
checks both workflows' calls (operation, method, body fields) against the connector definition.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tree_sitter import Node

from oncegate.domain.statuses import Decision
from tests.conftest import FakeClock
from tests.connector.spec import DEFINITIONS, PROPERTIES, load
from tests.connector.test_samples import (
    BULK_WORKFLOW,
    PERFORM_WORKFLOW,
    WORKFLOW,
    actions,
    oncegate_calls,
    operation_ids,
)
from tests.infra.bicep import (
    BicepFile,
    Evaluator,
    Fail,
    NotLiteral,
    arguments,
    call_name,
    deploy_module,
    properties,
    string_value,
    text,
    walk,
)
from tests.infra.wdl import Call, Run, nested

MODULE = "app/logicapps.bicep"
# Stage two: deployed by azure.yaml's postdeploy hook once the code is published (tools/logicapps_connection.py).
CONNECTION_MODULE = "app/logicapps-connection.bicep"
HOST = "func-oncegate-abc.azurewebsites.net"
# What Bicep inlines from a file at compile time, at most (MaxJsonFileCharacterLimit in Azure/bicep's
# LanguageConstants). loadTextContent takes 131,072 characters, less than a connector definition.
LOAD_JSON_CONTENT_LIMIT = 1_048_576
# What each of the module's values stands for when it is evaluated here (known only at deployment).
DEPLOYMENT = {
    "functionAppHost": HOST,
    "tenantId": "11111111-1111-1111-1111-111111111111",
    "entraClientId": "22222222-2222-2222-2222-222222222222",
    "connectorClientId": "33333333-3333-3333-3333-333333333333",
    "connectorClientSecret": "s" * 40,
    "environmentName": "oncegate-prod",
    "loginEndpoint": "https://login.microsoftonline.us/",
}
RUN_AFTER_STATUSES = {"Succeeded", "Failed", "Skipped", "TimedOut"}
# Workflow Definition Language functions that name an action, and the one that names a parameter.
ACTION_REFERENCE = re.compile(r"\b(body|outputs|actions|result|items|iterationIndexes)\(\s*'([^']*)'\s*\)")
PARAMETER_REFERENCE = re.compile(r"\bparameters\(\s*'([^']*)'\s*\)")
VARIABLE_REFERENCE = re.compile(r"\bvariables\(\s*'([^']*)'\s*\)")


class Loading(Evaluator):
    """The module's expressions evaluated with ``loadJsonContent`` too, read as the compiler reads it."""

    def call(self, node: Node, depth: int) -> Any:
        if call_name(node) != "loadJsonContent":
            return super().call(node, depth)
        path, *json_path = [self.evaluate(argument, depth + 1) for argument in arguments(node)]
        return load_json_content(self.file.path.parent / path, *json_path)


def load_json_content(path: Path, json_path: str = "$") -> Any:
    """The file's JSON, or the part a simple JSONPath (``$.a.b``) names."""
    assert path.is_file(), f"loadJsonContent: no file {path}"
    value = load(path)
    for part in json_path.removeprefix("$").split(".")[1:]:
        value = value[part]
    return value


@pytest.fixture(scope="module")
def module(bicep: dict[str, BicepFile]) -> BicepFile:
    return bicep[MODULE]


@pytest.fixture(scope="module")
def connection_module(bicep: dict[str, BicepFile]) -> BicepFile:
    return bicep[CONNECTION_MODULE]


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    document: dict[str, Any] = load(WORKFLOW)["definition"]
    return document


@pytest.fixture(scope="module")
def bulk_definition() -> dict[str, Any]:
    document: dict[str, Any] = load(BULK_WORKFLOW)["definition"]
    return document


def deployed(module: BicepFile, auth_mode: str, resource: str, *path: str) -> Any:
    node = module.declaration("resource", resource).get(*path)
    assert node is not None, f"{resource} has no {'.'.join(path)}"
    return Loading(module, {**DEPLOYMENT, "authMode": auth_mode})(node)


def loaded_files(file: BicepFile) -> set[Path]:
    calls = [node for node in walk(file.root) if call_name(node) == "loadJsonContent"]
    return {(file.path.parent / Evaluator(file)(arguments(node)[0])).resolve() for node in calls}


# -- the module in main.bicep ------------------------------------------------------------------------------
def test_logic_apps_are_deployed_only_when_asked(root: Path, main_bicep: BicepFile) -> None:
    flag = main_bicep.declaration("param", "deployLogicApps")
    assert flag.declared_type == "bool"
    assert flag.value is not None
    assert text(flag.value) == "false"
    (logic_apps,) = [m for m in main_bicep.declarations("module") if m.declared_type == MODULE]
    assert logic_apps.condition is not None
    assert text(logic_apps.condition) == "deployLogicApps"
    # Off in azd too unless the environment asks: in entra mode it needs the connector's registration.
    parameters = load(root / "infra" / "main.parameters.json")["parameters"]
    assert parameters["deployLogicApps"] == {"value": "${ONCEGATE_LOGIC_APPS=false}"}


# -- the connector -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("auth_mode", sorted(DEFINITIONS))
def test_the_connector_is_the_generated_definition_pointed_at_this_app(module: BicepFile, auth_mode: str) -> None:
    generated = load(DEFINITIONS[auth_mode])
    swagger = deployed(module, auth_mode, "connector", "properties", "swagger")
    assert swagger == {**generated, "host": HOST}
    assert deployed(module, auth_mode, "connector", "properties", "backendService") == {"serviceUrl": f"https://{HOST}"}
    assert deployed(module, auth_mode, "connector", "properties", "displayName") == generated["info"]["title"]
    brand = deployed(module, auth_mode, "connector", "properties", "brandColor")
    assert brand == load(PROPERTIES[auth_mode])["properties"]["iconBrandColor"]


def test_every_file_is_loaded_from_where_it_is_generated_and_fits(
    module: BicepFile, connection_module: BicepFile
) -> None:
    assert loaded_files(module) == {path.resolve() for path in (*DEFINITIONS.values(), PROPERTIES["key"])}
    assert loaded_files(connection_module) == {WORKFLOW.resolve(), BULK_WORKFLOW.resolve(), PERFORM_WORKFLOW.resolve()}
    loaded = loaded_files(module) | loaded_files(connection_module)
    oversized = [path for path in loaded if len(path.read_text(encoding="utf-8")) > LOAD_JSON_CONTENT_LIMIT]
    assert oversized == [], "over loadJsonContent's limit"


def connection_parameter_names(swagger: dict[str, Any]) -> set[str]:
    """The connection parameters the connector platform reads a definition's security from."""
    return {name if scheme["type"] == "apiKey" else "token" for name, scheme in swagger["securityDefinitions"].items()}


@pytest.mark.parametrize("auth_mode", sorted(DEFINITIONS))
def test_the_connection_parameters_are_the_definitions_security(module: BicepFile, auth_mode: str) -> None:
    parameters = deployed(module, auth_mode, "connector", "properties", "connectionParameters")
    assert set(parameters) == connection_parameter_names(load(DEFINITIONS[auth_mode]))
    if auth_mode == "key":
        assert parameters == {"api_key": {"type": "securestring"}}
        return
    oauth = parameters["token"]["oAuthSettings"]
    assert parameters["token"]["type"] == "oauthSetting"
    assert (oauth["identityProvider"], oauth["clientId"]) == ("aad", DEPLOYMENT["connectorClientId"])
    assert oauth["clientSecret"] == DEPLOYMENT["connectorClientSecret"]
    custom = {name: entry["value"] for name, entry in oauth["customParameters"].items()}
    assert custom["resourceUri"] == f"api://{DEPLOYMENT['entraClientId']}"
    assert custom["tenantId"] == DEPLOYMENT["tenantId"]
    # The sign-in host of the cloud deployed to, as environment() names it, without its trailing '/'.
    assert custom["loginUri"] == "https://login.microsoftonline.us"
    login = module.declaration("var", "loginEndpoint").value
    assert login is not None
    assert text(login) == "environment().authentication.loginEndpoint"


def test_entra_mode_needs_the_connectors_registration_and_key_mode_does_not(module: BicepFile) -> None:
    guards = {
        "connectorClientId": "connectorClientIdRequired",
        "connectorClientSecret": "connectorClientSecretRequired",
    }
    for missing, guard in guards.items():
        needs = f"logicapps-entra-needs-logicApps{missing[0].upper()}{missing[1:]}"
        with pytest.raises(Fail, match=f"{needs}: value is shorter than 1"):
            deploy_module(module, guard, {**DEPLOYMENT, "authMode": "entra", missing: ""})
        assert deploy_module(module, guard, {**DEPLOYMENT, "authMode": "key", missing: ""}) is None
    # The connector waits for both checks: it is not written without the registration.
    depends = module.declaration("resource", "connector").get("dependsOn")
    assert depends is not None
    assert set(text(depends).split()) >= set(guards.values())
    unset = {**DEPLOYMENT, "authMode": "key", "connectorClientId": "", "connectorClientSecret": ""}
    connector = module.declaration("resource", "connector").get("properties", "connectionParameters")
    assert connector is not None
    assert Loading(module, unset)(connector) == {"api_key": {"type": "securestring"}}


# -- the connection and its key ------------------------------------------------------------------------------
def test_the_connection_and_workflow_are_deployed_after_the_code_is_published(
    root: Path, module: BicepFile, connection_module: BicepFile, main_bicep: BicepFile
) -> None:
    # Stage one (with the infrastructure) writes the connector only; a connection written there would
    # lose its key on every provision, and no key can be read before the host runs.
    kinds = {kind for kind, _, existing in module.resources().values() if not existing}
    assert kinds == {"Microsoft.Web/customApis"}
    kinds = {kind for kind, _, existing in connection_module.resources().values() if not existing}
    assert kinds == {"Microsoft.Web/connections", "Microsoft.Logic/workflows"}
    assert CONNECTION_MODULE not in main_bicep.modules().values()
    outputs = {output.name: text(output.value) for output in main_bicep.declarations("output") if output.value}
    assert outputs["SERVICE_API_NAME"] == "api.outputs.name"
    assert outputs["LOGIC_APPS_CONNECTOR_NAME"] == "deployLogicApps ? logicApps.outputs.connectorName : ''"


def test_the_connection_signs_in_with_a_function_key_of_its_own(
    connection_module: BicepFile, bicep_files: list[BicepFile]
) -> None:
    values = connection_module.declaration("resource", "connection").get("properties", "parameterValues")
    assert values is not None
    reads = [(f, node) for f in bicep_files for node in walk(f.root) if call_name(node) == "listKeys"]
    assert len(reads) == 1, "the function key is read once"
    ((file, read),) = reads
    assert file is connection_module
    assert values.start_byte <= read.start_byte < read.end_byte <= values.end_byte, "listKeys outside the connection"
    assert read.parent is not None
    # The named key, not the shared default one that opens every route to everyone holding it.
    assert text(read.parent.parent or read) == (
        "listKeys('${functionApp.id}/host/default', '2024-04-01').functionKeys[functionKeyName]"
    )
    name = connection_module.declaration("param", "functionKeyName")
    assert name.value is not None
    assert string_value(name.value) == "oncegate-logicapps" != "default"
    assert connection_module.declaration("resource", "functionApp").existing
    # Read at deployment in key mode; in entra mode that branch is not evaluated, and no key is read.
    with pytest.raises(NotLiteral):
        Evaluator(connection_module, {"authMode": "key"})(values)
    assert Evaluator(connection_module, {"authMode": "entra"})(values) == {}


def test_no_key_or_secret_is_a_parameter_value_or_an_output(
    root: Path, module: BicepFile, connection_module: BicepFile, main_bicep: BicepFile
) -> None:
    parameters = load(root / "infra" / "main.parameters.json")["parameters"]
    # Environment values with no default: empty unless the operator gives them (entra mode only).
    assert parameters["logicAppsConnectorClientSecret"] == {"value": "${ONCEGATE_CONNECTOR_CLIENT_SECRET}"}
    assert parameters["logicAppsConnectorClientId"] == {"value": "${ONCEGATE_CONNECTOR_CLIENT_ID}"}
    assert main_bicep.declaration("param", "logicAppsConnectorClientSecret").has_decorator("secure")
    assert module.declaration("param", "connectorClientSecret").has_decorator("secure")
    # No parameter carries the function key: stage two reads it itself, by its name.
    for file in (module, connection_module):
        assert not [
            p.name for p in file.declarations("param") if "key" in p.name.lower() and p.name != "functionKeyName"
        ]
    outputs = {output.name: text(output.value) for output in module.declarations("output") if output.value}
    assert outputs == {"connectorName": "connector.name"}
    outputs = {output.name: text(output.value) for output in connection_module.declarations("output") if output.value}
    assert outputs == {"workflowName": "workflow.name", "connectionName": "connection.name"}


# -- the workflow as the module deploys it --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("resource", "sample"),
    [("workflow", WORKFLOW), ("bulkWorkflow", BULK_WORKFLOW), ("performWorkflow", PERFORM_WORKFLOW)],
)
def test_the_workflow_is_the_sample_with_the_parameters_it_declares(
    connection_module: BicepFile, resource: str, sample: Path
) -> None:
    module = connection_module
    definition = load(sample)["definition"]
    assert deployed(module, "key", resource, "properties", "definition") == definition
    given = module.declaration("resource", resource).get("properties", "parameters")
    assert given is not None
    assert module.object_keys(given) == set(definition["parameters"])
    (connections,) = module.object_values(module.object_values(given, "$connections")[0], "value")
    assert module.object_keys(connections) == connections_used(definition)
    (oncegate,) = module.object_values(connections, "oncegate")
    wiring = {key: text(value) for key, _, value in properties(module.resolve(oncegate))}
    assert wiring == {"connectionId": "connection.id", "connectionName": "connection.name", "id": "connector.id"}
    (environment,) = module.object_values(module.object_values(given, "environmentName")[0], "value")
    assert text(environment) == "environmentName"


def connections_used(definition: dict[str, Any]) -> set[str]:
    """The connections the workflow's connector actions name in ``$connections``."""
    pattern = re.compile(r"^@parameters\('\$connections'\)\['([^']+)'\]\['connectionId'\]$")
    hosts = [
        action["inputs"]["host"] for _, action in actions(definition) if action["type"].startswith("ApiConnection")
    ]
    names = [host["connection"]["name"] for host in hosts]
    return {match[1] if (match := pattern.match(name)) else name for name in names}


# -- the workflow, whole --------------------------------------------------------------------------------------
def containers(node: dict[str, Any], parent: str | None = None) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """Each set of sibling actions, with the action it belongs to (None at the top)."""
    if "actions" in node:
        yield parent, node["actions"]
    for name, action in node.get("actions", {}).items():
        yield from containers(action, name)
        yield from containers(action.get("else", {}), name)
        yield from containers(action.get("default", {}), name)
        for case in action.get("cases", {}).values():
            yield from containers(case, name)


def run_after_problems(definition: dict[str, Any]) -> list[str]:
    problems = []
    for _, siblings in containers(definition):
        for name, action in siblings.items():
            for before, statuses in action.get("runAfter", {}).items():
                if before not in siblings:
                    problems.append(f"{name} runs after {before}, which is not beside it")
                if not statuses or not set(statuses) <= RUN_AFTER_STATUSES:
                    problems.append(f"{name} runs after {before} when {statuses}")
        if siblings and not any(not action.get("runAfter") for action in siblings.values()):
            problems.append(f"no action of {sorted(siblings)} starts")
    problems += [f"{name} runs after itself" for name, before in ran_before(definition).items() if name in before]
    return problems


def ran_before(definition: dict[str, Any]) -> dict[str, set[str]]:
    """For each action, the actions started or finished before it starts: those it runs after, and
    those its enclosing actions (a Switch, an If) run after, transitively. An action after an Until may
    read the actions inside it (their last iteration), as the Until's own expression does."""
    untils = {name: set(nested(action)) for name, action in actions(definition) if action["type"] == "Until"}
    steps: dict[str, set[str]] = {}
    for parent, siblings in containers(definition):
        for name, action in siblings.items():
            runs_after = set(action.get("runAfter", {}))
            inside = {inner for before in runs_after for inner in untils.get(before, set())}
            steps[name] = runs_after | inside | ({parent} if parent else set())
    found = {}
    for name in steps:
        seen: set[str] = set()
        stack = [name]
        while stack:
            for before in steps.get(stack.pop(), set()) - seen:
                seen.add(before)
                stack.append(before)
        found[name] = seen
    return found


def own_strings(action: dict[str, Any]) -> Iterator[str]:
    """The strings of an action's own fields: not those of the actions nested in it."""
    nested = {"actions", "cases", "default", "else"}

    def strings(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from strings(item)
        elif isinstance(value, list):
            for item in value:
                yield from strings(item)

    for key, value in action.items():
        if key not in nested:
            yield from strings(value)


def initialized(definition: dict[str, Any]) -> set[str]:
    """The variables the workflow initializes: only at its top level, where Logic Apps takes them."""
    return {
        variable["name"]
        for action in definition["actions"].values()
        if action["type"] == "InitializeVariable"
        for variable in action["inputs"]["variables"]
    }


def expression_problems(definition: dict[str, Any]) -> list[str]:
    """Expressions that name an action that has not run before them, a parameter not declared, or a variable
    not initialized."""
    problems = []
    before = ran_before(definition)
    declared = set(definition.get("parameters", {}))
    variables = initialized(definition)
    for name, action in actions(definition):
        read = before[name] | (set(nested(action)) if action["type"] == "Until" else set())
        for string in own_strings(action):
            if "@" not in string:
                continue
            for function, target in ACTION_REFERENCE.findall(string):
                if target not in read:
                    problems.append(f"{name}: {function}('{target}') has not run before it")
            problems += [f"{name}: no parameter {p}" for p in PARAMETER_REFERENCE.findall(string) if p not in declared]
            problems += [f"{name}: no variable {v}" for v in VARIABLE_REFERENCE.findall(string) if v not in variables]
    return problems


def switch_problems(definition: dict[str, Any]) -> list[str]:
    switch = definition["actions"].get("Switch_on_decision", {})
    if switch.get("expression") != "@body('Check_and_claim')?['decision']":
        return ["no Switch on Check and claim's decision"]
    cases = [case["case"] for case in switch["cases"].values()]
    problems = [f"two cases for {case}" for case in set(cases) if cases.count(case) > 1]
    problems += [f"no case for {d.value}" for d in Decision if d.value not in cases]
    problems += [f"{case} is not a decision" for case in set(cases) - {d.value for d in Decision}]
    if not switch.get("default", {}).get("actions"):
        problems.append("no default: a decision added later would pass unseen")
    return problems


def test_the_switch_has_a_case_for_every_decision(definition: dict[str, Any]) -> None:
    assert switch_problems(definition) == []


def test_run_after_names_actions_beside_it_and_nothing_loops(definition: dict[str, Any]) -> None:
    assert run_after_problems(definition) == []


def test_expressions_name_only_actions_that_ran_and_parameters_declared(definition: dict[str, Any]) -> None:
    assert expression_problems(definition) == []
    assert {name for _, name in ACTION_REFERENCE.findall(json.dumps(definition))} >= {"Check_and_claim"}


def cases(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    switch = definition["actions"]["Switch_on_decision"]
    return {case["case"]: case for case in switch["cases"].values()}


def test_proceed_and_reconcile_do_the_stand_in_then_record_a_target_record(definition: dict[str, Any]) -> None:
    for decision in ("proceed", "reconcile"):
        case = cases(definition)[decision]
        recorded = [
            action["inputs"]["body"]
            for _, action in oncegate_calls({"definition": case})
            if action["inputs"]["path"].endswith("/result") and action["inputs"]["body"]["outcome"] == "succeeded"
        ]
        assert recorded, f"{decision}: no Record result"
        stand_ins = {
            name for name, action in actions(case) if action["type"] == "Compose" and "standsFor" in action["inputs"]
        }
        for body in recorded:
            (source,) = ACTION_REFERENCE.findall(body["targetRecordId"])
            assert source[1] in stand_ins, f"{decision}: the target record id comes from {source}"


def test_the_run_answers_with_the_decision_and_the_conflict_id(definition: dict[str, Any]) -> None:
    trigger = definition["triggers"]["When_an_order_arrives"]
    assert (trigger["type"], trigger["inputs"]["method"]) == ("Request", "POST")
    answer = definition["actions"]["Answer_the_caller"]
    assert answer["type"] == "Response"
    assert answer["runAfter"] == {"Switch_on_decision": ["Succeeded"]}
    assert answer["inputs"]["body"]["decision"] == "@body('Check_and_claim')?['decision']"
    assert answer["inputs"]["body"]["conflictId"] == "@body('Check_and_claim')?['conflictId']"
    conflict = dict(actions(cases(definition)["conflict"]))
    assert all(action["type"] == "Compose" for action in conflict.values()), "a conflict creates nothing"


def test_the_sample_needs_no_other_connection(definition: dict[str, Any]) -> None:
    assert connections_used(definition) == {"oncegate"}
    kinds = {action["type"] for _, action in actions(definition)}
    assert kinds <= {"ApiConnection", "Compose", "Switch", "If", "Terminate", "Response"}, kinds


# -- the workflow, run ------------------------------------------------------------------------------------------
ORDER = {"orderNumber": "TEST-0001", "customer": "Test customer", "amount": 120.5, "lines": [{"sku": "A-1"}]}
CONNECTION = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Web/connections/oncegate-abc"
# The workflow's parameters as the module gives them.
PARAMETERS = {
    "environmentName": DEPLOYMENT["environmentName"],
    "$connections": {"oncegate": {"connectionId": CONNECTION, "connectionName": "oncegate-abc", "id": "..."}},
}


@pytest.fixture
def store_kind() -> str:
    return "sqlite"


def run(definition: dict[str, Any], call: Call, name: str, order: dict[str, Any] = ORDER) -> Run:
    return Run(definition, order, call, PARAMETERS, name=name).start()


def answer(run: Run) -> dict[str, Any]:
    assert run.response is not None, f"no answer; statuses {run.statuses}"
    assert run.response["statusCode"] == 200
    body: dict[str, Any] = run.response["body"]
    return body


def test_the_same_order_twice_proceeds_once_then_is_a_duplicate(definition: dict[str, Any], call_app: Call) -> None:
    first = run(definition, call_app, "run-1")
    assert answer(first)["decision"] == "proceed"
    assert first.statuses["Record_result"] == "Succeeded"
    assert first.statuses["Record_unknown_outcome"] == "Skipped"
    second = run(definition, call_app, "run-2")
    assert answer(second)["decision"] == "duplicate"
    assert answer(second)["result"]["targetRecordId"] == "order-run-1"
    assert answer(second)["claimId"] == answer(first)["claimId"]
    assert "Create_the_order" not in second.statuses, "the side effect ran twice"
    assert second.outputs["Reuse_the_order_id"] == "order-run-1"


def another_run(call: Call, definition: dict[str, Any], outcome: dict[str, Any] | None) -> None:
    """What an earlier run of the same order left: a claim, and the result it recorded (None: still running,
    with a lease longer than the sample's wait)."""
    flow = {"name": "logic-oncegate-sample", "environment": PARAMETERS["environmentName"]}
    body = definition["actions"]["Check_and_claim"]["inputs"]["body"]
    claim = {"scope": body["scope"], "key": ORDER["orderNumber"], "payload": ORDER, "runId": "run-0", "flow": flow}
    claim["leaseSeconds"] = 2 * body["maxWaitSeconds"]
    status, granted = call("post", "/api/claims", claim)
    assert (status, granted["decision"]) == (200, "proceed")
    if outcome is not None:
        result = {"claimToken": granted["claimToken"], **outcome}
        status, _ = call("post", f"/api/claims/{granted['claimId']}/result", result)
        assert status == 200


EARLIER = {
    "in_progress": ({}, None),
    "reconcile": ({}, {"outcome": "unknown", "error": "the ERP timed out"}),
    "blocked": ({}, {"outcome": "failed", "error": "the ERP refused the order", "retryable": False}),
    "conflict": ({"amount": 999.0}, {"outcome": "succeeded", "targetRecordId": "order-run-0"}),
}
# The action each decision's case runs last, and what it then says.
LAST = {
    "in_progress": "Another_run_is_creating_it",
    "reconcile": "Record_the_new_order",
    "blocked": "A_person_must_act",
    "conflict": "Hand_the_conflict_to_its_owner",
}


@pytest.mark.parametrize("decision", sorted(EARLIER))
def test_each_decision_takes_its_case(definition: dict[str, Any], call_app: Call, decision: str) -> None:
    change, outcome = EARLIER[decision]
    another_run(call_app, definition, outcome)
    done = run(definition, call_app, "run-1", {**ORDER, **change})
    assert answer(done)["decision"] == decision
    assert done.statuses[LAST[decision]] == "Succeeded"
    if decision == "conflict":
        assert answer(done)["conflictId"]
        assert done.outputs[LAST[decision]]["conflictId"] == answer(done)["conflictId"]
    if decision == "reconcile":
        assert answer(run(definition, call_app, "run-2"))["result"]["targetRecordId"] == "order-run-1"


def test_the_run_waits_for_a_holder_whose_lease_runs_out_and_reconciles_with_its_idempotency_key(
    definition: dict[str, Any], call_app: Call, clock: FakeClock
) -> None:
    flow = {"name": "logic-oncegate-sample", "environment": PARAMETERS["environmentName"]}
    scope = definition["actions"]["Check_and_claim"]["inputs"]["body"]["scope"]
    holder = {"scope": scope, "key": ORDER["orderNumber"], "payload": ORDER, "runId": "run-0", "flow": flow}
    status, held = call_app("post", "/api/claims", {**holder, "leaseSeconds": 300})
    started = clock.now

    done = run(definition, call_app, "run-1")

    assert (status, answer(done)["decision"]) == (200, "reconcile")
    assert (clock.now - started).total_seconds() >= 300, "the engine waited for the lease"
    created = done.outputs["Create_the_order_after_all"]
    assert created["headers"]["Idempotency-Key"] == held["idempotencyKey"]


# -- the checks have teeth -------------------------------------------------------------------------------------
def remove_case(definition: dict[str, Any]) -> None:
    del definition["actions"]["Switch_on_decision"]["cases"]["In_progress"]


def misspell_run_after(definition: dict[str, Any]) -> None:
    proceed = definition["actions"]["Switch_on_decision"]["cases"]["Proceed"]["actions"]
    proceed["Record_result"]["runAfter"] = {"Read_the_order_bak": ["Succeeded"]}


def read_a_sibling_branch(definition: dict[str, Any]) -> None:
    duplicate = definition["actions"]["Switch_on_decision"]["cases"]["Duplicate"]["actions"]
    duplicate["Reuse_the_order_id"]["inputs"] = "@outputs('Read_the_order_back')?['id']"


def misspell_a_parameter(definition: dict[str, Any]) -> None:
    check = definition["actions"]["Check_and_claim"]["inputs"]["body"]["flow"]
    check["environment"] = "@{parameters('environment')}"


def loop(definition: dict[str, Any]) -> None:
    definition["actions"]["Check_and_claim"]["runAfter"] = {"Answer_the_caller": ["Succeeded"]}


PLANTED = {
    "a decision without its case": (remove_case, switch_problems, "no case for in_progress"),
    "runAfter a misspelt action": (misspell_run_after, run_after_problems, "Read_the_order_bak, which is not beside"),
    "an action of another case": (read_a_sibling_branch, expression_problems, "outputs('Read_the_order_back') has"),
    "a parameter not declared": (misspell_a_parameter, expression_problems, "no parameter environment"),
    "a loop": (loop, run_after_problems, "no action of"),
}


@pytest.mark.parametrize("name", list(PLANTED))
def test_a_planted_error_in_the_workflow_is_caught(name: str, definition: dict[str, Any]) -> None:
    plant, check, expected = PLANTED[name]
    broken = copy.deepcopy(definition)
    assert check(broken) == []
    plant(broken)
    found = check(broken)
    assert any(expected in problem for problem in found), f"{name} not caught; found {found}"


def test_the_docs_trigger_the_sample_twice_with_the_same_order(root: Path, definition: dict[str, Any]) -> None:
    deploy = (root / "docs" / "deploy.md").read_text(encoding="utf-8")
    section = deploy.partition("## Logic Apps in one step")[2].partition("\n## ")[0]
    (trigger,) = definition["triggers"]
    assert f"/triggers/{trigger}/listCallbackUrl" in section
    posts = re.findall(r"^curl .*\"\$TRIGGER_URL\".*$", section, re.MULTILINE)
    assert len(posts) >= 2, "two calls to the trigger's URL"
    assert "proceed" in section
    assert "duplicate" in section


# -- the bulk import (issue 24; issue 31) -------------------------------------------------------------------------
PASSES = "Until_every_row_is_done_or_held"
PAGE = "For_each_page_of_100_rows"
CASES = {"proceed", "reconcile", "duplicate", "in_progress"}


def test_the_bulk_import_claims_each_page_acts_on_each_decision_and_records_the_results(
    bulk_definition: dict[str, Any],
) -> None:
    """The recipe's bulk import: passes over the rows still to do, each page a Select, Check and claim many (sent again
    whole while an item was not answered), a case for each decision, the orders made with the claims' idempotency keys,
    and Record results; the run answers with the rows proceeded, skipped as done, held and failed."""
    passes = bulk_definition["actions"][PASSES]
    assert (passes["type"], passes["expression"]) == ("Until", "@empty(variables('pending'))")
    page = passes["actions"][PAGE]
    assert page["foreach"] == "@chunk(variables('rows'), 100)"
    # One page after another: the connection's calls stay in order, and the page's variables are its own.
    assert page["runtimeConfiguration"]["concurrency"]["repetitions"] == 1
    steps = page["actions"]
    select = steps["Select_the_items"]["inputs"]
    assert select["from"] == f"@items('{PAGE}')"
    # The row's own id is its reference, never its payload: copied rows are the same order, not a conflict.
    assert select["select"]["payload"] == "@removeProperty(item(), 'rowId')"
    assert select["select"]["reference"] == "@item()?['rowId']"
    again = steps["Until_the_store_answered_every_item"]
    assert again["actions"]["Check_and_claim_many"]["inputs"]["body"] == {"items": "@body('Select_the_items')"}
    assert again["expression"] == "@empty(body('Filter_the_items_not_answered'))"
    switch = steps["For_each_answer"]["actions"]["Switch_on_decision"]
    assert {case["case"] for case in switch["cases"].values()} == CASES
    assert switch["default"]["actions"], "conflict, blocked and an item's error are counted as failed"
    create = steps["For_each_row_to_create"]["actions"]["Create_the_order"]["inputs"]
    assert create["headers"] == {"Idempotency-Key": "@{items('For_each_row_to_create')?['answer']?['idempotencyKey']}"}
    recorded = steps["Any_result_to_record"]["actions"]["Until_the_store_answered_every_result"]["actions"]
    assert recorded["Record_results"]["inputs"]["body"] == {"items": "@body('Select_the_results')"}
    assert set(steps["Select_the_results"]["inputs"]["select"]) <= {
        "claimId",
        "claimToken",
        "outcome",
        "targetRecordId",
        "error",
    }
    body = bulk_definition["actions"]["Answer_the_caller"]["inputs"]["body"]
    assert {"proceeded", "skippedAsDone", "held", "failed"} <= set(body)
    called = operation_ids({"definition": bulk_definition}, load(DEFINITIONS["key"]))
    assert called == {"Check_and_claim_many": "CheckAndClaimMany", "Record_results": "RecordResults"}
    assert connections_used(bulk_definition) == {"oncegate"}


def test_the_bulk_import_runs_after_and_names_only_what_ran(bulk_definition: dict[str, Any]) -> None:
    assert run_after_problems(bulk_definition) == []
    assert expression_problems(bulk_definition) == []


def import_rows(count: int, repeated: int) -> list[dict[str, Any]]:
    """An import of ``count`` rows, ``repeated`` of them the same order as another row (with a row id of its own),
    spread over the pages."""
    orders = [{"orderNumber": f"TEST-{n:04d}", "customer": "Test customer", "amount": 10.0 + n} for n in range(count)]
    rows = [{**order, "rowId": f"row-{n}"} for n, order in enumerate(orders[: count - repeated])]
    rows += [{**orders[n * 7 % len(rows)], "rowId": f"row-{len(rows) + n}"} for n in range(repeated)]
    random.Random(24).shuffle(rows)
    return rows


@pytest.mark.slow
def test_a_1000_row_import_with_100_repeated_rows_costs_21_connector_calls_and_each_order_is_created_once(
    bulk_definition: dict[str, Any], call_app: Call
) -> None:
    rows = import_rows(1000, 100)

    first = Run(bulk_definition, {"rows": rows}, call_app, PARAMETERS, name="run-1").start()
    again = Run(bulk_definition, {"rows": rows}, call_app, PARAMETERS, name="run-2").start()

    done = answer(first)
    assert (len(done["proceeded"]), len(done["skippedAsDone"]), done["held"], done["failed"]) == (900, 100, [], [])
    # A repeated row in its order's page is held (in_progress) until the second pass, which finds it done: one more
    # Check and claim many for those rows, and nothing more to record.
    assert Counter(path for _, path in first.sent) == {"/api/claims/batch": 11, "/api/claims/results": 10}
    # The same import again: every row a duplicate, nothing to record, one call per page.
    assert answer(again)["proceeded"] == []
    assert sorted(answer(again)["skippedAsDone"]) == sorted(row["rowId"] for row in rows)
    assert Counter(path for _, path in again.sent) == {"/api/claims/batch": 10}
    status, claim = call_app("post", "/api/claims/lookup", {"scope": "sample.create-order", "key": "TEST-0007"})
    # The order's first row in the import created it; the row repeating it later was a duplicate.
    created_by = next(row["rowId"] for row in rows if row["orderNumber"] == "TEST-0007")
    assert (status, claim["status"], claim["targetRecordId"]) == (200, "succeeded", f"order-{created_by}")
