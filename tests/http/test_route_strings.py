"""Each route is spelled once in the app's code: in its entry of the operation table.

Anything else that needs a route's address (a poll address, the list a cursor or ticket is sealed
for) asks the entry (``Operation.path``), so a route changed in its entry cannot leave a stale copy
behind. Read from the code's string literals and f-strings; docstrings and comments, which tell
people where things are, are not code. The app's list of functions (``operations/functions.py``) is
written from the entries by ``python -m tools.functions`` and checked against them
(``tests/http/test_worker_index.py``), as the connector's definition is: not a copy kept by hand.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from oncegate.entrypoints.operations import OPERATIONS

ROOT = Path(__file__).resolve().parents[2]
WRITTEN = ROOT / "oncegate" / "entrypoints" / "operations" / "functions.py"
CODE = [
    ROOT / "function_app.py",
    *sorted(path for path in (ROOT / "oncegate").rglob("*.py") if path != WRITTEN),
    *sorted((ROOT / "tools").rglob("*.py")),
]
# A route with its parameters as holes: "claims/{claimId}/wait" is "claims/{}/wait".
ROUTES = {re.sub(r"\{[^}]*\}", "{}", operation.route) for operation in OPERATIONS if "/" in operation.route}


def _docstrings(tree: ast.AST) -> set[int]:
    bodies = [node.body for node in ast.walk(tree) if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)]
    return {
        id(body[0].value)
        for body in bodies
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    }


def _spelled(tree: ast.AST) -> list[tuple[int, str]]:
    """Each string of the code as a template: literal text, and ``{}`` for what an f-string fills in."""
    skipped = _docstrings(tree)
    found = []
    for node in ast.walk(tree):  # breadth first: an f-string comes before the pieces it is made of
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
            parts = [str(value.value) if isinstance(value, ast.Constant) else "{}" for value in node.values]
            found.append((node.lineno, "".join(parts)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            found.append((node.lineno, node.value))
    return found


def test_each_route_is_spelled_only_in_its_entry() -> None:
    spelled: dict[str, list[str]] = {route: [] for route in ROUTES}
    for path in CODE:
        for line, text in _spelled(ast.parse(path.read_text(encoding="utf-8"))):
            template = re.sub(r"\{[^}]*\}", "{}", text.removeprefix("/").removeprefix("api/"))
            if template in spelled:
                spelled[template].append(f"{path.relative_to(ROOT)}:{line}")
    elsewhere = {
        route: places
        for route, places in spelled.items()
        if [place for place in places if not place.startswith("oncegate/entrypoints/operations/")] or len(places) != 1
    }
    assert elsewhere == {}, "a route spelled besides its entry: ask the entry for its path instead"
