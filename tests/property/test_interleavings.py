"""Random interleavings of every claim action by several runs, on both stores: no double side effect.

Three runs (two of one flow, one of its copy in a second environment), through two service
instances, claim two business keys with three versions (fingerprints) in any order, while the clock
jumps past leases and a reviewer resolves conflicts. A run behaves as a flow does: told ``proceed``
or ``reconcile`` it holds a claim token; it does the side effect only while its lease lasts, and on
``reconcile`` only after looking in the target system for what the earlier attempt did; it records
``succeeded`` for a record it made or found, ``failed`` only when nothing was done, ``unknown``
either way, and releases only when told ``proceed``, before any side effect (``ReleasingReconcilers``
releases when told ``reconcile`` too). Whatever the interleaving:

1. a key has one current claim token: a token from an earlier holder is refused with ``stale_claim``;
2. each key's side effect is done, and recorded ``succeeded``, at most once per version a reviewer
   accepted (each ``accept_new`` starts the next);
3. a recorded ``succeeded`` stays the claim's result, and once ``accept_new`` supersedes it, stays
   in the claim's history;
4. ``duplicate`` carries the target record id of the recorded success;
5. a changed fingerprint never gets ``proceed`` on a claim that is not released, unless a reviewer
   made it current (``accept_new``) or an alias (``keep_original``).

Every answer is also checked against the contract's decision table (``model.py``). Each example
runs on a store of its own: a new SQLite file, or new tables on Azurite.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision, EventKind, Outcome, Resolution
from oncegate.domain.warnings import ANOTHER_FLOW_COPY
from oncegate.entrypoints import error_map
from oncegate.errors import StateConflict
from oncegate.models import ClaimRequest, ClaimResponse, HeartbeatRequest, ReleaseRequest, ReportConflictRequest
from oncegate.models import ResolveConflictRequest as Resolve
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.property.model import (
    BUSY,
    FAILED_FINAL,
    FAILED_RETRYABLE,
    RESOLVED,
    RUNS,
    STALE,
    UNKNOWN,
    Change,
    ExpectedClaim,
    ExpectedConflict,
    Holding,
    Result,
    Target,
    succeeded,
)
from tests.service.calls import SCOPE, claim, keyed, release
from tests.support.azurite import TableStoreFactory
from tests.support.sqlite_template import fresh_sqlite_file

T = TypeVar("T")
KEYS = ("ORDER-1", "ORDER-2")
VERSIONS = ("v1", "v2", "v3")
# Flows mostly send again the version they sent before: the first comes up as often as the others together.
VERSION = st.sampled_from((VERSIONS[0], *VERSIONS))
LEASES = (60, 300)
# Within both leases, and past them (lease_runs_out reaches a lease's very end).
CLOCK_STEPS = (1, 30, 59, 240, 301, 900)
INSTANCES = 2
# (examples, steps): about 10 s each on two cores for the main property on each store; "releasing" found
# the bug it guards against (see its test) within a few dozen examples.
BUDGET = {"sqlite": (200, 40), "tables": (15, 25), "releasing": (80, 30)}


class Ask(NamedTuple):
    """A Check and claim as a run sends it."""

    run: str
    key: str
    version: str
    lease: int


ASKS = st.builds(
    Ask, run=st.sampled_from(sorted(RUNS)), key=st.sampled_from(KEYS), version=VERSION, lease=st.sampled_from(LEASES)
)


class StoreOpener(Protocol):
    """Opens store instances on one example's own data, and closes them all afterwards."""

    def __call__(self) -> ClaimStore: ...

    def close(self) -> None: ...


class SqliteFiles:
    """SqliteStores on one new file (a copy of an empty store's, as the service tests open): for SQLite what
    TableStoreFactory is for tables."""

    def __init__(self, directory: Path) -> None:
        self.path = fresh_sqlite_file(directory / f"{uuid.uuid4().hex}.db")
        self._stores: list[SqliteStore] = []

    def __call__(self) -> SqliteStore:
        self._stores.append(SqliteStore(self.path))
        return self._stores[-1]

    def close(self) -> None:
        for store in self._stores:
            store.close()


