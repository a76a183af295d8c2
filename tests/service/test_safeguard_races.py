"""Claims racing what the safeguard guards against, with real threads on both stores: a store wiped under the
instance, and a key secret rotation's switch.

The core claims on the safeguard's last good reading of the marks (``Reading``: the ring, until when it stands)
without reading them again. A store wiped under a running instance may still take the claims of that reading's
interval (docs/operations.md, 'A store that lost its claims': "Between two reads of the marks (every 5 s) an
instance may still write to a table made again empty"), and none after: a claim that starts once every reading
taken before the wipe has run out is refused. At a switch, instances whose readings were taken on either side of
the new secret's time claim with different secrets for up to an interval; a key claimed at once under both is
still granted once (the claim made meets the other's and is withdrawn).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.safeguard import SWITCH_GRACE
from oncegate.domain.statuses import Decision
from oncegate.errors import NotConfigured, NotFound
from oncegate.models import ClaimResponse
from oncegate.service.safeguard import Safeguard
from oncegate.stores.port import ClaimStore
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim
from tests.service.test_table_marks import A, App, done_before, lose_claims_table

INTERVAL = timedelta(seconds=0.3)
CLAIMERS = 4
# Past it, a claimer that was never refused fails the test rather than spin.
DEADLINE = 10.0


@pytest.fixture
def app(store_kind: str, open_store: Callable[[], ClaimStore], clock: FakeClock, tmp_path: Path) -> App:
    return App(store_kind, open_store, clock, tmp_path)


def safeguard(service: Gate) -> Safeguard:
    return service.services.claims._core.safeguard


class Checks:
    """The safeguard's good readings, by when each began and ended (``time.monotonic()``)."""

    def __init__(self, guard: Safeguard) -> None:
        self.good: list[tuple[float, float]] = []
        self._lock = threading.Lock()
        check = guard._check

        def counted() -> KeyRing:
            began = time.monotonic()
            ring = check()
            with self._lock:
                self.good.append((began, time.monotonic()))
            return ring

        guard._check = counted  # type: ignore[method-assign]


def test_a_store_wiped_under_claiming_threads_takes_no_claim_past_the_readings_before_it(
    app: App, request: pytest.FixtureRequest
) -> None:
    started, store_id = app.first()
    done = done_before(started)
    running = Gate(
        app._open_store(),
        KeyHasher(A),
        clock=app._clock,
        pin=app.pin(store_id),
        check_interval=INTERVAL,
    )
    checks = Checks(safeguard(running))
    asked: list[tuple[float, float, str]] = []  # when a claim began and ended, and what it was answered
    lock = threading.Lock()
    warm = threading.Barrier(CLAIMERS + 1)
    wiped = threading.Event()

    give_up = time.monotonic() + DEADLINE

    def claimer(number: int) -> None:
        for round_ in range(10**6):
            key = done[(number + round_) % len(done)]
            began = time.monotonic()
            try:
                outcome = claim(running, key=key, run=f"run-{number}-{round_}").decision.value
            except NotConfigured:
                outcome = "not_configured"
            with lock:
                asked.append((began, time.monotonic(), outcome))
            if round_ == 0:
                warm.wait(timeout=30)
            if outcome == "not_configured" or time.monotonic() > give_up:
                return
            if not wiped.is_set() and round_ > 50:
                wiped.wait(timeout=30)

    with ThreadPoolExecutor(CLAIMERS) as pool:
        claimers = [pool.submit(claimer, number) for number in range(CLAIMERS)]
        warm.wait(timeout=30)  # every claimer has claimed on a good reading
        wipe_began = time.monotonic()
        lose_claims_table(app, running.store, request, drop=False)
        wiped_at = time.monotonic()
        wiped.set()
        for done_claimer in claimers:
            done_claimer.result()

    # The last reading that may have read the store before the wipe stands until its end plus the interval.
    stands_until = max(end for began, end in checks.good if began < wiped_at) + INTERVAL.total_seconds()
    late = [(began - wiped_at, outcome) for began, _, outcome in asked if began >= stands_until + 0.05]
    after = Counter(outcome for began, _, outcome in asked if began >= wiped_at)
    assert all(outcome == "not_configured" for _, outcome in late), late
    assert (
        sum(1 for *_, outcome in asked if outcome == "not_configured") == CLAIMERS
    )  # every claimer refused in the end
    # Before the wipe, every key was done; on Table Storage the rows go one by one, a claim in between may proceed.
    assert {outcome for _, ended, outcome in asked if ended < wipe_began} == {"duplicate"}
    print(f"after the wipe: {dict(after)}; last reading from before it stood {stands_until - wiped_at:.3f} s")


