"""The bulk import sample, ``connector/samples/bulk-workflow.json``, run with faults at every step (issue 31).

The sample runs in this process (``wdl.py``) against the app, with the engine's default
retry policy on every connector call and on the calls its stand-ins make to a stand-in ERP
(:class:`Erp`), which makes an order per call unless it has seen the call's ``Idempotency-Key``. A
fault strikes one step: a call that never arrives, a call whose answer is lost after it was applied,
the OnceGate server down through every retry, the run ended (its host lost) before or after a call, or
the store cut in the middle of Check and claim many. Then the import runs again at once (the rerun),
and once more after the lease: every row's order is made exactly once, every claim ends succeeded,
and the last run finds every row done. Every fault runs on SQLite; on Table Storage, those the store
meets in a way of its own (``ON_TABLE_STORAGE``).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus
from tests.conftest import KEY_SECRET, FakeClock
from tests.connector.spec import load
from tests.connector.test_samples import BULK_WORKFLOW
from tests.faults.faulty_store import Fault, FaultyStore, cut_claims_mid_call
from tests.gate import Gate
from tests.infra.test_logic_app import PARAMETERS
from tests.infra.wdl import Call, Killed, Run, Target

SCOPE = "sample.create-order"
# The engine's default retry policy: up to 4 retries.
DEFAULT_RETRIES = 4
LEASE_SECONDS = 300
# The rows imported and how many of them are an order of another row again: on SQLite over two pages, each
# repeat in the same page as that row and in the other. On Table Storage one page of 40, 4 repeated within it:
# each fault there strikes a write path of the bulk calls, which write a page's items a request each, the same
# for every item and for two items of one key in one call; a row repeated on the other page is a later call's
# ordinary claim, which the SQLite cases run. The four Azurite cases took 23.7 s of CPU with 150 rows, 7.8 s with 40
# (the emulator's included).
ROWS = {"sqlite": (150, 12), "tables": (40, 4)}


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    document: dict[str, Any] = load(BULK_WORKFLOW)["definition"]
    return document


@pytest.fixture
def store(open_store: Callable[[], Any]) -> FaultyStore:
    """The store under the app, to be cut in the middle of a call; it fails nothing until armed."""
    return FaultyStore(open_store(), Fault.AFTER)


@pytest.fixture
def service(store: FaultyStore, clock: FakeClock) -> Iterator[Gate]:
    gate = Gate(store, KeyHasher(KEY_SECRET), clock=clock)
    yield gate
    gate.close()


def import_rows(store_kind: str = "sqlite") -> list[dict[str, Any]]:
    """The ``ROWS`` of the store, so many of them an order of another row again, each with a row id of its own."""
    count, repeated = ROWS[store_kind]
    rows = [
        {"rowId": f"row-{n}", "orderNumber": f"SO-{n:04d}", "customer": "Contoso", "amount": 10.0 + n}
        for n in range(count - repeated)
    ]
    for n in range(repeated):
        rows.insert(1 + n * 12, {**rows[n * 11], "rowId": f"row-{len(rows)}"})
    return rows


@dataclass
class Erp:
    """The target system behind the sample's stand-ins: it makes an order for each create call, except one whose
    ``Idempotency-Key`` it has seen, which it answers with the order that key made; a look-up lists an order
    number's orders."""

    # False: an ERP that ignores the key, and makes an order for every create call.
    keyed: bool = True
    made: list[tuple[str, str]] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)

    def __call__(self, request: dict[str, Any]) -> tuple[int, Any]:
        if request["method"] == "GET":
            (number,) = parse_qs(urlsplit(request["uri"]).query)["orderNumber"]
            return 200, {"value": [{"id": made} for order, made in self.made if order == number]}
        key = request["headers"].get("Idempotency-Key") if self.keyed else None
        if key and key in self.keys:
            return 201, {"id": self.keys[key]}
        made = f"ERP-{len(self.made) + 1}"
        self.made.append((request["order"]["orderNumber"], made))
        if key:
            self.keys[key] = made
        return 201, {"id": made}

    def orders(self) -> Counter[str]:
        return Counter(order for order, _ in self.made)


# A strike's step that counts every call of the run, the connector's and the target's alike.
ANY_STEP = "any"


