"""Every ``oncegate`` command a document names exists, with the options it uses (issue 27).

deploy.md named ``oncegate claims find`` after it had become ``lookup``; the command's own help
listed ``serve`` without ``--workers`` and advertised a ``--threads`` that serve did not take.
Each command the README, docs/*.md and the connector's documents name, in a shell block or a code
span, is parsed by the command's real parser, as the command would parse it:

* a command to run (a shell block's line, or a code span without brackets) must parse whole, with
  placeholders (``<claim id>``, ``$CONFLICT_ID``) standing for a value; a code span in prose may
  leave out what the command requires (``oncegate scopes set --lease-seconds`` names an option);
* a synopsis (``[--top N]``, ``open|resolved|all``), in the documents or in the command's own help,
  is not run: its command must exist, and each option it lists must be one of that command's.
"""

from __future__ import annotations

import argparse
import itertools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import oncegate.cli.parser
from oncegate.cli.parser import build_parser
from tests.docs.markdown import FENCE, REPO, SHELLS, markdown_files

DOCUMENTS = [
    path
    for path in markdown_files()
    if path.relative_to(REPO).parts[0] in ("docs", "connector") or path == REPO / "README.md"
]
SPAN = re.compile(r"`(oncegate [^`\n]+)`")
PLACEHOLDER = re.compile(r"<[^<>]+>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
# What a code span in prose may leave out: it names a command and an option, it is not one to run.
UNFINISHED = ("the following arguments are required", "expected one argument")
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


@dataclass(frozen=True)
class Named:
    """A command as a document writes it, where, and whether it is a whole line of a shell block."""

    where: str
    text: str
    in_block: bool

    @property
    def synopsis(self) -> bool:
        return bool(re.search(r"\[|\]|\w\|\w|\.\.\.\]", self.text))

    def __str__(self) -> str:
        return f"{self.where}: {self.text}"


def _block_lines(code: str) -> Iterator[tuple[int, str]]:
    """The block's lines, a line ending in a backslash joined to the next, with their offsets."""
    pending, start = "", 0
    for number, line in enumerate(code.splitlines()):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def named_in(path: Path) -> Iterator[Named]:
    text = path.read_text(encoding="utf-8")
    name = str(path.relative_to(REPO))
    for fence in FENCE.finditer(text):
        if fence["info"].strip().split(" ")[0] not in SHELLS:
            continue
        first = text.count("\n", 0, fence.start("code")) + 1
        for offset, line in _block_lines(fence["code"]):
            command = line.strip().removeprefix("$ ")
            if command.startswith("oncegate "):
                yield Named(f"{name}:{first + offset}", command, in_block=True)
    prose = FENCE.sub(lambda fence: "\n" * fence[0].count("\n"), text)
    for span in SPAN.finditer(prose):
        yield Named(f"{name}:{prose.count(chr(10), 0, span.start()) + 1}", span[1], in_block=False)


def in_the_help() -> Iterator[Named]:
    """The synopsis of the command's own help (the module docstring argparse prints)."""
    for number, line in enumerate((oncegate.cli.parser.__doc__ or "").splitlines(), start=1):
        words = line.split()
        if words[:1] == ["oncegate"]:
            yield Named(f"oncegate --help:{number}", " ".join(words), in_block=False)
        elif words and words[0] in ("claims", "conflicts", "flows", "scopes", "drill", "health") and len(words) > 1:
            # The remote commands, indented under "oncegate [--url URL] ... COMMAND".
            yield Named(f"oncegate --help:{number}", "oncegate " + line.split("  (")[0].strip(), in_block=False)


NAMED = [named for document in DOCUMENTS for named in named_in(document)] + list(in_the_help())


class Refused(Exception):
    pass


@pytest.fixture(scope="module")
def built_parser() -> argparse.ArgumentParser:
    """The command's parser, built once for the module (6 ms a build): parsing changes nothing in it."""
    return build_parser()


@pytest.fixture
def parser(built_parser: argparse.ArgumentParser, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The command's parser, raising what it would print and exit with."""

    def error(self: argparse.ArgumentParser, message: str) -> None:
        raise Refused(f"{self.prog}: {message}")

    monkeypatch.setattr(argparse.ArgumentParser, "error", error)
    return built_parser


def words(command: str) -> list[str]:
    """The command's arguments as the shell gives them, up to a comment, a pipe or the next command."""
    lexer = shlex.shlex(PLACEHOLDER.sub("X1", command), posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    found = []
    for word in lexer:
        if word and set(word) <= set(";&|<>"):
            break
        found.append(word)
    return found[1:]


def parsers_of(parser: argparse.ArgumentParser, path: list[str]) -> list[argparse.ArgumentParser]:
    """The parser of each command word of ``path`` in turn, from the top one."""
    chain = [parser]
    for word in path:
        choices = next(
            (action.choices for action in chain[-1]._actions if isinstance(action, argparse._SubParsersAction)), None
        )
        if choices is None or word not in choices:
            break
        chain.append(choices[word])
    return chain


def synopsis_problems(parser: argparse.ArgumentParser, named: Named) -> list[str]:
    text = PLACEHOLDER.sub("X1", named.text).split(None, 1)[1]
    # The command's words come first, before any option, placeholder or bracket.
    command = list(itertools.takewhile(lambda word: re.fullmatch(r"[a-z][a-z-]*", word), text.split()))
    chain = parsers_of(parser, command)
    if len(chain) <= len(command):
        return [f"{command[len(chain) - 1]} is no command of {chain[-1].prog}"]
    options = {option for each in chain for action in each._actions for option in action.option_strings}
    return [f"{option} is no option of {chain[-1].prog}" for option in OPTION.findall(text) if option not in options]


@pytest.mark.parametrize("named", NAMED, ids=str)
def test_a_command_a_document_names_exists_with_its_options(named: Named, parser: argparse.ArgumentParser) -> None:
    if named.synopsis:
        assert synopsis_problems(parser, named) == []
        return
    try:
        parser.parse_args(words(named.text))
    except Refused as refused:
        if named.in_block or not any(reason in str(refused) for reason in UNFINISHED):
            pytest.fail(f"{named}\n{refused}")


def test_the_documents_name_commands_and_the_check_refuses_a_wrong_one(parser: argparse.ArgumentParser) -> None:
    assert len(NAMED) > 50
    with pytest.raises(Refused, match=r"invalid choice: 'search'"):
        parser.parse_args(words("oncegate claims search --scope s --key k"))
    assert synopsis_problems(parser, Named("x", "oncegate serve [--threads N] [--turbo]", in_block=False)) == [
        "--turbo is no option of oncegate serve"
    ]
    assert synopsis_problems(parser, Named("x", "oncegate claims find [--all-pages]", in_block=False)) == []
    assert synopsis_problems(parser, Named("x", "oncegate claims search [--top N]", in_block=False)) == [
        "search is no command of oncegate claims"
    ]
