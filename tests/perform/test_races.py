"""Run twice, called once: racing runs of one action never reach the target twice (issue 34).

8 racers on 100 keys, each racer a thread with a connection of its own to the local server, every racer
sending every key in its own order: each key is sent to the target once, whichever racer makes the call,
and every racer is answered ``performed``, ``duplicate`` or ``in_progress``.
"""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest

from oncegate.domain.targets import Target
from tests.http.client import ServerApi
from tests.perform.calls import perform_body
from tests.support.target_server import StandInTarget

RACERS = 8
KEYS = 100


# Table Storage through Azurite takes about a tenth of a second a key for 8 racers (8.5 s for 100, CPU about 7 s of
# Azurite's and the server's), SQLite a hundredth: the 100 keys run on SQLite, 10 on Table Storage. Every key is
# raced by all 8 racers either way, and on 10 keys they meet on each more often than on 100; what
# 90 more keys would add is samples of the same interleavings, which the decisions take the same way on both stores
# (the service above the store is one code), while what differs by store, one winner among conditioned writes
# racing on one row, is the store contract suite's on Azurite (tests/stores/contract.py, "exactly one winner").
RACES = [
    ("sqlite", KEYS),
    pytest.param("tables", 10, marks=pytest.mark.azurite),
]


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.mark.parametrize(("store_kind", "count"), RACES, indirect=["store_kind"])
def test_eight_racers_on_a_hundred_keys_make_one_call_each(
    service: object, local_server: tuple[str, int], erp: Target, stand_in: StandInTarget, count: int
) -> None:
    api = ServerApi(local_server)
    keys = [f"SO-{number}" for number in range(count)]
    ready = Barrier(RACERS)

    def race(racer: int) -> list[str]:
        order = random.Random(racer).sample(keys, len(keys))
        ready.wait(timeout=60)
        decisions = []
        for key in order:
            reply = api.call("perform_once", perform_body(key, run=f"run-{racer}"))
            assert reply.status == 200, reply.body
            decisions.append(reply.body["decision"])
        return decisions

    with ThreadPoolExecutor(RACERS) as pool:
        decisions = Counter(decision for answers in pool.map(race, range(RACERS)) for decision in answers)

    sent = Counter(request.path for request in stand_in.writes())
    references = Counter(record.reference for record in stand_in.records)
    assert len(stand_in.writes()) == count, sent
    assert set(references.values()) == {1}
    assert decisions["performed"] == count
    assert set(decisions) <= {"performed", "duplicate", "in_progress"}
