"""A call in doubt is judged over on another instance's clock only past its deadline and the clocks' margin.

Each instance's clock may be up to MAX_CLOCK_SKEW from the store's (further is refused ``503 clock_skew``), so two
instances' may be twice that apart. The instance that sent a call ends it by the deadline its claim records, on its
own clock; another whose clock is ahead judged that deadline passed while the call could still reach the target: its
look-up found nothing yet, and the claim was handed to a flow that made the order itself, a second one. Each test
runs two instances over one store (both stores): the sender's clock MAX_CLOCK_SKEW behind the true time, the judge's
as far ahead, both moved by one fake clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import CALL_DEADLINE_MARGIN
from oncegate.domain.safeguard import MAX_CLOCK_SKEW
from oncegate.domain.targets import Target
from oncegate.domain.times import said
from oncegate.models import ClaimRequest, ClaimResponse
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.perform.test_call_deadline import claim_body, perform, recorded_deadline
from tests.support.target_server import Answer, Record, StandInTarget

KEY = "SO-skew"
# How far into the sender's call the judge asks, on the true time: the call may still reach the target.
WITHIN_THE_CALL = 0.5


@pytest.fixture
def instances(open_store: Callable[[], ClaimStore], clock: FakeClock, erp_store: Target) -> Iterator[tuple[Gate, Gate]]:
    """The sender, its clock behind, and the judge, its clock ahead, over the same store."""

    def instance(offset: float) -> Gate:
        moved = MAX_CLOCK_SKEW * offset
        return Gate(open_store(), KeyHasher(KEY_SECRET), clock=lambda: clock() + moved, targets_allow_loopback=True)

    sender, judge = instance(-1), instance(1)
    yield sender, judge
    sender.close()
    judge.close()


def test_the_margin_is_twice_the_clock_skew_one_instance_may_have() -> None:
    assert CALL_DEADLINE_MARGIN == 2 * MAX_CLOCK_SKEW


def sent_in_doubt(sender: Gate, stand_in: StandInTarget, clock: FakeClock) -> str:
    """The sender's call answered 504 by a gateway while the order system goes on making the order: the claim id.
    The fake clock is moved to when the judge asks, the call still within its time on the sender's clock."""
    stand_in.script(Answer(status=504, commit=False))
    first = perform(sender, KEY, "run-1")
    assert first.decision.value == "reconcile", first
    clock.advance(WITHIN_THE_CALL)
    return first.claim_id


def handed_over_at(sender: Gate, claim_id: str) -> datetime:
    """When the claim may be handed over on any clock: the recorded deadline and the margin, up to the second."""
    over = recorded_deadline(sender, claim_id) + CALL_DEADLINE_MARGIN
    return over.replace(microsecond=0) + timedelta(seconds=1) if over.microsecond else over


def test_perform_once_on_an_instance_ahead_looks_up_no_call_the_sender_may_still_be_making(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    over = handed_over_at(sender, sent_in_doubt(sender, stand_in, clock))

    early = perform(judge, KEY, "run-2")
    stand_in.records.append(Record("order-0", KEY, None))  # the order system made the call's order by its deadline
    clock.advance(early.retry_after_seconds or 0)
    later = perform(judge, KEY, "run-2")

    assert (early.decision.value, early.claim_token) == ("in_progress", None), early
    assert f"until {said(over)}" in early.reason, "the reason names a time before the look-up"
    assert (later.decision.value, later.target_record_id) == ("duplicate", "order-0"), later
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert len(stand_in.records) == 1


def ask(judge: Gate) -> ClaimResponse:
    return judge.check_and_claim(ClaimRequest.model_validate(claim_body(KEY, "run-2"), by_name=False))


def test_check_and_claim_on_an_instance_ahead_hands_no_call_over_the_sender_may_still_be_making(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    over = handed_over_at(sender, sent_in_doubt(sender, stand_in, clock))
    left = (over - (clock() + MAX_CLOCK_SKEW)).total_seconds()  # on the judge's clock

    early = ask(judge)
    clock.advance(left - 0.001)
    still = ask(judge)
    clock.advance(0.001)
    handed = ask(judge)

    assert (early.decision.value, early.claim_token) == ("in_progress", None), early
    assert left <= (early.retry_after_seconds or 0) < left + 1, "asked again before the hand-over, or long after"
    assert (still.decision.value, still.claim_token) == ("in_progress", None), still
    assert handed.decision.value == "reconcile", handed
    assert handed.claim_token
    assert [request.method for request in stand_in.received] == ["POST"]


def test_a_wait_on_an_instance_ahead_polls_no_sooner_than_the_hand_over(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    over = handed_over_at(sender, sent_in_doubt(sender, stand_in, clock))
    left = (over - (clock() + MAX_CLOCK_SKEW)).total_seconds()

    waited, waiting = judge.check_and_wait(ClaimRequest.model_validate(claim_body(KEY, "run-2"), by_name=False))
    assert waiting is not None, waited
    clock.advance(waited.retry_after_seconds or 0)
    polled, _ = judge.poll(waiting)

    assert (waited.decision.value, waited.claim_token) == ("in_progress", None), waited
    assert (waited.retry_after_seconds or 0) >= left, "the poll came before the claim could be handed over"
    assert polled.decision.value == "reconcile", polled
    assert polled.claim_token


def test_the_watch_on_an_instance_ahead_looks_up_no_call_the_sender_may_still_be_making(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    over = handed_over_at(sender, sent_in_doubt(sender, stand_in, clock))
    left = (over - (clock() + MAX_CLOCK_SKEW)).total_seconds()

    early = judge.services.perform.look_up_all_in_doubt()
    methods = [request.method for request in stand_in.received]
    stand_in.records.append(Record("order-0", KEY, None))  # the order system made the call's order by its deadline
    clock.advance(left)
    found = judge.services.perform.look_up_all_in_doubt()

    assert (early, methods) == (0, ["POST"]), "looked up while the call could still reach the target"
    assert found == 1
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
