"""``make run`` installs only what the service and its command need, and that is enough to run it; ``make test``
adds the rest.

The service's imports (``oncegate/`` and ``function_app.py``) must come from ``pyproject.toml``'s
dependencies and what they depend on, never from the extras; the ``oncegate`` command's own
(``oncegate/cli/``) may come from the ``[cli]`` extra too, which ``make run`` installs and Azure's
lock leaves out, never from ``[dev]``. The Makefile is read with ``make -n``, which prints what it
would run and runs nothing.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.requirements import Requirement

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
INHERITED_FROM_MAKE = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")
# The Makefile's own settings: `make test JOBS=1` (as the README offers) exports JOBS to the suite, and a
# maker's PORT=8080 is in the environment; the dry runs below show the defaults.
MAKEFILE_SETTINGS = ("JOBS", "PORT", "WORKERS", "THREADS")
PROJECT_FILES = ("Makefile", "pyproject.toml", "requirements.txt", "package.json", "package-lock.json")


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions(*extras: str) -> set[str]:
    """pyproject.toml's dependencies, with these of its extras, and everything they need in turn, as installed here."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [*project["dependencies"], *(line for extra in extras for line in project["optional-dependencies"][extra])]
    pending = [Requirement(line) for line in lines]
    found: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = normalised(requirement.name)
        if name in found or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        found.add(name)
        try:
            requires = importlib.metadata.requires(requirement.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        wanted = set(requirement.extras)
        for line in requires:
            needed = Requirement(line)
            if needed.marker is None or any(needed.marker.evaluate({"extra": extra}) for extra in wanted | {""}):
                pending.append(needed)
    return found


SERVICE = [ROOT / "function_app.py", *sorted((ROOT / "oncegate").rglob("*.py"))]
COMMAND = ROOT / "oncegate" / "cli"


def imported_modules(paths: list[Path]) -> dict[str, str]:
    """Each top-level module these files import (at the top of a file or inside a function), and where."""
    modules: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                modules.setdefault(name.split(".")[0], f"{path.relative_to(ROOT)}:{node.lineno}")
    return modules


def imported_from_outside(paths: list[Path], *extras: str) -> dict[str, str]:
    """The modules these files import from no distribution of the dependencies and these extras, and where."""
    runtime = runtime_distributions(*extras)
    providers = importlib.metadata.packages_distributions()
    return {
        module: where
        for module, where in imported_modules(paths).items()
        if module not in sys.stdlib_module_names
        and module != "oncegate"
        and not {normalised(dist) for dist in providers.get(module, [])} & runtime
    }


def test_the_service_imports_only_what_make_run_installs() -> None:
    outside = imported_from_outside(SERVICE, "cli")
    assert outside == {}, "imported, but not from pyproject.toml's dependencies (add it there, not to [dev])"


def test_only_the_command_imports_the_cli_extra_which_azure_never_installs() -> None:
    assert imported_from_outside([path for path in SERVICE if COMMAND not in path.parents]) == {}
    # The check itself: the command's tables do come from the extra.
    assert set(imported_from_outside([path for path in SERVICE if COMMAND in path.parents])) == {"rich"}


def test_a_dev_only_import_is_found() -> None:
    # Guards the tests above: pytest is installed here, but only as a [dev] extra.
    assert "pytest" not in runtime_distributions("cli")
    assert "pytest" in importlib.metadata.packages_distributions()


def dry_run(workdir: Path, target: str) -> str:
    # Run as a top-level make even when the suite itself runs under ``make test``: an inherited
    # MAKELEVEL or MAKEFLAGS makes make print "Entering directory" lines around what it would run.
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in INHERITED_FROM_MAKE and name not in MAKEFILE_SETTINGS
    }
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for name in PROJECT_FILES:
        shutil.copy2(ROOT / name, tmp_path / name)
    return tmp_path


def test_make_run_installs_the_runtime_only_and_make_test_adds_the_rest(workdir: Path) -> None:
    run = dry_run(workdir, "run")
    assert "-m venv .venv" in run
    assert "pip install --quiet -e '.[cli]'\n" in run
    assert "[dev]" not in run
    assert "npm" not in run
    assert run.rstrip().endswith("oncegate serve --port 7071 --workers 1")
    test = dry_run(workdir, "test")
    assert "-e '.[dev]'" in test
    assert "npm ci" in test
    # Checkov's JSONPath parse tables, written once beside it (a scan builds them 221 times without).
    assert ".venv/checkov/bin/python tests/infra/jsonpath_tables.py\n" in test


