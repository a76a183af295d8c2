"""The samples and the README: the workflow uses only what the definition offers, the README what makers expect."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncegate.domain.statuses import Decision
from tests.connector.spec import CONNECTOR, load, operations, resolve

WORKFLOW = CONNECTOR / "samples" / "workflow.json"
# The bulk import (issues 24 and 31): passes over the rows -> Select -> Check and claim many -> a case per decision ->
# For each row to create -> Select -> Record results.
BULK_WORKFLOW = CONNECTOR / "samples" / "bulk-workflow.json"
# Perform once (issue 34): OnceGate makes the order itself, once -> a case per decision.
PERFORM_WORKFLOW = CONNECTOR / "samples" / "perform-workflow.json"
RECIPE = CONNECTOR / "samples" / "power-automate-recipe.md"
README = CONNECTOR / "README.md"
ONCEGATE_CONNECTION = "@parameters('$connections')['oncegate']['connectionId']"


def actions(container: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every action of a workflow definition, in scopes, conditions and switch cases too."""
    for name, action in container.get("actions", {}).items():
        yield name, action
        yield from actions(action)
        yield from actions(action.get("else", {}))
        yield from actions(action.get("default", {}))
        for case in action.get("cases", {}).values():
            yield from actions(case)


def oncegate_calls(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, action)
        for name, action in actions(workflow["definition"])
        if action["type"] == "ApiConnection" and action["inputs"]["host"]["connection"]["name"] == ONCEGATE_CONNECTION
    ]


def template_of(path: str) -> str:
    """``/api/claims/@{expression}/result`` as the definition writes it: ``/api/claims/{}/result``."""
    return re.sub(r"@\{[^}]*\}", "{}", path)


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    document: dict[str, Any] = load(WORKFLOW)
    return document


def operation_ids(workflow: dict[str, Any], definition: dict[str, Any]) -> dict[str, str]:
    """The connector operation each OnceGate action of the workflow calls, by the action's name."""
    offered = {(op.method, re.sub(r"\{[^}]+\}", "{}", op.path)): op for op in operations(definition)}
    return {
        name: offered[action["inputs"]["method"], template_of(action["inputs"]["path"])].spec["operationId"]
        for name, action in oncegate_calls(workflow)
    }


@pytest.mark.parametrize(
    ("sample", "called"),
    [
        (WORKFLOW, {"Check_and_claim": "CheckAndClaim", "Record_result": "RecordResult"}),
        (BULK_WORKFLOW, {"Check_and_claim_many": "CheckAndClaimMany", "Record_results": "RecordResults"}),
        (PERFORM_WORKFLOW, {"Create_the_order_once": "PerformOnce"}),
    ],
    ids=["single", "bulk", "perform"],
)
def test_workflow_calls_only_operations_of_the_definition(
    sample: Path, called: dict[str, str], definition: dict[str, Any]
) -> None:
    workflow = load(sample)
    offered = {(op.method, re.sub(r"\{[^}]+\}", "{}", op.path)): op for op in operations(definition)}
    calls = oncegate_calls(workflow)
    assert operation_ids(workflow, definition).items() >= called.items()
    for name, action in calls:
        key = (action["inputs"]["method"], template_of(action["inputs"]["path"]))
        assert key in offered, f"{name} calls {key}, which the definition does not offer"
        body_parameters = [param for param in offered[key].spec["parameters"] if param["in"] == "body"]
        if body_parameters:
            schema = resolve(definition, body_parameters[0]["schema"])
            assert set(action["inputs"]["body"]) <= set(schema["properties"]), name
            assert set(schema.get("required", [])) <= set(action["inputs"]["body"]), name


def test_workflow_switches_on_every_decision_of_the_pattern(workflow: dict[str, Any]) -> None:
    switch = workflow["definition"]["actions"]["Switch_on_decision"]
    assert switch["expression"] == "@body('Check_and_claim')?['decision']"
    cases = {case["case"] for case in switch["cases"].values()}
    assert cases <= {decision.value for decision in Decision}
    assert {"proceed", "duplicate", "reconcile", "conflict"} <= cases
    assert switch["default"]["actions"], "blocked (and anything new) stops the run"


