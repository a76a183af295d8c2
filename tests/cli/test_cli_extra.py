"""The command line's own dependency, rich, comes with the ``cli`` extra (issue 32): Azure installs none of it.

Run as a separate Python in which ``rich`` cannot be imported, as in an install of ``oncegate``
without ``[cli]``: ``serve`` serves and answers, every other command is one line naming the extra.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncegate.cli.extra import MISSING

REPO = Path(__file__).resolve().parents[2]
# What an install without the extra leaves: no rich to import (None in sys.modules stops the import).
WITHOUT_RICH = "import sys; sys.modules['rich'] = None; from oncegate.cli import main; sys.exit(main())"


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """The SQLite store in this test's folder, and no setting of the developer's shell."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_") and name != "PORT"}
    return {**kept, "ONCEGATE_SQLITE_PATH": str(tmp_path / "oncegate.db")}


def without_rich(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RICH, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "argv",
    [("scopes", "list"), ("health",), ("purge", "--dry-run"), ("keys",), ("store", "init")],
    ids=["a deployment's command", "health", "purge", "keys", "store"],
)
def test_a_command_without_the_extra_is_one_line_naming_it(argv: tuple[str, ...], environment: dict[str, str]) -> None:
    done = without_rich(*argv, env=environment)

    assert (done.returncode, done.stdout, done.stderr) == (2, "", MISSING + "\n")
    assert "pip install 'oncegate[cli]'" in done.stderr


@pytest.fixture
def serving_without_rich(environment: dict[str, str]) -> Iterator[str]:
    """``oncegate serve`` on a free port in a Python without rich; its URL, once it says it serves."""
    process = subprocess.Popen(
        [sys.executable, "-c", WITHOUT_RICH, "serve", "--port", "0", "--app-dir", str(REPO)],
        cwd=REPO,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until serve says it serves, or exits
        assert " serving on http://" in line, (line, process.poll())
        yield line.split(" serving on ", 1)[1].split(" ", 1)[0].rstrip(",")
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_serve_runs_and_answers_without_the_extra(serving_without_rich: str) -> None:
    with urllib.request.urlopen(serving_without_rich + "/health", timeout=30) as answer:
        body = json.load(answer)

    assert answer.status == 200
    assert (body["status"], body["store"]) == ("ok", "sqlite")
