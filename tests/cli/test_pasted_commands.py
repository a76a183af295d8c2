"""A command the output gives to run next, pasted into a shell as it is printed, does what it says.

``store export`` ends with the import to run. With the export in a folder whose name has a space (``My
Documents``, a Chinese folder name with one), the line was ``oncegate store import /a/备份 目录/export.jsonl.gz
--forget-after ...``: pasted, the shell split the path, and the import refused its arguments. Now each word
is quoted where it must be.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from oncegate.cli import main
from tests.cli.test_governance import STORE_SETTINGS
from tests.cli.test_store_commands import database

__all__ = ["database"]

RESTORE_WITH = re.compile(r"^Restore with: (?P<command>.+)$", re.MULTILINE)


@pytest.mark.parametrize("folder", ["备份 目录", "it's mine", "exports"])
def test_the_import_an_export_prints_runs_pasted_into_a_shell(
    database: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    exported = tmp_path / folder / "export.jsonl.gz"
    exported.parent.mkdir()
    assert main(["store", "export", str(exported)]) == 0
    printed = RESTORE_WITH.search(capsys.readouterr().out)
    assert printed is not None
    restored = tmp_path / "restored" / "oncegate.db"
    restored.parent.mkdir()
    environment = {name: value for name, value in os.environ.items() if name not in STORE_SETTINGS}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"

    done = subprocess.run(
        ["bash", "-e", "-c", printed["command"]],
        env={**environment, "ONCEGATE_SQLITE_PATH": str(restored)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert f"restored from {exported}" in done.stdout