B = "secret-b-" + "b" * 32
NEXT = KeyRing(KeyHasher(A), next_=KeyHasher(B))
SWITCHED = KeyRing(KeyHasher(B), previous=KeyHasher(A))
KEYS = 12


def test_a_key_claimed_at_once_on_both_sides_of_a_switch_is_granted_once(
    open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    def instance(keys: KeyRing, interval: timedelta = timedelta(0)) -> Gate:
        started = Gate(open_store(), keys, clock=clock, check_interval=interval)
        started.health()  # as an instance starting with these settings: it reads and writes the key secrets' records
        return started

    instance(KeyRing(KeyHasher(A)))
    instance(NEXT)
    instance(SWITCHED)  # the switch: B in use once the grace is over
    clock.advance(SWITCH_GRACE.total_seconds() - 1)
    # Its last reading taken a second before B's time, an instance claims with A for its interval (here, the test's).
    before = instance(SWITCHED, interval=timedelta(hours=1))
    clock.advance(2)
    after, announced = instance(SWITCHED), instance(NEXT)  # read after B's time: they claim with B
    sides = (before, after, announced)
    keys = [f"SO-{number}" for number in range(KEYS)]
    barrier = threading.Barrier(len(sides) * KEYS)

    def run(index: int) -> tuple[str, ClaimResponse]:
        key = keys[index % KEYS]
        barrier.wait(timeout=30)
        return key, claim(sides[index // KEYS], key=key, run=f"run-{index}")

    with ThreadPoolExecutor(len(sides) * KEYS) as pool:
        raced = list(pool.map(run, range(len(sides) * KEYS)))
    # Every key asked again on each side, once the race is over: a key both sides withdrew is claimed now.
    again = [
        (key, claim(side, key=key, run=f"run-again-{number}")) for number, side in enumerate(sides) for key in keys
    ]

    by_claim_id = {(A, key): KeyHasher(A).claim_id(SCOPE, key) for key in keys}
    assert {answer.claim_id for _, answer in raced} <= set(by_claim_id.values()) | {
        KeyHasher(B).claim_id(SCOPE, key) for key in keys
    }
    granted = Counter(key for key, answer in raced + again if answer.decision is Decision.PROCEED)
    assert granted == dict.fromkeys(keys, 1)
    raced_with = Counter(
        (answer.claim_id == by_claim_id[A, key]) for key, answer in raced if answer.decision is Decision.PROCEED
    )
    # Exactly one claim of each key is left, under one secret, the one granted, and every side finds it.
    for key in keys:
        winner = next(answer for k, answer in raced + again if k == key and answer.decision is Decision.PROCEED)
        rows = [side.store.get_claim(winner.claim_id).attempt for side in sides]
        assert rows == [1, 1, 1]
        other = KeyHasher(B).claim_id(SCOPE, key) if winner.claim_id == by_claim_id[A, key] else by_claim_id[A, key]
        with pytest.raises(NotFound):
            before.store.get_claim(other)
        assert {side_answer.decision for k, side_answer in again if k == key} <= {
            Decision.PROCEED,
            Decision.IN_PROGRESS,
        }
    later = KEYS - sum(raced_with.values())
    print(f"granted in the race under A {raced_with[True]}, under B {raced_with[False]}; after it {later}")
