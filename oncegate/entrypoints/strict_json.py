"""Request bodies read as strict JSON: one object, unique members, finite numbers, Unicode text.

Python's ``json`` accepts what the contract refuses: ``NaN`` and ``Infinity``, numbers that
overflow to infinity (``1e400``, which would be stored as ``null``: data silently altered), a
member given twice (the last one silently wins), and a lone surrogate written as an escape
(``"\\ud800"``), which is not a character: UTF-8 cannot encode it, so every digest, HMAC and
canonical JSON made of the string failed with a 500 (issue 31; I-JSON, RFC 7493 §2.1, refuses it).
The decoder's hooks mark each where it occurs (an escape in the text, for a surrogate), and a walk
over the decoded body names the first by its path, as a validation error names a field. Done once
here, it holds for every string of every body, whatever its model declares.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, TypeAlias

from oncegate.errors import InvalidRequest

# A path into the body as a linked list (parent, part): extending one costs the same at any depth.
Path: TypeAlias = tuple["Path", str] | None
# UTF-8 cannot carry a surrogate (D800 to DFFF): one can only come from an escape. A surrogate pair decodes to
# one character, and an escaped backslash before "ud800" is plain text; the walk tells those apart.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _NonFinite(str):
    """A number that is not finite, as it was written."""


class _Duplicated(dict[str, Any]):
    """An object that gave ``member`` more than once."""

    member = ""


def read_object(raw: bytes, *, items: str | None = None) -> dict[str, Any]:
    """The body as a JSON object; 400 naming the body, or the field at fault, for anything else.

    With ``items``, the name of a bulk call's list: a defect inside one item refuses that item alone. The item
    is replaced by its refusal (an ``InvalidRequest`` naming the field within the item, as the single call's
    refusal would), and the caller answers it in the item's place; a defect outside the items refuses the body.
    """
    marked: list[bool] = []

    def number(literal: str) -> float | str:
        value = float(literal)
        if math.isfinite(value):
            return value
        marked.append(True)
        return _NonFinite(literal)

    def constant(name: str) -> str:
        marked.append(True)
        return _NonFinite(name)

    def members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) == len(pairs):
            return found
        marked.append(True)
        return _duplicated(found, pairs)

    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_float=number, parse_constant=constant, object_pairs_hook=members)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: arrays nested a few thousand deep fit in 64 KiB and exhaust the decoder's stack.
        raise InvalidRequest(f"The body is not valid UTF-8 JSON: {exc}", target="body") from exc
    if marked or SURROGATE_ESCAPE.search(text):
        listed = data.get(items) if items is not None and type(data) is dict else None
        if not isinstance(listed, list) or _defect({name: value for name, value in data.items() if name != items}):
            defect = _defect(data)
            if defect is not None:
                raise defect
            if marked:
                raise _first_defect(data)
        else:
            data[items] = [_defect(item) or item for item in listed]
    if not isinstance(data, dict):
        raise InvalidRequest("The body must be a JSON object.", target="body")
    return data


def _duplicated(found: dict[str, Any], pairs: list[tuple[str, Any]]) -> _Duplicated:
    seen: set[str] = set()
    duplicated = _Duplicated(found)
    for name, _ in pairs:
        if name in seen:
            duplicated.member = name
            break
        seen.add(name)
    return duplicated


def _first_defect(data: Any) -> InvalidRequest:
    """The refusal of the first marked value, in document order."""
    return _defect(data) or InvalidRequest("The body is not valid JSON for this service.", target="body")


def _defect(data: Any) -> InvalidRequest | None:
    """The refusal of the first marked value in ``data``, in document order; None when it has none."""
    stack: list[tuple[Any, Path]] = [(data, None)]
    while stack:  # iterative: the body may be nested as deep as the decoder allows
        node, path = stack.pop()
        if isinstance(node, _NonFinite):
            return _refusal(path, f"{node} is not a finite number")
        if isinstance(node, str) and not _is_text(node):
            return _refusal(path, _LONE_SURROGATE)
        if isinstance(node, _Duplicated):
            return _refusal((path, node.member), f"the member {node.member!r} is given more than once")
        if isinstance(node, dict) and (name := next((name for name in node if not _is_text(name)), None)):
            return _refusal((path, name.encode("utf-8", "backslashreplace").decode("ascii")), _LONE_SURROGATE)
        parts = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        stack.extend((child, (path, str(part))) for part, child in reversed(list(parts)))
    return None


_LONE_SURROGATE = "a lone surrogate (an escape from \\ud800 to \\udfff not in a pair) is not a character"


def _is_text(text: str) -> bool:
    """Whether ``text`` is Unicode text: no lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refusal(path: Path, message: str) -> InvalidRequest:
    parts: list[str] = []
    while path is not None:
        path, part = path
        parts.append(part)
    target = ".".join(reversed(parts)) or "body"
    return InvalidRequest(f"The request is not valid: {message} ({target}).", details=[(target, message)])
