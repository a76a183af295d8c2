"""A scope's horizon lengthened while a purge runs, on both stores.

An operator who learns that a scope's keys come back later than its horizon (a polling trigger's window longer
than thought, a yearly re-run) lengthens it with ``oncegate scopes set --horizon-days``. Once Set scope has
answered, a purge running meanwhile keeps the tombstones the new horizon keeps: it reads the scopes' retention and
horizon again for each page it deletes from, not once at its start (a purge by hand over a large store runs for
hours). Before, a purge started before the change deleted the tombstones past the old horizon, and their keys were
answered ``proceed`` again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Decision
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, record, set_scope

KEYS = ["SO-1", "SO-2", "SO-3"]


def test_a_horizon_lengthened_while_a_purge_runs_keeps_the_tombstones_it_now_covers(
    open_store: Callable[[], ClaimStore], new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    service = new_service()
    set_scope(service, SCOPE, retention_days=30, horizon_days=60)
    for key in KEYS:
        record(service, claim(service, key=key, run=f"run-{key}"), target_record_id=f"ERP-{key}")
    clock.advance(timedelta(days=31).total_seconds())
    assert service.retention.purge().deleted_total == len(KEYS)  # each down to its tombstone
    clock.advance(timedelta(days=30).total_seconds())  # 61 days after the last change: past the horizon of 60
    purging = FaultyStore(open_store(), Fault.BEFORE)
    purger = Gate(purging, KeyHasher(KEY_SECRET), clock=clock)
    operator = new_service()
    # The operator lengthens the horizon once the purge has read its first page of claims.
    purging.interleave(1, "list_claims", lambda: set_scope(operator, SCOPE, horizon_days=400))

    report = purger.retention.purge()

    assert purging.fired is not None, "the horizon was never changed during the purge"
    assert sum(report.tombstones_deleted.values()) == 0
    answers = [claim(service, key=key, run=f"run-{key}-late").decision for key in KEYS]
    assert answers == [Decision.DUPLICATE] * len(KEYS)
