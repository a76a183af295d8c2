"""A storage fault at every call of every action, on both stores: no double side effect, no lost result.

For each action and each way to fail, the sweep fails the 1st storage call of the action, then
the 2nd, and so on until the action runs out of calls. The ways to fail: ``Fault.BEFORE`` (the
write did not land), ``Fault.AFTER`` (it landed and the answer was lost), and on Table Storage a
``500 OperationTimedOut`` after the write landed, which the SDK retries by itself. After each
fault the same caller sends the same request again (for a result, release or heartbeat: with
the same token), as a flow's retry policy does, or is gone for good; then further runs follow
the contract's decision table against a target system that counts the side effects really
done. At the end of each round:

- no business version was done twice in the target system, and the liveness run finds it done;
- no claim token was handed to two runs, and every token but the current one is fenced off;
- a ``succeeded`` once answered with 200 is still the claim's result, with its target record id;
- after the faults stop, contract actions (here: one more run after every lease ran out)
  reach ``succeeded`` — no claim is left in a state nothing can leave.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Protocol, TypeVar

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision, EventKind, Resolution
from oncegate.domain.waiting import Waiting
from oncegate.entrypoints import error_map
from oncegate.errors import NotFound, StateConflict, StoreUnavailable
from oncegate.models import (
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    HeartbeatRequest,
    ListConflictsQuery,
    ReportConflictRequest,
)
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.faults.lossy_proxy import LossyProxy
from tests.gate import Gate
from tests.service.calls import FLOW, claim, heartbeat, keyed, record, release, resolve
from tests.support.azurite import ExternalTables, TableStoreFactory
from tests.support.records import current_token

T = TypeVar("T")
KEY = "ORDER-1"
WARM_UP = "faults.warm-up"
# Longer than any lease the scenarios take: afterwards nobody holds the claim.
EVERY_LEASE_OVER = 2 * 86_400
# No action needs this many storage calls; a sweep that gets here never runs out of calls.
MAX_CALLS = 20
# Longer than any scenario's wait, in seconds.
WAIT = 3600
# The safeguard reads the store's marks again once its interval is over on the machine's own clock, which no
# FakeClock moves: left at its 5 s, a round that happened to straddle it failed that read instead of the action's
# nth call. Where the background work is due, every call reads the marks (0), so that the sweep fails that read too;
# elsewhere, the first call only (an interval longer than any run of the suite), which a scenario makes unarmed.
MARKS_READ_BY_EVERY_CALL = timedelta(0)
MARKS_READ_ONCE = timedelta(days=1)


class Target:
    """The target system (an ERP): the records the flows really created, per business version."""

    def __init__(self) -> None:
        self.records: dict[str, list[str]] = defaultdict(list)

    def create(self, version: str) -> str:
        record_id = f"ERP-{version}-{len(self.records[version]) + 1}"
        self.records[version].append(record_id)
        return record_id

    def find(self, version: str) -> str | None:
        return self.records[version][0] if self.records[version] else None


class CallerGone(Exception):
    """The caller whose request failed never sends it again (the flow run was cancelled or timed out)."""


class Injector(Protocol):
    """Fails the Nth call from ``arm()``: a FaultyStore counts store calls, a LossyProxy HTTP requests."""

    fired: str | None

    def arm(self, at: int) -> None: ...

    def disarm(self) -> list[str]: ...


class World:
    """One business key in its own scope, the flows calling the service for it, and what they did."""

    def __init__(self, service: Gate, faults: Injector, clock: FakeClock, round_: int, then: str) -> None:
        self.service, self.faults, self.clock, self.round = service, faults, clock, round_
        self.gives_up = then == GONE
        self.scope = f"faults.round-{round_}"
        self.version = "v1"
        self.target = Target()
        self.claim_id = KeyHasher(KEY_SECRET).claim_id(self.scope, KEY)
        self.after_settling: Callable[[], None] = lambda: None
        self.holders: dict[str, str] = {}  # claim token -> the run it was handed to
        self.succeeded: dict[str, str] = {}  # version -> target record id a result call answered 200 for
        self.action_calls: list[str] = []

    # -- the fault ---------------------------------------------------------------------------

    def faulted(self, action: Callable[[], T], *, background_due: bool = False) -> T:
        """Run ``action`` with the round's fault armed; when it fails, the same caller sends it again or is gone.

        Work the service does now and then on the side (the inventory's refresh and count flush) is
        done first, so that round n fails the nth call of the action itself; ``background_due``
        leaves it due, so that the action does it and the sweep fails those calls too.
        """
        if background_due:
            # Flush what earlier rounds left first, so that every round's action finds the same work due.
            self.clock.advance(EVERY_LEASE_OVER)
        claim(self.service, run="run-warm-up", key=f"warm-up-{self.round}", scope=WARM_UP, fingerprint="v1")
        if background_due:
            self.clock.advance(EVERY_LEASE_OVER)
        self.faults.arm(self.round)
        try:
            return action()
        except StoreUnavailable:
            assert self.faults.fired, "StoreUnavailable that no injected fault explains"
            if self.gives_up:
                raise CallerGone from None
        finally:
            self.action_calls = self.faults.disarm()
        return action()

    # -- what flows do -----------------------------------------------------------------------

    def ask(self, run: str, version: str = "v1", lease_seconds: int = 300) -> ClaimResponse:
        answer = claim(
            self.service, run=run, key=KEY, scope=self.scope, fingerprint=version, lease_seconds=lease_seconds
        )
        return self.handed(answer, run)

    def handed(self, answer: ClaimResponse, run: str) -> ClaimResponse:
        assert answer.claim_id == self.claim_id
        if answer.claim_token is not None:
            holder = self.holders.setdefault(answer.claim_token, run)
            assert holder == run, f"token {answer.claim_token} handed to {holder} and to {run}"
        return answer

    def wait(self, run: str) -> tuple[ClaimResponse, Waiting | None]:
        """Check and claim (wait): the answer, and the waiting run the engine polls for (issue 25)."""
        request = ClaimRequest(
            scope=self.scope,
            key=KEY,
            run_id=run,
            flow=FLOW,
            fingerprint="v1",
            lease_seconds=300,
            wait=True,
            max_wait_seconds=WAIT,
        )
        answer, waiting = self.service.check_and_wait(request)
        return self.handed(answer, run), waiting

    def poll(self, run: str, waiting: Waiting) -> tuple[ClaimResponse, Waiting | None]:
        """One poll of the engine at the 202 answer's address."""
        answer, still = self.service.poll(waiting)
        return self.handed(answer, run), still

    def act(self, answer: ClaimResponse, version: str = "v1") -> None:
        """What a flow does with its answer: the side effect on proceed; on reconcile, look it up first."""
        if answer.decision is Decision.PROCEED:
            self.succeed(answer, self.target.create(version))
        elif answer.decision is Decision.RECONCILE:
            self.succeed(answer, self.target.find(version) or self.target.create(version))

    def run(self, run: str, version: str = "v1") -> ClaimResponse:
        answer = self.ask(run, version)
        self.act(answer, version)
        return answer

    def succeed(self, answer: ClaimResponse, record_id: str) -> ClaimView:
        view = record(self.service, answer, target_record_id=record_id)
        self.succeeded[version_of(view.fingerprint)] = record_id
        return view

    # -- what must hold ----------------------------------------------------------------------

    def stored(self) -> ClaimView:
        return self.service.get_claim(self.claim_id)

    def assert_holds(self, answer: ClaimResponse, run: str, attempt: int) -> None:
        """``run`` holds the claim with the token in ``answer``: a lost answer's retry got the same attempt."""
        stored = self.service.store.get_claim(self.claim_id)
        assert (stored.status, stored.run_id, stored.attempt) == (ClaimStatus.IN_PROGRESS, run, attempt)
        assert (answer.attempt, answer.claim_token) == (attempt, current_token(stored))

    def assert_results_kept(self, stored: ClaimView) -> None:
        """Every succeeded a result call answered 200 for is the claim's result while its version is current."""
        recorded = self.succeeded.get(version_of(stored.fingerprint))
        if recorded is not None:
            assert (stored.status, stored.target_record_id) == (ClaimStatus.SUCCEEDED, recorded)
        results = {
            entry.details.get("targetRecordId")
            for entry in stored.history or []
            if (entry.kind, entry.outcome) == (EventKind.RESULT, "succeeded")
        }
        assert set(self.succeeded.values()) <= results

    def assert_settles(self) -> None:
        """Once every lease ran out, one more run of the claim's current version reaches succeeded, done once."""
        try:
            before = self.stored()
        except NotFound:
            version, held = self.version, False  # the first request never landed
        else:
            version, held = version_of(before.fingerprint), before.status is ClaimStatus.IN_PROGRESS
            self.assert_results_kept(before)
        # A caller that retried knows where its request ended; one that is gone may have moved the claim on or not.
        assert self.gives_up or version == self.version
        if held:
            self.clock.advance(EVERY_LEASE_OVER)
        self.run("run-late", version)
        self.after_settling()
        stored = self.stored()
        assert stored.status is ClaimStatus.SUCCEEDED, stored
        assert stored.fingerprint is not None
        assert self.target.records[version_of(stored.fingerprint)] == [stored.target_record_id]
        done_twice = {version: ids for version, ids in self.target.records.items() if len(ids) > 1}
        assert not done_twice, f"side effect done more than once: {done_twice}"
        self.assert_results_kept(stored)
        self.assert_fenced()

    def assert_fenced(self) -> None:
        """No token but the current one is accepted: at most one run holds the claim at a time."""
        current = current_token(self.service.store.get_claim(self.claim_id))
        for token in set(self.holders) - {current}:
            with pytest.raises(StateConflict) as stale:
                self.service.heartbeat(self.claim_id, HeartbeatRequest(claim_token=token, lease_seconds=60))
            assert error_map.code(stale.value) == "stale_claim"


def version_of(fingerprint: str | None) -> str:
    """The version ("v1", "v2") whose keyed fingerprint the claim stores; "" for none."""
    return {keyed(version): version for version in ("v1", "v2")}.get(fingerprint or "", "")


# -- the actions under test: each builds its starting state, runs one action faulted, goes on --------


def claim_new(world: World) -> None:
    answer = world.faulted(lambda: world.ask("run-A"))
    assert answer.decision is Decision.PROCEED
    world.assert_holds(answer, "run-A", attempt=1)
    assert world.ask("run-B").decision is Decision.IN_PROGRESS
    world.act(answer)


def claim_new_background_due(world: World) -> None:
    answer = world.faulted(lambda: world.ask("run-A"), background_due=True)
    assert answer.decision is Decision.PROCEED
    world.assert_holds(answer, "run-A", attempt=1)
    world.act(answer)


def claim_duplicate(world: World) -> None:
    world.run("run-0")
    answer = world.faulted(lambda: world.ask("run-A"))
    assert answer.decision is Decision.DUPLICATE
    assert answer.result is not None
    assert answer.result.target_record_id == world.target.find("v1")


def claim_in_progress(world: World) -> None:
    holder = world.ask("run-0")
    answer = world.faulted(lambda: world.ask("run-A"))
    assert answer.decision is Decision.IN_PROGRESS
    assert answer.holder is not None
    assert answer.holder.lease_expires_at == holder.lease_expires_at
    world.act(holder)
    assert world.ask("run-A").decision is Decision.DUPLICATE


def wait_start(world: World) -> None:
    holder = world.ask("run-0")
    answer, waiting = world.faulted(lambda: world.wait("run-A"))
    assert answer.decision is Decision.IN_PROGRESS
    assert waiting is not None
    world.act(holder)
    assert world.poll("run-A", waiting)[0].decision is Decision.DUPLICATE


def wait_poll_held(world: World) -> None:
    holder = world.ask("run-0")
    _, waiting = world.wait("run-A")
    assert waiting is not None
    answer, still = world.faulted(lambda: world.poll("run-A", waiting))
    assert answer.decision is Decision.IN_PROGRESS
    assert still is not None
    assert waiting.unwritten is not None
    assert still.unwritten is not None
    # The same wait goes on: its next address differs only by this answer, counted once however the store failed.
    assert replace(still, unwritten=None) == replace(waiting, unwritten=None)
    assert still.unwritten.count == waiting.unwritten.count + 1
    world.act(holder)
    assert world.poll("run-A", still)[0].decision is Decision.DUPLICATE


def wait_poll_released(world: World) -> None:
    holder = world.ask("run-0")
    _, waiting = world.wait("run-A")
    assert waiting is not None
    release(world.service, holder, "the order was cancelled")
    answer, still = world.faulted(lambda: world.poll("run-A", waiting))
    assert (answer.decision, still) == (Decision.PROCEED, None)
    world.assert_holds(answer, "run-A", attempt=2)
    # The engine polling the same address again is the same run asking again: its own grant back.
    assert world.poll("run-A", waiting)[0].claim_token == answer.claim_token
    world.act(answer)


def wait_poll_expired(world: World) -> None:
    world.ask("run-0", lease_seconds=60)
    _, waiting = world.wait("run-A")
    assert waiting is not None
    world.target.create("v1")  # the ERP took the order, then the holder died before recording it
    world.clock.advance(61)
    answer, _ = world.faulted(lambda: world.poll("run-A", waiting))
    assert answer.decision is Decision.RECONCILE, answer.reason
    world.assert_holds(answer, "run-A", attempt=2)
    world.act(answer)
    assert world.stored().target_record_id == "ERP-v1-1"


def claim_reconcile_unknown(world: World) -> None:
    first = world.ask("run-0")
    world.target.create("v1")  # the ERP took the order, but the flow could not tell
    record(world.service, first, "unknown", error="ERP timed out")
    reconcile_after(world)


def claim_reconcile_expired(world: World) -> None:
    world.ask("run-0", lease_seconds=60)
    world.target.create("v1")  # the ERP took the order, then the flow died before recording it
    world.clock.advance(61)
    reconcile_after(world)


def reconcile_after(world: World) -> None:
    answer = world.faulted(lambda: world.ask("run-A"))
    # Told "proceed", run-A would create the order again; only "reconcile" makes it look first.
    assert answer.decision is Decision.RECONCILE, answer.reason
    assert answer.earlier_attempt is not None
    assert (answer.earlier_attempt.run_id, answer.earlier_attempt.attempt) == ("run-0", 1)
    world.assert_holds(answer, "run-A", attempt=2)
    world.act(answer)
    assert world.stored().target_record_id == "ERP-v1-1"


def claim_after_failure(world: World) -> None:
    first = world.ask("run-0")
    record(world.service, first, "failed", error="ERP refused: credit limit", retryable=True)
    answer = world.faulted(lambda: world.ask("run-A"))
    assert answer.decision is Decision.PROCEED
    world.assert_holds(answer, "run-A", attempt=2)
    world.act(answer)


def claim_conflict(world: World) -> None:
    world.run("run-0")
    answer = world.faulted(lambda: world.ask("run-A", "v2"))
    assert answer.decision is Decision.CONFLICT
    again = world.ask("run-B", "v2")
    assert again.conflict_id == answer.conflict_id
    assert_one_open_conflict(world, answer.conflict_id)


def record_result(world: World) -> None:
    answer = world.ask("run-0")
    record_id = world.target.create("v1")
    view = world.faulted(lambda: world.succeed(answer, record_id))
    assert (view.status, view.target_record_id) == (ClaimStatus.SUCCEEDED, record_id)
    world.assert_results_kept(world.stored())
    assert world.ask("run-B").decision is Decision.DUPLICATE


def release_claim(world: World) -> None:
    answer = world.ask("run-0")
    view = world.faulted(lambda: release(world.service, answer, "the order was cancelled"))
    assert view.status is ClaimStatus.RELEASED
    assert world.run("run-B").decision is Decision.PROCEED


def heartbeat_claim(world: World) -> None:
    answer = world.ask("run-0", lease_seconds=60)
    view = world.faulted(lambda: heartbeat(world.service, answer, 600))
    assert view.lease_expires_at == world.clock.now + timedelta(seconds=600)
    world.clock.advance(120)  # past the first lease, well inside the renewed one
    assert world.ask("run-B").decision is Decision.IN_PROGRESS
    world.act(answer)


def report_conflict(world: World) -> None:
    world.run("run-0")
    request = ReportConflictRequest(
        scope=world.scope, key=KEY, fingerprint="v2", run_id="run-A", reason="The ERP holds another amount."
    )
    reported = world.faulted(lambda: world.service.report_conflict(request))
    assert reported.status is ConflictStatus.OPEN
    assert world.ask("run-B", "v2").conflict_id == reported.conflict_id
    assert_one_open_conflict(world, reported.conflict_id)


def resolving(decision: Resolution) -> Callable[[World], None]:
    def resolve_conflict(world: World) -> None:
        world.run("run-0")
        conflict = world.ask("run-B", "v2")
        assert conflict.conflict_id is not None
        world.after_settling = lambda: follow_resolution(world, conflict.conflict_id or "", decision)
        resolved = world.faulted(lambda: resolve(world.service, conflict.conflict_id, decision.value))
        assert resolved.status is ConflictStatus.RESOLVED
        assert resolved.resolution is not None
        assert resolved.resolution.decision is decision
        after = world.run("run-C", "v2")
        expected = {
            Resolution.ACCEPT_NEW: Decision.PROCEED,
            Resolution.KEEP_ORIGINAL: Decision.DUPLICATE,
            Resolution.DISMISS: Decision.CONFLICT,
        }[decision]
        assert after.decision is expected, after.reason
        if decision is Resolution.ACCEPT_NEW:
            world.version = "v2"
        if decision is Resolution.DISMISS:
            assert after.conflict_id != conflict.conflict_id

    return resolve_conflict


def follow_resolution(world: World, conflict_id: str, decision: Resolution) -> None:
    """Once the conflict reads resolved, the new version's next run is answered by the decision, applied or not."""
    if world.service.get_conflict(conflict_id).status is not ConflictStatus.RESOLVED:
        return  # the reviewer's request never landed: the conflict still waits for them
    answer = world.run("run-D", "v2")
    expected = {
        Resolution.ACCEPT_NEW: {Decision.PROCEED, Decision.DUPLICATE},
        Resolution.KEEP_ORIGINAL: {Decision.DUPLICATE},
        Resolution.DISMISS: {Decision.CONFLICT},
    }[decision]
    assert answer.decision in expected, answer.reason


def assert_one_open_conflict(world: World, conflict_id: str | None) -> None:
    conflicts, _ = world.service.list_conflicts(ListConflictsQuery(status=ConflictStatus.OPEN, scope=world.scope))
    assert [conflict.conflict_id for conflict in conflicts] == [conflict_id]


SCENARIOS: dict[str, Callable[[World], None]] = {
    "claim-new": claim_new,
    "claim-new-background-due": claim_new_background_due,
    "claim-duplicate": claim_duplicate,
    "claim-in_progress": claim_in_progress,
    "wait-start": wait_start,
    "wait-poll-held": wait_poll_held,
    "wait-poll-released": wait_poll_released,
    "wait-poll-expired": wait_poll_expired,
    "claim-reconcile-unknown": claim_reconcile_unknown,
    "claim-reconcile-expired": claim_reconcile_expired,
    "claim-after-failure": claim_after_failure,
    "claim-conflict": claim_conflict,
    "record-result": record_result,
    "release": release_claim,
    "heartbeat": heartbeat_claim,
    "report-conflict": report_conflict,
    **{f"resolve-{decision.value}": resolving(decision) for decision in Resolution},
}
BACKGROUND_DUE = {"claim-new-background-due"}


# A 500 after the write landed is retried inside the SDK: only Table Storage has that layer.
LOST_500 = "http-500-after-write"
RETRY = "then-retry"
GONE = "then-gone"
# Every fault on both stores with the caller retrying. A caller that never comes back exercises the
# service alone (the store only sees fewer calls), so it is swept on the fast store only.
CASES = [
    *[("sqlite", fault.value, then) for fault in Fault for then in (RETRY, GONE)],
    *[pytest.param("tables", fault.value, RETRY, marks=pytest.mark.azurite) for fault in Fault],
    pytest.param("tables", LOST_500, RETRY, marks=pytest.mark.azurite),
]


@pytest.fixture
def rig(
    fault: str, action: str, open_store: Callable[[], ClaimStore], clock: FakeClock, request: pytest.FixtureRequest
) -> Iterator[tuple[Gate, Injector]]:
    """The service under test and what fails under it: the store port, or Table Storage's HTTP answers."""
    interval = MARKS_READ_BY_EVERY_CALL if action in BACKGROUND_DUE else MARKS_READ_ONCE
    if fault != LOST_500:
        store = FaultyStore(open_store(), Fault(fault))
        yield Gate(store, KeyHasher(KEY_SECRET), clock=clock, check_interval=interval), store
        return
    azurite = request.getfixturevalue("azurite")
    if isinstance(azurite, ExternalTables):
        pytest.skip("the lossy proxy speaks plain HTTP to the emulator this suite starts")
    proxy = LossyProxy(azurite.connection_string)
    factory = TableStoreFactory(proxy.connection_string, request.getfixturevalue("test_tables"))
    yield Gate(factory(), KeyHasher(KEY_SECRET), clock=clock, check_interval=interval), proxy
    factory.close()
    proxy.close()


@pytest.mark.parametrize(("store_kind", "fault", "then"), CASES)
@pytest.mark.parametrize("action", list(SCENARIOS))
def test_a_fault_at_every_storage_call_of_the_action_leaves_the_claim_safe(
    rig: tuple[Gate, Injector], clock: FakeClock, action: str, then: str
) -> None:
    service, faults = rig
    fired: list[str] = []
    for round_ in range(1, MAX_CALLS + 1):
        world = World(service, faults, clock, round_, then)
        with contextlib.suppress(CallerGone):
            SCENARIOS[action](world)
        world.assert_settles()
        if faults.fired is None:
            break
        fired.append(faults.fired)
    # Round n failed the nth call the action makes; the round after the last call ran without a fault.
    assert faults.fired is None, f"{action} made {MAX_CALLS} storage calls and went on"
    assert fired == world.action_calls
    assert fired
