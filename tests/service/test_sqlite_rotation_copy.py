"""A SQLite store rotated by the runbook, then moved or restored on another machine with what the runbook says to keep.

On SQLite the ``key-secret`` file stands in for ``ONCEGATE_KEY_SECRET`` until a rotation, which names each secret in
a setting (docs/operations.md, *Local and development*). The switch leaves the file holding the previous secret:
the material said "On SQLite the secret is the key-secret file beside the database: keep a copy with the exports",
and a copy of the database served with the file kept that way refused every claim (the keys done since the switch
were made with a secret it did not hold). What the runbook now says to keep after a switch serves the copy: each
key done before the switch and after it is ``duplicate``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import Settings
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.safeguard import SWITCH_GRACE
from oncegate.domain.statuses import Decision
from oncegate.errors import NotConfigured
from oncegate.local_secret import SECRET_FILE_NAME, local_key_secret
from oncegate.stores.sqlite import SqliteStore
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim, record

ROOT = Path(__file__).resolve().parents[2]
NEW = "new-secret-" + "n" * 32


def _gate(path: Path, ring: KeyRing, clock: FakeClock) -> Gate:
    return Gate(SqliteStore(path), ring, clock=clock, check_interval=timedelta(0))


def _settings_of(environment: dict[str, str]) -> KeyRing:
    settings = Settings.from_environment(environment)
    return bootstrap.key_ring(settings, bootstrap.key_secret(settings))


def _rotated(folder: Path, clock: FakeClock, *, before_the_switch: bool = True) -> str:
    """A store whose claims were made with the file's secret, then with ONCEGATE_KEY_SECRET after the switch."""
    database = folder / "oncegate.db"
    old = local_key_secret(database)
    before = _gate(database, KeyRing(KeyHasher(old)), clock)
    if before_the_switch:
        record(before, claim(before, key="SO-before"))
    else:
        before.health()
    announcing = _gate(database, KeyRing(KeyHasher(old), next_=KeyHasher(NEW)), clock)
    announcing.health()
    switched = _gate(database, KeyRing(KeyHasher(NEW), previous=KeyHasher(old)), clock)
    switched.health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    record(switched, claim(switched, key="SO-after", run="run-2"))
    for gate in (before, announcing, switched):  # every instance stopped: the file holds what they wrote
        gate.store.close()
    return old


def _moved(source: Path, target: Path) -> Path:
    """The database and its key-secret file copied to another machine, as the runbook moves them."""
    target.mkdir()
    for name in ("oncegate.db", SECRET_FILE_NAME):
        shutil.copy2(source / name, target / name)
    return target / "oncegate.db"


def test_a_copy_with_the_key_secret_file_alone_after_a_switch_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    _rotated(tmp_path / "here", clock)
    copy = _moved(tmp_path / "here", tmp_path / "there")

    ring = _settings_of({"ONCEGATE_SQLITE_PATH": str(copy)})
    gate = _gate(copy, ring, clock)
    with pytest.raises(NotConfigured) as refused:
        claim(gate, key="SO-after", run="run-3")
    assert refused.value.target == "ONCEGATE_KEY_SECRET"
    gate.store.close()


def test_a_copy_with_what_the_runbook_keeps_after_a_switch_answers_each_key_done_duplicate(
    tmp_path: Path, clock: FakeClock
) -> None:
    old = _rotated(tmp_path / "here", clock)
    copy = _moved(tmp_path / "here", tmp_path / "there")
    operations = " ".join((ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split())
    # What the runbook says to keep after the switch: the current secret's setting, and the file's content (the
    # previous secret) as ONCEGATE_KEY_SECRET_PREVIOUS until it is retired.
    assert "After the switch (step 2) the file holds the previous secret" in operations

    ring = _settings_of(
        {
            "ONCEGATE_SQLITE_PATH": str(copy),
            "ONCEGATE_KEY_SECRET": NEW,
            # "$(cat key-secret)": the file's content, its line end dropped
            "ONCEGATE_KEY_SECRET_PREVIOUS": (copy.parent / SECRET_FILE_NAME).read_text(encoding="utf-8").strip(),
        }
    )
    gate = _gate(copy, ring, clock)
    assert (copy.parent / SECRET_FILE_NAME).read_text(encoding="utf-8").strip() == old
    assert claim(gate, key="SO-before", run="run-3").decision is Decision.DUPLICATE
    assert claim(gate, key="SO-after", run="run-4").decision is Decision.DUPLICATE
    gate.store.close()


# The runbook's command that writes the current secret into the file once the previous one is retired (step 4).
WRITE_THE_FILE = re.compile(r"`(printf '%s' [^`]*> \.oncegate/key-secret)`")
SHELLS = [shell for shell in ("sh", "dash", "bash", "zsh") if shutil.which(shell)]


def _written(shell: str, command: str, folder: Path, secret: str | None) -> subprocess.CompletedProcess[str]:
    """The runbook's command run as written by ``shell`` in ``folder``, ONCEGATE_KEY_SECRET set there or not."""
    environment = {name: value for name, value in os.environ.items() if name != "ONCEGATE_KEY_SECRET"}
    if secret is not None:
        environment["ONCEGATE_KEY_SECRET"] = secret
    return subprocess.run([shell, "-c", command], cwd=folder, env=environment, capture_output=True, text=True)


@pytest.mark.parametrize("shell", SHELLS)
def test_once_the_previous_secret_is_retired_the_file_written_with_the_current_one_stands_in_for_the_setting(
    tmp_path: Path,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    shell: str,
) -> None:
    database = tmp_path / ".oncegate" / "oncegate.db"
    old = _rotated(database.parent, clock, before_the_switch=False)
    for name, value in (("ONCEGATE_SQLITE_PATH", str(database)), ("ONCEGATE_KEY_SECRET", NEW)):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ONCEGATE_KEY_SECRET_PREVIOUS", old)
    assert main(["keys", "retire", KeyHasher(old).key_id]) == 0, capsys.readouterr().err
    (command,) = WRITE_THE_FILE.findall(" ".join((ROOT / "docs" / "operations.md").read_text(encoding="utf-8").split()))
    secret_file = database.parent / SECRET_FILE_NAME
    mode = secret_file.stat().st_mode

    # Run in a shell where the variable was never set (the operator set it in the app's settings only): the file
    # is left as it was, not emptied, and the shell says why.
    unset = _written(shell, command, tmp_path, None)
    assert unset.returncode != 0
    assert "ONCEGATE_KEY_SECRET" in unset.stderr
    assert secret_file.read_text(encoding="utf-8").strip() == old

    # Step 4, then the file written with the current secret, as the runbook says: no setting names a secret.
    done = _written(shell, command, tmp_path, NEW)
    assert done.returncode == 0, done.stderr
    assert secret_file.read_text(encoding="utf-8") == NEW
    assert secret_file.stat().st_mode == mode  # written over, so still readable by its owner alone
    ring = _settings_of({"ONCEGATE_SQLITE_PATH": str(database)})
    gate = _gate(database, ring, clock)
    assert claim(gate, key="SO-after", run="run-3").decision is Decision.DUPLICATE
    gate.store.close()
