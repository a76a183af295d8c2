"""What the flow inventory costs the claim path on Table Storage, counted in HTTP requests.

A new claim stays one request (the claim and its history row in one transaction) and a duplicate
three (the refused insert, the read, the history row): registrations come from the instance's
cache and counts from memory. The cache costs two list queries once per TTL. A poll of a waiting
run that nothing changed is one read, however many runs poll at once (issue 36).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Decision
from oncegate.domain.waiting import Waiting
from oncegate.models import ClaimRequest
from oncegate.service.inventory import FLUSH_INTERVAL, REGISTRY_TTL
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW, FLOW_COPY, KEY, SCOPE, claim, record, register, set_scope, succeeded
from tests.support.azurite import TableStoreFactory

pytestmark = pytest.mark.azurite


class Requests:
    """An azure-core ``raw_response_hook``: counts the HTTP requests that got an answer."""

    def __init__(self) -> None:
        self.count = 0
        self.methods: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, response: Any) -> None:
        with self._lock:  # threads poll at once
            self.count += 1
            self.methods.append(response.http_request.method)

    def of(self, action: Callable[[], object]) -> int:
        """How many requests ``action`` made."""
        before = self.count
        action()
        return self.count - before


@pytest.fixture
def requests() -> Requests:
    return Requests()


@pytest.fixture
def service(table_store_factory: TableStoreFactory, requests: Requests, clock: FakeClock) -> Gate:
    """A service on Table Storage whose every request is counted, with a registered flow and a configured scope."""
    served = Gate(table_store_factory(raw_response_hook=requests), KeyHasher(KEY_SECRET), clock=clock)
    register(served, owner="ana@contoso.com")
    set_scope(served, lease_seconds=600)
    succeeded(served, key="WARM-UP")
    return served


def test_a_new_claim_is_one_request_and_a_duplicate_three(service: Gate, requests: Requests) -> None:
    answers = []

    new = requests.of(lambda: answers.append(claim(service, run="run-1")))
    record(service, answers[0], target_record_id="SO-1")
    duplicate = requests.of(lambda: answers.append(claim(service, run="run-2")))
    from_a_copy = requests.of(lambda: answers.append(claim(service, run="run-3", flow=FLOW_COPY)))

    assert [answer.decision for answer in answers] == [Decision.PROCEED, Decision.DUPLICATE, Decision.DUPLICATE]
    assert "another_flow_copy" in answers[2].warnings
    assert (new, duplicate, from_a_copy) == (1, 3, 3)


def test_the_registry_is_read_again_once_per_ttl(service: Gate, requests: Requests, clock: FakeClock) -> None:
    clock.advance(REGISTRY_TTL.total_seconds())

    refreshed = requests.of(lambda: claim(service, run="run-1", key="ORDER-1"))
    cached = requests.of(lambda: claim(service, run="run-2", key="ORDER-2"))

    assert (refreshed, cached) == (3, 1)


def test_counts_are_flushed_once_per_interval(service: Gate, requests: Requests, clock: FakeClock) -> None:
    clock.advance(FLUSH_INTERVAL.total_seconds())

    flushing = requests.of(lambda: claim(service, run="run-1", key="ORDER-1"))
    after = requests.of(lambda: claim(service, run="run-2", key="ORDER-2"))

    # Two list queries for the registry, the claim, then per table with counts one list and one write.
    assert (flushing, after) == (2 + 1 + 2 + 2, 1)


POLLERS = 8


def waiting_run(service: Gate, run: str) -> Waiting:
    request = ClaimRequest(scope=SCOPE, key=KEY, run_id=run, flow=FLOW, payload={"order": "SO-1"}, max_wait_seconds=900)
    answer, waiting = service.check_and_wait(request)
    assert answer.decision is Decision.IN_PROGRESS
    assert waiting is not None
    return waiting


def test_a_poll_that_nothing_changed_is_one_read(service: Gate, requests: Requests, clock: FakeClock) -> None:
    """Issue 36: it was 3 (a refused insert, a read, a merge of the series line counting in_progress answers)."""
    held = claim(service, run="run-0", payload={"order": "SO-1"})
    waiting: Waiting | None = waiting_run(service, "run-1")
    made: list[int] = []
    for _ in range(3):
        clock.advance(5)
        assert waiting is not None
        before = len(requests.methods)
        waiting = service.poll(waiting)[1]
        made.append(len(requests.methods) - before)
        assert requests.methods[before:] == ["GET"]
    record(service, held, "succeeded", target_record_id="SO-1")
    assert waiting is not None

    before = len(requests.methods)
    ending = service.poll(waiting)[0]

    assert made == [1, 1, 1]
    assert ending.decision is Decision.DUPLICATE
    # The read, the duplicate's own line, and the in_progress answers of the wait counted once.
    assert Counter(requests.methods[before:]) == {"GET": 1, "POST": 2}


def test_pollers_at_once_each_read_once_per_poll(service: Gate, requests: Requests, clock: FakeClock) -> None:
    claim(service, run="run-0", payload={"order": "SO-1"})
    waiting = [waiting_run(service, f"run-{i + 1}") for i in range(POLLERS)]
    barrier = threading.Barrier(POLLERS)
    rounds = 3

    def polls(index: int) -> None:
        mine: Waiting | None = waiting[index]
        for _ in range(rounds):
            barrier.wait(timeout=30)
            assert mine is not None
            mine = service.poll(mine)[1]

    before = len(requests.methods)
    with ThreadPoolExecutor(POLLERS) as pool:
        list(pool.map(polls, range(POLLERS)))

    assert requests.methods[before:] == ["GET"] * POLLERS * rounds
