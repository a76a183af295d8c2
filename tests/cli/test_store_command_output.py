"""What a store command shows the operator in a terminal: what it did, not the app's log lines.

``oncegate store init`` on a store whose claims table was lost (docs/operations.md, *A store that lost its
claims*) meets the missing table on purpose, and the store logs it as the app's log should. Run as an operator
runs it, in a process of its own where nothing configured logging, those lines reached the terminal as Python's
last resort prints them: the SDK's error twice over, with its request id and its JSON body, above "is now store".
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.cli import main
from oncegate.domain.keys import KeyHasher
from oncegate.stores.sqlite import SqliteStore
from tests.gate import Gate
from tests.service.calls import claim

REPO = Path(__file__).resolve().parents[2]


def oncegate(folder: Path, settings: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, in ``folder``, with the store ``settings`` and no other."""
    environment = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_")}
    return subprocess.run(
        [sys.executable, "-m", "oncegate.cli", *argv],
        capture_output=True,
        text=True,
        env=environment | settings | {"PYTHONPATH": str(REPO)},
        cwd=folder,
        timeout=120,
        check=False,
    )


@pytest.fixture
def tables(table_store_factory: Any) -> dict[str, str]:
    table_store_factory()  # the test's own tables, dropped after the run
    return {
        "ONCEGATE_STORE": "tables",
        "ONCEGATE_TABLES_CONNECTION_STRING": table_store_factory.connection_string,
        "ONCEGATE_TABLE_PREFIX": table_store_factory.prefix,
    }


def in_process(settings: dict[str, str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    """A step the test only needs done: the command in this process, where the suite's logging catches the log."""
    for name in [name for name in os.environ if name.startswith("ONCEGATE_")]:
        monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    return main(list(argv))


@pytest.mark.azurite
def test_store_init_on_a_lost_claims_table_says_what_it_did_and_nothing_of_the_log(
    tables: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert in_process(tables, monkeypatch, "store", "init", "--new-only", "--json") == 0
    store_id = json.loads(capsys.readouterr().out)["storeId"]
    with TableServiceClient.from_connection_string(tables["ONCEGATE_TABLES_CONNECTION_STRING"]) as service:
        service.delete_table(f"{tables['ONCEGATE_TABLE_PREFIX']}Claims")

    started = oncegate(tmp_path, tables, "store", "init")
    with TableServiceClient.from_connection_string(tables["ONCEGATE_TABLES_CONNECTION_STRING"]) as service:
        service.delete_table(f"{tables['ONCEGATE_TABLE_PREFIX']}Claims")
    logged = oncegate(tmp_path, tables | {"ONCEGATE_LOG_LEVEL": "INFO"}, "store", "init")

    assert started.returncode == 0, started.stderr
    assert started.stdout == (
        f"tables at {tables['ONCEGATE_TABLES_CONNECTION_STRING'].split('TableEndpoint=')[1].rstrip(';')}, tables "
        f"{tables['ONCEGATE_TABLE_PREFIX']}* is now store {store_id}; claims made before it was wiped are forgotten.\n"
        f"Set ONCEGATE_STORE_ID={store_id} on the app, so that it recognises a wiped or replaced store after a restart "
        "(docs/operations.md, 'A store that lost its claims').\n"
    )
    assert started.stderr == ""
    # The log is there for whoever asks for it, as the app writes it.
    assert logged.returncode == 0, logged.stderr
    assert "ERROR oncegate.stores.tables.entities: A OnceGate table is missing" in logged.stderr
    assert f"WARNING oncegate.service.key_secrets: Store marked as store {store_id} by an operator" in logged.stderr


def test_store_init_on_a_dropped_sqlite_claims_table_says_what_it_did_and_nothing_of_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"ONCEGATE_SQLITE_PATH": str(tmp_path / "store" / "oncegate.db")}
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "oncegate.db").touch()
    assert in_process(settings, monkeypatch, "store", "init") == 0
    with sqlite3.connect(tmp_path / "store" / "oncegate.db") as connection:
        connection.execute("DROP TABLE claims")
    connection.close()

    started = oncegate(tmp_path, settings, "store", "init")

    assert started.returncode == 0, started.stderr
    assert "claims made before it was wiped are forgotten" in started.stdout
    assert started.stderr == ""


def test_a_table_storage_endpoint_nobody_signed_in_to_is_one_line_naming_az_login(tmp_path: Path) -> None:
    """Forgetting `az login` before a runbook's store command ended in the SDK's traceback, exit 1 (the drill's).

    Every store command opens the store the same way (its first read signs in), and one handler answers for all.
    """
    settings = {
        "ONCEGATE_STORE": "tables",
        "ONCEGATE_TABLES_ENDPOINT": "https://stoncegatenobody.table.core.windows.net",
        "ONCEGATE_KEY_SECRET": "s" * 32,
        # Only the Azure CLI's sign-in is tried, and there is no Azure CLI on this PATH: nobody is signed in.
        "AZURE_TOKEN_CREDENTIALS": "AzureCliCredential",
        "PATH": str(tmp_path),
    }

    refused = oncegate(tmp_path, settings, "keys")

    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert (
        "oncegate keys: cannot sign in to Table Storage at https://stoncegatenobody.table.core.windows.net: "
        in refused.stderr
    )
    assert "Sign in with az login" in refused.stderr


def test_an_exports_summary_writes_every_time_as_the_command_writes_times(tmp_path: Path) -> None:
    """operations.md, *The oncegate command*: times read the same everywhere. The expiry line wrote the end
    record's text (``2027-12-07T09:34:15.317060+00:00``) under a start written ``2026-12-07T09:34:15.316196Z``."""
    database = tmp_path / ".oncegate" / "oncegate.db"
    database.parent.mkdir()
    gate = Gate(SqliteStore(database), KeyHasher("s" * 40))
    claim(gate, key="SO-1")
    gate.close()

    done = oncegate(tmp_path, {"ONCEGATE_KEY_SECRET": "s" * 40}, "store", "export", "export.jsonl.gz")

    assert done.returncode == 0, done.stderr
    times = re.findall(r"\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d)", done.stdout)
    assert len(times) == 3, done.stdout
    assert all(time.endswith("Z") for time in times), done.stdout
