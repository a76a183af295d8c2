"""``oncegate --help`` fitted to the terminal (issue 33): its synopsis and paragraphs wrapped at its width.

The description is written as it reads at 120 columns. In a narrower terminal each paragraph is filled
again, and each synopsis line (indented) breaks between whole options, never inside one: ``[--source S]``
and ``(alone: ...)`` stay together, and what goes to the next line is indented under the command.
"""

from __future__ import annotations

import argparse
import textwrap

OPENING = "[("
CLOSING = "])"
# A synopsis line continued on the next is indented this much more than the line.
HANGING = "    "


def options(line: str) -> list[str]:
    """The words of a synopsis line, a bracketed group (``[--top N]``, ``(alone: ...)``) as one."""
    units: list[str] = []
    depth = 0
    for word in line.split():
        if depth > 0:
            units[-1] += " " + word
        else:
            units.append(word)
        depth += sum(word.count(mark) for mark in OPENING) - sum(word.count(mark) for mark in CLOSING)
    return units


def fitted(text: str, width: int) -> str:
    """``text`` wrapped at ``width``: prose paragraphs filled again, indented synopsis lines broken between options."""
    paragraphs = []
    for paragraph in text.split("\n\n"):
        lines = paragraph.splitlines()
        if lines and not any(line.startswith(" ") for line in lines):
            paragraphs.append(textwrap.fill(" ".join(lines), width, break_long_words=False, break_on_hyphens=False))
        else:
            paragraphs.append("\n".join(_broken(line, width) for line in _joined(lines)))
    return "\n\n".join(paragraphs)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _joined(lines: list[str]) -> list[str]:
    """The synopsis lines with the continuations written under a long one (indented deeper) put back on it."""
    joined: list[str] = []
    for line in lines:
        if joined and _indent(line) > _indent(joined[-1]) + len(HANGING):
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def _broken(line: str, width: int) -> str:
    if len(line) <= width:
        return line
    indent = line[: _indent(line)]
    broken = [indent]
    for unit in options(line):
        if broken[-1].strip() and len(broken[-1]) + 1 + len(unit) > width:
            broken.append(indent + HANGING)
        broken[-1] += (" " if broken[-1].strip() else "") + unit
    return "\n".join(broken)


class FittedDescription(argparse.RawDescriptionHelpFormatter):
    """The description as written, wrapped at the terminal's width (the options argparse wraps itself)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.indent(fitted(text, width), indent)
