"""The errors name what went wrong and know nothing of HTTP; the edge's one table
(``oncegate/entrypoints/error_map.py``) answers each with a status and a code, and docs/contract.md's list of
errors says the same, both ways.

The table is read as the code reads it: each error class of the package resolved through it, and the local
server's refusals of what it cannot read as HTTP, one per status its request handler (the standard
library's, and ours) refuses with.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import oncegate
from oncegate import errors
from oncegate.cli.batch_drill import _item_refusal
from oncegate.entrypoints import error_map, framing
from oncegate.errors import OnceGateError
from oncegate.models import ErrorInfo

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(oncegate.__file__).parent
# "409 stale_claim | claim_busy", "401 unauthorized": a status and the codes answered with it.
ANSWER = re.compile(r"\b([1-5]\d\d) ([a-z_]+(?: \| [a-z_]+)*)")
CONTRACT_LIST = "Errors follow the Microsoft REST API guidelines"
# The core: what decides and serves a request, below the edge.
CORE = [
    PACKAGE / "errors.py",
    *sorted((PACKAGE / "domain").rglob("*.py")),
    *sorted((PACKAGE / "service").rglob("*.py")),
]

Code = tuple[int, str]


def listed(text: str) -> set[Code]:
    """Each (status, code) a text names as ``409 stale_claim | claim_busy``."""
    found = ANSWER.findall(" ".join(text.split()))
    return {(int(status), code) for status, codes in found for code in codes.split(" | ")}


def contract_codes() -> set[Code]:
    contract = (ROOT / "docs" / "contract.md").read_text()
    paragraph = contract[contract.index(CONTRACT_LIST) :].split("\n\n")[0]
    return listed(" ".join(re.findall(r"`([^`]+)`", paragraph)))


def error_classes() -> Iterator[type[OnceGateError]]:
    """OnceGateError and its subclasses defined anywhere in the package (every module imported first)."""
    for module in pkgutil.walk_packages([str(PACKAGE)], "oncegate."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    pending: list[type[OnceGateError]] = [OnceGateError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("oncegate."):
            yield cls


@functools.cache
def package_nodes() -> list[tuple[Path, ast.AST]]:
    """Every node of every module of the package, with its module's path: parsed once for every test."""
    return [
        (path, node)
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
    ]


def calls(name: str) -> Iterator[tuple[str, ast.Call]]:
    """Every call of ``name`` (``Name(...)`` or ``module.Name(...)``) in the package, with where it is."""
    for path, node in package_nodes():
        if isinstance(node, ast.Call):
            called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if called == name:
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def refused_statuses() -> set[HTTPStatus]:
    """Each status the local server's request handler (the stdlib's, or ours) sends as an error."""
    statuses = set()
    for source in (inspect.getsource(BaseHTTPRequestHandler), inspect.getsource(framing)):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "send_error":
                first = node.args[0]
                assert isinstance(first, ast.Attribute), ast.unparse(node)
                statuses.add(HTTPStatus[first.attr])
    return statuses


def mapped() -> set[Code]:
    """Every (status, code) the edge answers with: its table of errors and its framing refusals."""
    answers = {(said.status.value, said.code) for said in error_map.ERRORS.values()}
    return answers | {(status.value, code) for status, code in error_map.FRAMING.items()}


def test_every_code_in_the_contract_is_mapped_with_the_contracts_status() -> None:
    assert contract_codes() - mapped() == set()


def test_every_mapped_code_is_in_the_contract() -> None:
    assert mapped() - contract_codes() == set()


def test_every_code_is_one_error() -> None:
    # A flow branches on error.code: two errors answered with one code could not be told apart.
    codes = [said.code for said in error_map.ERRORS.values()]

    assert len(codes) == len(set(codes))


def test_every_error_the_package_can_raise_has_its_own_entry() -> None:
    # An error left out would be answered as its base is: a new StateConflict as stale_claim, say.
    for cls in error_classes():
        if cls not in error_map.ERRORS:
            made = [where for where, _ in calls(cls.__name__)]
            assert not made, f"{cls.__name__} is raised ({made}) but has no entry in error_map.ERRORS"
            assert cls.__subclasses__(), f"{cls.__name__} is never raised: drop it or give it an entry"


