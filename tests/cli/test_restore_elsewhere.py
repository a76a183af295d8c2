"""The SQLite restore on another machine (the disk that held the store is gone): the export, and the key-secret file.

The runbook's step 3 runs ``oncegate keys`` after the import. In a folder where only the export came back, the
command made a new ``key-secret`` beside the imported database, as the server does for a new store: the app then
refused every claim (rightly: no claim was made with that secret), and the operator had a wrong secret file to
find and replace. A store command never makes a key secret; it says which file to put back.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import ConfigError, Settings
from oncegate.domain.statuses import Decision
from tests.cli.test_backup_runbook import KEYS, RESTORE_WITH, in_a_clean_folder
from tests.gate import Gate
from tests.service.calls import claim, record


def imported_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], keys: list[str]
) -> tuple[Path, Path]:
    """Keys done on one machine's SQLite store, exported, and imported on another where only the export came:
    both machines' folders, the shell working in the new one's."""
    lost, elsewhere = tmp_path / "lost-machine", tmp_path / "new-machine"
    lost.mkdir()
    elsewhere.mkdir()
    in_a_clean_folder(lost, monkeypatch)
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    for key in keys:
        record(service, claim(service, key=key, run=f"run-{key}"))
    service.close()
    assert main(["store", "export", str(tmp_path / "export.jsonl.gz")]) == 0
    exported = RESTORE_WITH.search(capsys.readouterr().out)
    assert exported is not None
    monkeypatch.chdir(elsewhere)
    assert main(["store", "import", str(tmp_path / "export.jsonl.gz"), "--forget-after", exported["time"]]) == 0
    capsys.readouterr()
    return lost, elsewhere


def test_a_store_command_on_a_database_without_its_key_secret_says_to_put_it_back_and_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lost, elsewhere = imported_elsewhere(tmp_path, monkeypatch, capsys, KEYS)

    refused = main(["keys"])
    said = capsys.readouterr().err

    assert refused == 2
    assert re.search(r"no key-secret file beside the database at .*new-machine/\.oncegate/oncegate\.db", said), said
    assert "put back the key-secret file" in said
    assert not (elsewhere / ".oncegate" / "key-secret").exists()
    # Done as it says, the store is whole again: every key done before the export is a duplicate.
    shutil.copy(lost / ".oncegate" / "key-secret", elsewhere / ".oncegate" / "key-secret")
    assert main(["keys"]) == 0
    restored = Gate.of(bootstrap.build_services(Settings.from_environment()))
    assert {claim(restored, key=key, run="again").decision for key in KEYS} == {Decision.DUPLICATE}
    restored.close()


def test_the_app_on_a_database_without_its_key_secret_is_not_configured_and_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The server's first request made a new key-secret beside an imported database: every claim was then refused
    # (rightly), and a wrong file was left for the operator to find. It is refused as a setting is, naming the file.
    _, elsewhere = imported_elsewhere(tmp_path, monkeypatch, capsys, KEYS[:1])

    with pytest.raises(
        ConfigError, match=r"no key-secret file .*new-machine/\.oncegate/key-secret beside the database: "
    ) as lost_secret:
        bootstrap.key_secret(Settings.from_environment())

    assert lost_secret.value.setting == "ONCEGATE_KEY_SECRET"
    assert "put back the key-secret file" in str(lost_secret.value)
    assert not (elsewhere / ".oncegate" / "key-secret").exists()


def test_a_database_store_init_alone_made_gets_its_key_secret_from_the_app_and_the_store_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_a_clean_folder(tmp_path, monkeypatch)
    assert main(["store", "init"]) == 0

    assert main(["keys"]) == 0
    made = (tmp_path / ".oncegate" / "key-secret").read_text()

    assert bootstrap.key_secret(Settings.from_environment()) == made
