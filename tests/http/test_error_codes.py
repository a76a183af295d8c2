"""Every error code the API can answer is in the tree of ``oncegate/errors.py`` and in docs/contract.md's list, and
neither lists a code that nothing answers.

The codes are read from the code itself: the ``code`` of each error class, the literal ``code`` given to
the classes that take one per instance (``StateConflict``, ``AccessDenied``), wherever they are raised,
and the local server's refusals of what it cannot read as HTTP, one per status its request handler
(the standard library's, and ours) refuses with.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import oncegate
from oncegate import errors
from oncegate.entrypoints import framing
from oncegate.errors import OnceGateError

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(oncegate.__file__).parent
# "409 stale_claim | claim_busy", "401 unauthorized": a status and the codes answered with it.
ANSWER = re.compile(r"\b([1-5]\d\d) ([a-z_]+(?: \| [a-z_]+)*)")
CONTRACT_LIST = "Errors follow the Microsoft REST API guidelines"

Code = tuple[int, str]


def listed(text: str) -> set[Code]:
    """Each (status, code) a text names as ``409 stale_claim | claim_busy``."""
    found = ANSWER.findall(" ".join(text.split()))
    return {(int(status), code) for status, codes in found for code in codes.split(" | ")}


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


def calls(name: str) -> Iterator[tuple[str, ast.Call]]:
    """Every call of ``name`` (``Name(...)`` or ``module.Name(...)``) in the package, with where it is."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if called == name:
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def instance_codes(cls: type[OnceGateError]) -> Iterator[Code]:
    """The (status, code) of each place that makes ``cls``, which takes its code per instance."""
    signature = inspect.signature(cls)
    for where, call in calls(cls.__name__):
        given = signature.bind_partial(*call.args, **{kw.arg: kw.value for kw in call.keywords if kw.arg})
        code, status = given.arguments.get("code"), given.arguments.get("status")
        assert isinstance(code, ast.Constant), f"{where}: give {cls.__name__} its code as a literal, for errors.py"
        assert status is None or isinstance(status, ast.Constant), f"{where}: give its status as a literal"
        yield (cls.status if status is None else status.value), code.value


def framing_codes() -> set[Code]:
    """The local server's refusal of each status its request handler (the stdlib's, or ours) sends as an error."""
    statuses = set()
    for source in (inspect.getsource(BaseHTTPRequestHandler), inspect.getsource(framing)):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "send_error":
                first = node.args[0]
                assert isinstance(first, ast.Attribute), ast.unparse(node)
                statuses.add(HTTPStatus[first.attr])
    return {(status.value, framing.refusal_code(status)) for status in statuses}


def answered() -> set[Code]:
    """Every (status, code) the code base can answer with."""
    codes = framing_codes()
    for cls in error_classes():
        if "code" in inspect.signature(cls).parameters:
            codes.update(instance_codes(cls))
        elif "code" in vars(cls):
            codes.add((cls.status, cls.code))
    return codes


def test_the_error_tree_lists_every_code_answered_and_no_other() -> None:
    tree = errors.__doc__ or ""
    public = tree[tree.index("::") : tree.index("StoreRace")]

    assert listed(public) == answered()


def test_the_contract_lists_every_code_answered_and_no_other() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text()
    paragraph = contract[contract.index(CONTRACT_LIST) :].split("\n\n")[0]

    assert listed(" ".join(re.findall(r"`([^`]+)`", paragraph))) == answered()


def test_error_bodies_take_their_code_from_an_error_class_or_the_framing_refusal() -> None:
    # A body built with a code of its own would answer a code neither errors.py nor this test knows of.
    codes = {
        where: next(ast.unparse(kw.value) for kw in call.keywords if kw.arg == "code")
        for where, call in calls("ErrorInfo")
    }

    assert set(codes.values()) == {"exc.code", "refusal_code(status)"}, codes


def test_the_framing_refusals_are_read_from_both_handlers() -> None:
    # From ours (411) and from the standard library's (414, 501): the scan above reads each.
    assert {(411, "length_required"), (414, "request_uri_too_long"), (501, "not_implemented")} <= framing_codes()
