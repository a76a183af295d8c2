"""The runbooks' blocks that stop on purpose, pasted into an interactive bash and zsh as an operator does.

A block run by ``bash -e -c`` may end with ``exit``; pasted into the operator's own terminal, the same
``exit`` closes it (the window, or the SSH session to the machine being restored), and what was pasted
after it goes nowhere. Such a block must stop itself, not the shell it was pasted into.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_backup_runbook import runbook
from tests.docs.terminal import SHELLS, paste
from tests.docs.test_readme_blocks import shell


@pytest.mark.parametrize("name", list(SHELLS))
def test_the_move_aside_that_stops_leaves_the_terminal_open_and_moves_nothing(name: str, tmp_path: Path) -> None:
    aside = runbook()["aside"]
    (tmp_path / ".oncegate").mkdir()
    (tmp_path / "wiped").mkdir()
    (tmp_path / ".oncegate" / "oncegate.db").write_text("half imported")
    (tmp_path / "wiped" / "oncegate.db").write_text("moved aside first")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "xterm-256color", "LANG": "C.UTF-8"}

    pasted = paste(shell(name), [aside.code, "echo next"], cwd=tmp_path, env=env, timeout=60)

    assert pasted.statuses[0] not in (0, None), pasted.transcript
    assert "is there already: .oncegate/oncegate.db is not moved over it" in pasted.outputs[0]
    # The shell is still there: the next line pasted runs.
    assert pasted.statuses.get(1) == 0, pasted.transcript
    assert "next" in pasted.outputs[1]
    assert (tmp_path / "wiped" / "oncegate.db").read_text() == "moved aside first"
    assert (tmp_path / ".oncegate" / "oncegate.db").read_text() == "half imported"