def _refused(call: Callable[[], T]) -> tuple[T | None, str | None]:
    """What the call answered, or the code of the StateConflict it raised."""
    try:
        return call(), None
    except StateConflict as exc:
        return None, error_map.code(exc)


class Interleavings(RuleBasedStateMachine):
    """Flows, a reviewer and the clock acting on two claims in random order; see the module docstring."""

    # Whether flows report conflicts and a reviewer resolves them.
    conflicts_handled = True

    def __init__(self, stores: StoreOpener) -> None:
        super().__init__()
        self.stores = stores
        self.clock = FakeClock()
        hasher = KeyHasher(KEY_SECRET)
        self.services = [Gate(stores(), hasher, clock=self.clock) for _ in range(INSTANCES)]
        self.claims = {key: ExpectedClaim(hasher.claim_id(SCOPE, key)) for key in KEYS}
        self.holdings: dict[tuple[str, str], Holding] = {}  # (run id, key) -> the run's latest grant
        self.tokens: dict[str, tuple[str, int]] = {}  # every token handed out -> (key, attempt)
        self.conflicts: dict[str, ExpectedConflict] = {}
        self.asked: dict[str, Ask] = {}  # run id -> its last claim
        self.target = Target()
        # What flows and reviewers were answered with a 200: the facts invariants 2 and 3 are about.
        self.recorded: dict[str, str] = {}  # key -> the target record its current version succeeded with
        self.superseded: dict[str, list[str]] = defaultdict(list)  # key -> results accept_new superseded
        self.successes: Counter[tuple[str, int]] = Counter()  # (key, accepted version) -> succeeded recorded
        self.touched: set[str] = set()

    def teardown(self) -> None:
        self.stores.close()

    def _service(self, run_id: str) -> Gate:
        return self.services[RUNS[run_id].instance]

    # -- runs asking ---------------------------------------------------------------------------

    def _claimed(self) -> list[str]:
        return [key for key, expected in self.claims.items() if expected.status is not None]

    # Each example starts with a claim, and three rules claim: Hypothesis turns a random part of the rules off
    # in each example (swarm testing), and with no claim nothing else can happen.
    @initialize(ask=ASKS)
    def first_claim(self, ask: Ask) -> None:
        self._claim(ask)

    # One argument, so that Hypothesis, which orders rules by their number of arguments and then by name, tries
    # claim first: in its simplest examples the first rule that applies is all that runs.
    @rule(ask=ASKS)
    def claim(self, ask: Ask) -> None:
        self._claim(ask)

    @precondition(lambda self: self._claimed())
    @rule(data=st.data(), run=st.sampled_from(sorted(RUNS)), lease=st.sampled_from(LEASES))
    def trigger_again(self, data: st.DataObject, run: str, lease: int) -> None:
        """The business event reaches a run again (a redelivered trigger, the flow's copy): same key, same version."""
        key = data.draw(st.sampled_from(self._claimed()), label="key")
        version = self.claims[key].fingerprint
        assert version is not None
        self._claim(Ask(run, key, version, lease))

    @precondition(lambda self: self.asked)
    @rule(data=st.data())
    def claim_again(self, data: st.DataObject) -> None:
        """A run sends its last Check and claim again, as after a lost answer."""
        self._claim(self.asked[data.draw(st.sampled_from(sorted(self.asked)), label="run")])

    def _claim(self, ask: Ask) -> None:
        run_id, key, version, lease = ask
        expected, run = self.claims[key], RUNS[run_id]
        decision = expected.decide(run_id, version, self.clock.now)
        request = ClaimRequest(
            scope=SCOPE, key=key, fingerprint=version, run_id=run_id, flow=run.flow, lease_seconds=lease
        )
        answer = self._service(run_id).check_and_claim(request)
        self.asked[run_id] = ask
        self.touched.add(key)
        event(f"decision: {answer.decision.value}")
        self._check_claim_invariants(answer, run_id, key, version)
        assert (answer.claim_id, answer.decision) == (expected.claim_id, decision), (
            f"decision table: {run_id} asking for {key} {version} should get {decision}, got {answer.decision}: "
            f"{answer.reason}"
        )
        if decision in (Decision.PROCEED, Decision.RECONCILE):
            self._granted(answer, run_id, key, version, lease)
        elif decision is Decision.CONFLICT:
            assert answer.conflict_id is not None
            self._opened(key, version, answer.conflict_id)
        elif decision is Decision.IN_PROGRESS:
            assert answer.holder is not None
            assert answer.holder.lease_expires_at == expected.lease_expires_at
        # The answer's status is an AnswerStatus, the model's a ClaimStatus: both str enums of the same values.
        assert (answer.status, answer.attempt) == (expected.status, expected.attempt)  # type: ignore[comparison-overlap]
        if decision in (Decision.DUPLICATE, Decision.IN_PROGRESS):
            assert expected.run_id is not None
            copy = RUNS[expected.run_id].flow != run.flow
            assert (ANOTHER_FLOW_COPY in answer.warnings) == copy, answer.warnings

    def _check_claim_invariants(self, answer: ClaimResponse, run_id: str, key: str, version: str) -> None:
        expected = self.claims[key]
        if answer.decision is Decision.PROCEED and expected.status not in (None, ClaimStatus.RELEASED):
            assert expected.accepts(version), (
                f"invariant 5: {version} got proceed on a claim of version {expected.fingerprint} "
                f"(status {expected.status}, aliases {sorted(expected.aliases)})"
            )
        token = answer.claim_token
        if token is not None and token in self.tokens:
            assert (token, run_id) == (expected.token, expected.run_id), (
                f"invariant 1: {run_id} got the token of {key} attempt {self.tokens[token][1]}, which the current "
                f"attempt {expected.attempt} of {expected.run_id} does not hold"
            )
        if answer.decision is Decision.DUPLICATE:
            recorded = self.recorded.get(key)
            carried = answer.result.target_record_id if answer.result else None
            assert recorded is not None, f"invariant 4: duplicate for {key}, which has no recorded success"
            assert carried == recorded, f"invariant 4: duplicate for {key} carries {carried}, not {recorded}"

    def _granted(self, answer: ClaimResponse, run_id: str, key: str, version: str, lease: int) -> None:
        expected, token = self.claims[key], answer.claim_token
        assert token is not None
        if token == expected.token:  # the same run asked again while holding: it acts on this answer
            self.holdings[run_id, key].decision = answer.decision
        else:
            earlier = expected.token
            expected.grant(answer.decision, token, run_id, version, self.clock.now + timedelta(seconds=lease))
            assert expected.lease_expires_at is not None
            self.tokens[token] = (key, expected.attempt)
            self.holdings[run_id, key] = Holding(run_id, key, token, answer.decision, expected.lease_expires_at)
            if earlier is not None:
                self._expect_fenced(key, earlier, "the attempt just taken over")
        assert answer.lease_expires_at == expected.lease_expires_at
        if answer.decision is Decision.RECONCILE:
            assert answer.earlier_attempt is not None
            assert (answer.earlier_attempt.attempt, answer.earlier_attempt.run_id) == expected.previous

    def _opened(self, key: str, version: str, conflict_id: str) -> None:
        open_conflicts = self.claims[key].open_conflicts
        if version in open_conflicts:
            assert conflict_id == open_conflicts[version], "another conflict id for a key and fingerprint still open"
            return
        assert conflict_id not in self.conflicts, f"resolved conflict {conflict_id} came back"
        open_conflicts[version] = conflict_id
        self.conflicts[conflict_id] = ExpectedConflict(key, version)

    # -- runs holding a token ------------------------------------------------------------------

    def _holders(self, can: Callable[[Holding], object]) -> list[tuple[str, str]]:
        return sorted(place for place, holding in self.holdings.items() if can(holding))

    def _draw_holder(self, data: st.DataObject, can: Callable[[Holding], object]) -> Holding:
        return self.holdings[data.draw(st.sampled_from(self._holders(can)), label="holder")]

    def _may_act(self, holding: Holding) -> bool:
        return holding.acted is None and holding.sent is None and not holding.done and self._in_lease(holding)

    def _in_lease(self, holding: Holding) -> bool:
        return holding.lease_expires_at > self.clock.now

    @precondition(lambda self: self._holders(self._may_act))
    @rule(data=st.data())
    def act(self, data: st.DataObject) -> None:
        """A holder does the side effect within its lease; told reconcile, it looks in the target first."""
        self._act(self._draw_holder(data, self._may_act))

    @precondition(lambda self: self._holders(self._may_act))
    @rule(data=st.data())
    def act_and_record(self, data: st.DataObject) -> None:
        """The usual run: the side effect, then its result at once."""
        holding = self._draw_holder(data, self._may_act)
        self._act(holding)
        assert holding.acted is not None
        self._send_result(holding, succeeded(holding.acted))

    def _act(self, holding: Holding) -> None:
        epoch = self.claims[holding.key].epoch
        found = self.target.find(holding.key, epoch) if holding.decision is Decision.RECONCILE else None
        holding.acted = found or self.target.create(holding.key, epoch, holding.run_id)
        done = self.target.records[holding.key, epoch]
        assert len(done) <= 1, f"invariant 2: the side effect for {holding.key} was done {len(done)} times: {done}"

    def _results(self, holding: Holding) -> list[Result]:
        """What the holder may record next: a success only for a record it made or found."""
        if holding.done:
            return []
        if holding.acted is not None:
            results: Sequence[Result] = (succeeded(holding.acted), UNKNOWN)
        elif self._found_nothing(holding):
            results = (FAILED_RETRYABLE, FAILED_FINAL, UNKNOWN)
        else:
            results = (UNKNOWN,)
        return [result for result in results if not result.same_as(holding.sent)]

    @precondition(lambda self: self._holders(self._results))
    @rule(data=st.data())
    def record_result(self, data: st.DataObject) -> None:
        holding = self._draw_holder(data, self._results)
        self._send_result(holding, data.draw(st.sampled_from(self._results(holding)), label="result"))

    @precondition(lambda self: self._holders(lambda holding: not holding.fenced and holding.sent is not None))
    @rule(data=st.data())
    def resend_result(self, data: st.DataObject) -> None:
        """A flow's retry policy sends the result again (its answer timed out)."""
        holding = self._draw_holder(data, lambda holding: not holding.fenced and holding.sent is not None)
        assert holding.sent is not None
        self._send_result(holding, holding.sent)

    def _send_result(self, holding: Holding, result: Result) -> None:
        expected = self.claims[holding.key]
        change = expected.record(holding.token, result)
        service = self._service(holding.run_id)
        _, refused = _refused(lambda: service.record_result(expected.claim_id, result.request(holding.token)))
        self._agree(holding, change, refused, f"record {result.outcome.value}")
        if refused:
            return
        first = not result.same_as(holding.sent)
        holding.sent = result
        if first and result.outcome is Outcome.SUCCEEDED:
            assert result.target_record_id is not None
            self.successes[holding.key, expected.epoch] += 1
            assert self.successes[holding.key, expected.epoch] == 1, (
                f"invariant 2: succeeded recorded twice for {holding.key} since the last accept_new"
            )
            self.recorded[holding.key] = result.target_record_id

    def _found_nothing(self, holding: Holding) -> bool:
        """Whether the holder knows that no side effect was done: it did none, and told reconcile, it looked."""
        epoch = self.claims[holding.key].epoch
        return holding.decision is Decision.PROCEED or self.target.find(holding.key, epoch) is None

    def _may_release(self, holding: Holding) -> bool:
        # Told reconcile, a run looks in the target system and records what it finds (ReleasingReconcilers differs).
        proceeding = holding.decision is Decision.PROCEED
        return proceeding and holding.acted is None and holding.sent is None and not holding.fenced

    @precondition(lambda self: self._holders(self._may_release))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        """Release before any side effect; a released holder may send it again."""
        holding = self._draw_holder(data, self._may_release)
        expected = self.claims[holding.key]
        change = expected.release(holding.token)
        request = ReleaseRequest(claim_token=holding.token, reason="the order was cancelled")
        service = self._service(holding.run_id)
        _, refused = _refused(lambda: service.release(expected.claim_id, request))
        self._agree(holding, change, refused, "release")
        holding.released = not refused

    def _may_heartbeat(self, holding: Holding) -> bool:
        return holding.sent is None and not holding.done

    @precondition(lambda self: self._holders(self._may_heartbeat))
    @rule(data=st.data(), lease=st.sampled_from(LEASES))
    def heartbeat(self, data: st.DataObject, lease: int) -> None:
        holding = self._draw_holder(data, self._may_heartbeat)
        expected = self.claims[holding.key]
        change = expected.heartbeat(holding.token, self.clock.now, lease)
        request = HeartbeatRequest(claim_token=holding.token, lease_seconds=lease)
        service = self._service(holding.run_id)
        view, refused = _refused(lambda: service.heartbeat(expected.claim_id, request))
        self._agree(holding, change, refused, "heartbeat")
        if view is not None:
            assert expected.lease_expires_at is not None
            assert view.lease_expires_at == expected.lease_expires_at, (
                f"heartbeat by {holding.run_id} for {lease} s set the lease to {view.lease_expires_at}"
            )
            holding.lease_expires_at = expected.lease_expires_at

    def _agree(self, holding: Holding, change: Change, refused: str | None, what: str) -> None:
        """The service did what the model says: applied or repeated, or refused as stale."""
        self.touched.add(holding.key)
        current = self.claims[holding.key].token == holding.token
        attempt = self.tokens[holding.token][1]
        if change is Change.STALE and not current:
            assert refused == STALE, (
                f"invariant 1: {what} by {holding.run_id} with the token of {holding.key} attempt {attempt}, "
                f"no longer current, was {refused or 'accepted'}"
            )
        elif change is Change.STALE:
            assert refused == STALE, f"{what} by {holding.run_id} after its attempt ended was {refused or 'accepted'}"
        else:
            assert refused is None, f"{what} by {holding.run_id} (attempt {attempt}) was refused: {refused}"
        holding.fenced = refused is not None

    def _stale_tokens(self) -> list[tuple[str, int]]:
        return [place for token, place in self.tokens.items() if token != self.claims[place[0]].token]

    @precondition(lambda self: self._stale_tokens())
    @rule(data=st.data())
    def use_stale_token(self, data: st.DataObject) -> None:
        """Any earlier holder's token is refused, whatever happened since."""
        key, attempt = data.draw(st.sampled_from(self._stale_tokens()), label="stale token (key, attempt)")
        token = next(token for token, place in self.tokens.items() if place == (key, attempt))
        self._expect_fenced(key, token, "an earlier attempt")

    def _expect_fenced(self, key: str, token: str, which: str) -> None:
        request = HeartbeatRequest(claim_token=token, lease_seconds=LEASES[0])
        _, refused = _refused(lambda: self.services[1].heartbeat(self.claims[key].claim_id, request))
        assert refused == STALE, f"invariant 1: the token of {which} of {key} was {refused or 'accepted'}"

    # -- time and reviewers --------------------------------------------------------------------

    @rule(seconds=st.sampled_from(CLOCK_STEPS))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds)

    def _running(self) -> list[str]:
        now = self.clock.now
        return [
            key
            for key, expected in self.claims.items()
            if expected.lease_expires_at and expected.lease_expires_at > now
        ]

    @precondition(lambda self: self._running())
    @rule(data=st.data())
    def lease_runs_out(self, data: st.DataObject) -> None:
        """The clock reaches the very moment a running attempt's lease ends (from then on it has expired)."""
        key = data.draw(st.sampled_from(self._running()), label="key")
        lease_expires_at = self.claims[key].lease_expires_at
        assert lease_expires_at is not None
        self.clock.now = lease_expires_at

    @precondition(lambda self: self.conflicts_handled and self._claimed())
    @rule(data=st.data(), run=st.sampled_from(sorted(RUNS)), version=VERSION)
    def report_conflict(self, data: st.DataObject, run: str, version: str) -> None:
        """A run finds the target system holding other data than its version."""
        key = data.draw(st.sampled_from(self._claimed()), label="key")
        request = ReportConflictRequest(
            scope=SCOPE,
            key=key,
            fingerprint=version,
            run_id=run,
            flow=RUNS[run].flow,
            reason="The ERP holds another amount for this order.",
        )
        conflict = self._service(run).report_conflict(request)
        assert (conflict.status, conflict.fingerprint) == (ConflictStatus.OPEN, keyed(version))
        self._opened(key, version, conflict.conflict_id)
        self.touched.add(key)

    @precondition(lambda self: self.conflicts_handled and self.conflicts)
    @rule(data=st.data(), decision=st.sampled_from(Resolution))
    def resolve_conflict(self, data: st.DataObject, decision: Resolution) -> None:
        """A reviewer decides an open conflict, or decides a closed one again (the same way: a no-op)."""
        conflict_id = data.draw(st.sampled_from(list(self.conflicts)), label="conflict")
        conflict = self.conflicts[conflict_id]
        expected = self.claims[conflict.key]
        if conflict.decision is not None:
            expected_refusal = None if decision is conflict.decision else RESOLVED
        elif decision is Resolution.ACCEPT_NEW and expected.status in (ClaimStatus.IN_PROGRESS, ClaimStatus.UNKNOWN):
            expected_refusal = BUSY
        else:
            expected_refusal = None
        request = Resolve(decision=decision, reviewer="ops@contoso", note="checked in the ERP")
        view, refused = _refused(lambda: self.services[0].resolve_conflict(conflict_id, request))
        assert refused == expected_refusal, (
            f"resolving {conflict.fingerprint} of {conflict.key} as {decision.value}: expected "
            f"{expected_refusal or 'ok'}, got {refused or 'ok'}"
        )
        self.touched.add(conflict.key)
        if view is None or conflict.decision is not None:
            return
        assert view.resolution is not None
        assert view.resolution.decision is decision
        conflict.decision = decision
        assert expected.open_conflicts.get(conflict.fingerprint) == conflict_id
        expected.resolve(conflict.fingerprint, decision)
        if decision is Resolution.ACCEPT_NEW and conflict.key in self.recorded:
            self.superseded[conflict.key].append(self.recorded.pop(conflict.key))

    # -- what must hold after every step -------------------------------------------------------

    @invariant()
    def results_are_kept(self) -> None:
        """Invariant 3, and the stored claim is the model's, for each claim the last step touched."""
        for key in sorted(self.touched):
            expected = self.claims[key]
            view = self.services[0].get_claim(expected.claim_id)
            recorded = self.recorded.get(key)
            if recorded is not None:
                assert (view.status, view.target_record_id) == (ClaimStatus.SUCCEEDED, recorded), (
                    f"invariant 3: {key} recorded succeeded with {recorded}, the claim now says "
                    f"{view.status.value} with {view.target_record_id}"
                )
            results = {
                entry.details.get("targetRecordId")
                for entry in view.history or []
                if (entry.kind, entry.outcome) == (EventKind.RESULT, Outcome.SUCCEEDED.value)
            }
            lost = [result for result in self.superseded[key] if result not in results]
            assert not lost, f"invariant 3: results of {key} superseded by accept_new are gone from its history: {lost}"
            stored = (view.status, view.attempt, view.fingerprint, view.run_id)
            fingerprint = keyed(expected.fingerprint) if expected.fingerprint else None
            modelled = (expected.status, expected.attempt, fingerprint, expected.run_id)
            assert stored == modelled, (
                f"{key} is stored as (status, attempt, fingerprint, run) {stored}, not {modelled}"
            )
        self.touched.clear()


