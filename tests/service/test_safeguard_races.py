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
from oncegate.errors import NotConfigured
from oncegate.service.safeguard import Safeguard
from oncegate.stores.port import ClaimStore
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim
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
