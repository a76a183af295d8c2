"""Refuse a leftover ``ONCEGATE_NEW_KEY_SECRET`` on a deployed environment: azure.yaml's preprovision hook.

The template takes a deployment given ``newKeySecret`` for an environment's first one (infra/main.bicep):
it writes the value into the vault as a new version of ``oncegate-key-secret`` and sends ``storageSku``
and ``location`` to the storage account instead of keeping the account's live SKU and region. On an
environment already deployed that would write a different secret as the vault's latest version (the
app keeps the version its setting pins, but every copy or put-back read from the vault would be the
wrong one) and undo a conversion of the storage account (to GZRS, or back to ZRS after a failover).
A value left in ``.azure/<env>/.env`` after a first ``azd up`` that failed, or set again by mistake,
would do that on every later ``azd up``.

So before ``azd provision`` deploys anything, while ``ONCEGATE_NEW_KEY_SECRET`` is set, this hook asks
``az`` for the environment's function app (tagged ``azd-env-name`` and ``azd-service-name: api``) and
its ``ONCEGATE_STORE_ID``. That setting is written by the postprovision hook (tools/store_mark.py) only
after a first provisioning has succeeded, before any claim: an app that has it belongs to a deployed
environment, and the hook refuses, naming the setting to clear. So does an app whose OnceGate settings
lack ``ONCEGATE_STORE_ID`` altogether: a release before the pin wrote them (every provisioning since writes
the setting, empty until the store is marked), and its flows may have made claims in the store it names.
Without a pin otherwise (no resource group, no app, or an app whose first provisioning stopped
half-way) the deployment goes on as a first deployment, so
a re-run after a failed first ``azd up`` finishes it (the store holds no claim: no claim is made on an
unmarked store). Putting back a lost secret on purpose (docs/deploy.md, *When the key secret is lost*)
also sets ``ONCEGATE_PUT_BACK_KEY_SECRET=true``; the hook then asks that ``ONCEGATE_STORAGE_SKU`` be
the storage account's live SKU, so that the put-back converts nothing.

Standard library only: it runs on the deployer's machine with the Azure CLI signed in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tools import store_mark
from tools.logicapps_connection import run_az

NEW_SECRET = "ONCEGATE_NEW_KEY_SECRET"
PUT_BACK = "ONCEGATE_PUT_BACK_KEY_SECRET"
STORAGE_SKU = "ONCEGATE_STORAGE_SKU"
# infra/main.parameters.json's default for storageSku.
DEFAULT_SKU = "Standard_ZRS"
PIN = "ONCEGATE_STORE_ID"
# What az answers for a resource group that does not exist yet: nothing of the environment is deployed.
NO_GROUP = "ResourceGroupNotFound"

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


class Refused(Exception):
    """The deployment would undo what the environment already holds, or the hook cannot tell."""


@dataclass(frozen=True)
class Environment:
    """The azd environment's resource group and name; its resources carry the name as their azd-env-name tag."""

    group: str
    name: str

    def list_apps(self) -> tuple[str, ...]:
        return ("az", "functionapp", "list", "--resource-group", self.group, "-o", "json")

    def list_accounts(self) -> tuple[str, ...]:
        return ("az", "storage", "account", "list", "--resource-group", self.group, "-o", "json")

    def list_settings(self, app: str) -> tuple[str, ...]:
        """The names of the app's OnceGate settings (never their values)."""
        query = "[?starts_with(name, 'ONCEGATE_')].name"
        return ("az", "functionapp", "config", "appsettings", "list", "--resource-group", self.group, "--name", app,
                "--query", query, "-o", "json")  # fmt: skip

    def ours(self, listed: str, service: str | None = None) -> list[dict[str, Any]]:
        """The resources of this environment (and of one azd service) in az's JSON list."""
        wanted = {"azd-env-name": self.name, **({"azd-service-name": service} if service else {})}
        resources: list[dict[str, Any]] = json.loads(listed or "[]")
        return [one for one in resources if wanted.items() <= (one.get("tags") or {}).items()]


