"""A command imports what it runs (issue 32): each ``oncegate`` command is started in a new interpreter, as a
person's shell starts it, and what it imported is read at its end.

``--help`` imports no command's implementation and no model; a command talking to a deployment imports the models
of the answers it reads and no other; no command that builds no HTTP request of the app imports the Functions
library; a command on a SQLite store imports no Azure SDK.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import FUNCTION_KEY

ROOT = Path(__file__).resolve().parents[2]
# Runs the command as the installed script does, then writes every module it imported, even when it exits.
RUN = """
import atexit, json, sys
atexit.register(lambda: open(sys.argv[1], "w").write(json.dumps(sorted(sys.modules))))
from oncegate.cli import main
sys.exit(main(sys.argv[2:]))
"""
COMMANDS = ("oncegate.cli.commands", "oncegate.cli.store_commands", "oncegate.cli.targets_commands")
DRILL = ("oncegate.cli.drill", "oncegate.cli.batch_drill")


def started(tmp_path: Path, *argv: str) -> set[str]:
    """The modules ``oncegate ARGV`` imported, run on this test's SQLite file; it must end well."""
    seen = tmp_path / "modules.json"
    environment = {"ONCEGATE_SQLITE_PATH": str(tmp_path / "oncegate.db"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(seen), *argv], env=environment, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(seen.read_text())
    return set(modules)


def models_of(modules: set[str]) -> set[str]:
    return {module for module in modules if module.startswith("oncegate.models.")}


def test_help_imports_no_command_and_no_model(tmp_path: Path) -> None:
    modules = started(tmp_path, "--help")
    assert modules.isdisjoint((*COMMANDS, *DRILL, "oncegate.cli.client")), modules & {*COMMANDS, *DRILL}
    assert not models_of(modules)
    assert not {module for module in modules if module.startswith(("oncegate.service", "oncegate.stores"))}
    assert "pydantic" not in modules
    assert "azure.functions" not in modules


def test_a_command_s_help_imports_no_command(tmp_path: Path) -> None:
    modules = started(tmp_path, "scopes", "set", "--help")
    assert modules.isdisjoint((*COMMANDS, *DRILL)), modules & {*COMMANDS, *DRILL}
    assert not models_of(modules)


def test_a_list_against_a_deployment_imports_its_answer_s_model_alone(tmp_path: Path, url: str) -> None:
    modules = started(tmp_path, "scopes", "list", "--url", url, "--key", FUNCTION_KEY)
    assert "oncegate.cli.commands" in modules
    assert "azure.functions" not in modules
    assert modules.isdisjoint(DRILL)
    # ScopeList and what it is made of (a page, the shared types), and the error body it reads on a refusal (health's
    # module); not the claims', conflicts', bulk's or Perform once's models.
    assert models_of(modules) <= {
        "oncegate.models.base",
        "oncegate.models.claim_requests",
        "oncegate.models.health",
        "oncegate.models.inventory",
        "oncegate.models.paging",
    }, models_of(modules)
    assert "oncegate.models.inventory" in modules


@pytest.mark.parametrize("argv", [("keys",), ("store", "export", "exported.jsonl")], ids=["keys", "store export"])
def test_a_command_on_a_sqlite_store_imports_no_azure_library_and_no_model(tmp_path: Path, argv: tuple[str]) -> None:
    started(tmp_path, "store", "init")
    modules = started(tmp_path, *argv)
    assert "oncegate.cli.store_commands" in modules
    assert not {module for module in modules if module.startswith("azure")}
    assert not models_of(modules)
    assert modules.isdisjoint(DRILL)
