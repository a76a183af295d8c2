"""A call in doubt is judged over on another instance's clock only past its deadline and the clocks' margin.

Each instance's clock may be up to MAX_CLOCK_SKEW from the store's as measured (further is refused ``503
clock_skew``), and the measurement itself is uncertain by the store's whole-second Date and the round trip of the
reading: an instance the check lets through may really be further off, and two instances twice that apart. The
instance that sent a call ends it by the deadline its claim records, on its own clock; another whose clock is ahead
judged that deadline passed while the call could still reach the target: its look-up found nothing yet, and the
claim was handed to a flow that made the order itself, a second one. Each test runs two instances over one store
(both stores): the sender's clock as far behind the true time as the check lets through with a reading over a round
trip of a second, the judge's as far ahead, both moved by one fake clock; the look-up or hand-over comes no sooner
than the sender's call really ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import CALL_DEADLINE_MARGIN
from oncegate.domain.safeguard import MAX_CLOCK_SKEW, STORE_CLOCK_RESOLUTION, check_clock
from oncegate.domain.targets import Target
from oncegate.domain.times import said
from oncegate.errors import ClockSkewed
from oncegate.models import ClaimRequest, ClaimResponse
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.perform.calls import perform
from tests.perform.test_call_deadline import claim_body, recorded_deadline
from tests.support.target_server import Answer, Record, StandInTarget

KEY = "SO-skew"
# How far into the sender's call the judge asks, on the true time: the call may still reach the target.
WITHIN_THE_CALL = 0.5
# A round trip of a reading of the store's clock (a real one, not the loopback's few milliseconds).
ROUND_TRIP = timedelta(seconds=1)
# A whole second of the store's clock, as its Date header says it.
STORE_SECOND = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)


def reading(skew: timedelta, round_trip: timedelta) -> StoreMarks:
    """What an instance whose clock is ``skew`` from the store's reads of the store's clock over ``round_trip``,
    the store answering where the measurement is furthest off: for an instance ahead, at the end of the round trip
    and on the store's whole second; behind, at its start and just before the next second."""
    if skew > timedelta(0):
        asked = STORE_SECOND - round_trip
    else:
        asked = STORE_SECOND + STORE_CLOCK_RESOLUTION - timedelta(microseconds=1)
    return StoreMarks(
        store_id="s", secrets=(), clock=STORE_SECOND, asked_at=asked + skew, answered_at=asked + round_trip + skew
    )


def accepted(skew: timedelta, round_trip: timedelta) -> bool:
    try:
        check_clock(reading(skew, round_trip))
    except ClockSkewed:
        return False
    return True


def furthest_accepted(round_trip: timedelta, sign: int) -> timedelta:
    """The furthest an instance's clock really is from the store's (ahead or behind) that the check lets through
    on a reading over ``round_trip``, to the millisecond."""
    low, high = 0, 120_000  # milliseconds
    while low < high:
        middle = (low + high + 1) // 2
        if accepted(sign * timedelta(milliseconds=middle), round_trip):
            low = middle
        else:
            high = middle - 1
    return timedelta(milliseconds=low)


# The sender and the judge, each just inside what the check lets through.
EDGE = furthest_accepted(ROUND_TRIP, 1)


@pytest.fixture
def instances(open_store: Callable[[], ClaimStore], clock: FakeClock, erp_store: Target) -> Iterator[tuple[Gate, Gate]]:
    """The sender, its clock behind, and the judge, its clock ahead, over the same store."""

    def instance(offset: float) -> Gate:
        moved = EDGE * offset
        return Gate(open_store(), KeyHasher(KEY_SECRET), clock=lambda: clock() + moved, targets_allow_loopback=True)

    sender, judge = instance(-1), instance(1)
    yield sender, judge
    sender.close()
    judge.close()


@pytest.mark.parametrize("milliseconds", [0, 20, 300, 1000, 2500, 10_000, 60_000])
def test_the_margin_covers_two_instances_the_clock_check_lets_through(milliseconds: int) -> None:
    round_trip = timedelta(milliseconds=milliseconds)
    ahead, behind = furthest_accepted(round_trip, 1), furthest_accepted(round_trip, -1)

    assert ahead + behind <= CALL_DEADLINE_MARGIN, "two instances the check lets through are further apart"
    if round_trip <= ROUND_TRIP:  # over a round trip of a second at most, the check lets through what it did before
        before = MAX_CLOCK_SKEW + STORE_CLOCK_RESOLUTION + round_trip - timedelta(milliseconds=2)
        assert min(ahead, behind) >= before


