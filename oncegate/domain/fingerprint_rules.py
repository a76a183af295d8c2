"""A scope's fingerprint rules: which parts of ``payload`` make up the business data (issue 25).

A SharePoint or Dataverse trigger fires again with the same business data and a new ``Modified``,
``@odata.etag`` or version stamp. A scope's owner names the parts that matter (``include``) and
those that do not (``ignore``) as JSON Pointers (RFC 6901); the service fingerprints what
:func:`applied` leaves of the payload. One addition to RFC 6901: a segment ``*`` stands for every
item of an array (on an object it is the member named ``*``, as the RFC reads it).

- With ``include``, only the parts it points at are kept, where they were; then ``ignore`` removes
  parts of what is left. A pointer that matches nothing in a payload is no error: payloads vary.
- A payload that is not an object or array is fingerprinted whole.

The rules are versioned (:class:`~oncegate.domain.records.FingerprintRules`). A claim keeps the version
its fingerprint was made under, and the digest of each member of its payload
(:mod:`oncegate.domain.members`): a request is compared with it member by member under the current rules,
whenever the claim was made (issue 33). Its fingerprint, under the claim's version, still keys what
reviewers decided and the conflict's id; a claim without member digests is compared by it alone.
:func:`kept_rules` bounds the versions a scope keeps.

The presets list the system fields of two trigger bodies, which change with every edit of an item.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Container, Sequence
from enum import StrEnum
from typing import Any, Final

from oncegate.domain.records import FingerprintRules

WILDCARD = "*"
MAX_POINTERS = 64
MAX_POINTER_LENGTH = 256
# The characters of rules' versions a scope row keeps: four versions of 128 pointers of 256 characters (half a MiB
# of UTF-16 of Table Storage's 1 MiB entity, which the scope's counts and settings share).
RULES_BUDGET = 4 * 2 * MAX_POINTERS * (MAX_POINTER_LENGTH + 4) + 1024
# "~" escapes only "~0" (~) and "~1" (/) in RFC 6901. Compiled (re's cache) when a scope's rules are first checked,
# as the patterns below the first claim's path are: a new process compiles only those its first claim matches.
_BAD_ESCAPE = r"~(?![01])"


class _Missing:
    """What a pointer finds where the payload has nothing."""


MISSING: Final = _Missing()


class FingerprintPreset(StrEnum):
    """The trigger bodies a preset knows the system fields of."""

    SHAREPOINT = "sharepoint"
    DATAVERSE = "dataverse"


# The system fields a trigger changes on every edit of an item, whatever changed in it (issue 25).
PRESETS: dict[FingerprintPreset, tuple[str, ...]] = {
    # SharePoint "When an item is created or modified" (and "... file ... properties only"): the item's body.
    FingerprintPreset.SHAREPOINT: (
        "/@odata.etag",
        "/Modified",
        "/Editor",
        "/Editor#Claims",
        "/{VersionNumber}",
        "/OData__UIVersionString",
        "/{TriggerWindowStartToken}",
        "/{TriggerWindowEndToken}",
        "/{Thumbnail}",
    ),
    # Dataverse "When a row is added, modified or deleted": the row, with its annotations.
    FingerprintPreset.DATAVERSE: (
        "/@odata.etag",
        "/SdkMessage",
        "/RunAsSystemUserId",
        "/modifiedon",
        "/modifiedon@OData.Community.Display.V1.FormattedValue",
        "/_modifiedby_value",
        "/_modifiedby_value@Microsoft.Dynamics.CRM.lookuplogicalname",
        "/_modifiedby_value@OData.Community.Display.V1.FormattedValue",
        "/_modifiedby_type",
        "/_modifiedonbehalfby_value",
        "/_modifiedonbehalfby_value@Microsoft.Dynamics.CRM.lookuplogicalname",
        "/_modifiedonbehalfby_value@OData.Community.Display.V1.FormattedValue",
        "/versionnumber",
        "/versionnumber@OData.Community.Display.V1.FormattedValue",
        "/timezoneruleversionnumber",
        "/utcconversiontimezonecode",
    ),
}


def pointers_problem(pointers: Sequence[str], *, ignored: bool) -> str | None:
    """What is wrong with a list of pointers (the first bad one named); None when each is a JSON Pointer."""
    if len(pointers) > MAX_POINTERS:
        return f"at most {MAX_POINTERS} pointers, not {len(pointers)}"
    if ignored and "" in pointers:
        return "'' points at the whole payload, which cannot be ignored"
    return next((problem for pointer in pointers if (problem := pointer_problem(pointer))), None)


def pointer_problem(pointer: str) -> str | None:
    """What is wrong with ``pointer`` as an RFC 6901 JSON Pointer; None when it is one."""
    if len(pointer) > MAX_POINTER_LENGTH:
        return f"{pointer[:40]!r}… is over {MAX_POINTER_LENGTH} characters"
    if pointer and not pointer.startswith("/"):
        return f"{pointer!r} is not a JSON Pointer: it must start with '/' (RFC 6901), such as /Title"
    if re.search(_BAD_ESCAPE, pointer):
        return f"{pointer!r} is not a JSON Pointer: '~' must be followed by 0 (for ~) or 1 (for /)"
    return None


def segments(pointer: str) -> tuple[str, ...]:
    """The pointer's reference tokens, unescaped; the pointer must be valid (:func:`pointer_problem`)."""
    if not pointer:
        return ()
    return tuple(token.replace("~1", "/").replace("~0", "~") for token in pointer[1:].split("/"))