@dataclass(frozen=True)
class Strike:
    """A fault at the ``nth`` call of a step (``claims/batch``, ``claims/results``, ``create``, ``look-up``, or
    ``ANY_STEP``: the run's nth call of any of them), for ``times`` calls
    in a row: the call is applied first when ``after``; then its answer is lost (a connection that failed), or the
    run ends there when ``kill``."""

    step: str
    nth: int
    after: bool
    kill: bool = False
    times: int = 1


@dataclass
class Faults:
    strike: Strike | None
    counted: Counter[str] = field(default_factory=Counter)
    fired: int = 0

    def around(self, step: str, send: Callable[[], tuple[int, Any]]) -> tuple[int, Any]:
        self.counted[step] += 1
        self.counted[ANY_STEP] += 1
        strike = self.strike
        if strike is None or strike.step not in (step, ANY_STEP):
            return send()
        if not strike.nth <= self.counted[strike.step] < strike.nth + strike.times:
            return send()
        self.fired += 1
        if strike.after:
            send()
        if strike.kill:
            raise Killed(step)
        raise ConnectionError(step)


STRIKES = {
    "claim call refused": Strike("claims/batch", 1, after=False),
    "claim call applied, answer lost": Strike("claims/batch", 1, after=True),
    "claim call applied, server down through the retries": Strike("claims/batch", 1, after=True, times=5),
    "claim call applied, run ended": Strike("claims/batch", 1, after=True, kill=True),
    "second page's claim call applied, run ended": Strike("claims/batch", 2, after=True, kill=True),
    "order made, answer lost": Strike("create", 3, after=True),
    "run ended between two orders": Strike("create", 40, after=False, kill=True),
    "order made, run ended": Strike("create", 41, after=True, kill=True),
    "results call refused": Strike("claims/results", 1, after=False),
    "results call applied, answer lost": Strike("claims/results", 1, after=True),
    "results call refused, run ended": Strike("claims/results", 1, after=False, kill=True),
    "results call applied, run ended": Strike("claims/results", 2, after=True, kill=True),
    "store cut in the middle of the claim call": None,
}


def run(
    definition: dict[str, Any],
    call: Call,
    target: Target,
    clock: FakeClock,
    name: str,
    store_kind: str = "sqlite",
    *,
    rows: list[dict[str, Any]] | None = None,
) -> Run:
    """The import (``rows``, else the store's), run by the engine with its default retry policy; its waits move the
    test's clock."""
    trigger = {"rows": import_rows(store_kind) if rows is None else rows}
    return Run(
        definition, trigger, call, PARAMETERS, name=name, retries=DEFAULT_RETRIES, target=target, sleep=clock.advance
    ).start()


def claims_of(store: FaultyStore, scope: str) -> dict[str, tuple[ClaimStatus, str | None]]:
    """Every claim of ``scope`` in the store, in any status: its status and target record id, by claim id."""
    matching = ClaimFilter(statuses=tuple(ClaimStatus), scope=scope)
    found: dict[str, tuple[ClaimStatus, str | None]] = {}
    cursor: str | None = None
    while True:
        page = store.list_claims(matching, limit=1000, cursor=cursor)
        found.update((claim.claim_id, (claim.status, claim.target_record_id)) for claim in page.items)
        if page.cursor is None:
            return found
        cursor = page.cursor


def outcome(done: Run) -> dict[str, Any]:
    assert done.response is not None, f"no answer; statuses {done.statuses}"
    assert done.response["statusCode"] == 200
    body: dict[str, Any] = done.response["body"]
    return body


# Every fault on SQLite; on Table Storage the faults the store meets in a way of its own, each a write path of
# its bulk calls (a request per write, items at once; oncegate.service.bulk): a Check and claim many sent again
# whole (claims read back), its claims taken over after the lease (writes at their ETags), a Record results sent
# again whole (results recorded already), and the store cut in the middle of a call (on Table Storage the claims
# written before the cut stand; on SQLite the commit is lost). The other faults strike the connector's calls or
# the target before or after a call the store answered whole: the store sees only the same ordinary calls again,
# whose answers on both stores the store contract suite (tests/stores/contract.py) and the bulk and service suites'
# Table Storage cases (tests/http/test_bulk.py, tests/service/) check.
ON_TABLE_STORAGE = [
    "claim call applied, answer lost",
    "claim call applied, run ended",
    "results call applied, answer lost",
    "store cut in the middle of the claim call",
]
FAULTS = [pytest.param("sqlite", where, id=f"sqlite-{where}") for where in STRIKES] + [
    pytest.param("tables", where, id=f"tables-{where}", marks=pytest.mark.azurite) for where in ON_TABLE_STORAGE
]


