"""Mark the store as part of the deployment: azure.yaml's postprovision hook (docs/deploy.md, step 4; issue 31).

A new, empty store looks exactly like a wiped one, so the app on Table Storage never marks one itself:
something must, on purpose. On the azd path that is this hook, after ``azd provision`` has made the
tables and given the deployer Storage Table Data Contributor on them, and before the code is
published (so before the first claim):

1. read the app's ``ONCEGATE_STORE_ID`` (empty on a first deployment);
2. run ``oncegate store init --new-only --json`` on the deployment's tables, signed in as the deployer,
   with that id pinned: a new store is marked, a store of an earlier release gets its marks, a whole
   store answers its id, and a store that lost a mark is refused (the hook fails and changes nothing;
   docs/operations.md, *A store that lost its claims*);
3. on a first deployment, write that id into the app's ``ONCEGATE_STORE_ID``, which every later
   deployment keeps (infra/app/api.bicep).

A store that does not answer yet (the deployer's role is still being applied) is tried again. No key
secret is needed: marking reads no claim. Standard library only: it runs ``az`` and the ``oncegate``
command of this checkout's ``.venv`` (``make install``), or one on the PATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.logicapps_connection import run_az

SETTING = "ONCEGATE_STORE_ID"
# A role assignment takes minutes to apply to data access: tried for up to ten minutes.
ATTEMPTS = 20
WAIT_SECONDS = 30.0
# The refusal store init prints while the store does not answer (or refuses access, not yet granted).
NOT_YET = "store_unavailable:"
ROOT = Path(__file__).resolve().parents[1]


class HookError(Exception):
    """A value the hook needs is missing, or a command failed; nothing more was changed."""


@dataclass(frozen=True)
class Plan:
    """The app whose setting pins the store, and the store's settings for ``oncegate store init``."""

    group: str
    app: str
    store: dict[str, str]

    def read_pin(self) -> tuple[str, ...]:
        query = f"[?name=='{SETTING}'].value | [0]"
        return ("az", "functionapp", "config", "appsettings", "list", *self._app(), "--query", query, "-o", "tsv")

    def write_pin(self, store_id: str) -> tuple[str, ...]:
        setting = f"{SETTING}={store_id}"
        return ("az", "functionapp", "config", "appsettings", "set", *self._app(), "--settings", setting, "-o", "none")

    def _app(self) -> tuple[str, ...]:
        return ("--resource-group", self.group, "--name", self.app)


def plan(env: Mapping[str, str]) -> Plan:
    """What the hook works on, from the azd environment (``azd provision`` writes the outputs it reads)."""
    needed = ("AZURE_RESOURCE_GROUP", "SERVICE_API_NAME", "STORE_TABLES_ENDPOINT", "STORE_TABLE_PREFIX")
    missing = [name for name in needed if not env.get(name)]
    if missing:
        raise HookError(f"the azd environment lacks {', '.join(missing)}: run azd provision first")
    store = {
        "ONCEGATE_STORE": "tables",
        "ONCEGATE_TABLES_ENDPOINT": env["STORE_TABLES_ENDPOINT"].rstrip("/"),
        "ONCEGATE_TABLE_PREFIX": env["STORE_TABLE_PREFIX"],
    }
    return Plan(group=env["AZURE_RESOURCE_GROUP"], app=env["SERVICE_API_NAME"], store=store)


def oncegate_command(root: Path = ROOT) -> str:
    """This checkout's ``oncegate`` (``make install``), else one on the PATH."""
    for local in (root / ".venv" / "bin" / "oncegate", root / ".venv" / "Scripts" / "oncegate.exe"):
        if local.exists():
            return str(local)
    found = shutil.which("oncegate")
    if found is None:
        raise HookError("the oncegate command is missing: run `make install` (or `pip install -e .`) in this folder")
    return found


def store_environment(base: Mapping[str, str], steps: Plan, pinned: str | None) -> dict[str, str]:
    """The deployer's environment (its sign-in, its PATH) with exactly the store's settings: no other
    ONCEGATE_ value of the azd environment reaches ``oncegate``."""
    kept = {name: value for name, value in base.items() if not name.startswith("ONCEGATE_")}
    return {**kept, **steps.store, **({SETTING: pinned} if pinned else {})}


Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
StoreInit = Callable[[Mapping[str, str]], "subprocess.CompletedProcess[str]"]


def run_store_init(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    args = [oncegate_command(), "store", "init", "--new-only", "--json"]
    return subprocess.run(args, capture_output=True, text=True, check=False, env=dict(env))


def execute(
    steps: Plan,
    base: Mapping[str, str],
    *,
    az: Runner = run_az,
    store_init: StoreInit = run_store_init,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, bool]:
    """Mark the store and pin its id on the app; the id, and whether the pin was written now."""
    read = az(steps.read_pin())
    if read.returncode != 0:
        raise HookError(f"reading the app's {SETTING} failed: {read.stderr.strip()}")
    pinned = read.stdout.strip() if read.stdout.strip() not in ("", "None", "null") else None
    environment = store_environment(base, steps, pinned)
    for attempt in range(1, ATTEMPTS + 1):
        done = store_init(environment)
        if done.returncode == 0:
            break
        if NOT_YET not in done.stderr or attempt == ATTEMPTS:
            raise HookError(done.stderr.strip() or f"oncegate store init failed ({done.returncode})")
        sleep(WAIT_SECONDS)
    store_id = str(json.loads(done.stdout)["storeId"])
    if pinned == store_id:
        return store_id, False
    written = az(steps.write_pin(store_id))
    if written.returncode != 0:
        raise HookError(f"the store is marked as {store_id}, but setting {SETTING} failed: {written.stderr.strip()}")
    return store_id, True


def main(env: Mapping[str, str]) -> int:
    try:
        steps = plan(env)
        store_id, written = execute(steps, env)
    except HookError as error:
        print(f"Store mark: {error}", file=sys.stderr)
        return 1
    pinned = f"pinned on {steps.app} as {SETTING}" if written else f"already pinned on {steps.app}"
    print(f"Store {store_id} ({steps.store['ONCEGATE_TABLE_PREFIX']}* tables) is marked and {pinned}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(os.environ))
