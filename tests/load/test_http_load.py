"""Concurrent flows over HTTP on each store: one success per key, and a history that accounts for every call.

The issue's figure (64 clients, 500 keys, 4 triggers each) runs in ``make bench``; the suite runs
a smaller cut of the same workload so that it stays quick on a two-core machine.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET
from tests.gate import Gate
from tests.load.served import served
from tests.load.workload import Workload, audit, run

# On Table Storage 50 keys, not 200: each key's four triggers race the same way on every key (one create wins,
# every history row its own write), and the store contract suite races creates and counts history on Azurite;
# the 32 clients still all race. The test took 6.9 s of CPU there with 200 keys, 3.3 s with 50 (the emulator's
# included).
LOAD = {
    "sqlite": Workload(clients=32, keys=200, duplicates=4, changed_every=10),
    "tables": Workload(clients=32, keys=50, duplicates=4, changed_every=10),
}


@pytest.mark.slow
def test_concurrent_duplicate_triggers_over_http_leave_one_success_per_key_and_a_full_history(
    open_store: Callable[[], ClaimStore], store_kind: str
) -> None:
    # The real clock: leases must not expire while the load runs, and nothing here moves time by hand.
    service = Gate(open_store(), KeyHasher(KEY_SECRET))
    with served(service) as address:
        report = run(address, LOAD[store_kind])
        problems = audit(address, report)

    assert report.errors == []
    assert set(report.statuses) == {200}, report.statuses
    assert problems == []
    decisions = {trigger.decision for trigger in report.triggers}
    # The load really raced and really conflicted: a run where every trigger came alone proves nothing.
    assert {"proceed", "conflict"} <= decisions
    assert decisions & {"in_progress", "duplicate"}
