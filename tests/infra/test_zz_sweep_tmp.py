from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from tests.conftest import KEY_SECRET, FakeClock
from tests.infra import test_bulk_workflow as b
from tests.infra.test_bulk_workflow import definition, service, store  # noqa: F401
from tests.infra.wdl import Killed, Run
from tests.infra.test_logic_app import PARAMETERS

ROWS = [
    {"rowId": f"row-{n}", "orderNumber": f"SO-{n:04d}", "customer": "Contoso", "amount": 10.0 + n} for n in range(8)
]
ROWS.insert(2, {**ROWS[0], "rowId": "row-r1"})
ROWS.insert(5, {**ROWS[0], "rowId": "row-r2"})
ROWS.append({**ROWS[3], "rowId": "row-r3"})

def go(definition, call, target, clock, name):
    return Run(definition, {"rows": [dict(r) for r in ROWS]}, call, PARAMETERS, name=name, retries=4, target=target,
               sleep=clock.advance).start()


@pytest.mark.parametrize("mode", ["before", "after", "kill-before", "kill-after", "down-after"])
@pytest.mark.parametrize("nth", range(1, 30))
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_sweep(definition, call_app, store, clock: FakeClock, nth, mode) -> None:
    erp = b.Erp()
    counted = Counter()
    seen = [0]
    fired = []

    def around(step, send):
        seen[0] += 1
        if seen[0] < nth or (seen[0] >= nth + (5 if mode == "down-after" else 1)):
            return send()
        fired.append(step)
        if mode != "before" and mode != "kill-before":
            send()
        if mode.startswith("kill"):
            raise Killed(step)
        raise ConnectionError(step)

    def call(method, path, body):
        return around(path.removeprefix("/api/"), lambda: call_app(method, path, body))

    def target(request):
        return around("create" if request["method"] == "POST" else "look-up", lambda: erp(request))

    with contextlib.suppress(Killed):
        first = go(definition, call, target, clock, "run-1")
    if not fired:
        pytest.skip("no such step")
    rerun = go(definition, call_app, erp, clock, "run-2")
    clock.advance(300)
    after = go(definition, call_app, erp, clock, "run-3")
    orders = {r["orderNumber"] for r in ROWS}
    print(fired, rerun.response["body"], after.response["body"])
    assert erp.orders() == dict.fromkeys(orders, 1)
    hasher = KeyHasher(KEY_SECRET)
    assert b.claims_of(store, b.SCOPE) == {hasher.claim_id(b.SCOPE, o): (b.ClaimStatus.SUCCEEDED, m) for o, m in erp.made}
    assert sorted(after.response["body"]["skippedAsDone"]) == sorted(r["rowId"] for r in ROWS)


@pytest.mark.parametrize("mode2", ["kill-before", "kill-after", "after"])
@pytest.mark.parametrize("nth2", range(1, 14))
@pytest.mark.parametrize("mode", ["kill-before", "kill-after"])
@pytest.mark.parametrize("nth", range(1, 13))
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_double(definition, call_app, store, clock: FakeClock, nth, mode, nth2, mode2) -> None:
    erp = b.Erp()
    fired = []

    def faulty(n, m):
        seen = [0]

        def around(step, send):
            seen[0] += 1
            if seen[0] != n:
                return send()
            fired.append((step, m))
            if m != "kill-before":
                send()
            if m.startswith("kill"):
                raise Killed(step)
            raise ConnectionError(step)

        def call(method, path, body):
            return around(path.removeprefix("/api/"), lambda: call_app(method, path, body))

        def target(request):
            return around("create" if request["method"] == "POST" else "look-up", lambda: erp(request))
        return call, target

    with contextlib.suppress(Killed):
        go(definition, *faulty(nth, mode), clock, "run-1")
    with contextlib.suppress(Killed):
        go(definition, *faulty(nth2, mode2), clock, "run-2")
    if len(fired) < 2:
        pytest.skip("no such step")
    rerun = go(definition, call_app, erp, clock, "run-3")
    clock.advance(300)
    after = go(definition, call_app, erp, clock, "run-4")
    orders = {r["orderNumber"] for r in ROWS}
    print(fired, rerun.response["body"], after.response["body"])
    assert erp.orders() == dict.fromkeys(orders, 1)
    hasher = KeyHasher(KEY_SECRET)
    assert b.claims_of(store, b.SCOPE) == {hasher.claim_id(b.SCOPE, o): (b.ClaimStatus.SUCCEEDED, m) for o, m in erp.made}
    assert sorted(after.response["body"]["skippedAsDone"]) == sorted(r["rowId"] for r in ROWS)


@pytest.mark.parametrize("trial", range(20))
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_concurrent(definition, call_app, store, clock: FakeClock, trial) -> None:
    import threading
    import time
    erp = b.Erp()
    lock = threading.Lock()

    def target(request):
        time.sleep(0.001)
        with lock:
            return erp(request)

    runs = {}
    barrier = threading.Barrier(3)

    def one(name):
        barrier.wait()
        runs[name] = Run(definition, {"rows": [dict(r) for r in ROWS]}, call_app, PARAMETERS, name=name, retries=4,
                         target=target, sleep=lambda s: time.sleep(0.002)).start()

    threads = [threading.Thread(target=one, args=(f"run-{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, r in runs.items():
        print(name, r.response["body"])
    clock.advance(300)
    after = go(definition, call_app, erp, clock, "run-z")
    print(after.response["body"])
    orders = {r["orderNumber"] for r in ROWS}
    assert erp.orders() == dict.fromkeys(orders, 1)
    assert sorted(after.response["body"]["skippedAsDone"]) == sorted(r["rowId"] for r in ROWS)
