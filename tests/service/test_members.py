"""Member digests against the payloads they stand for (issue 33): compared part by part, two payloads are the
same business data exactly when what the rules keep of them is the same JSON."""

from __future__ import annotations

from typing import Any

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from oncegate.domain.fingerprint_rules import applied, rules
from oncegate.domain.keys import KeyHasher
from oncegate.domain.members import changed, unmatched
from tests.conftest import KEY_SECRET

HASHER = KeyHasher(KEY_SECRET)
NAMES = st.sampled_from(["a", "b", "c", "a/b", "~", "*", "0"])
SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["x", "y", ""])
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3))
OBJECTS = st.dictionaries(NAMES, JSON, max_size=4)


def same(first: Any, second: Any) -> bool:
    return bool(rfc8785.dumps(first) == rfc8785.dumps(second))


def differing(first: Any, second: Any, **rule: Any) -> tuple[str, ...]:
    members = HASHER.members(first), HASHER.members(second)
    assert members[0] is not None
    assert members[1] is not None
    return changed(members[0], members[1], rules(1, **rule), HASHER)


@given(JSON, JSON)
def test_without_rules_the_members_differ_exactly_when_the_payloads_do(first: Any, second: Any) -> None:
    assert (differing(first, second) == ()) is same(first, second)


@given(OBJECTS, OBJECTS, st.sets(NAMES))
def test_ignored_members_never_differ_and_the_others_do_as_the_payloads_do(
    first: dict[str, Any], second: dict[str, Any], ignored: set[str]
) -> None:
    ignore = [f"/{name.replace('~', '~0').replace('/', '~1')}" for name in ignored]
    kept = ({k: v for k, v in first.items() if k not in ignored}, {k: v for k, v in second.items() if k not in ignored})

    assert (differing(first, second, ignore=ignore) == ()) is same(*kept)


@given(OBJECTS, OBJECTS, st.sets(NAMES, min_size=1))
def test_included_members_differ_as_the_payloads_do_and_the_others_never(
    first: dict[str, Any], second: dict[str, Any], included: set[str]
) -> None:
    include = [f"/{name.replace('~', '~0').replace('/', '~1')}" for name in included]
    kept = ({k: v for k, v in first.items() if k in included}, {k: v for k, v in second.items() if k in included})

    assert (differing(first, second, include=include) == ()) is same(*kept)


# Ignore pointers two deep, naming object members or every array item: the fingerprint of the rules applied
# (``applied``) is then the oracle, since no ignored array item moves the items after it.
DEEP_IGNORES = st.lists(
    st.tuples(NAMES.filter(lambda name: name != "0"), NAMES.filter(lambda name: name != "0")).map(
        lambda pair: "/" + "/".join(name.replace("~", "~0").replace("/", "~1") for name in pair)
    ),
    max_size=3,
)


@given(OBJECTS, OBJECTS, DEEP_IGNORES)
def test_members_ignored_inside_an_object_or_array_differ_exactly_when_what_the_rules_leave_does(
    first: dict[str, Any], second: dict[str, Any], ignore: list[str]
) -> None:
    left = rules(1, ignore=ignore)

    assert (differing(first, second, ignore=ignore) == ()) is same(applied(first, left), applied(second, left))


def test_a_container_whose_members_are_all_ignored_is_the_empty_one_it_becomes() -> None:
    sent = {"Amount": 1, "Meta": {"ETag": "w1"}, "Attachments": ["a.pdf"]}
    ignore = ["/Meta/ETag", "/Attachments/*"]

    assert differing(sent, {"Amount": 1, "Meta": {}, "Attachments": []}, ignore=ignore) == ()
    assert differing({"Amount": 1, "Meta": {}, "Attachments": []}, sent, ignore=ignore) == ()
    assert differing(sent, {"Amount": 1, "Meta": [], "Attachments": {}}, ignore=ignore) == ("/Attachments", "/Meta")
    # As {"Meta": {}} against {"Meta": {"Id": 1}}: the empty object left, and the member added.
    assert differing(sent, {"Amount": 1, "Meta": {"ETag": "w2", "Id": 1}, "Attachments": []}, ignore=ignore) == (
        "/Meta",
        "/Meta/Id",
    )
    # A container present only in the re-fire, its members all ignored, is the empty one added (as in the fingerprint).
    assert differing({"Amount": 1}, {"Amount": 1, "Meta": {"ETag": "w2"}}, ignore=ignore) == ("/Meta",)


def test_changed_parts_are_named_by_pointer_and_a_wildcard_reaches_array_items_only() -> None:
    order = {"Amount": 1, "Lines": [{"Qty": 1, "At": "09:00"}, {"Qty": 2, "At": "09:00"}], "*": {"At": 1}}
    edited = {"Amount": 2, "Lines": [{"Qty": 1, "At": "10:00"}, {"Qty": 3, "At": "10:00"}], "*": {"At": 2}}

    assert differing(order, edited, ignore=["/Lines/*/At"]) == ("/*/At", "/Amount", "/Lines/1/Qty")


def test_an_include_pointer_matching_no_member_is_unmatched() -> None:
    found = unmatched({"Amount": 1, "Lines": [{"Qty": 1}]}, rules(1, include=["/Amount", "/Lines/*/Qty", "/Amout"]))

    assert found == ("/Amout",)