def test_make_run_after_make_test_installs_nothing_and_the_reverse_adds_dev(workdir: Path) -> None:
    # Both installed, in the order make would stamp them: make run only serves.
    (workdir / ".venv" / "bin").mkdir(parents=True)
    (workdir / ".venv" / "checkov" / "bin").mkdir(parents=True)
    (workdir / "node_modules").mkdir()
    stamps = (
        ".venv/bin/python",
        ".venv/.installed-runtime",
        ".venv/checkov/bin/checkov",
        ".venv/checkov/.jsonpath-tables",
        "node_modules/.installed",
    )
    # make test's installer, which its [dev] extras keep installed.
    for stamp in (*stamps, ".venv/bin/uv", ".venv/.installed-dev"):
        (workdir / stamp).touch()
    assert dry_run(workdir, "run").splitlines() == [".venv/bin/oncegate serve --port 7071 --workers 1"]
    assert dry_run(workdir, "test").splitlines() == [".venv/bin/pytest -n 2 --dist loadgroup"]
    # Only the runtime installed (make run): make test adds the [dev] extras and Azurite, not the runtime again.
    (workdir / ".venv" / ".installed-dev").unlink()
    (workdir / "node_modules" / ".installed").unlink()
    test = dry_run(workdir, "test")
    assert "-e '.[dev]'" in test
    assert "npm ci" in test
    assert "install --quiet -e '.[cli]'\n" not in test


def a_python_310(path: Path) -> Path:
    """An interpreter that says it is Python 3.10: fails the Makefile's check as a real one would."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "Python 3.10.13" && exit 0\nexit 1\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def test_a_python_too_old_is_refused_before_any_venv_naming_the_version_and_python(workdir: Path) -> None:
    python = a_python_310(workdir / "bin" / "python3.10")
    env = {name: value for name, value in os.environ.items() if name not in INHERITED_FROM_MAKE}

    done = subprocess.run(
        ["make", "--no-print-directory", "run", f"PYTHON={python}"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )

    assert done.returncode == 2
    assert f"OnceGate needs Python 3.11 or later; PYTHON={python} is Python 3.10.13." in done.stderr
    assert "make run PYTHON=python3.11" in done.stderr
    assert not (workdir / ".venv").exists()


def test_a_venv_made_by_another_python_is_made_again(workdir: Path) -> None:
    # As an earlier make run PYTHON=python3.10 left it, installed and stamped.
    a_python_310(workdir / ".venv" / "bin" / "python")
    (workdir / ".venv" / ".installed-runtime").touch()

    run = dry_run(workdir, "run")

    assert "rm -rf .venv  # made by Python 3.10.13" in run
    assert run.index("rm -rf .venv") < run.index("-m venv .venv") < run.index("pip install --quiet -e '.[cli]'\n")


def collected(*args: str) -> list[str]:
    """The test ids pytest collects here with the project's settings and ``args``, as make test's workers do."""
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_make_test_runs_the_slow_tests() -> None:
    # The slow marker is for a maker working on one area (-m 'not slow'); make test's settings leave none out.
    everything = collected("tests/service/test_bounded_rows.py")

    assert any("test_many_resolutions_leave_the_claim_row_bounded" in test for test in everything), everything


def test_each_worker_starts_with_the_slow_tests() -> None:
    # So that a run in two processes does not end on one worker's last long test while the other waits.
    class Item:
        def __init__(self, name: str, slow: bool) -> None:
            self.name, self.slow = name, slow

        def get_closest_marker(self, name: str) -> object | None:
            return object() if name == "slow" and self.slow else None

    items = [Item("a", False), Item("b", True), Item("c", False), Item("d", True)]
    worker = SimpleNamespace(workerinput={"workerid": "gw0"})

    conftest.pytest_collection_modifyitems(worker, items)  # type: ignore[arg-type]

    assert [item.name for item in items] == ["b", "d", "a", "c"]
