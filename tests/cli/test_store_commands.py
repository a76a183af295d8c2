"""``oncegate keys``, ``keys retire`` and ``store init`` on a SQLite file, as an operator runs them (issue 22)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import Settings
from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Decision
from oncegate.errors import NotConfigured
from oncegate.local_secret import local_key_secret
from oncegate.stores.sqlite import SqliteStore
from tests.cli.conftest import Run
from tests.cli.test_governance import STORE_SETTINGS
from tests.gate import Gate
from tests.service.calls import claim, record

NEXT = "next-secret-" + "n" * 32


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite store the app served three claims from, named by the environment as `oncegate serve` reads it."""
    path = tmp_path / "store" / "oncegate.db"
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(path))
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    for index in range(3):
        record(service, claim(service, key=f"ORDER-{index}", run=f"run-{index}"))
    service.close()
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return Run(code, out, err)


def test_keys_lists_the_store_id_and_each_secret_with_its_claims(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = run(capsys, "keys", "--json")
    text = run(capsys, "keys")

    answer = json.loads(listed.out)
    key_id = KeyHasher(local_key_secret(database)).key_id
    assert listed.code == 0
    pin = database.parent / "oncegate.store-id"
    assert answer["storeId"] == pin.read_text().strip()
    assert pin.stat().st_mode & 0o777 == 0o600
    assert [(s["keyId"], s["state"], s["claims"]) for s in answer["keySecrets"]] == [(key_id, "current", 3)]
    assert key_id in text.out
    assert "current" in text.out


def test_retiring_a_secret_with_claims_is_refused_naming_the_count_then_done_with_orphan(
    database: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old = local_key_secret(database)
    old_id = KeyHasher(old).key_id
    monkeypatch.setenv("ONCEGATE_KEY_SECRET", NEXT)
    monkeypatch.setenv("ONCEGATE_KEY_SECRET_PREVIOUS", old)
    Gate.of(bootstrap.build_services(Settings.from_environment())).health()  # the switch
    during = run(capsys, "keys", "retire", old_id, "--orphan", "3")
    _switched_a_while_ago(database)

    refused = run(capsys, "keys", "retire", old_id)
    current = run(capsys, "keys", "retire", KeyHasher(NEXT).key_id)
    unknown = run(capsys, "keys", "retire", "nope")
    done = run(capsys, "keys", "retire", old_id, "--orphan", "3")

    assert during.code == 2
    assert "under way" in during.err
    assert refused.code == 2
    assert "found only through it: 3 claims (" in refused.err
    assert "--orphan 3" in refused.err
    assert current.code == 2
    assert "current key secret" in current.err
    assert unknown.code == 2
    assert old_id in unknown.err
    assert done.code == 0
    # What the app logs (the log is shown only with ONCEGATE_LOG_LEVEL), the command says itself.
    assert f"Key secret {old_id} is retired on " in done.out
    assert done.out.endswith(": 3 rows made with it orphaned.\n")
    states = {s["keyId"]: s["state"] for s in json.loads(run(capsys, "keys", "--json").out)["keySecrets"]}
    assert states[old_id] == "retired"


def test_retiring_a_secret_with_no_rows_orphans_none_whatever_orphan_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A secret nothing was made with is retired without --orphan; given one anyway (5, or again once retired), the
    command said "5 rows made with it orphaned", counting what the operator typed, not the store's rows."""
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "oncegate.db"))
    Gate.of(bootstrap.build_services(Settings.from_environment())).health()  # the store and its first secret
    old = local_key_secret(tmp_path / "oncegate.db")
    monkeypatch.setenv("ONCEGATE_KEY_SECRET", NEXT)
    monkeypatch.setenv("ONCEGATE_KEY_SECRET_PREVIOUS", old)
    Gate.of(bootstrap.build_services(Settings.from_environment())).health()  # the switch
    _switched_a_while_ago(tmp_path / "oncegate.db")
    old_id = KeyHasher(old).key_id

    done = run(capsys, "keys", "retire", old_id, "--orphan", "5")
    again = run(capsys, "keys", "retire", old_id, "--orphan", "5")

    assert (done.code, again.code) == (0, 0), (done.err, again.err)
    for told in (done, again):
        assert told.out.startswith(f"Key secret {old_id} is retired on "), told.out
        assert "orphaned" not in told.out, told.out


def test_a_wiped_database_is_refused_until_store_init(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # What an operator cleaning up types: the database and its -wal and -shm files, not the store-id beside them.
    for path in database.parent.glob("oncegate.db*"):
        path.unlink()

    wiped = Gate.of(bootstrap.build_services(Settings.from_environment()))
    with pytest.raises(NotConfigured) as refused:
        claim(wiped, key="ORDER-0", run="run-again")
    wiped.close()
    started = run(capsys, "store", "init")
    again = run(capsys, "store", "init")

    assert refused.value.target == "ONCEGATE_STORE_ID"
    assert started.code == 0
    assert "claims made before it was wiped are forgotten" in started.out
    assert again.code == 2
    assert "nothing was changed" in again.err
    served = Gate.of(bootstrap.build_services(Settings.from_environment()))
    assert claim(served, key="ORDER-0", run="run-again").decision is Decision.PROCEED
    served.close()


def _switched_a_while_ago(database: Path) -> None:
    """The store as it stands once the switch's grace is over: the secret announced in use from now, not in a minute
    (the test does not wait a minute), still after every claim made before the switch."""
    store = SqliteStore(database)
    now = datetime.now(UTC)
    for secret in store.read_marks().secrets:
        assert secret.in_use_from is not None
        store.save_secret(replace(secret, in_use_from=min(secret.in_use_from, now)))
    store.close()


def test_a_claims_table_emptied_behind_the_store_id_is_refused_and_new_only_never_starts_it_again(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`DELETE FROM claims` with the store-id file intact (issue 31): on main, 3 of 3 done keys proceeded."""
    store_id = (database.parent / "oncegate.store-id").read_text().strip()
    whole = run(capsys, "store", "init", "--new-only", "--json")
    with sqlite3.connect(database) as connection:
        connection.execute("DELETE FROM claims")
    connection.close()

    emptied = Gate.of(bootstrap.build_services(Settings.from_environment()))
    refusals = []
    for index in range(3):
        with pytest.raises(NotConfigured) as refused:
            claim(emptied, key=f"ORDER-{index}", run="run-again")
        refusals.append(refused.value.target)
    emptied.close()
    kept = run(capsys, "store", "init", "--new-only")
    started = run(capsys, "store", "init", "--json")

    assert json.loads(whole.out) == {"storeId": store_id}
    assert refusals == ["ONCEGATE_STORE_ID"] * 3
    assert kept.code == 3
    assert "not_configured:" in kept.err
    assert "lost its mark" in kept.err
    assert json.loads(started.out) == {"storeId": store_id}
    served = Gate.of(bootstrap.build_services(Settings.from_environment()))
    assert claim(served, key="ORDER-0", run="run-again").decision is Decision.PROCEED
    served.close()


def test_store_init_on_a_new_database_does_not_say_claims_were_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A brand-new store had no claims to forget: `store init` said "claims made before it was wiped are forgotten"."""
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "new" / "oncegate.db"))
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "oncegate.db").touch()

    started = run(capsys, "store", "init")

    assert started.code == 0, started.err
    assert "wiped are forgotten" not in started.out
    assert "it had no id: a new store, or one wiped whole" in started.out
