"""The wire stays at the edge: the domain, the services and the stores import no wire model (issue 23).

The contract's pydantic models (``oncegate.models``) are parsed and rendered in ``oncegate.entrypoints``;
below it, services take the plain commands of ``oncegate.service.commands`` and return domain records.
Within the services, no module imports another that imports it back (no grab bag that every service
needs and that needs them). Read from the source with ``ast``, so an import inside a function counts as
much as one at the top.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "oncegate"
# Each layer and what it must never import: nothing of a layer above it.
FORBIDDEN = {
    "domain": ("oncegate.models", "oncegate.service", "oncegate.stores", "oncegate.entrypoints", "oncegate.bootstrap"),
    "stores": ("oncegate.models", "oncegate.service", "oncegate.entrypoints", "oncegate.bootstrap"),
    "service": ("oncegate.models", "oncegate.entrypoints", "oncegate.bootstrap", "pydantic"),
}
MODULES = [(layer, path) for layer in FORBIDDEN for path in sorted((PACKAGE / layer).glob("*.py"))]


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(("layer", "path"), MODULES, ids=[f"{layer}/{path.name}" for layer, path in MODULES])
def test_a_layer_imports_nothing_above_it(layer: str, path: Path) -> None:
    above = [name for name in imported(path) if name.startswith(FORBIDDEN[layer])]
    assert above == [], f"{layer}/{path.name} imports {above}"


def test_the_check_sees_an_import_of_the_wire() -> None:
    # The check itself: the HTTP actions do import the wire models, and the check finds them.
    assert any(name.startswith("oncegate.models") for name in imported(PACKAGE / "entrypoints" / "render.py"))


def service_imports() -> dict[str, set[str]]:
    """Each module of ``oncegate.service`` and the other service modules it imports, at the top or in a function."""
    modules = {path.stem for path in (PACKAGE / "service").glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        imports = imported(PACKAGE / "service" / f"{name}.py")
        graph[name] = {part for found in imports for part in found.split(".")[2:3] if part in modules} - {name}
    return graph


def test_the_services_import_each_other_without_a_cycle() -> None:
    # Helpers two services share live below both (identity, races, core), not in one of them that imports the
    # other: a cycle is how a grab bag starts, and what makes an import fail depending on which runs first.
    graph = service_imports()
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as cycle:
        pytest.fail(f"the services import each other in a cycle: {' -> '.join(cycle.args[1])}")

    # The scan itself: it sees that waits builds on claims, and claims on core (ast.walk: in a function too).
    assert "claims" in graph["waits"]
    assert "core" in graph["claims"]
    assert order.index("core") < order.index("claims") < order.index("waits")