def test_the_margin_is_no_wider_than_the_clock_check_needs() -> None:
    ahead, behind = furthest_accepted(ROUND_TRIP, 1), furthest_accepted(ROUND_TRIP, -1)

    assert CALL_DEADLINE_MARGIN - (ahead + behind) <= timedelta(milliseconds=2)
    assert ahead == EDGE


class InDoubt(NamedTuple):
    """A call the sender sent, in doubt: when any clock may hand its claim over (the recorded deadline and the
    margin, up to the second), when the call really ended (its deadline on the sender's clock, EDGE behind the true
    time), and the seconds until the hand-over on the judge's clock (EDGE ahead)."""

    over: datetime
    ended: datetime
    left: float


def sent_in_doubt(sender: Gate, stand_in: StandInTarget, clock: FakeClock) -> InDoubt:
    """The sender's call answered 504 by a gateway while the order system goes on making the order. The fake clock
    is moved to when the judge asks, the call still within its time on the sender's clock."""
    stand_in.script(Answer(status=504, commit=False))
    first = perform(sender, KEY, "run-1")
    assert first.decision.value == "reconcile", first
    clock.advance(WITHIN_THE_CALL)
    deadline = recorded_deadline(sender, first.claim_id)
    over = deadline + CALL_DEADLINE_MARGIN
    over = over.replace(microsecond=0) + timedelta(seconds=1) if over.microsecond else over
    return InDoubt(over, deadline + EDGE, (over - (clock() + EDGE)).total_seconds())


def test_perform_once_on_an_instance_ahead_looks_up_no_call_the_sender_may_still_be_making(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    over, ended, _ = sent_in_doubt(sender, stand_in, clock)

    early = perform(judge, KEY, "run-2")
    stand_in.records.append(Record("order-0", KEY, None))  # the order system made the call's order by its deadline
    clock.advance(early.retry_after_seconds or 0)
    looked_at = clock()
    later = perform(judge, KEY, "run-2")

    assert (early.decision.value, early.claim_token) == ("in_progress", None), early
    assert f"until {said(over)}" in early.reason, "the reason names a time before the look-up"
    assert looked_at >= ended, "looked up before the sender's call really ended"
    assert (later.decision.value, later.target_record_id) == ("duplicate", "order-0"), later
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert len(stand_in.records) == 1


def ask(judge: Gate) -> ClaimResponse:
    return judge.check_and_claim(ClaimRequest.model_validate(claim_body(KEY, "run-2"), by_name=False))


def test_check_and_claim_on_an_instance_ahead_hands_no_call_over_the_sender_may_still_be_making(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    _, ended, left = sent_in_doubt(sender, stand_in, clock)

    early = ask(judge)
    clock.advance(left - 0.001)
    still = ask(judge)
    clock.advance(0.001)
    handed_at = clock()
    handed = ask(judge)

    assert (early.decision.value, early.claim_token) == ("in_progress", None), early
    assert left <= (early.retry_after_seconds or 0) < left + 1, "asked again before the hand-over, or long after"
    assert (still.decision.value, still.claim_token) == ("in_progress", None), still
    assert handed.decision.value == "reconcile", handed
    assert handed_at >= ended, "handed over before the sender's call really ended"
    assert handed.claim_token
    assert [request.method for request in stand_in.received] == ["POST"]


def test_a_wait_on_an_instance_ahead_polls_no_sooner_than_the_hand_over(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    _, ended, left = sent_in_doubt(sender, stand_in, clock)

    waited, waiting = judge.check_and_wait(ClaimRequest.model_validate(claim_body(KEY, "run-2"), by_name=False))
    assert waiting is not None, waited
    clock.advance(waited.retry_after_seconds or 0)
    polled_at = clock()
    polled, _ = judge.poll(waiting)

    assert (waited.decision.value, waited.claim_token) == ("in_progress", None), waited
    assert (waited.retry_after_seconds or 0) >= left, "the poll came before the claim could be handed over"
    assert polled.decision.value == "reconcile", polled
    assert polled_at >= ended, "handed over before the sender's call really ended"
    assert polled.claim_token


def test_the_watch_on_an_instance_ahead_looks_up_no_call_the_sender_may_still_be_making(
    instances: tuple[Gate, Gate], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    sender, judge = instances
    _, ended, left = sent_in_doubt(sender, stand_in, clock)

    early = judge.services.perform.look_up_all_in_doubt()
    methods = [request.method for request in stand_in.received]
    stand_in.records.append(Record("order-0", KEY, None))  # the order system made the call's order by its deadline
    clock.advance(left)
    found_at = clock()
    found = judge.services.perform.look_up_all_in_doubt()

    assert (early, methods) == (0, ["POST"]), "looked up while the call could still reach the target"
    assert found == 1
    assert found_at >= ended, "looked up before the sender's call really ended"
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
