"""Stage two of Logic Apps in one step: azure.yaml's postdeploy hook (docs/deploy.md, "Logic Apps in one step").

After ``azd deploy`` has published the code, so that the Functions host runs and answers for its keys:

1. in key mode, make sure the host has the connection's own function key, ``oncegate-logicapps``
   (created with a value the host draws, only when missing: a redeploy keeps the key, and revoking
   it shuts out this connection alone);
2. deploy ``infra/app/logicapps-connection.bicep``: the connection, which reads that key itself when it
   deploys, and the sample workflow.

Nothing happens unless the azd environment asks for Logic Apps (``ONCEGATE_LOGIC_APPS=true``). The key's
value never reaches this process: ``az`` is asked only whether the key exists. Standard library only: the
hook runs on the deployer's machine, with the Azure CLI signed in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

KEY_NAME = "oncegate-logicapps"
TEMPLATE = "infra/app/logicapps-connection.bicep"
DEPLOYMENT_NAME = "oncegate-logicapps-connection"
# The host may still be starting right after publishing: its key API answers 5xx until it runs.
ATTEMPTS = 6
WAIT_SECONDS = 20.0


class HookError(Exception):
    """A value the hook needs is missing, or ``az`` kept failing."""


@dataclass(frozen=True)
class Plan:
    """What the hook runs: the key check and creation (key mode only), then the deployment."""

    key_exists: tuple[str, ...] | None
    create_key: tuple[str, ...] | None
    deploy: tuple[str, ...]


def plan(env: Mapping[str, str]) -> Plan | None:
    """The ``az`` commands for this azd environment; None when it does not ask for Logic Apps."""
    if env.get("ONCEGATE_LOGIC_APPS", "false").strip().lower() != "true":
        return None
    needed = ("AZURE_RESOURCE_GROUP", "AZURE_ENV_NAME", "SERVICE_API_NAME", "LOGIC_APPS_CONNECTOR_NAME")
    missing = [name for name in needed if not env.get(name)]
    if missing:
        raise HookError(f"the azd environment lacks {', '.join(missing)}: run azd provision first")
    group, app = env["AZURE_RESOURCE_GROUP"], env["SERVICE_API_NAME"]
    auth = env.get("ONCEGATE_AUTH") or "key"
    target = ("--resource-group", group, "--name", app)
    deploy = (
        *("az", "deployment", "group", "create", "--resource-group", group, "--name", DEPLOYMENT_NAME),
        *("--template-file", TEMPLATE, "--output", "none", "--parameters"),
        f"functionAppName={app}",
        f"connectorName={env['LOGIC_APPS_CONNECTOR_NAME']}",
        f"authMode={auth}",
        f"environmentName={env['AZURE_ENV_NAME']}",
        f"functionKeyName={KEY_NAME}",
    )
    if auth != "key":
        return Plan(key_exists=None, create_key=None, deploy=deploy)
    # JMESPath over the listing prints true or false, never a key's value.
    exists = ("az", "functionapp", "keys", "list", *target, "--query", f"contains(keys(functionKeys), '{KEY_NAME}')")
    create = ("az", "functionapp", "keys", "set", *target, "--key-type", "functionKeys", "--key-name", KEY_NAME)
    return Plan(key_exists=(*exists, "--output", "tsv"), create_key=(*create, "--output", "none"), deploy=deploy)


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def run_az(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    # shutil.which finds az.cmd on Windows, which a process cannot start by the bare name.
    executable = shutil.which(args[0]) or args[0]
    return subprocess.run([executable, *args[1:]], capture_output=True, text=True, check=False)


def retried(run: Runner, args: Sequence[str], sleep: Callable[[float], None]) -> str:
    """The command's output, tried again while the host starts; ``HookError`` after the last try."""
    for attempt in range(1, ATTEMPTS + 1):
        done = run(args)
        if done.returncode == 0:
            return done.stdout.strip()
        if attempt < ATTEMPTS:
            sleep(WAIT_SECONDS)
    raise HookError(f"{' '.join(args[:4])} failed {ATTEMPTS} times: {done.stderr.strip()}")


def execute(steps: Plan, run: Runner = run_az, sleep: Callable[[float], None] = time.sleep) -> None:
    missing = steps.key_exists is not None and retried(run, steps.key_exists, sleep).lower() != "true"
    if missing and steps.create_key is not None:
        retried(run, steps.create_key, sleep)
    retried(run, steps.deploy, sleep)


def main(env: Mapping[str, str]) -> int:
    try:
        steps = plan(env)
        if steps is None:
            return 0
        execute(steps)
    except HookError as error:
        print(f"Logic Apps connection: {error}", file=sys.stderr)
        return 1
    print("Logic Apps connection and sample workflow deployed.")
    return 0


if __name__ == "__main__":
    import os

    sys.exit(main(os.environ))
