"""What the flow inventory costs the claim path on Table Storage, counted in HTTP requests.

A new claim stays one request (the claim and its history row in one transaction) and a duplicate
three (the refused insert, the read, the history row): registrations come from the instance's
cache and counts from memory. The cache costs two list queries once per TTL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Decision
from oncegate.service.inventory import FLUSH_INTERVAL, REGISTRY_TTL
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW_COPY, claim, record, register, set_scope, succeeded
from tests.support.azurite import TableStoreFactory

pytestmark = pytest.mark.azurite


class Requests:
    """An azure-core ``raw_response_hook``: counts the HTTP requests that got an answer."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, response: Any) -> None:
        self.count += 1

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
