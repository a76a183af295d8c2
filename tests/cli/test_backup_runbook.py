"""The restore runbook of docs/operations.md (*Backup and restore*) run as written, in bash, on a SQLite store.

The blocks that take an export, move the database aside and import it run word for word; the export's
time, which the operator reads off the export's output, is the one value the test fills in
(``EXPORTED_AT``). The ``az`` blocks need a subscription and are not run. Afterwards every key done
before the export is answered ``duplicate`` again and health says the store was restored; the
commands' refusals and progress are checked through the command itself. A target declared with
``oncegate targets set`` comes back with the claims, and Perform once reaches it with its secret, which
stayed where it was (``target-secrets/`` beside the database, which the runbook leaves in place).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import AccountSasPermissions, ResourceTypes, TableServiceClient, generate_account_sas

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import Settings
from oncegate.domain.statuses import Decision
from oncegate.domain.targets import Target, TargetAuth
from oncegate.stores import export_format
from oncegate.stores.tables.store import table_names
from tests.cli.conftest import Run
from tests.docs.markdown import REPO, ShellBlock, shell_blocks
from tests.faults.lossy_proxy import LossyProxy
from tests.gate import Gate
from tests.perform.calls import perform
from tests.service.calls import claim, record
from tests.support.target_server import StandInTarget

OPERATIONS = REPO / "docs" / "operations.md"
SECTION = "## Backup and restore\n"
KEYS = [f"SO-{index}" for index in range(5)]
ERP = Target(
    name="erp",
    base_url="https://erp.contoso.com/api",
    auth=TargetAuth.SECRET,
    auth_value="X-Api-Key=oncegate-target-erp",
)
RESTORE_WITH = re.compile(r"^Restore with: oncegate store import \S+ --forget-after (?P<time>\S+)$", re.MULTILINE)


def runbook() -> dict[str, ShellBlock]:
    """The section's shell blocks that run on this machine, by what they do."""
    text = OPERATIONS.read_text(encoding="utf-8")
    start = text.count("\n", 0, text.index(SECTION)) + 1
    end = text.count("\n", 0, text.index("\n## ", text.index(SECTION) + 1)) + 1
    blocks = [block for block in shell_blocks(OPERATIONS) if start < block.line < end]
    steps = {
        "export": [
            block for block in blocks if block.code.strip().endswith("oncegate store export oncegate-export.jsonl.gz")
        ],
        "aside": [block for block in blocks if 'mv "$file" wiped/' in block.code],
        "import": [block for block in blocks if "oncegate store import" in block.code],
    }
    assert all(len(found) == 1 for found in steps.values()), steps
    return {step: found[0] for step, found in steps.items()}


