"""A scope's key pattern: what its owner declares the scope's keys look like (issue 22).

Some business ids cannot be told from personal data by their digits: an 11-digit customer number
starting 13-19 is a China mobile number's shape, a 16-digit id with a card's prefix passes Luhn
one time in ten. The scope's owner knows; they declare the shape with Set scope, and a key of the
scope that matches it whole is never refused (nor flagged) as personal data. Keys that do not
match are read by the detectors as before.

The pattern is a Python regular expression, matched with ``re.fullmatch`` against the key as the
caller sent it. It is run on every claim of the scope, so it must stay cheap whatever the key:
it is at most 200 characters, repeats single characters or classes only (no repeated group, no
back-reference: ``(a+)+`` backtracks exponentially), with at most two open-ended repeats
(``\\d+-\\d+``), and is tried on keys of at most 256 characters (the declared ids are short; a
longer key is read by the detectors).
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any

MAX_PATTERN_LENGTH = 200
MAX_DECLARED_KEY = 256
MAX_OPEN_REPEATS = 2
# A repeat of more than this many is as open-ended as "+" for the backtracking it may cause.
OPEN_REPEAT = 64
# Python's own parser of regular expressions: the shape of the pattern, as re compiles it.
_parser: Any = importlib.import_module("re._parser")
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}
_ONE_CHARACTER = {"LITERAL", "NOT_LITERAL", "IN", "ANY", "CATEGORY"}


def key_pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be a scope's key pattern, in a sentence; None when it can."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"the key pattern is longer than {MAX_PATTERN_LENGTH} characters"
    try:
        parsed = _parser.parse(pattern)
    except re.error as exc:
        return f"the key pattern is not a regular expression: {exc}"
    open_repeats = 0
    stack = [parsed]
    while stack:
        for op, argument in stack.pop():
            name = str(op)
            if name in {"GROUPREF", "GROUPREF_EXISTS"}:
                return "the key pattern refers back to a group; write the key's shape without back-references"
            if name in _REPEATS:
                _, high, body = argument
                if len(body) != 1 or str(body[0][0]) not in _ONE_CHARACTER:
                    return "the key pattern repeats a group; repeat single characters or classes, such as [0-9]{16}"
                open_repeats += high == _parser.MAXREPEAT or high > OPEN_REPEAT
            stack.extend(_nested(name, argument))
    if open_repeats > MAX_OPEN_REPEATS:
        return f"the key pattern has more than {MAX_OPEN_REPEATS} open-ended repeats (such as + or *)"
    return None


def _nested(name: str, argument: Any) -> list[Any]:
    """The sub-patterns of one parsed item: a group's, each branch's, an assertion's."""
    if name == "SUBPATTERN":
        return [argument[-1]]
    if name == "BRANCH":
        return list(argument[1])
    if name in {"ASSERT", "ASSERT_NOT"}:
        return [argument[1]]
    if name == "ATOMIC_GROUP":
        return [argument]
    return []


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """The pattern compiled once per process; None for one that was stored before a check refused it."""
    return None if key_pattern_problem(pattern) else re.compile(pattern)


def declared(pattern: str | None, key: str) -> bool:
    """Whether ``key`` has the shape its scope's owner declared (``pattern``, matched whole)."""
    compiled = _compiled(pattern) if pattern is not None and len(key) <= MAX_DECLARED_KEY else None
    return compiled is not None and compiled.fullmatch(key) is not None