def test_workflow_records_the_record_read_back(workflow: dict[str, Any]) -> None:
    proceed = dict(actions(workflow["definition"]["actions"]["Switch_on_decision"]["cases"]["Proceed"]))
    assert proceed["Record_result"]["runAfter"] == {"Read_the_order_back": ["Succeeded"]}
    assert "Read_the_order_back" in proceed["Record_result"]["inputs"]["body"]["targetRecordId"]
    assert proceed["Record_unknown_outcome"]["inputs"]["body"]["outcome"] == "unknown"


def test_workflow_waits_within_its_timeout_and_hands_the_erp_the_idempotency_key(workflow: dict[str, Any]) -> None:
    check = workflow["definition"]["actions"]["Check_and_claim"]
    timeout = re.fullmatch(r"PT(\d+)M", check["limit"]["timeout"])
    assert timeout is not None
    assert check["inputs"]["body"]["wait"] is True
    assert check["inputs"]["body"]["maxWaitSeconds"] < int(timeout.group(1)) * 60
    creating = {name: action for name, action in actions(workflow["definition"]) if name.startswith("Create_the_order")}
    assert len(creating) == 2
    for name, action in creating.items():
        assert action["inputs"]["headers"]["Idempotency-Key"] == "@{body('Check_and_claim')?['idempotencyKey']}", name


def test_recipe_walks_through_the_pattern(definition: dict[str, Any]) -> None:
    recipe = RECIPE.read_text(encoding="utf-8")
    summaries = {op.spec["operationId"]: op.spec["summary"] for op in operations(definition)}
    for operation_id in ("CheckAndClaim", "RecordResult", "ResolveConflict"):
        assert summaries[operation_id] in recipe, operation_id
    for decision in Decision:
        assert f"`{decision.value}`" in recipe, decision.value


def test_readme_has_the_sections_makers_expect() -> None:
    readme = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", readme, re.MULTILINE)
    for section in (
        "Publisher: ",
        "Prerequisites",
        "Supported Operations",
        "Obtaining Credentials",
        "Known Issues and Limitations",
        "Deployment Instructions",
    ):
        assert any(heading.startswith(section) for heading in headings), section


def test_readme_documents_every_operation_and_decision(definition: dict[str, Any]) -> None:
    readme = README.read_text(encoding="utf-8")
    for op in operations(definition):
        if op.spec["x-ms-visibility"] != "internal":
            assert op.spec["summary"].lower() in readme.lower(), op.id
    for decision in Decision:
        assert re.search(rf"^\| `{decision.value}` \|", readme, re.MULTILINE), decision.value


def test_readme_says_which_files_to_import() -> None:
    readme = README.read_text(encoding="utf-8")
    for path in ("apiProperties.json", "entra/apiProperties.json", "entra/apiDefinition.swagger.json"):
        assert f"`{path}`" in readme
    for tool in ("paconn create", "pac connector create", "Import an OpenAPI file"):
        assert tool in readme


def test_every_guide_tells_a_perform_once_reconcile_without_a_claim_token_when_to_run_again(
    definition: dict[str, Any],
) -> None:
    """Perform once's reconcile comes with a Claim Token (this run holds the claim) or without one (the call just
    ended in doubt, or ended so for the holder a waiting run waited for): Record result needs the token, so each
    guide's reconcile step says what to do without it, by the field that answer carries. The connector README's
    said only to record a result, which without a token is a 400 naming claimToken."""
    answer = resolve(definition, definition["definitions"]["PerformResponse"])["properties"]
    token, when = answer["claimToken"]["x-ms-summary"], answer["retryAfterSeconds"]["x-ms-summary"]
    readme = README.read_text(encoding="utf-8")
    recipe = RECIPE.read_text(encoding="utf-8").split("## Create the order with Perform once")[1]
    steps = {
        "connector/README.md": re.search(r"^\| `reconcile` \(Perform once\) \|.*$", readme, re.MULTILINE),
        "the recipe": re.search(r"^- `reconcile`:.*?(?=^- |^\S)", recipe, re.MULTILINE | re.DOTALL),
    }
    for guide, step in steps.items():
        assert step is not None, guide
        assert f"**{token}**" in step.group(0), guide
        assert f"**{when}**" in " ".join(step.group(0).split()), guide