def bash(block: ShellBlock, workdir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    clean["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{clean['PATH']}"
    return subprocess.run(
        ["bash", "-e", "-c", block.code],
        cwd=workdir,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def in_a_clean_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No OnceGate setting from the machine, working in the test's folder, as an operator's new shell."""
    for name in [name for name in os.environ if name.startswith("ONCEGATE_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def on_table_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table_store_factory: Any) -> None:
    """As in_a_clean_folder, with the settings naming the test's own tables on Azurite."""
    in_a_clean_folder(tmp_path, monkeypatch)
    table_store_factory()  # the factory drops the test's tables afterwards
    monkeypatch.setenv("ONCEGATE_STORE", "tables")
    monkeypatch.setenv("ONCEGATE_TABLES_CONNECTION_STRING", table_store_factory.connection_string)
    monkeypatch.setenv("ONCEGATE_TABLE_PREFIX", table_store_factory.prefix)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder where `oncegate serve` ran on its default SQLite store and did five keys."""
    in_a_clean_folder(tmp_path, monkeypatch)
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    for key in KEYS:
        record(service, claim(service, key=key, run=f"run-{key}"))
    service.close()
    return tmp_path


def test_the_restore_runbook_as_written_brings_back_every_key_and_health_says_so(served: Path) -> None:
    steps = runbook()

    exported = bash(steps["export"], served)
    time = RESTORE_WITH.search(exported.stdout)
    aside = bash(steps["aside"], served)
    imported = bash(steps["import"], served, EXPORTED_AT=time["time"] if time else "")

    assert exported.returncode == 0, exported.stderr
    assert "claim: 5 rows" in exported.stderr
    assert time is not None, exported.stdout
    assert aside.returncode == 0, aside.stderr
    assert not (served / ".oncegate" / "oncegate.db").exists() or imported.returncode == 0
    assert imported.returncode == 0, imported.stderr
    assert f"Keys done after {time['time']} are forgotten until" in imported.stdout
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    try:
        for key in KEYS:
            assert claim(service, key=key, run="run-again").decision is Decision.DUPLICATE, key
        restored = service.health().restored
        assert restored is not None
        assert restored.message.startswith(
            f"Restored from an export: keys done after {time['time'].replace('Z', '+00:00')}"
        )
    finally:
        service.close()


def test_the_runbook_run_at_the_repository_root_leaves_nothing_git_would_commit(served: Path) -> None:
    """`make run` keeps its store in .oncegate/ at the repository root, where the runbook is run: the export and
    the database moved aside hold the flows' references and result data, and must not be committed with the
    next `git add -A` (before, both showed as untracked files)."""
    subprocess.run(["git", "init", "--quiet", str(served)], check=True)
    (served / ".gitignore").write_text((REPO / ".gitignore").read_text(encoding="utf-8"), encoding="utf-8")
    steps = runbook()
    before = untracked(served)

    exported = bash(steps["export"], served)
    aside = bash(steps["aside"], served)

    assert (exported.returncode, aside.returncode) == (0, 0), exported.stderr + aside.stderr
    assert (served / "oncegate-export.jsonl.gz").exists()
    assert (served / "wiped" / "oncegate.db").exists()
    assert untracked(served) - before == set()
    # An export cut short leaves <name>.partial<suffix> instead (docs/operations.md, *Taking an export*).
    partial = served / "oncegate-export.jsonl.partial.gz"
    partial.write_bytes(b"")
    assert untracked(served) - before == set()


def untracked(folder: Path) -> set[str]:
    """The files `git add -A` would add in ``folder``, a repository with no commit."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return set(status.stdout.splitlines())


def test_the_restore_runbook_as_written_brings_back_the_declared_targets_and_perform_once_reaches_them(
    served: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = runbook()
    monkeypatch.setenv("ONCEGATE_TARGETS_ALLOW_LOOPBACK", "true")
    secrets = served / ".oncegate" / "target-secrets"
    secrets.mkdir()
    (secrets / "oncegate-target-erp").write_text("the-erp-api-key\n", encoding="utf-8")
    (secrets / "oncegate-target-erp").chmod(0o600)
    with StandInTarget() as erp:
        declared = run(
            capsys,
            *("targets", "set", "erp", "--base-url", erp.base_url, "--auth", "secret:X-Api-Key=oncegate-target-erp"),
            *("--lookup-path", "/orders?reference={reference}", "--record-pointer", "/id"),
        )
        service = Gate.of(bootstrap.build_services(Settings.from_environment()))
        try:
            first = perform(service, "SO-P1", "run-1")
        finally:
            service.close()

        exported = bash(steps["export"], served)
        time = RESTORE_WITH.search(exported.stdout)
        aside = bash(steps["aside"], served)
        imported = bash(steps["import"], served, EXPORTED_AT=time["time"] if time else "")
        listed = run(capsys, "targets", "list", "--json")
        restored = Gate.of(bootstrap.build_services(Settings.from_environment()))
        try:
            again = perform(restored, "SO-P1", "run-again")
            other = perform(restored, "SO-P2", "run-2")
        finally:
            restored.close()

    assert declared.code == 0, declared.err
    assert (first.decision, first.target_record_id) == ("performed", "order-1")
    assert (exported.returncode, aside.returncode, imported.returncode) == (0, 0, 0), imported.stderr
    assert "target: 1 row\n" in exported.stderr
    assert listed.code == 0, listed.err
    [target] = json.loads(listed.out)["value"]
    assert (target["name"], target["baseUrl"], target["auth"]) == (
        "erp",
        erp.base_url,
        "secret:X-Api-Key=oncegate-target-erp",
    )
    assert "the-erp-api-key" not in listed.out
    # The key done before the export is a duplicate with its record, never a second call; a new key reaches the
    # target with the secret that stayed beside the database.
    assert (again.decision, again.target_record_id) == ("duplicate", "order-1")
    assert (other.decision, other.target_record_id) == ("performed", "order-2")
    assert [request.header("X-Api-Key") for request in erp.writes()] == ["the-erp-api-key"] * 2


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return Run(code, out, err)


def test_the_import_names_what_it_refuses_and_exits_2(served: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exported = run(capsys, "store", "export", "export.jsonl")
    time = RESTORE_WITH.search(exported.out)
    assert time is not None

    wrong = run(capsys, "store", "import", "export.jsonl", "--forget-after", "2020-01-01T00:00:00Z")
    full = run(capsys, "store", "import", "export.jsonl", "--forget-after", time["time"])
    missing = run(capsys, "store", "import", "nothing.jsonl", "--forget-after", time["time"])
    unreadable = run(capsys, "store", "import", "export.jsonl", "--forget-after", "yesterday")

    assert exported.code == 0
    assert (wrong.code, full.code, missing.code) == (2, 2, 2)
    assert f"oncegate store import: --forget-after must be the export's time, {time['time']}:" in wrong.err
    assert full.err.splitlines()[-1] == (
        "oncegate store import: the store is not empty: it holds claims, flows, scopes, key secrets, store id. "
        "Import into an empty store."
    )
    assert "nothing.jsonl cannot be read as an export" in missing.err
    assert unreadable.code == 2
    assert unreadable.err.startswith("oncegate store import: --forget-after: give a date and time with its zone")


def test_an_import_refused_for_its_time_leaves_no_database_behind(
    served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "store", "export", "export.jsonl").code == 0
    (served / ".oncegate" / "oncegate.db").rename(served / "aside.db")

    wrong = run(capsys, "store", "import", "export.jsonl", "--forget-after", "2020-01-01T00:00:00Z")

    assert wrong.code == 2
    assert "--forget-after must be the export's time" in wrong.err
    assert not (served / ".oncegate" / "oncegate.db").exists()


def test_the_export_in_json_names_its_time_the_secrets_it_needs_and_when_it_expires(
    served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = run(capsys, "store", "export", "export.jsonl.gz", "--json")

    summary = json.loads(exported.out)
    header = next(iter(export_format.records(served / "export.jsonl.gz")))
    assert exported.code == 0
    assert (summary["storeId"], summary["startedAt"]) == (header["storeId"], header["startedAt"].replace("+00:00", "Z"))
    assert summary["counts"] == {"secret": 1, "scope": 1, "flow": 1, "claim": len(KEYS)}
    assert summary["keySecretIds"] == header["keySecretIds"]
    assert len(summary["keySecretIds"]) == 1
    # One form of time in one document, the commands' own (Z), which --forget-after takes.
    assert all(summary[name].endswith("Z") for name in ("startedAt", "finishedAt", "expiresAt")), summary
    expires = datetime.fromisoformat(summary["expiresAt"]) - datetime.fromisoformat(summary["finishedAt"])
    assert expires == timedelta(days=365)
    assert not (served / "export.partial.jsonl.gz").exists()


@pytest.mark.azurite
def test_on_table_storage_export_and_import_need_no_key_secret_and_the_pinned_app_serves_the_restored_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table_store_factory: Any
) -> None:
    on_table_storage(tmp_path, monkeypatch, table_store_factory)
    marked = run(capsys, "store", "init", "--new-only", "--json")
    store_id = json.loads(marked.out)["storeId"]
    app_settings = {**os.environ, "ONCEGATE_KEY_SECRET": "secret-a-" + "a" * 32, "ONCEGATE_STORE_ID": store_id}
    service = Gate.of(bootstrap.build_services(Settings.from_environment(app_settings)))
    for key in KEYS:
        record(service, claim(service, key=key, run=f"run-{key}"))
    service.store.save_target(ERP)
    service.close()

    # The operator's machine holds the store settings and no key secret, as for `store init`.
    exported = run(capsys, "store", "export", "export.jsonl")
    time = RESTORE_WITH.search(exported.out)
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as tables:
        for name in table_names(table_store_factory.prefix):
            tables.delete_table(name)
    imported = run(capsys, "store", "import", "export.jsonl", "--forget-after", time["time"] if time else "")
    restored = Gate.of(bootstrap.build_services(Settings.from_environment(app_settings)))
    try:
        answers = [claim(restored, key=key, run="run-again").decision for key in KEYS]
        health = restored.health()
        targets = restored.store.list_targets()
    finally:
        restored.close()

    assert exported.code == 0, exported.err
    assert time is not None
    assert imported.code == 0, imported.err
    assert f"is store {store_id} again" in imported.out
    assert answers == [Decision.DUPLICATE] * len(KEYS)
    assert (health.status, health.restored is not None) == ("ok", True)
    assert [replace(target, version=None) for target in targets] == [ERP]


@pytest.mark.azurite
def test_on_table_storage_an_export_needs_only_read_access_to_the_tables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table_store_factory: Any
) -> None:
    """The docs' Storage Table Data Reader, as a read-and-list account SAS on Azurite: opening the store for the
    export makes no table (a create needs a write role even when the table exists) and repairs no row."""
    on_table_storage(tmp_path, monkeypatch, table_store_factory)
    store_id = json.loads(run(capsys, "store", "init", "--new-only", "--json").out)["storeId"]
    app_settings = {**os.environ, "ONCEGATE_KEY_SECRET": "secret-a-" + "a" * 32, "ONCEGATE_STORE_ID": store_id}
    service = Gate.of(bootstrap.build_services(Settings.from_environment(app_settings)))
    for key in KEYS:
        record(service, claim(service, key=key, run=f"run-{key}"))
    service.close()
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as tables:
        credential = tables.credential
        endpoint = tables.url.rstrip("/")
    assert isinstance(credential, AzureNamedKeyCredential)
    signature = generate_account_sas(
        credential,
        resource_types=ResourceTypes(service=True, container=True, object=True),
        permission=AccountSasPermissions(read=True, list=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )
    monkeypatch.setenv(
        "ONCEGATE_TABLES_CONNECTION_STRING", f"TableEndpoint={endpoint};SharedAccessSignature={signature}"
    )

    exported = run(capsys, "store", "export", "export.jsonl")

    assert exported.code == 0, exported.err
    assert f"Exported store {store_id}" in exported.out
    assert "claim: 5 rows" in exported.err


BEING_DELETED = (
    b'{"odata.error":{"code":"TableBeingDeleted","message":{"lang":"en-US",'
    b'"value":"The specified table is being deleted. Try operation later."}}}'
)


class DeletingTables(LossyProxy):
    """Table Storage just after the tables were deleted: it refuses to make a table of a deleted one's name (Azurite
    makes it at once; an Azure account answers this for a minute or so)."""

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any, bytes]:
        if method == "POST" and path.split("?", 1)[0].rstrip("/").endswith("/Tables"):
            return 409, [("Content-Type", "application/json;odata=minimalmetadata")], BEING_DELETED
        return super().forward(method, path, headers, body)


@pytest.mark.azurite
def test_an_import_run_moments_after_the_tables_were_deleted_is_refused_with_when_to_try_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table_store_factory: Any
) -> None:
    on_table_storage(tmp_path, monkeypatch, table_store_factory)
    store_id = json.loads(run(capsys, "store", "init", "--new-only", "--json").out)["storeId"]
    app_settings = {**os.environ, "ONCEGATE_KEY_SECRET": "secret-a-" + "a" * 32, "ONCEGATE_STORE_ID": store_id}
    service = Gate.of(bootstrap.build_services(Settings.from_environment(app_settings)))
    record(service, claim(service, key=KEYS[0], run="run-0"))
    service.close()
    exported = run(capsys, "store", "export", "export.jsonl")
    time = RESTORE_WITH.search(exported.out)
    assert time is not None
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as tables:
        for name in table_names(table_store_factory.prefix):
            tables.delete_table(name)
    proxy = DeletingTables(table_store_factory.connection_string)
    try:
        monkeypatch.setenv("ONCEGATE_TABLES_CONNECTION_STRING", proxy.connection_string)
        refused = run(capsys, "store", "import", "export.jsonl", "--forget-after", time["time"])
    finally:
        proxy.close()
    monkeypatch.setenv("ONCEGATE_TABLES_CONNECTION_STRING", table_store_factory.connection_string)
    again = run(capsys, "store", "import", "export.jsonl", "--forget-after", time["time"])

    assert refused.code == 3
    assert "was deleted moments ago" in refused.err.splitlines()[-1], refused.err
    assert again.code == 0, again.err
    assert f"is store {store_id} again" in again.out


def test_an_export_under_a_name_that_is_taken_exits_2_and_keeps_the_file(
    served: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "store", "export", "export.jsonl").code == 0
    kept = (served / "export.jsonl").read_bytes()

    again = run(capsys, "store", "export", "export.jsonl")

    assert again.code == 2
    assert again.err.splitlines()[-1] == (
        "oncegate store export: export.jsonl already exists: an export never replaces a file, which may be the last "
        "good export. Name another file, or move that one away first."
    )
    assert (served / "export.jsonl").read_bytes() == kept
