"""requirements.txt, what Azure installs, is a lock with hashes generated from pyproject.toml (issue 26).

Azure's build installs requirements.txt with pip, which checks every hash; pyproject.toml keeps the
ranges the code supports. ``make lock`` writes the lock with uv; this checks, offline, that it is still
what pyproject.toml asks for: every dependency pinned to one version inside its range (extras included),
every package with its hashes and reached from pyproject.toml, nothing left from an earlier list.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\;]+)")
ROOT_MARK = "oncegate (pyproject.toml)"


def lock_entries(text: str) -> dict[str, dict[str, object]]:
    """Package -> its version, hashes and the packages it is there for (uv's ``# via`` lines)."""
    entries: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    in_via = False
    for line in text.splitlines():
        if match := PIN.match(line):
            current = {"version": match[2], "hashes": [], "via": set()}
            entries[canonicalize_name(match[1])] = current
            in_via = False
        elif current is None:
            continue
        elif "--hash=sha256:" in line:
            current["hashes"].append(line.split("--hash=sha256:")[1].strip(" \\"))  # type: ignore[attr-defined]
        elif line.strip().startswith("# via"):
            rest = line.strip()[len("# via") :].strip()
            in_via = not rest
            if rest:
                current["via"].add(rest)  # type: ignore[attr-defined]
        elif in_via and line.strip().startswith("#   "):
            current["via"].add(line.strip()[4:].strip())  # type: ignore[attr-defined]
    return entries


def test_the_lock_pins_every_dependency_inside_its_range_with_hashes() -> None:
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    entries = lock_entries(text)
    assert entries, "no pinned package in requirements.txt"
    assert ">=" not in text.split("\n", 2)[2], "a range in the lock"
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    for line in dependencies:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in entries, f"{requirement.name} is in pyproject.toml, not in the lock: run make lock"
        version = str(entries[name]["version"])
        assert requirement.specifier.contains(version, prereleases=True), f"{name}=={version} is outside {line}"
        assert ROOT_MARK in entries[name]["via"], f"{name}: the lock does not say pyproject.toml asks for it"  # type: ignore[operator]
    asked = {canonicalize_name(Requirement(line).name) for line in dependencies}
    stale = sorted(name for name, entry in entries.items() if ROOT_MARK in entry["via"] and name not in asked)  # type: ignore[operator]
    assert stale == [], f"pinned for pyproject.toml, which no longer asks for {stale}: run make lock"
    for package, entry in entries.items():
        hashes = entry["hashes"]
        assert isinstance(hashes, list)
        assert hashes, f"{package} has no hash"
        assert all(re.fullmatch(r"[0-9a-f]{64}", value) for value in hashes), package


def test_every_locked_package_is_reached_from_pyproject() -> None:
    entries = lock_entries((ROOT / "requirements.txt").read_text(encoding="utf-8"))
    reached, frontier = set(), {name for name, entry in entries.items() if ROOT_MARK in entry["via"]}  # type: ignore[operator]
    while frontier:
        reached |= frontier
        frontier = {
            name
            for name, entry in entries.items()
            if name not in reached and {canonicalize_name(v) for v in entry["via"]} & reached  # type: ignore[attr-defined]
        }
    assert set(entries) - reached == set(), "left from an earlier lock: run make lock"


def test_the_lock_says_how_it_was_made_and_the_makefile_makes_it_so() -> None:
    header = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()[1]
    command = header.lstrip("# ").strip()
    assert command.startswith("uv pip compile pyproject.toml --generate-hashes")
    # For the platform Azure runs the app on, whatever machine makes the lock.
    assert "--python-version 3.11" in command
    assert "--python-platform x86_64-manylinux_2_28" in command
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n\t\t", "")
    assert f"$(BIN)/{command}" in makefile