class ReleasingReconcilers(Interleavings):
    """As Interleavings, but a run told reconcile gives up: it releases the claim without looking in the target.

    No conflicts are reported or resolved: this is about leases and releases.
    """

    conflicts_handled = False

    @initialize(ask=st.just(Ask("run-1", KEYS[0], VERSIONS[0], LEASES[0])))
    def first_claim(self, ask: Ask) -> None:
        """The first run does the side effect, and its lease runs out before it records the result."""
        self._claim(ask)
        self._act(self.holdings[ask.run, ask.key])
        self.clock.advance(ask.lease)

    def _may_act(self, holding: Holding) -> bool:
        return holding.decision is Decision.PROCEED and super()._may_act(holding)

    def _may_release(self, holding: Holding) -> bool:
        return holding.acted is None and holding.sent is None and not holding.fenced

    def _results(self, holding: Holding) -> list[Result]:
        return [] if holding.decision is Decision.RECONCILE else super()._results(holding)

    def _may_heartbeat(self, holding: Holding) -> bool:
        return holding.decision is Decision.PROCEED and super()._may_heartbeat(holding)


def _run(machine: Callable[[], Interleavings], examples: int, steps: int, **more: Any) -> None:
    # derandomize: the same examples on every run, so CI is reproducible; database=None: nothing written to disk.
    chosen = settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        **more,
    )
    # Hypothesis calls any factory of machines, though its annotation asks for a class.
    run_state_machine_as_test(machine, settings=chosen)  # type: ignore[arg-type]


