"""Two payloads compared member by member under a scope's fingerprint rules (issue 33).

A claim keeps a keyed digest of each member of its payload, named by its JSON Pointer
(:func:`oncegate.domain.keys.member_digests`): rules set after the claim was made cannot be applied to its
fingerprint, since the payload itself is never kept, but they can be applied to its members. The shape of a
member (``o`` an object's member, ``a`` an array's item, one letter per segment) lets a ``*`` segment match
array items only, as :mod:`oncegate.domain.fingerprint_rules` reads it.

Two payloads are the same business data under some rules when every member the rules keep has the same
digest in both (:func:`changed` names those that differ). Members are compared where they are: an
array item ignored does not move the items after it, as it does in the fingerprint of the rules applied.
"""

from __future__ import annotations

from typing import Any

from oncegate.domain.fingerprint_rules import WILDCARD, segments
from oncegate.domain.keys import KeyHasher, Members, escaped, leaves
from oncegate.domain.records import FingerprintRules

# Of a conflict's changed members, this many are named; the rest are counted.
MAX_NAMED = 20


def kept(pointer: str, shape: str, rules: FingerprintRules) -> bool:
    """Whether the rules keep the member at ``pointer`` (of that shape): included (when they include), not ignored.

    The member ``""`` (the payload's kind, or the payload when it is a scalar) is always kept, as the rules keep it.
    """
    path = segments(pointer)
    if not path:
        return True
    if rules.include and not any(_within(path, shape, segments(rule)) for rule in rules.include):
        return False
    return not any(_within(path, shape, segments(rule)) for rule in rules.ignored)


def _within(path: tuple[str, ...], shape: str, rule: tuple[str, ...]) -> bool:
    """Whether the rule's pointer points at this member or at a part of the payload holding it."""
    if len(rule) > len(path):
        return False
    steps = zip(rule, path, shape, strict=False)
    return all(token == step or (token == WILDCARD and kind == "a") for token, step, kind in steps)


def changed(claimed: Members, asked: Members, rules: FingerprintRules, hasher: KeyHasher) -> tuple[str, ...]:
    """The members the rules keep whose digests differ (or that one of the two payloads lacks), in pointer order.

    A container whose members the rules all leave out is compared as the empty one the rules leave of it
    (:func:`_left`): ``{"Meta": {"ETag": "w1"}}`` with ``/Meta/ETag`` ignored is ``{"Meta": {}}``.
    """
    deep = [path for rule in rules.ignored if len(path := segments(rule)) > 1]
    if deep:
        claimed, asked = _left(claimed, deep, hasher), _left(asked, deep, hasher)
    differing = []
    for pointer in sorted(claimed.keys() | asked.keys()):
        mine, theirs = claimed.get(pointer), asked.get(pointer)
        if mine == theirs:
            continue
        shape = (mine or theirs or ":").split(":", 1)[0]
        if kept(pointer, shape, rules):
            differing.append(pointer)
    return tuple(differing)


def _left(found: Members, deep: list[tuple[str, ...]], hasher: KeyHasher) -> Members:
    """``found`` with each object or array inside the payload whose every member or item an ignore pointer (of two
    segments or more: a shorter one ignores the container itself) leaves out, as the empty one the rules applied to
    the payload leave (``hasher`` makes its digest, the one a payload sent with it empty has)."""
    # By length, each written as the members' pointers write their tokens: a container at depth n is emptied by
    # pointers of n + 1 segments only, compared token by token with the members' pointers as they are.
    by_length: dict[int, list[tuple[str, ...]]] = {}
    for rule in deep:
        by_length.setdefault(len(rule), []).append(tuple(map(escaped, rule)))
    emptied: dict[str, tuple[str, bool]] = {}
    for member, digest in found.items():
        shape, path = digest.split(":", 1)[0], member.split("/")  # "" first: a container of depth n is path[:n + 1]
        for length, rules in by_length.items():
            if length > len(shape):  # no container of that depth holds the member
                continue
            container = "/".join(path[:length])
            if not emptied.get(container, ("", True))[1]:
                continue
            ignored = any(
                all(
                    token == step or (token == WILDCARD and shape[n] == "a")
                    for n, (token, step) in enumerate(zip(rule, path[1 : length + 1], strict=True))
                )
                for rule in rules
            )
            emptied[container] = (shape[:length], ignored)  # its own shape, then its kind
    return {
        **found,
        **{
            container: hasher.emptied(container, kinds[:-1], kinds[-1])
            for container, (kinds, ignored) in emptied.items()
            if ignored
        },
    }


def unmatched(payload: Any, rules: FingerprintRules) -> tuple[str, ...]:
    """The include pointers that point at nothing in ``payload`` (a mistyped pointer makes every payload alike)."""
    if not rules.include or not isinstance(payload, dict | list):
        return ()
    places = [(segments(pointer), shape) for pointer, shape, _ in leaves(payload) if pointer]
    return tuple(
        rule for rule in rules.include if not any(_within(path, shape, segments(rule)) for path, shape in places)
    )


def named(pointers: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    """The changed members a conflict names (the first :data:`MAX_NAMED`) and how many more there are."""
    return pointers[:MAX_NAMED], max(0, len(pointers) - MAX_NAMED)
