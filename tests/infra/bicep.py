"""A small reader of the Bicep in ``infra/``, for tests that cannot run the Bicep CLI.

It knows just enough of the language for the templates here: comments and ``#disable-next-line``
directives, single-quoted strings with ``${...}`` interpolation, multi-line ``'''`` strings, and
top-level statements (decorators, ``param``, ``var``, ``resource``, ``module``, ``output``) that
start in the first column. It keeps two copies of the text at the same offsets: ``code`` (comments
blanked) and ``mask`` (string contents blanked too), so brackets and keys are found in the mask and
values read from the code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

OPENERS = "([{"
CLOSERS = ")]}"
RESOURCE = re.compile(r"resource\s+(\w+)\s+'([^'@]+)@([^']+)'(\s+existing)?")
MODULE = re.compile(r"module\s+(\w+)\s+'([^']+)'")
IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def _string_end(text: str, start: int) -> int:
    """Index just past the string literal opening at ``start``."""
    if text.startswith("'''", start):
        return text.index("'''", start + 3) + 3
    i = start + 1
    while text[i] != "'":
        if text[i] == "\\":
            i += 2
        elif text.startswith("${", i):
            i = _interpolation_end(text, i + 2)
        else:
            i += 1
    return i + 1


def _interpolation_end(text: str, start: int) -> int:
    """Index just past the ``}`` closing an interpolation whose expression starts at ``start``."""
    depth, i = 0, start
    while True:
        char = text[i]
        if char == "'":
            i = _string_end(text, i)
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return i + 1
            depth -= 1
        i += 1


def _blank(text: str) -> str:
    """Spaces for every character but line breaks, so offsets and line numbers survive."""
    return re.sub(r"[^\n]", " ", text)


def scan(text: str) -> tuple[str, str]:
    """``(code, mask)``: the text without comments, and that again without string contents."""
    code, mask = [], []
    i = 0
    while i < len(text):
        if text.startswith(("//", "#"), i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            code.append(_blank(text[i:end]))
            mask.append(_blank(text[i:end]))
        elif text.startswith("/*", i):
            end = text.index("*/", i) + 2
            code.append(_blank(text[i:end]))
            mask.append(_blank(text[i:end]))
        elif text[i] == "'":
            end = _string_end(text, i)
            code.append(text[i:end])
            mask.append("'" + re.sub(r"[^\n]", "x", text[i + 1 : end - 1]) + "'")
        else:
            end = i + 1
            code.append(text[i])
            mask.append(text[i])
        i = end
    return "".join(code), "".join(mask)


@dataclass(frozen=True)
class Statement:
    """One top-level declaration, with the decorators written directly above it."""

    code: str
    mask: str
    line: int
    decorators: tuple[str, ...]

    @property
    def keyword(self) -> str:
        return self.code.split(None, 1)[0]

    @property
    def name(self) -> str:
        return self.code.split()[1]

    @property
    def value(self) -> str:
        """The expression after the declaration's ``=`` (empty when it has none)."""
        position = self.mask.find("=")
        return self.code[position + 1 :].strip() if position >= 0 else ""

    def has_decorator(self, name: str) -> bool:
        return any(re.match(rf"@(sys\.)?{name}\(", decorator) for decorator in self.decorators)

    def property_values(self, key: str) -> list[str]:
        """Values of ``key: value`` lines anywhere in the statement's body."""
        return [match.group(1).strip() for match in re.finditer(rf"^[ \t]*{key}:[ \t]*(.+)$", self.code, re.M)]

    def object_keys(self) -> list[str]:
        """Keys of the object literal this statement's value is, at its first level."""
        start = self.mask.index("{", self.mask.find("="))
        keys, depth = [], 0
        for offset in range(start, len(self.mask)):
            char = self.mask[offset]
            if char in OPENERS:
                depth += 1
            elif char in CLOSERS:
                depth -= 1
            elif char == "\n" and depth == 1:
                match = re.match(r"[ \t]*([A-Za-z_]\w*)[ \t]*:", self.code[offset + 1 :])
                if match:
                    keys.append(match.group(1))
        return keys


def _lines(mask: str) -> list[tuple[int, int, int]]:
    """``(start, end, depth)`` of each line, ``depth`` being the bracket depth where it begins."""
    lines, depth, start = [], 0, 0
    for line in mask.splitlines(keepends=True):
        lines.append((start, start + len(line), depth))
        depth += sum(line.count(c) for c in OPENERS) - sum(line.count(c) for c in CLOSERS)
        start += len(line)
    return lines


class BicepFile:
    """One ``.bicep`` file, read as top-level statements."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.text = path.read_text(encoding="utf-8")
        self.code, self.mask = scan(self.text)

    @cached_property
    def statements(self) -> list[Statement]:
        chunks: list[tuple[int, int, int]] = []
        for number, (start, end, depth) in enumerate(_lines(self.mask), start=1):
            text = self.mask[start:end]
            if depth > 0 or (text.strip() and text[0].isspace()):
                chunks[-1] = (chunks[-1][0], end, chunks[-1][2])  # inside a statement, or its next line
            elif text.strip() or not self.text[start:end].strip():
                chunks.append((start, end, number))  # a statement starts, or a blank line separates
            # else a comment or directive line between statements: it neither starts nor separates
        statements: list[Statement] = []
        decorators: list[str] = []
        for start, end, line in chunks:
            code = self.code[start:end].strip()
            if not code:
                decorators = []
            elif code.startswith("@"):
                decorators.append(code)
            else:
                statements.append(Statement(code, self.mask[start:end].strip(), line, tuple(decorators)))
                decorators = []
        return statements

    def declarations(self, keyword: str) -> list[Statement]:
        return [statement for statement in self.statements if statement.keyword == keyword]

    def declaration(self, keyword: str, name: str) -> Statement:
        (found,) = [statement for statement in self.declarations(keyword) if statement.name == name]
        return found

    @property
    def target_scope(self) -> str:
        match = re.search(r"^targetScope\s*=\s*'(\w+)'", self.code, re.M)
        return match.group(1) if match else "resourceGroup"

    def resources(self) -> dict[str, tuple[str, str, bool]]:
        """Symbol -> (type, API version, existing) of every resource declaration."""
        found = {}
        for statement in self.declarations("resource"):
            match = RESOURCE.match(statement.code)
            assert match, f"{self.path.name}:{statement.line}: unreadable resource declaration"
            found[match.group(1)] = (match.group(2), match.group(3), bool(match.group(4)))
        return found

    def modules(self) -> dict[str, str]:
        """Symbol -> path of every module declaration."""
        found = {}
        for statement in self.declarations("module"):
            match = MODULE.match(statement.code)
            assert match, f"{self.path.name}:{statement.line}: unreadable module declaration"
            found[match.group(1)] = match.group(2)
        return found

    def resolved(self, text: str) -> str:
        """``text`` followed by the values of the variables it names, and of theirs, transitively."""
        variables = {statement.name: statement.value for statement in self.declarations("var")}
        seen: set[str] = set()
        pending = [text]
        parts = []
        while pending:
            part = pending.pop()
            parts.append(part)
            for name in IDENTIFIER.findall(part):
                if name in variables and name not in seen:
                    seen.add(name)
                    pending.append(variables[name])
        return "\n".join(parts)


def read_all(folder: Path) -> list[BicepFile]:
    return [BicepFile(path) for path in sorted(folder.rglob("*.bicep"))]