# A pass takes seconds; shrinking a failure may take minutes (Hypothesis gives up shrinking after five).
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_interleaving_breaks_the_claim_invariants(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if store_kind == "tables":
        connection_string: str = request.getfixturevalue("azurite").connection_string
        made: list[str] = request.getfixturevalue("test_tables")

        def stores() -> StoreOpener:
            return TableStoreFactory(connection_string, made)

    else:

        def stores() -> StoreOpener:
            return SqliteFiles(tmp_path)

    _run(lambda: Interleavings(stores()), *BUDGET[store_kind])


# A pass takes seconds; shrinking a failure may take minutes (Hypothesis gives up shrinking after five).
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_runs_told_reconcile_may_release_before_looking(tmp_path: Path) -> None:
    """Released, the attempt granted to reconcile must leave the attempt it reconciles in doubt.

    This property found that releasing it marked the claim released: the next run was told proceed
    and did the side effect a second time (invariant 2). One store suffices: the decision is the service's.
    """
    _run(lambda: ReleasingReconcilers(SqliteFiles(tmp_path)), *BUDGET["releasing"])


def test_a_released_reconcile_attempt_stays_in_doubt(service: Gate, clock: FakeClock) -> None:
    """The shortest sequence the property above found, on both stores."""
    first = claim(service, run="run-1", lease_seconds=60)
    assert first.decision is Decision.PROCEED  # run-1 creates the order in the ERP; its result never arrives
    clock.advance(60)
    second = claim(service, run="run-2")
    assert second.decision is Decision.RECONCILE
    release(service, second, reason="the run was cancelled before it looked in the ERP")

    third = claim(service, run="run-3")

    # Told proceed, run-3 would create the order a second time without looking.
    assert third.decision is Decision.RECONCILE