def answer(done: subprocess.CompletedProcess[str], what: str) -> str:
    """The command's output; ``Refused`` when az failed, since the hook then cannot tell."""
    if done.returncode != 0:
        raise Refused(f"{what} failed, so whether the environment is deployed is unknown: {done.stderr.strip()}")
    return done.stdout.strip()


def check(env: Mapping[str, str], az: Runner = run_az) -> str:
    """What the deployment will be; ``Refused`` when a first deployment's value reaches a deployed environment."""
    if not env.get(NEW_SECRET):
        return "a redeploy: the vault's key secret and the storage account's live SKU stay as they are"
    group, name = env.get("AZURE_RESOURCE_GROUP", ""), env.get("AZURE_ENV_NAME", "")
    if not group or not name:
        raise Refused(f"{NEW_SECRET} is set: set AZURE_RESOURCE_GROUP, so that a deployed environment can be told")
    environment = Environment(group=group, name=name)
    listed = az(environment.list_apps())
    if listed.returncode != 0 and NO_GROUP in listed.stderr:
        return "a first deployment: the resource group holds nothing yet"
    apps = environment.ours(answer(listed, "listing the function apps"), service="api")
    pin = None
    if apps:
        app = str(apps[0]["name"])
        read = answer(az(store_mark.Plan(group=group, app=app, store={}).read_pin()), f"reading {PIN}")
        pin = None if read in ("", "None", "null") else read
        if pin is None:
            _refuse_an_earlier_release(environment, app, az)
    if pin is None:
        return "a first deployment (or the re-run of one that stopped): no store is marked yet"
    if env.get(PUT_BACK, "").lower() != "true":
        raise Refused(
            f"{NEW_SECRET} is set, but this environment is deployed (its app {app} pins store {pin}): a deployment "
            f"given it would write a new version of oncegate-key-secret and send {STORAGE_SKU} to the storage "
            f'account in place of its live SKU. Clear it: azd env set {NEW_SECRET} "". To put back a lost key '
            f"secret on purpose, also set {PUT_BACK}=true (docs/deploy.md, When the key secret is lost)."
        )
    accounts = environment.ours(answer(az(environment.list_accounts()), "listing the storage accounts"))
    live = [str(account["sku"]["name"]) for account in accounts]
    wanted = env.get(STORAGE_SKU) or DEFAULT_SKU
    if any(sku != wanted for sku in live):
        raise Refused(
            f"putting back the key secret also writes {STORAGE_SKU} ({wanted}) to the storage account, which is "
            f"{live[0]}: azd env set {STORAGE_SKU} {live[0]}, so that the deployment converts nothing"
        )
    return f"putting back a lost key secret ({PUT_BACK}) on store {pin}, the storage account staying {wanted}"


def _refuse_an_earlier_release(environment: Environment, app: str, az: Runner) -> None:
    """``Refused`` when the app's settings were written by a release before the pin: they hold OnceGate settings but
    not ``ONCEGATE_STORE_ID``, which every provisioning of this release writes, empty until the store is marked.

    Such an app served flows with the store it names, never marked since (no redeploy ran the postprovision hook):
    its store may hold every claim the flows made. An app whose first provisioning stopped before its settings were
    written has none of them, and one that stopped after has the pin's setting, empty: both go on as first ones.
    """
    names = json.loads(answer(az(environment.list_settings(app)), "listing the app's settings") or "[]")
    if names and PIN not in names:
        raise Refused(
            f"{NEW_SECRET} is set, but this environment is deployed: its app {app} has OnceGate settings written by "
            f"a release before {PIN}, and its store may hold the claims its flows made. A deployment given it would "
            f"write a new version of oncegate-key-secret and send {STORAGE_SKU} to the storage account in place of "
            f'its live SKU. Clear it: azd env set {NEW_SECRET} "", and run azd up: the redeploy keeps the key secret, '
            f"and its postprovision hook marks the store and pins its id on the app. To put back a lost key secret "
            f"(docs/deploy.md, When the key secret is lost), redeploy so first, then set {NEW_SECRET} and {PUT_BACK}."
        )


def main(env: Mapping[str, str]) -> int:
    try:
        print(f"Deployment: {check(env)}.")
    except Refused as error:
        print(f"Deployment refused: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
