"""Runs racing for one key, with real threads on real stores: exactly one may act.

Threads share a few service instances (as server threads share one process, and Functions
instances share one store), wait at a barrier, and all ask at once.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from oncegate.domain.statuses import ClaimStatus, Decision, EventKind
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim, history, record

RACERS = 24
INSTANCES = 4
T = TypeVar("T")


def race(new_service: Callable[[], Gate], attempt: Callable[[Gate, int], T]) -> list[T]:
    """``attempt(service, i)`` in RACERS threads released together; the results in thread order."""
    services = [new_service() for _ in range(INSTANCES)]
    barrier = threading.Barrier(RACERS)

    def run(index: int) -> T:
        barrier.wait(timeout=30)
        return attempt(services[index % INSTANCES], index)

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(run, range(RACERS)))


def test_runs_claiming_a_new_key_at_once_get_exactly_one_proceed(new_service: Callable[[], Gate]) -> None:
    answers = race(new_service, lambda service, i: claim(service, run=f"run-{i}"))

    assert Counter(answer.decision for answer in answers) == {Decision.PROCEED: 1, Decision.IN_PROGRESS: RACERS - 1}
    winner = next(answer for answer in answers if answer.decision is Decision.PROCEED)
    winner_run = f"run-{answers.index(winner)}"
    assert len({answer.holder.lease_expires_at for answer in answers if answer.holder}) == 1
    assert len({answer.claim_id for answer in answers}) == 1
    view = new_service().get_claim(winner.claim_id)
    assert (view.run_id, view.attempt) == (winner_run, 1)
    assert Counter(outcome for _, outcome in history(new_service(), winner.claim_id)) == {
        "proceed": 1,
        "in_progress": RACERS - 1,
    }


def test_runs_finding_an_expired_lease_at_once_get_exactly_one_reconcile(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    first = claim(new_service(), run="run-first", lease_seconds=60)
    clock.advance(61)

    answers = race(new_service, lambda service, i: claim(service, run=f"run-{i}"))

    assert Counter(answer.decision for answer in answers) == {Decision.RECONCILE: 1, Decision.IN_PROGRESS: RACERS - 1}
    winner = next(answer for answer in answers if answer.decision is Decision.RECONCILE)
    winner_run = f"run-{answers.index(winner)}"
    assert len({answer.holder.lease_expires_at for answer in answers if answer.holder}) == 1
    view = new_service().get_claim(first.claim_id)
    assert (view.run_id, view.attempt, view.status) == (winner_run, 2, ClaimStatus.IN_PROGRESS)


def test_the_same_result_sent_at_once_is_recorded_once(new_service: Callable[[], Gate]) -> None:
    answer = claim(new_service())

    views = race(new_service, lambda service, i: record(service, answer, target_record_id="SO-1"))

    assert {(view.status, view.target_record_id) for view in views} == {(ClaimStatus.SUCCEEDED, "SO-1")}
    assert history(new_service(), answer.claim_id).count((EventKind.RESULT, "succeeded")) == 1