def test_the_error_tree_draws_every_error_class_and_no_other() -> None:
    tree = errors.__doc__ or ""
    public = tree[tree.index("::") : tree.index("StoreRace")]

    drawn = re.findall(r"^[\s│├└─]*([A-Z]\w+)", public, re.MULTILINE)

    assert sorted(drawn) == sorted(cls.__name__ for cls in error_classes())


def test_the_framing_refusals_are_those_both_handlers_send() -> None:
    # From ours (411) and from the standard library's (414, 501): the scan reads each.
    assert {
        HTTPStatus.LENGTH_REQUIRED,
        HTTPStatus.REQUEST_URI_TOO_LONG,
        HTTPStatus.NOT_IMPLEMENTED,
    } <= refused_statuses()
    assert set(error_map.FRAMING) == refused_statuses()


def test_error_bodies_take_their_code_from_the_edge_map() -> None:
    # A body built with a code of its own would answer a code neither the table nor the contract knows of.
    codes = {
        where: next(ast.unparse(kw.value) for kw in call.keywords if kw.arg == "code")
        for where, call in calls("ErrorInfo")
    }

    assert set(codes.values()) == {"code(error)", "refusal_code(status)"}, codes


@pytest.mark.parametrize("cls", list(error_classes()), ids=lambda cls: cls.__name__)
def test_no_error_class_carries_an_http_status_or_code(cls: type[OnceGateError]) -> None:
    assert not {"status", "code", "http_status", "status_code"} & set(dir(cls))
    assert not {"status", "code"} & set(inspect.signature(cls).parameters)


@pytest.mark.parametrize("path", CORE, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_the_core_references_no_http_status(path: Path) -> None:
    # Domain and service errors name what went wrong; only the edge knows HTTP. A status there is the wire leaking in.
    error_names = {cls.__name__ for cls in error_classes()}
    leaks = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            leaks += [m for m in modules if m.split(".")[0] == "http" or m.startswith("oncegate.entrypoints")]
        elif (isinstance(node, ast.Name) and node.id == "HTTPStatus") or (
            isinstance(node, ast.Attribute) and node.attr == "HTTPStatus"
        ):
            leaks.append("HTTPStatus")
        elif isinstance(node, ast.ClassDef) and node.name in error_names:
            leaks += [
                f"{node.name}.{target.id}"
                for statement in node.body
                if isinstance(statement, ast.Assign | ast.AnnAssign)
                for target in (statement.targets if isinstance(statement, ast.Assign) else [statement.target])
                if isinstance(target, ast.Name) and target.id in {"status", "code", "http_status", "status_code"}
            ]

    assert leaks == [], f"{path.relative_to(ROOT)}: {leaks}"


def test_an_error_subclass_without_an_entry_of_its_own_is_answered_as_its_base() -> None:
    class Unforeseen(errors.StoreUnavailable):
        pass

    said = error_map.answered(Unforeseen("the store is gone"))

    assert (said.status, said.code, said.retry_after) == (503, "store_unavailable", 5)
    assert error_map.headers(Unforeseen("the store is gone")) == {"Retry-After": "5"}


@pytest.mark.parametrize(
    ("code", "status"),
    [("stale_claim", 409), ("sensitive_data", 400), ("not_configured", 503), ("internal_error", 500)],
)
def test_the_batch_drill_reports_a_refused_item_with_the_status_its_single_call_answers(code: str, status: int) -> None:
    # The CLI reads the same table: an item refused not_configured was reported as a 400 when the batch drill
    # kept a table of its own that knew only some codes.
    error = ErrorInfo(code=code, message="refused", details=[])

    refused = _item_refusal("claim", "R01", "check_and_claim_many", None, error, 1.0)

    assert (refused.answer, refused.refused) == (code, status)
