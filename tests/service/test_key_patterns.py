"""A scope's key pattern: its owner declares what the scope's keys look like, and such keys are accepted (issue 22).

An 11-digit customer number starting 13-19 has the shape of a China mobile number; a 16-digit
id written in groups may pass a card's checks. Only the scope's owner knows, so only a key of
that scope, matching the declared pattern whole, is let through; everything else is read as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from pydantic import ValidationError

from oncegate.domain.key_patterns import MAX_DECLARED_KEY, MAX_OPEN_REPEATS, declared, key_pattern_problem
from oncegate.domain.statuses import Decision
from oncegate.errors import SensitiveData, SensitiveKey
from oncegate.models import SetScopeRequest
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, scopes, set_scope

CUSTOMER_NUMBERS = r"1[3-9][0-9]{9}"


def test_a_key_of_the_declared_shape_is_accepted_in_its_scope_only(service: Gate) -> None:
    set_scope(service, key_pattern=CUSTOMER_NUMBERS)

    answer = claim(service, key="13800138000")

    assert answer.decision is Decision.PROCEED
    assert "sensitive_key" not in answer.warnings
    with pytest.raises(SensitiveKey):
        claim(service, scope="crm.create-contact", key="13800138000")
    # Matched whole: the same number inside a longer key is read as before.
    with pytest.raises(SensitiveKey):
        claim(service, key="call 13800138000")
    with pytest.raises(SensitiveKey):
        claim(service, key="ana@contoso.com")


def test_the_pattern_is_kept_on_the_store_and_read_by_every_instance(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    first, other = new_service(), new_service()
    with pytest.raises(SensitiveKey):
        claim(other, key="4111 1111 1111 1111")

    view = set_scope(first, key_pattern=r"[0-9]{4} [0-9]{4} [0-9]{4} [0-9]{4}")
    clock.advance(timedelta(seconds=31).total_seconds())  # the other instance reads registrations again

    assert view.key_pattern == "[0-9]{4} [0-9]{4} [0-9]{4} [0-9]{4}"
    assert scopes(other)[SCOPE].key_pattern == view.key_pattern
    assert claim(other, key="4111 1111 1111 1111").decision is Decision.PROCEED


def test_setting_the_scope_again_without_it_keeps_it_and_null_clears_it(service: Gate) -> None:
    set_scope(service, key_pattern=CUSTOMER_NUMBERS)
    set_scope(service, owner="team-erp")
    kept = scopes(service)[SCOPE].key_pattern
    accepted = claim(service, key="13800138000")
    set_scope(service, key_pattern=None)

    # Only what a request names changes (issue 31): a pattern stays until a request clears it.
    assert kept == CUSTOMER_NUMBERS
    assert accepted.decision is Decision.PROCEED
    assert scopes(service)[SCOPE].key_pattern is None
    with pytest.raises(SensitiveKey):
        claim(service, key="13800138001")


def test_a_pattern_carrying_personal_data_is_refused_as_stored_data(service: Gate) -> None:
    with pytest.raises(SensitiveData) as refused:
        set_scope(service, key_pattern="ana@contoso.com")

    assert refused.value.target == "keyPattern"


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("[0-9", "not a regular expression"),
        ("([0-9]+)+", "repeats a group"),
        ("(?:SO-[0-9]{4})*", "repeats a group"),
        (r"(a)\1", "refers back"),
        (r"\d*\d*\d*x", "open-ended repeats"),
        ("x" * 201, "200 characters"),
    ],
)
def test_a_pattern_that_could_not_be_matched_cheaply_is_refused_naming_the_field(pattern: str, problem: str) -> None:
    with pytest.raises(ValidationError) as refused:
        SetScopeRequest(scope=SCOPE, key_pattern=pattern)

    [error] = refused.value.errors()
    assert error["loc"] == ("key_pattern",)  # keyPattern on the wire, as the 400 names it
    assert problem in error["msg"]


@pytest.mark.parametrize(
    "pattern", [CUSTOMER_NUMBERS, "(?:SO|PO)-[0-9]{4}-[0-9]{6}", r"[A-Z]{2,4}-\d+", r"\d+-\d+", "(?=4)[0-9]{16}"]
)
def test_ordinary_patterns_are_accepted(pattern: str) -> None:
    assert key_pattern_problem(pattern) is None


def test_matching_stays_cheap_for_the_worst_pattern_allowed_and_long_keys_are_not_tried() -> None:
    """The most open-ended repeats allowed, then a character the key lacks: re backtracks through every way of
    sharing the key among them, about 0.2 ms of CPU for the longest key tried (one repeat more: 11 ms; the same
    two at 4,096 characters: 30 ms). Timed in this thread's CPU, which a wait for a core does not add to."""
    worst = r"\d*" * MAX_OPEN_REPEATS + "x"
    assert key_pattern_problem(worst) is None

    def cost(key: str) -> float:
        started = time.thread_time()
        declared(worst, key)
        return time.thread_time() - started

    declared(worst, "")  # compiled once, outside the time
    assert min(cost("1" * MAX_DECLARED_KEY) for _ in range(3)) < 0.005
    assert not declared("1+", "1" * (MAX_DECLARED_KEY + 1))
