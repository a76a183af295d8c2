"""The code keeps to the glossary: no name the glossary puts aside is an identifier (issue 23).

``docs/glossary.md`` lists, per concept, the names not to use in code. Wire spellings and stored
columns that keep a 0.1.0 name are strings in the code, never identifiers, so they do not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "glossary.md"
MODULES = sorted([ROOT / "function_app.py", *(ROOT / "oncegate").rglob("*.py"), *(ROOT / "tools").rglob("*.py")])


def put_aside(glossary: str) -> set[str]:
    """The names in the "not in code" column of the glossary's table."""
    rows = [line for line in glossary.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    column = header.index("not in code")
    names: set[str] = set()
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        names.update(re.findall(r"`([^`]+)`", cells[column]))
    return names


def identifiers(source: str) -> set[str]:
    """Every name the code defines or refers to: classes, functions, arguments, variables, attributes, imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg | ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[-1])
            names.add(node.name.split(".")[-1])
    return names


DISCOURAGED = put_aside(GLOSSARY.read_text(encoding="utf-8"))


def test_the_glossary_puts_names_aside() -> None:
    # Guards the parsing: a table read wrong would leave nothing to look for, and every module would pass.
    assert {"ConflictSource", "reconciling", "LastAttempt", "SensitiveKeyPolicy", "find_claims"} <= DISCOURAGED
    assert len(MODULES) > 40


def test_a_name_put_aside_is_found_and_a_string_is_not() -> None:
    source = (
        "from oncegate.domain.statuses import ConflictSource\n"
        "def f(reconciling):\n"
        "    return claim.last_attempt, {'lastAttempt': 1, 'Reconciling': 'reconciles'}\n"
    )
    assert identifiers(source) & DISCOURAGED == {"ConflictSource", "reconciling", "last_attempt"}


@pytest.mark.parametrize("path", MODULES, ids=[str(path.relative_to(ROOT)) for path in MODULES])
def test_the_code_uses_the_glossary_names(path: Path) -> None:
    found = identifiers(path.read_text(encoding="utf-8")) & DISCOURAGED
    assert sorted(found) == [], f"{path.relative_to(ROOT)} uses names docs/glossary.md puts aside"
