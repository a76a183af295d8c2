"""The schedule of a waiting run's polls (issue 33), and what it promises a run whose holder is done after a while.

An engine following ``Retry-After`` from the first request on: the run waits from 0 s; the holder is done after
``hold`` seconds; the run's answer comes at the first poll at or after it. The service's side of the same promises,
through HTTP on both stores, is in ``tests/http/test_waiting.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from oncegate.domain.waiting import FIRST_POLL_SECONDS, MAX_POLL_SECONDS, Waiting, poll_after

WAIT = 900


def polled(hold: float, wait: int = WAIT) -> tuple[int, float]:
    """The polls an engine makes for a holder done after ``hold`` s, and how late after that it is answered."""
    now, polls = 0, 0
    while now < hold and now < wait:
        now += poll_after(timedelta(seconds=now), timedelta(seconds=wait - now))
        polls += 1
    return polls, now - hold


@given(st.floats(min_value=0, max_value=20))
def test_a_holder_done_within_20_s_is_seen_within_10_s(hold: float) -> None:
    assert polled(hold)[1] <= 10


def test_a_holder_done_after_10_minutes_takes_at_most_15_polls() -> None:
    assert polled(600)[0] <= 15


@given(st.floats(min_value=0, max_value=WAIT))
def test_the_run_is_answered_about_half_the_hold_late_at_most_and_never_past_the_longest_interval(hold: float) -> None:
    late = polled(hold)[1]

    assert late <= max(FIRST_POLL_SECONDS, hold / 2 + 1)  # intervals are whole seconds, rounded up
    assert late <= MAX_POLL_SECONDS


@given(st.integers(min_value=0, max_value=86_400), st.integers(min_value=0, max_value=86_400))
def test_intervals_grow_and_stay_within_bounds(waited: int, more: int) -> None:
    ahead = timedelta(days=2)
    first, later = poll_after(timedelta(seconds=waited), ahead), poll_after(timedelta(seconds=waited + more), ahead)

    assert FIRST_POLL_SECONDS <= first <= later <= MAX_POLL_SECONDS


@given(st.integers(min_value=0, max_value=3_600), st.floats(min_value=0.001, max_value=200))
def test_a_poll_never_comes_after_the_time_left_nor_at_once(waited: int, left: float) -> None:
    seconds = poll_after(timedelta(seconds=waited), timedelta(seconds=left))

    assert 1 <= seconds <= max(1, -(-left // 1))


def test_a_waiting_run_polls_by_the_sooner_of_its_deadline_and_the_holders_lease() -> None:
    began = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)
    waiting = Waiting("erp", "run-2", None, 300, (), 0, deadline=began + timedelta(seconds=100), since=began)
    later = began + timedelta(seconds=60)

    assert waiting.poll_after(later, None) == 30
    assert waiting.poll_after(later, began + timedelta(seconds=70)) == 10
    assert waiting.poll_after(began + timedelta(seconds=95), None) == 5
    assert waiting.poll_after(began + timedelta(seconds=98), began + timedelta(hours=1)) == 2