def rules(
    version: int, *, include: Sequence[str] = (), ignore: Sequence[str] = (), preset: FingerprintPreset | None = None
) -> FingerprintRules:
    """One version of the rules, with the preset's pointers as this release has them (each pointer once)."""
    return FingerprintRules(
        version=version,
        include=tuple(dict.fromkeys(include)),
        ignore=tuple(dict.fromkeys(ignore)),
        preset=preset.value if preset else None,
        preset_ignore=PRESETS[preset] if preset else (),
    )


def kept_rules(
    history: tuple[FingerprintRules, ...], in_use: Callable[[], Container[int]]
) -> tuple[FingerprintRules, ...]:
    """The versions a scope keeps: all while they fit :data:`RULES_BUDGET`, else the current one and, newest first,
    those a claim still uses (``in_use()``, asked only then: it reads the scope's claims) as long as they fit
    (issue 33).

    A scope row holds every version, and 15 versions of 128 long pointers filled it (a 413 for the next change).
    A claim whose version is gone is compared under the current rules: member by member as every claim with
    member digests is; by its fingerprint made under the current rules otherwise.
    """
    if sum(map(_size, history)) <= RULES_BUDGET:
        return history
    *older, current = history
    kept, size, used = [current], _size(current), in_use()
    for rules_ in reversed(older):
        if rules_.version in used and size + _size(rules_) <= RULES_BUDGET:
            kept.insert(0, rules_)
            size += _size(rules_)
    return tuple(kept)


def _size(rules_: FingerprintRules) -> int:
    """At least the UTF-16 code units one version takes in the scope row: each pointer JSON-escaped to ASCII (a
    control character is 6, a character outside the BMP 12), where the row holds 6 and 2."""
    pointers = (*rules_.include, *rules_.ignore, *rules_.preset_ignore, *rules_.matched)
    return 64 + sum(len(json.dumps(pointer)) + 1 for pointer in pointers)


def changed(current: FingerprintRules, wanted: FingerprintRules) -> bool:
    """Whether ``wanted`` is other rules than ``current``: only then a new version is made."""
    return (current.include, current.ignore, current.preset, current.preset_ignore) != (
        wanted.include,
        wanted.ignore,
        wanted.preset,
        wanted.preset_ignore,
    )


def applied(payload: Any, rules_: FingerprintRules) -> Any:
    """What the rules leave of ``payload``: the included parts, less the ignored ones."""
    if rules_.empty or not isinstance(payload, dict | list):
        return payload
    kept: Any = payload
    if rules_.include:
        kept = MISSING
        for pointer in rules_.include:
            kept = _merged(kept, _projected(payload, segments(pointer)))
        if kept is MISSING:
            kept = {} if isinstance(payload, dict) else []
        kept = _finished(kept)
    for pointer in rules_.ignored:
        kept = _without(kept, segments(pointer))
    return kept


def _index(token: str, items: list[Any]) -> int | None:
    # An array index in RFC 6901: "0", or ASCII digits without a leading zero.
    whole = token.isascii() and token.isdigit() and (token == "0" or token[0] != "0")
    return int(token) if whole and int(token) < len(items) else None


def _projected(value: Any, path: tuple[str, ...]) -> Any:
    """``value`` with only what ``path`` points at, where it was; MISSING when it points at nothing.

    An array keeps its length, its items not pointed at MISSING, so that two projections merge item by item.
    """
    if not path:
        return value
    token, rest = path[0], path[1:]
    if isinstance(value, dict):
        if token not in value:
            return MISSING
        inner = _projected(value[token], rest)
        return MISSING if inner is MISSING else {token: inner}
    if isinstance(value, list):
        chosen = range(len(value)) if token == WILDCARD else [i for i in [_index(token, value)] if i is not None]
        items = [_projected(item, rest) if i in chosen else MISSING for i, item in enumerate(value)]
        return MISSING if all(item is MISSING for item in items) else items
    return MISSING


def _merged(first: Any, second: Any) -> Any:
    if first is MISSING:
        return second
    if second is MISSING:
        return first
    if isinstance(first, dict) and isinstance(second, dict):
        return {**first, **{key: _merged(first.get(key, MISSING), value) for key, value in second.items()}}
    if isinstance(first, list) and isinstance(second, list):
        return [_merged(a, b) for a, b in zip(first, second, strict=True)]
    return first  # the same part of the payload, reached by two pointers


def _finished(value: Any) -> Any:
    """A projection as JSON: an array item nothing pointed at is null, so the array keeps its length."""
    if isinstance(value, dict):
        return {key: _finished(item) for key, item in value.items()}
    if isinstance(value, list):
        return [None if item is MISSING else _finished(item) for item in value]
    return value


def _without(value: Any, path: tuple[str, ...]) -> Any:
    """``value`` less what ``path`` points at (a copy where it changes); the whole value when it points at nothing."""
    if not path:
        return None  # "" ignores the whole payload
    token, rest = path[0], path[1:]
    if isinstance(value, dict):
        if token not in value:
            return value
        if not rest:
            return {key: item for key, item in value.items() if key != token}
        return {**value, token: _without(value[token], rest)}
    if isinstance(value, list):
        chosen = set(range(len(value))) if token == WILDCARD else {i for i in [_index(token, value)] if i is not None}
        if not rest:
            return [item for i, item in enumerate(value) if i not in chosen]
        return [_without(item, rest) if i in chosen else item for i, item in enumerate(value)]
    return value
