"""The queries docs/operations.md gives for the SQLite store (*Local and development*), run as written.

The block is pasted into bash in the folder ``oncegate serve`` runs in, ``<claim id>`` replaced by a claim's id:
the first lists the claims in progress or in doubt with their run and lease, the second a claim's history in
order. A column renamed or a table moved would make them fail, with nothing else noticing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.stores.sqlite import SqliteStore
from tests.docs.markdown import REPO
from tests.gate import Gate
from tests.service.calls import claim, record

OPERATIONS = REPO / "docs" / "operations.md"
# The block sits in a list item, its fence indented as the item's text is.
INDENTED_BLOCK = re.compile(r"^(?P<indent> +)```sh\n(?P<code>.*?)^(?P=indent)```$", re.MULTILINE | re.DOTALL)


def sqlite_queries() -> str:
    [code] = [
        textwrap.dedent(found["code"])
        for found in INDENTED_BLOCK.finditer(OPERATIONS.read_text(encoding="utf-8"))
        if found["code"].strip().startswith("sqlite3 .oncegate/oncegate.db")
    ]
    return code


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 command is not installed")
def test_the_sqlite_queries_run_as_written_list_claims_in_doubt_and_a_claims_history(tmp_path: Path) -> None:
    queries = sqlite_queries()
    (tmp_path / ".oncegate").mkdir()
    gate = Gate(SqliteStore(tmp_path / ".oncegate" / "oncegate.db"), KeyHasher("s" * 40))
    held = claim(gate, key="SO-1", run="run-held")
    doubt = claim(gate, key="SO-2", run="run-doubt")
    record(gate, doubt, "unknown")
    done = claim(gate, key="SO-3", run="run-done")
    record(gate, done)
    again = claim(gate, key="SO-3", run="run-again")
    gate.close()

    pasted = queries.replace("<claim id>", done.claim_id)
    ran = subprocess.run(["bash", "-e", "-c", pasted], cwd=tmp_path, capture_output=True, text=True, timeout=30)

    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    listed = {line.split("|")[0]: line.split("|")[1:] for line in lines[:2]}
    assert listed.keys() == {held.claim_id, doubt.claim_id}
    assert listed[held.claim_id][:4] == ["erp.create-order", "in_progress", "1", "run-held"]
    assert listed[doubt.claim_id][:4] == ["erp.create-order", "unknown", "1", "run-doubt"]
    history = [line.split("|")[1:3] for line in lines[2:]]
    assert history == [["claim", "proceed"], ["result", "succeeded"], ["claim", again.decision.value]]
