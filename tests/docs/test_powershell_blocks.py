"""The README's PowerShell blocks, checked for their shape (issue 27): no PowerShell runs on the CI machine.

Nothing here runs them. What can be checked without Windows is checked: every ``oncegate`` call
parses with the command's real parser; every other program is one that ``.venv\\Scripts`` holds
and every ``python -m`` module one the project installs; the extras ``pip install`` names exist;
``py -3.N`` is the Python pyproject.toml asks for; every API call names a route the app serves
for POST; brackets balance; and no line is bash (``export``, ``.venv/bin``, ``&&``, ``${X:-y}``,
``curl``, a backslash continuation...).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import tomllib

import pytest

import function_app
from oncegate.entrypoints.routes import function_routes, match
from tests.docs.markdown import FENCE, REPO
from tests.docs.test_commands_named import Refused, built_parser, parser, words

__all__ = ["built_parser", "parser"]

README = REPO / "README.md"
SCRIPTS = re.compile(r"\.venv\\Scripts\\(?P<program>[\w.]+)(?P<rest>[^\n#]*)")
PROGRAMS = {"python", "oncegate"}
# A PowerShell variable or subexpression, standing for a value ($Order, $Changed.conflictId, $($First.claimId)).
VARIABLE = re.compile(r"\$\([^()]*\)|\$(?:env:)?[A-Za-z_][\w.]*")
POSTED = re.compile(r"\bPost\s+(?P<path>\"[^\"]+\"|'[^']+'|[^\s(]+)")
BASH = {
    "export": re.compile(r"^\s*export\s", re.MULTILINE),
    ".venv/bin": re.compile(r"\.venv/bin"),
    "/dev/null": re.compile(r"/dev/null"),
    "&& or ||": re.compile(r"&&|\|\|"),
    "${X:-y}": re.compile(r"\$\{\w+:-"),
    "curl (an alias of Invoke-WebRequest in Windows PowerShell)": re.compile(r"\bcurl\b"),
    "python3 (Windows has py and python)": re.compile(r"\bpython3\b"),
    "NAME=value": re.compile(r"^\s*[A-Za-z_]\w*=\S", re.MULTILINE),
    "a backslash continuation": re.compile(r"\\[ \t]*$", re.MULTILINE),
    "a here-document": re.compile(r"<<"),
    "$RANDOM": re.compile(r"\$RANDOM"),
    "source or .": re.compile(r"^\s*(?:source|\.)\s", re.MULTILINE),
    "local": re.compile(r"^\s*local\s", re.MULTILINE),
}


def powershell_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [fence["code"] for fence in FENCE.finditer(text) if fence["info"].strip() == "powershell"]


BLOCKS = powershell_blocks()
LINES = [line for block in BLOCKS for line in block.splitlines()]


def code(line: str) -> str:
    """The line without its comment (a # outside quotes)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:index]
    return line


def test_windows_has_its_set_up_tests_and_walk_through() -> None:
    assert len(BLOCKS) >= 3
    joined = "\n".join(BLOCKS)
    for needed in ("-m venv .venv", "pip install -e '.[cli]'", "oncegate serve", "-m pytest", "Invoke-RestMethod"):
        assert needed in joined


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.splitlines()[0][:40])
def test_no_line_is_bash(block: str) -> None:
    uncommented = "\n".join(code(line) for line in block.splitlines())
    found = [name for name, pattern in BASH.items() if pattern.search(uncommented)]
    assert found == []


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.splitlines()[0][:40])
def test_brackets_balance(block: str) -> None:
    uncommented = re.sub(r"'[^']*'|\"[^\"]*\"", "", "\n".join(code(line) for line in block.splitlines()))
    for opening, closing in ("()", "{}", "[]"):
        assert uncommented.count(opening) == uncommented.count(closing), opening + closing


def test_every_program_is_one_the_virtual_environment_holds() -> None:
    programs = [found["program"] for line in LINES for found in SCRIPTS.finditer(code(line))]
    assert programs
    assert set(programs) <= PROGRAMS
    modules = [found.group(1) for line in LINES for found in re.finditer(r"python -m ([\w.]+)", code(line))]
    assert set(modules) == {"pip", "pytest"}
    assert all(importlib.util.find_spec(module) for module in modules)


def test_the_python_and_extras_named_are_the_projects() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = re.fullmatch(r">=(\d+\.\d+)", project["requires-python"])
    assert wanted
    assert {found.group(1) for line in LINES for found in re.finditer(r"\bpy -(\d+\.\d+)", line)} == {wanted[1]}
    extras = {found.group(1) for line in LINES for found in re.finditer(r"'\.\[(\w+)\]'", line)}
    assert extras
    assert extras <= set(project["optional-dependencies"])


ONCEGATE = [
    VARIABLE.sub("X1", found["rest"]).strip()
    for line in LINES
    for found in SCRIPTS.finditer(code(line))
    if found["program"] == "oncegate"
]


@pytest.mark.parametrize("arguments", ONCEGATE)
def test_each_oncegate_call_parses(arguments: str, parser: argparse.ArgumentParser) -> None:
    try:
        parser.parse_args(words(f"oncegate {arguments}"))
    except Refused as refused:
        pytest.fail(str(refused))


def test_every_api_call_is_a_route_the_app_serves() -> None:
    routes = function_routes(function_app.app)
    posted = [VARIABLE.sub("X1", found["path"].strip("\"'")) for line in LINES for found in POSTED.finditer(code(line))]
    assert {"claims", "claims/X1/result", "claims/batch", "claims/results"} <= set(posted)
    assert [path for path in posted if match(routes, "POST", path) is None] == []


def test_bodies_are_sent_as_utf8_bytes() -> None:
    """Windows PowerShell 5.1 sends a string body in ISO-8859-1 whatever the JSON says: every character outside
    it becomes ``?``, so two orders keyed in Chinese, Greek or Cyrillic of one length would arrive as one key and
    the second be answered ``duplicate``. Bytes are sent as they are, by 5.1 and 7 alike."""
    sent = [line for line in LINES if "Invoke-RestMethod" in line and "-Body" in line]
    assert sent
    for line in sent:
        assert "-ContentType 'application/json; charset=utf-8'" in line, line
        body = re.search(r"-Body\s+(\$\w+)", line)
        assert body, f"the body is not a variable holding bytes: {line}"
        made = [made for made in LINES if made.strip().startswith(f"{body[1]} = ")]
        assert made, f"{body[1]} is not made in the block"
        assert "[Text.Encoding]::UTF8.GetBytes(" in made[0], made