@pytest.mark.parametrize(("store_kind", "where"), FAULTS)
def test_a_fault_at_any_step_leaves_no_row_undone_none_done_twice_and_no_claim_open(
    definition: dict[str, Any], call_app: Call, store: FaultyStore, clock: FakeClock, where: str, store_kind: str
) -> None:
    import_with_a_fault(definition, call_app, store, clock, STRIKES[where], Erp(), store_kind)


# The run ended after orders were made and before their results were recorded.
UNRECORDED = ["claim call applied, run ended", "run ended between two orders", "order made, run ended"]


# SQLite alone: what differs is the target (it ignores the key), which the sample looks up before it orders again;
# the store answers the same calls as in the cases above, on Table Storage among them.
@pytest.mark.parametrize("where", UNRECORDED)
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_target_without_idempotency_keys_is_looked_up_before_an_order_is_made_again(
    definition: dict[str, Any], call_app: Call, store: FaultyStore, clock: FakeClock, where: str
) -> None:
    """The reconcile branch looks the row up in the target: one that ignores the key still gets each order once."""
    import_with_a_fault(definition, call_app, store, clock, STRIKES[where], Erp(keyed=False))


def import_with_a_fault(
    definition: dict[str, Any],
    call_app: Call,
    store: FaultyStore,
    clock: FakeClock,
    strike: Strike | None,
    erp: Erp,
    store_kind: str = "sqlite",
    *,
    rows: list[dict[str, Any]] | None = None,
) -> None:
    """The import with the fault (None: the store cut mid-call), then the rerun and a run after the lease."""
    faults = Faults(strike)

    def call(method: str, path: str, body: Any) -> tuple[int, Any]:
        step = path.removeprefix("/api/")
        if strike is None and step == "claims/batch" and not faults.fired:
            # The store's connections cut mid-call: claims written, unanswered.
            faults.fired += 1
            cut_claims_mid_call(store)
            try:
                return call_app(method, path, body)
            finally:
                store.disarm()
        return faults.around(step, lambda: call_app(method, path, body))

    def target(request: dict[str, Any]) -> tuple[int, Any]:
        return faults.around("create" if request["method"] == "POST" else "look-up", lambda: erp(request))

    rows = import_rows(store_kind) if rows is None else rows
    orders = {row["orderNumber"] for row in rows}
    started = clock.now
    with contextlib.suppress(Killed):
        first = outcome(run(definition, call, target, clock, "run-1", store_kind, rows=rows))
        # A run the fault did not end does every row itself, and never waits for a lease to run out: a call sent
        # again whole is given back the claims its lost answer held.
        assert (first["held"], first["failed"]) == ([], [])
        assert sorted(first["proceeded"] + first["skippedAsDone"]) == sorted(row["rowId"] for row in rows)
        assert (clock.now - started).total_seconds() < LEASE_SECONDS
    assert faults.fired, "the fault never struck"
    rerun = outcome(run(definition, call_app, erp, clock, "run-2", store_kind, rows=rows))
    clock.advance(LEASE_SECONDS)
    after_the_lease = outcome(run(definition, call_app, erp, clock, "run-3", store_kind, rows=rows))

    assert erp.orders() == dict.fromkeys(orders, 1), "an order missing or made twice"
    assert (rerun["held"], rerun["failed"]) == ([], [])
    # Every key's claim (its id is the key's digest, as Look up claim finds it) succeeded with its own order, and
    # the scope holds no other claim: read in one pass of the store rather than a look-up and a history per key.
    hasher = KeyHasher(KEY_SECRET)
    assert claims_of(store, SCOPE) == {
        hasher.claim_id(SCOPE, order): (ClaimStatus.SUCCEEDED, made) for order, made in erp.made
    }
    assert after_the_lease["proceeded"] == []
    assert sorted(after_the_lease["skippedAsDone"]) == sorted(row["rowId"] for row in rows)
    assert (after_the_lease["held"], after_the_lease["failed"]) == ([], [])


