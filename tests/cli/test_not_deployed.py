"""The operator CLI is no part of what Azure runs: the Functions app imports none of it, .funcignore leaves it out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = "oncegate.cli"


def test_the_functions_app_imports_nothing_of_the_cli() -> None:
    # A process of its own: this one has imported the CLI for the other tests.
    prefixes = (CLI, "rich")
    loaded = f"import sys, function_app; print(sorted(name for name in sys.modules if name.startswith({prefixes!r})))"
    run = subprocess.run([sys.executable, "-c", loaded], cwd=ROOT, capture_output=True, text=True, check=True)

    assert run.stdout.strip() == "[]"


def test_what_azure_installs_leaves_the_clis_tables_out() -> None:
    # rich draws the CLI's tables; requirements.txt is what the function app installs.
    listed = [line.split(">")[0].strip().lower() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "rich" not in listed


def test_funcignore_leaves_the_cli_out() -> None:
    assert "oncegate/cli/" in (ROOT / ".funcignore").read_text().splitlines()
