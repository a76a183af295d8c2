"""Checkov (PyPI, Bicep framework) over ``infra/``: every file parsed, and no failed check left unexplained.

Checkov is an independent scanner: it reads the Bicep itself (with its own parser, pycep) and applies
its Azure policies. It skips a file it cannot parse without failing, so this test fails on any parsing
error and on any Bicep file with resources that Checkov did not report on. A failed check passes only
when ``ACCEPTED`` lists it, for that resource, with the reason; an entry that no longer fails must go.

Checkov pins libraries that the project's own tools need newer (packaging, among others), so ``make
test`` installs it into a virtual environment of its own inside ``.venv`` (``.venv/checkov``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.once import once_per_run

ROOT = Path(__file__).resolve().parents[2]
CHECKOV = Path(os.environ.get("CHECKOV", Path(sys.prefix) / "checkov" / "bin" / "checkov"))

PUBLIC_NETWORK = (
    "no virtual network, by design (docs/deploy.md, Operating it: not included): the Flex Consumption app, "
    "the Logic Apps connector and the deployer reach it over the internet; every request is authorized by "
    "Microsoft Entra ID and RBAC, and shared keys are off"
)
CONFIG_AS_SITE = (
    "Checkov reads a Microsoft.Web/sites/config child (appsettings, authsettingsV2) as if it were a whole "
    "site: the site-level properties it looks for are not part of that resource"
)
# (check, file under infra/, resource as Checkov names it) -> why the failure is accepted.
ACCEPTED = {
    ("CKV_AZURE_35", "core/storage/storage-account.bicep", "Microsoft.Storage/storageAccounts.storage"): PUBLIC_NETWORK,
    ("CKV_AZURE_59", "core/storage/storage-account.bicep", "Microsoft.Storage/storageAccounts.storage"): PUBLIC_NETWORK,
    ("CKV_AZURE_206", "core/storage/storage-account.bicep", "Microsoft.Storage/storageAccounts.storage"): (
        "the SKU is the parameter skuName, Standard_ZRS by default from main.bicep (test_templates.py); Checkov "
        "cannot read a module parameter's value"
    ),
    ("CKV_AZURE_109", "core/security/keyvault.bicep", "Microsoft.KeyVault/vaults.keyVault"): PUBLIC_NETWORK,
    ("CKV_AZURE_189", "core/security/keyvault.bicep", "Microsoft.KeyVault/vaults.keyVault"): PUBLIC_NETWORK,
    ("CKV_AZURE_110", "core/security/keyvault.bicep", "Microsoft.KeyVault/vaults.keyVault"): (
        "purge protection is the parameter enablePurgeProtection, true by default; written as "
        "'enablePurgeProtection ? true : null' because the service refuses false, which Checkov cannot evaluate"
    ),
    ("CKV_AZURE_42", "core/security/keyvault.bicep", "Microsoft.KeyVault/vaults.keyVault"): (
        "recoverable means soft delete (on, always) and purge protection (the parameter above, true by default)"
    ),
    ("CKV_AZURE_41", "core/security/key-secret.bicep", "Microsoft.KeyVault/vaults/secrets.keySecret"): (
        "the HMAC secret must not expire: every claim id is made with it, and an expired secret would stop the "
        "app; it is replaced by the rotation runbook (docs/deploy.md), not by a date"
    ),
    ("CKV_AZURE_225", "main.bicep", "Microsoft.Web/serverfarms.plan"): (
        "zone redundancy of a Flex Consumption plan is offered as the parameter zoneRedundant, off by default: "
        "only some regions support it, and it is fixed when the plan is created"
    ),
    ("CKV_AZURE_222", "app/api.bicep", "Microsoft.Web/sites.functionApp"): PUBLIC_NETWORK,
    ("CKV_AZURE_78", "app/api.bicep", "Microsoft.Web/sites.functionApp"): (
        "FTP and SCM publishing with a password are off through basicPublishingCredentialsPolicies (ftp, scm: "
        "allow false, test_templates.py); Checkov looks only for siteConfig.ftpsState"
    ),
    # Checkov reads siteConfig.http20Enabled (checkov/arm/checks/resource/AppServiceHttps20Enabled.py and
    # FunctionAppHttpVersionLatest.py): the HTTP version the platform's front ends offer clients, not a
    # security control (the site takes HTTPS only and TLS 1.2 at least: test_templates.py).
    ("CKV_AZURE_18", "app/api.bicep", "Microsoft.Web/sites.functionApp"): (
        "siteConfig.http20Enabled is left at the platform's default (HTTP/1.1): Flex Consumption deprecates a "
        "list of site properties (Microsoft's 'Flex Consumption plan deprecations'), and whether a Flex site "
        "takes this one is not documented where it was looked for nor verifiable without a subscription; it "
        "changes the protocol version between clients and the front ends, not who may call or how securely "
        "(HTTPS only, TLS 1.2)"
    ),
    ("CKV_AZURE_67", "app/api.bicep", "Microsoft.Web/sites.functionApp"): "the same as CKV_AZURE_18 (the same key)",
    ("CKV_AZURE_17", "app/api.bicep", "Microsoft.Web/sites.functionApp"): (
        "callers prove who they are with a function key or a Microsoft Entra ID token; the connectors present "
        "no client certificate"
    ),
    ("CKV_AZURE_212", "app/api.bicep", "Microsoft.Web/sites.functionApp"): (
        "Checkov counts siteConfig.numberOfWorkers, the instances of a dedicated or Premium plan, which a Flex "
        "Consumption app does not have. Its standing instances are always-ready instances "
        "(functionAppConfig.scaleAndConcurrency.alwaysReady), billed while idle: OnceGate scales from zero by "
        "default, its callers retry a cold start, and a zone-redundant plan (zoneRedundant) keeps at least two "
        "always-ready instances across zones by itself"
    ),
    ("CKV_AZURE_213", "app/api.bicep", "Microsoft.Web/sites.functionApp"): (
        "Flex Consumption has no health check setting (siteConfig.healthCheckPath is not supported); the app's "
        "GET /api/health is probed by the operators' monitoring instead (docs/operations.md)"
    ),
    **{
        (check, "app/api.bicep", f"Microsoft.Web/sites/config.{config}"): CONFIG_AS_SITE
        for check in ("CKV_AZURE_63", "CKV_AZURE_65", "CKV_AZURE_66", "CKV_AZURE_80", "CKV_AZURE_88", "CKV_AZURE_222")
        for config in ("appSettingsConfig", "authSettingsConfig")
    },
    ("CKV_AZURE_13", "app/api.bicep", "Microsoft.Web/sites/config.appSettingsConfig"): CONFIG_AS_SITE,
    ("CKV_AZURE_13", "app/api.bicep", "Microsoft.Web/sites/config.authSettingsConfig"): (
        "App Service authentication is on in entra mode; in key mode the Functions host checks the function key "
        "(authMode, docs/deploy.md): Checkov cannot read which branch deploys"
    ),
    ("CKV_AZURE_56", "app/api.bicep", "Microsoft.Web/sites/config.authSettingsConfig"): "the same as CKV_AZURE_13",
}


def scan() -> dict[str, Any]:
    assert CHECKOV.is_file(), f"no Checkov at {CHECKOV}: run make test (it installs Checkov into .venv/checkov)"
    # --skip-download: no call to the vendor's platform (this runs offline); the checks are in the package.
    command = [str(CHECKOV), "--directory", "infra", "--framework", "bicep", "--skip-download", "--output", "json"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.fixture(scope="session")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Checkov's report, made once per run in whichever process first asks (make test runs two): about 3 s of CPU
    with the JSONPath parse tables make install writes beside Checkov (tests/infra/jsonpath_tables.py), 8 s without."""
    found: dict[str, Any] = once_per_run(tmp_path_factory, "checkov-report", scan)
    return found


def failed(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (check["check_id"], check["file_path"].lstrip("/"), check["resource"])
        for check in report["results"]["failed_checks"]
    }


@pytest.mark.slow
def test_checkov_parses_every_bicep_file(report: dict[str, Any]) -> None:
    # A file Checkov cannot parse is counted here and otherwise skipped without a word.
    assert report["summary"]["parsing_errors"] == 0, report["results"].get("parsing_errors")
    results = report["results"]["passed_checks"] + report["results"]["failed_checks"]
    scanned = {check["file_path"].lstrip("/") for check in results}
    # The files with resources Checkov has policies for: each must have been read.
    for name in ("main.bicep", "app/api.bicep", "core/storage/storage-account.bicep", "core/security/keyvault.bicep"):
        assert name in scanned, f"Checkov skipped {name}"


def test_every_failed_check_is_accepted_with_its_reason(report: dict[str, Any]) -> None:
    unexplained = sorted(failed(report) - ACCEPTED.keys())
    assert unexplained == [], "fix these, or add them to ACCEPTED with the reason"


def test_no_accepted_failure_has_gone(report: dict[str, Any]) -> None:
    gone = sorted(ACCEPTED.keys() - failed(report))
    assert gone == [], "these pass now: drop them from ACCEPTED"
