"""The postdeploy hook (``tools/logicapps_connection.py``): the commands it runs, in their shapes.

No Azure CLI runs here. What is checked: the hook does nothing unless the environment asks for Logic
Apps; in key mode it creates the connection's own function key only when the host lacks it, and never
asks for a key's value; the deployment it runs names the stage-two template and gives exactly the
parameters that template declares; a host still starting is tried again, and a failure is reported.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.infra.bicep import BicepFile, string_value
from tools import logicapps_connection as hook

ENV = {
    "ONCEGATE_LOGIC_APPS": "true",
    "AZURE_RESOURCE_GROUP": "rg-oncegate-prod",
    "AZURE_ENV_NAME": "oncegate-prod",
    "SERVICE_API_NAME": "func-oncegate-abc",
    "LOGIC_APPS_CONNECTOR_NAME": "oncegate-abc",
}


def option(args: Sequence[str], name: str) -> str:
    return args[list(args).index(name) + 1]


def test_nothing_happens_unless_logic_apps_are_asked_for() -> None:
    assert hook.plan({**ENV, "ONCEGATE_LOGIC_APPS": "false"}) is None
    assert hook.plan({k: v for k, v in ENV.items() if k != "ONCEGATE_LOGIC_APPS"}) is None
    with pytest.raises(hook.HookError, match="LOGIC_APPS_CONNECTOR_NAME"):
        hook.plan({**ENV, "LOGIC_APPS_CONNECTOR_NAME": ""})


def test_key_mode_checks_for_the_key_by_name_and_never_reads_a_value() -> None:
    steps = hook.plan(ENV)
    assert steps is not None
    assert steps.key_exists is not None
    assert steps.create_key is not None
    check, create = steps.key_exists, steps.create_key
    assert check[:4] == ("az", "functionapp", "keys", "list")
    # The query answers true or false: the listing's values stay in az.
    assert option(check, "--query") == "contains(keys(functionKeys), 'oncegate-logicapps')"
    assert option(check, "--output") == "tsv"
    assert create[:4] == ("az", "functionapp", "keys", "set")
    assert option(create, "--key-type") == "functionKeys"
    assert option(create, "--key-name") == hook.KEY_NAME
    assert "--key-value" not in create, "the host draws the value"
    assert option(create, "--output") == "none", "az would print the new key"
    for args in (check, create):
        assert (option(args, "--resource-group"), option(args, "--name")) == ("rg-oncegate-prod", "func-oncegate-abc")


def test_the_deployment_gives_the_stage_two_template_exactly_its_parameters(root: Path) -> None:
    for auth in ("key", "entra"):
        steps = hook.plan({**ENV, "ONCEGATE_AUTH": auth})
        assert steps is not None
        deploy = steps.deploy
        assert deploy[:4] == ("az", "deployment", "group", "create")
        template = BicepFile(root / option(deploy, "--template-file"))
        params = {param.name: param for param in template.declarations("param")}
        given = dict(arg.split("=", 1) for arg in deploy[deploy.index("--parameters") + 1 :])
        assert given.keys() <= params.keys()
        assert {name for name, param in params.items() if param.value is None} <= given.keys()
        assert given["authMode"] == auth
        assert given["connectorName"] == ENV["LOGIC_APPS_CONNECTOR_NAME"]
        default = params["functionKeyName"].value
        assert default is not None
        assert given["functionKeyName"] == string_value(default) == hook.KEY_NAME
        assert option(deploy, "--resource-group") == ENV["AZURE_RESOURCE_GROUP"]
        if auth == "entra":
            assert (steps.key_exists, steps.create_key) == (None, None), "no key in entra mode"


class FakeAz:
    """``az`` as the hook sees it: answers in order, and records what was run."""

    def __init__(self, *answers: tuple[int, str]) -> None:
        self.answers = list(answers)
        self.ran: list[tuple[str, ...]] = []

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.ran.append(tuple(args))
        code, out = self.answers.pop(0) if self.answers else (0, "")
        return subprocess.CompletedProcess(list(args), code, out, "host runtime unavailable" if code else "")


def test_the_key_is_created_only_when_missing() -> None:
    steps = hook.plan(ENV)
    assert steps is not None
    present = FakeAz((0, "true\n"), (0, ""))
    hook.execute(steps, present, sleep=lambda _: None)
    assert [args[2:4] for args in present.ran] == [("keys", "list"), ("group", "create")]
    missing = FakeAz((0, "false\n"), (0, ""), (0, ""))
    hook.execute(steps, missing, sleep=lambda _: None)
    assert [args[2:4] for args in missing.ran] == [("keys", "list"), ("keys", "set"), ("group", "create")]


def test_a_host_still_starting_is_tried_again_and_a_lasting_failure_is_reported() -> None:
    steps = hook.plan(ENV)
    assert steps is not None
    waits: list[float] = []
    starting = FakeAz((1, ""), (1, ""), (0, "true"), (0, ""))
    hook.execute(steps, starting, sleep=waits.append)
    assert waits == [hook.WAIT_SECONDS, hook.WAIT_SECONDS]
    down = FakeAz(*[(1, "")] * hook.ATTEMPTS)
    with pytest.raises(hook.HookError, match="failed 6 times: host runtime unavailable"):
        hook.execute(steps, down, sleep=lambda _: None)
    assert hook.main({**ENV, "ONCEGATE_LOGIC_APPS": "no"}) == 0
