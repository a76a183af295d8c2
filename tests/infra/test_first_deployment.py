"""The preprovision hook (``tools/first_deployment.py``): a leftover ``ONCEGATE_NEW_KEY_SECRET`` never redeploys.

A deployment given ``newKeySecret`` is a first deployment to the template: it writes a new version of
``oncegate-key-secret`` and sends ``storageSku`` in place of the storage account's live SKU. Each test
runs azure.yaml's posix hook command as azd runs it (``sh``, from the project folder, with the azd
environment's values in its environment) against a stand-in ``az`` on the PATH that answers from a
resource group described by the test, as ``az`` answers: JSON lists of the group's function apps and
storage accounts with their tags, the app's settings, ``ResourceGroupNotFound`` for a group not made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    "AZURE_ENV_NAME": "oncegate-prod",
    "AZURE_RESOURCE_GROUP": "rg-oncegate-prod",
    "ONCEGATE_NEW_KEY_SECRET": "k" * 64,
}
TAGS = {"azd-env-name": "oncegate-prod"}

# The stand-in: `az` reading the group from $AZ_GROUP (absent: the group does not exist) and logging each call.
STAND_IN = """\
import json, os, sys

args = sys.argv[1:]
with open(os.environ["AZ_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
group = json.loads(os.environ.get("AZ_GROUP") or "null")
named = args[args.index("--resource-group") + 1]
if group is None or named != "rg-oncegate-prod":
    sys.stderr.write(f"(ResourceGroupNotFound) Resource group '{named}' could not be found.\\n")
    sys.exit(3)
if group == "signed-out":
    sys.stderr.write("Please run 'az login' to setup account.\\n")
    sys.exit(1)
if args[:2] == ["functionapp", "list"]:
    print(json.dumps([{"name": app["name"], "tags": app["tags"]} for app in group["apps"]]))
elif args[:4] == ["functionapp", "config", "appsettings", "list"]:
    app = next(app for app in group["apps"] if app["name"] == args[args.index("--name") + 1])
    query = args[args.index("--query") + 1]
    if query == "[?starts_with(name, 'ONCEGATE_')].name":
        assert args[args.index("-o") + 1] == "json"
        print(json.dumps([name for name in app["settings"] if name.startswith("ONCEGATE_")]))
    else:
        assert query == "[?name=='ONCEGATE_STORE_ID'].value | [0]"
        print(app["settings"].get("ONCEGATE_STORE_ID", ""))
elif args[:3] == ["storage", "account", "list"]:
    print(json.dumps(group["accounts"]))
else:
    sys.stderr.write(f"unexpected: {args}\\n")
    sys.exit(2)
"""


def app(settings: dict[str, str], tags: dict[str, str] = TAGS) -> dict[str, Any]:
    return {"name": "func-oncegate-abc", "tags": {**tags, "azd-service-name": "api"}, "settings": settings}


def account(sku: str) -> dict[str, Any]:
    return {"name": "stoncegateabc", "tags": TAGS, "sku": {"name": sku, "tier": "Standard"}}


# Some of the settings every provisioning writes (infra/app/api.bicep), the key secret as its vault reference.
SETTINGS = {
    "ONCEGATE_STORE": "tables",
    "ONCEGATE_KEY_SECRET": "@Microsoft.KeyVault(SecretUri=https://kv-oncegate-abc.vault.azure.net/secrets/x/1)",
}
DEPLOYED = {"apps": [app({**SETTINGS, "ONCEGATE_STORE_ID": "store-1"})], "accounts": [account("Standard_GZRS")]}
# Deployed by a release before ONCEGATE_STORE_ID, and never redeployed since: its settings lack it altogether.
EARLIER_RELEASE = {"apps": [app(SETTINGS)], "accounts": [account("Standard_GZRS")]}


class Preprovision:
    """azure.yaml's posix preprovision hook, run with given azd values over a given resource group."""

    def __init__(self, tmp_path: Path) -> None:
        hook = yaml.safe_load((ROOT / "azure.yaml").read_text(encoding="utf-8"))["hooks"]["preprovision"]["posix"]
        assert hook["shell"] == "sh"
        self.command = str(hook["run"])
        self.bin_dir = tmp_path / "bin"
        self.bin_dir.mkdir()
        az = self.bin_dir / "az"
        az.write_text(f"#!{sys.executable}\n{STAND_IN}", encoding="utf-8")
        az.chmod(0o755)
        self.log = tmp_path / "az.log"

    def __call__(self, values: dict[str, str], group: Any) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{self.bin_dir}{os.pathsep}{os.environ['PATH']}",
            "AZ_LOG": str(self.log),
            **({"AZ_GROUP": json.dumps(group)} if group is not None else {}),
            **values,
        }
        return subprocess.run(["sh", "-c", self.command], cwd=ROOT, env=env, capture_output=True, text=True)

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


@pytest.fixture
def preprovision(tmp_path: Path) -> Preprovision:
    return Preprovision(tmp_path)


def test_a_leftover_key_secret_on_a_deployed_environment_stops_the_deployment(preprovision: Preprovision) -> None:
    done = preprovision(ENV, DEPLOYED)
    assert done.returncode == 1
    assert "ONCEGATE_NEW_KEY_SECRET is set, but this environment is deployed" in done.stderr
    assert 'azd env set ONCEGATE_NEW_KEY_SECRET ""' in done.stderr
    assert "func-oncegate-abc pins store store-1" in done.stderr
    # Cleared, as docs/deploy.md says after the first deployment, the same environment redeploys; az is not asked.
    cleared = preprovision({**ENV, "ONCEGATE_NEW_KEY_SECRET": ""}, DEPLOYED)
    assert cleared.returncode == 0, cleared.stderr
    assert "a redeploy" in cleared.stdout
    assert len(preprovision.calls()) == 2  # the refused run's two questions; the cleared run asks none


def test_a_first_deployment_and_the_re_run_of_one_that_stopped_go_on(preprovision: Preprovision) -> None:
    # No resource group yet, then a group an earlier, failed run left half made: an app with no store pinned
    # (the postprovision hook never ran), whose store therefore holds no claim.
    # Stopped before the app's settings were written, or after, with the pin's setting empty.
    half_made = [app({}), app({**SETTINGS, "ONCEGATE_STORE_ID": ""})]
    groups: list[Any] = [
        None,
        {"apps": [], "accounts": []},
        *({"apps": [each], "accounts": [account("Standard_ZRS")]} for each in half_made),
    ]
    for group in groups:
        done = preprovision(ENV, group)
        assert done.returncode == 0, done.stderr
        assert "a first deployment" in done.stdout
    # Another environment's deployed app in the same group is not this one's.
    other = {"apps": [app({"ONCEGATE_STORE_ID": "store-9"}, tags={"azd-env-name": "oncegate-test"})], "accounts": []}
    assert preprovision(ENV, other).returncode == 0
    # Once the first deployment's postprovision hook has pinned the store, the same value is refused.
    assert preprovision(ENV, DEPLOYED).returncode == 1


def test_putting_back_a_lost_secret_keeps_the_storage_accounts_live_sku(preprovision: Preprovision) -> None:
    put_back = {**ENV, "ONCEGATE_PUT_BACK_KEY_SECRET": "true"}
    # The default ONCEGATE_STORAGE_SKU (Standard_ZRS) would convert the GZRS account back.
    done = preprovision(put_back, DEPLOYED)
    assert done.returncode == 1
    assert "azd env set ONCEGATE_STORAGE_SKU Standard_GZRS" in done.stderr
    given = preprovision({**put_back, "ONCEGATE_STORAGE_SKU": "Standard_GZRS"}, DEPLOYED)
    assert given.returncode == 0, given.stderr
    assert "putting back a lost key secret" in given.stdout


def test_a_deployment_that_cannot_be_told_is_refused(preprovision: Preprovision) -> None:
    done = preprovision(ENV, "signed-out")
    assert done.returncode == 1
    assert "whether the environment is deployed is unknown" in done.stderr
    assert "az login" in done.stderr
    unnamed = preprovision({key: value for key, value in ENV.items() if key != "AZURE_RESOURCE_GROUP"}, DEPLOYED)
    assert unnamed.returncode == 1
    assert "set AZURE_RESOURCE_GROUP" in unnamed.stderr


def test_an_environment_an_earlier_release_deployed_is_not_taken_for_a_first_deployment(
    preprovision: Preprovision,
) -> None:
    """Measured on main deee47c: an app deployed before ONCEGATE_STORE_ID existed (its settings without it), never
    redeployed since, with ONCEGATE_NEW_KEY_SECRET left set, was told "a first deployment (or the re-run of one that
    stopped)", exit 0: the deployment would have written a new key secret and reset the storage account's SKU."""
    done = preprovision(ENV, EARLIER_RELEASE)
    put_back = preprovision({**ENV, "ONCEGATE_PUT_BACK_KEY_SECRET": "true"}, EARLIER_RELEASE)
    cleared = preprovision({**ENV, "ONCEGATE_NEW_KEY_SECRET": ""}, EARLIER_RELEASE)

    assert done.returncode == 1, done.stdout
    assert "its app func-oncegate-abc has OnceGate settings written by a release before ONCEGATE_STORE_ID" in (
        done.stderr
    )
    assert 'azd env set ONCEGATE_NEW_KEY_SECRET ""' in done.stderr
    assert put_back.returncode == 1, put_back.stdout
    assert cleared.returncode == 0, cleared.stderr
    # Only names were asked for, never a setting's value but the pin's.
    asked = [call for call in preprovision.calls() if call[:4] == ["functionapp", "config", "appsettings", "list"]]
    assert {call[call.index("--query") + 1] for call in asked} == {
        "[?name=='ONCEGATE_STORE_ID'].value | [0]",
        "[?starts_with(name, 'ONCEGATE_')].name",
    }