# SQLite alone: the fault is the target's look-up; the claim held until the lease runs out and taken over after it
# is the "claim call applied, run ended" case above, which runs on Table Storage too.
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_row_whose_look_up_fails_is_listed_as_failed_and_done_by_the_run_after_the_lease(
    definition: dict[str, Any], call_app: Call, clock: FakeClock
) -> None:
    """A reconcile whose look-up in the target fails through every retry neither creates the order nor drops the
    row: it is listed as failed, its claim held until the lease runs out, and the next run does it."""
    erp = Erp()
    ended = Faults(STRIKES["claim call applied, run ended"])
    down = Faults(Strike("look-up", 1, after=False, times=DEFAULT_RETRIES + 1))

    def ending(method: str, path: str, body: Any) -> tuple[int, Any]:
        return ended.around(path.removeprefix("/api/"), lambda: call_app(method, path, body))

    def looking_up(request: dict[str, Any]) -> tuple[int, Any]:
        return down.around("look-up" if request["method"] == "GET" else "create", lambda: erp(request))

    with pytest.raises(Killed):
        run(definition, ending, erp, clock, "run-1")
    rerun = outcome(run(definition, call_app, looking_up, clock, "run-2"))
    clock.advance(LEASE_SECONDS)
    after_the_lease = outcome(run(definition, call_app, erp, clock, "run-3"))

    assert down.fired == DEFAULT_RETRIES + 1
    assert [(failed["rowId"], failed["error"]) for failed in rerun["failed"]] == [("row-0", "lookup_failed")]
    assert "row-0" not in rerun["proceeded"] + rerun["skippedAsDone"] + rerun["held"]
    assert (after_the_lease["proceeded"], after_the_lease["failed"]) == (["row-0"], [])
    assert erp.orders() == dict.fromkeys({row["orderNumber"] for row in import_rows()}, 1)


# A small import for the sweep below: 8 orders, the first one repeated twice in the page and another once, so that
# a clean run makes every kind of call (claims, the held rows' second pass, creates, results) in 11 calls.
SMALL_IMPORT = [
    {"rowId": f"row-{n}", "orderNumber": f"SO-{n:04d}", "customer": "Contoso", "amount": 10.0 + n} for n in range(8)
]
SMALL_IMPORT[2:2] = [{**SMALL_IMPORT[0], "rowId": "row-r1"}]
SMALL_IMPORT[5:5] = [{**SMALL_IMPORT[0], "rowId": "row-r2"}]
SMALL_IMPORT.append({**SMALL_IMPORT[3], "rowId": "row-r3"})
SMALL_IMPORT_CALLS = 11
# How the run meets the fault at its nth call: the call never arrives, its answer is lost after it was applied, or
# the run ends (its host lost) before or after it.
# (after, kill) of the strike.
WAYS = {
    "refused": (False, False),
    "applied, answer lost": (True, False),
    "run ended before it": (False, True),
    "run ended after it": (True, True),
}


def test_the_small_import_makes_every_kind_of_call_in_the_calls_the_sweep_strikes(
    definition: dict[str, Any], call_app: Call, store: FaultyStore, clock: FakeClock
) -> None:
    faults = Faults(None)
    erp = Erp()

    def call(method: str, path: str, body: Any) -> tuple[int, Any]:
        return faults.around(path.removeprefix("/api/"), lambda: call_app(method, path, body))

    def target(request: dict[str, Any]) -> tuple[int, Any]:
        return faults.around("create" if request["method"] == "POST" else "look-up", lambda: erp(request))

    outcome(run(definition, call, target, clock, "run-1", rows=SMALL_IMPORT))

    assert faults.counted == {ANY_STEP: SMALL_IMPORT_CALLS, "claims/batch": 2, "create": 8, "claims/results": 1}


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("nth", range(1, SMALL_IMPORT_CALLS + 1))
@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_fault_at_every_call_of_the_import_leaves_no_row_undone_and_none_done_twice(
    definition: dict[str, Any], call_app: Call, store: FaultyStore, clock: FakeClock, nth: int, way: str
) -> None:
    """The cases above strike chosen calls of a large import; this strikes each call of a small one in turn, in every
    way, the connector's and the target's alike (44 imports of three runs each, 2 s of CPU)."""
    after, kill = WAYS[way]
    strike = Strike(ANY_STEP, nth, after=after, kill=kill)
    import_with_a_fault(definition, call_app, store, clock, strike, Erp(), rows=SMALL_IMPORT)
