"""The drill: act as flows would against a deployment, and check that each business result happens once.

``oncegate drill`` claims two fresh test keys in the scope ``drill.check``, the way flows do:

1. Key A is triggered twice in a row. The first run is told ``proceed``, "does" the side effect
   (it only makes up a record id, ``DRILL-<letters>``) and records it; the second, with the same
   payload, must be told ``duplicate`` with that record id.
2. N runs fire at once on key A: all ``duplicate``. Then N runs fire at once on key B, before
   any result exists: exactly one ``proceed``, the rest ``in_progress``. The winner records its
   result, and one more run is told ``duplicate``.
3. Key A comes once more with a changed amount: ``conflict``. The drill dismisses that conflict,
   so that it does not wait in the owner's queue; a caller who may not resolve conflicts (Entra
   ID without the reviewer role) leaves it open, which the report notes.

Every run told ``proceed`` does the side effect and records it, as a flow would: a service that
tells two runs to proceed shows up as a side effect done twice. Last, each key's claim is read
back (``POST /api/claims/lookup``) and its history must hold every answer the drill was given.

Interrupted (Ctrl+C), the drill releases each claim it holds, with its own claim token, before it
stops (:class:`Interrupted`): left ``in_progress``, they would wait on the attention list until a
reviewer settled them.

First the drill asks for the service's health, which names the store the report shows. A run told
``blocked`` (the flow inventory refuses the drill's flow) stops the drill there: every later answer
would be ``blocked`` too, and the report ends with the command that registers the flow.

:func:`run_drill` does all of it over a :class:`~oncegate.cli.client.Client` and
returns a :class:`Report`; printing it is the command's business. Refusals the drill can
explain (a stale claim token, a conflict it may not dismiss) become calls in the report;
others (a rejected key, an unreachable service) are raised as the client's errors.

Each check (the end of the file) reads against the step constants and the ``EXPECTED`` table at the top.
"""

from __future__ import annotations

import itertools
import secrets
import shlex
import string
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field, replace
from datetime import UTC, datetime
from time import perf_counter
from typing import Any, TypeVar
from urllib.parse import urlsplit

from oncegate.cli.client import ApiError, Client, Interrupted, Unreachable, claim_body
from oncegate.cli.values import DEFAULT_CONCURRENCY, DEFAULT_SCOPE
from oncegate.domain.copies import frozen
from oncegate.domain.statuses import ClaimStatus, Decision, EventKind, Outcome, Resolution
from oncegate.models import ClaimResponse, ClaimView, FlowRef

FLOW_NAME = "OnceGate drill"
REVIEWER = "oncegate drill"
DISMISS_NOTE = "Opened on purpose by oncegate drill to check that a changed payload is a conflict."
INTERRUPTED_REASON = "oncegate drill was interrupted before doing its side effect."
PAYLOAD = {"order": "drill", "amount": 120.5, "lines": [{"sku": "DRILL-1", "qty": 2}]}
CHANGED_PAYLOAD = {**PAYLOAD, "amount": 121.5}
# Key A is done once and then repeated; key B is raced for before any result exists.
KEYS = ("A", "B")
# The slowest thread of a burst must be ready within this, or the burst is not simultaneous anyway.
BARRIER_SECONDS = 30.0
FORBIDDEN = 403
CONFLICT = 409

CHECK_AND_CLAIM = "check and claim"
RECORD_RESULT = "record result"
DISMISS = "dismiss conflict"
# An item of a bulk call (``oncegate drill --batch``, oncegate.cli.batch_drill) is checked as its single call is.
CHECK_AND_CLAIM_MANY = "check and claim many"
RECORD_RESULTS = "record results"
CLAIMS = (CHECK_AND_CLAIM, CHECK_AND_CLAIM_MANY)
RESULTS = (RECORD_RESULT, RECORD_RESULTS)

FIRST, AGAIN, BURST, RACE, AFTER, CHANGED = "1 first", "1 again", "2 burst", "2 race", "2 after", "3 changed"
# The batch drill's steps: racers at once on new records, then one batch of the same records again.
BATCH_RACE, BATCH_AGAIN = "B1 race", "B2 again"
EXPECTED: dict[str, frozenset[Decision]] = {
    FIRST: frozenset({Decision.PROCEED}),
    AGAIN: frozenset({Decision.DUPLICATE}),
    BURST: frozenset({Decision.DUPLICATE}),
    # Exactly one of them proceeds: counted apart.
    RACE: frozenset({Decision.PROCEED, Decision.IN_PROGRESS}),
    AFTER: frozenset({Decision.DUPLICATE}),
    CHANGED: frozenset({Decision.CONFLICT}),
    # Exactly one per record proceeds; a racer that comes after its result is recorded is told duplicate.
    BATCH_RACE: frozenset({Decision.PROCEED, Decision.IN_PROGRESS, Decision.DUPLICATE}),
    BATCH_AGAIN: frozenset({Decision.DUPLICATE}),
}

T = TypeVar("T")


@frozen
class Call:
    """One request of the drill and its answer: a decision, the claim's status after a result, or a refusal."""

    step: str
    key: str
    action: str
    run_id: str | None
    answer: str
    ms: float
    attempt: int | None = None
    target_record_id: str | None = None
    conflict_id: str | None = None
    reason: str | None = None
    # The HTTP status when the service refused the request; ``answer`` is then its error code.
    refused: int | None = None

    def is_claim(self, *decisions: Decision) -> bool:
        return self.action in CLAIMS and (not decisions or self.answer in decisions)

    def as_json(self) -> dict[str, Any]:
        fields = {
            "step": self.step,
            "key": self.key,
            "call": self.action,
            "runId": self.run_id,
            "answer": self.answer,
            "attempt": self.attempt,
            "targetRecordId": self.target_record_id,
            "conflictId": self.conflict_id,
            "ms": self.ms,
            "reason": self.reason,
            "refused": self.refused,
        }
        return {name: value for name, value in fields.items() if value is not None}


@frozen
class Lookup:
    """A drill key's claim as read back after the drill, with its history; ``error`` when it could not be read."""

    key: str
    claim: ClaimView | None
    raw: Any = None
    error: str | None = None


@frozen
class Check:
    """One thing the contract promises, and every way the drill saw it broken."""

    name: str
    deviations: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.deviations


@frozen
class Report:
    """What the drill did, what it was answered, and what it found.

    ``blocked`` is the answer that stopped the drill, and ``fix`` the command that lets its flow claim;
    ``batch`` says the drill fired its records in bulk calls (``--batch``), each record a key of ``keys``.
    """

    url: str
    scope: str
    concurrency: int
    flow: FlowRef
    keys: dict[str, str]
    calls: Sequence[Call]
    lookups: list[Lookup]
    checks: list[Check]
    notes: list[str]
    store: str | None = None
    source: str | None = None
    blocked: Call | None = None
    fix: str | None = None
    batch: bool = False

    @property
    def deviations(self) -> list[str]:
        return [deviation for check in self.checks for deviation in check.deviations]

    @property
    def passed(self) -> bool:
        return self.blocked is None and not self.deviations

    def as_json(self) -> dict[str, Any]:
        """The machine-readable report (``--json``)."""
        return {
            "passed": self.passed,
            "batch": self.batch,
            "url": self.url,
            "store": self.store,
            "blocked": self.blocked.as_json() if self.blocked else None,
            "fix": self.fix,
            "scope": self.scope,
            "source": self.source,
            "concurrency": self.concurrency,
            "flow": self.flow.model_dump(),
            "keys": self.keys,
            "calls": [call.as_json() for call in self.calls],
            "checks": [
                {"name": check.name, "passed": check.passed, "deviations": list(check.deviations)}
                for check in self.checks
            ],
            "deviations": self.deviations,
            "notes": self.notes,
            "claims": {
                lookup.key: lookup.raw if lookup.claim is not None else {"error": lookup.error}
                for lookup in self.lookups
            },
        }


class _Held:
    """The claims the drill holds, told proceed and without a result yet: their claim tokens, by claim id.

    Claims arrive from the threads of a burst, so the map is locked.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, str] = {}

    def took(self, answer: ClaimResponse) -> None:
        if answer.claim_token and answer.decision in (Decision.PROCEED, Decision.RECONCILE):
            with self._lock:
                self._tokens[answer.claim_id] = answer.claim_token

    def done(self, claim_id: str) -> None:
        with self._lock:
            self._tokens.pop(claim_id, None)

    def taken(self) -> dict[str, str]:
        with self._lock:
            return dict(self._tokens)


@frozen
class _Drill:
    client: Client
    scope: str
    flow: FlowRef
    keys: dict[str, str]
    numbers: Iterator[int]
    source: str | None = None
    held: _Held = field(default_factory=_Held)


def new_key(now: datetime) -> str:
    """A fresh test key, e.g. ``drill-20250301T090000Z-3f9a1c2e``: no personal data, never seen before."""
    return f"drill-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


def made_up_record_id() -> str:
    """The record id a drill run says it made: letters only. Hex digits would now and then run to eleven digits
    (``DRILL-D15199593258``), which the sensitive-data check rightly reads as a phone number and refuses."""
    return "DRILL-" + "".join(secrets.choice(string.ascii_uppercase) for _ in range(12))


def run_drill(
    client: Client,
    *,
    scope: str = DEFAULT_SCOPE,
    source: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_step: Callable[[str], None] = lambda _: None,
) -> Report:
    """Run the three steps against the client's deployment, read the claims back and check them.

    ``on_step`` hears a line as each step starts; a ``blocked`` answer ends the drill at its step.
    """
    health = client.health().model
    now = datetime.now(UTC)
    flow = FlowRef(name=FLOW_NAME, environment=urlsplit(client.url).hostname or client.url)
    drill = _Drill(client, scope, flow, {key: new_key(now) for key in KEYS}, itertools.count(1), source)
    report = Report(
        url=client.url,
        scope=scope,
        source=source,
        concurrency=concurrency,
        flow=flow,
        keys=drill.keys,
        calls=[],
        lookups=[],
        checks=[],
        notes=[],
        store=f"{health.store} at {health.store_location}" if health.store_location else health.store,
    )
    try:
        calls, blocked = _steps(drill, concurrency, on_step)
    except KeyboardInterrupt:
        raise _release_held(drill) from None
    if blocked is not None:
        return replace(report, calls=calls, blocked=blocked, fix=_register_command(client.url, flow))
    on_step("drill: reading each key's claim back")
    lookups = [_lookup(drill, key) for key in drill.keys]
    return replace(
        report, calls=calls, lookups=lookups, checks=_checks(calls, lookups, concurrency), notes=_notes(calls)
    )


def _steps(drill: _Drill, concurrency: int, on_step: Callable[[str], None]) -> tuple[list[Call], Call | None]:
    """Every call of the three steps, and the ``blocked`` answer that ended them early, if any."""
    plan = [(FIRST, "A", 1), (AGAIN, "A", 1), (BURST, "A", concurrency), (RACE, "B", concurrency), (AFTER, "B", 1)]
    calls: list[Call] = []
    for step, key, count in [*plan, (CHANGED, "A", 1)]:
        on_step(f"drill {step}: {count} run{'s' if count > 1 else ''} on key {key}")
        fired = _fire(drill, step, key, CHANGED_PAYLOAD if step == CHANGED else PAYLOAD, count)
        calls += fired
        blocked = next((call for call in fired if call.is_claim(Decision.BLOCKED)), None)
        if blocked is not None:
            return calls, blocked
    return calls + _dismiss(drill, [call for call in calls if call.step == CHANGED]), None


def _release_held(drill: _Drill) -> Interrupted:
    """Release each claim the drill holds, with its own token; the claims the service would not release are kept.

    Once a release gets no answer (the service cannot be reached, or did not answer within the client's
    timeout), the claims not yet released are kept without asking: whoever pressed Ctrl+C is not made to wait
    a timeout per claim, and is told which claims are left and why (before, the first such release ended the
    command with exit 3, naming none of them).
    """
    released, kept, unanswered = 0, [], None
    for claim_id, token in drill.held.taken().items():
        if unanswered is not None:
            kept.append(claim_id)
            continue
        try:
            drill.client.release_claim(claim_id, claim_token=token, reason=INTERRUPTED_REASON)
        except ApiError as exc:
            # 409: the result the drill was recording when interrupted landed after all, and the claim is done.
            if exc.status != CONFLICT:
                kept.append(claim_id)
            continue
        except Unreachable as exc:
            unanswered = exc.report()
            kept.append(claim_id)
            continue
        released += 1
    return Interrupted(released, kept, unanswered)


def _register_command(url: str, flow: FlowRef) -> str:
    """The command that registers the drill's flow, enabled: what a blocked drill needs before it runs again.
    ``--enabled`` is named: registering again changes only what it names, so a disabled flow stays disabled
    without it (issue 31)."""
    names = f"--name {shlex.quote(flow.name)} --environment {shlex.quote(flow.environment)}"
    return f"oncegate --url {shlex.quote(url)} flows register {names} --enabled"


# -- acting as flows ----------------------------------------------------------------------------


def _ms(started: float) -> float:
    return round((perf_counter() - started) * 1000, 1)


def _explained(exc: ApiError) -> bool:
    """A refusal the report can show as a call: a 4xx on a request the service should have accepted.

    Not a rejected credential (401, 403): the command reports that as it does for every command.
    """
    return 400 <= exc.status < 500 and exc.status not in (401, FORBIDDEN)


def _at_once(count: int, work: Callable[[int], T]) -> list[T]:
    """``work(0..count-1)`` on ``count`` threads released together by a barrier, in index order."""
    barrier = threading.Barrier(count, timeout=BARRIER_SECONDS)

    def together(index: int) -> T:
        barrier.wait()
        return work(index)

    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="drill") as pool:
        return list(pool.map(together, range(count)))


def _fire(drill: _Drill, step: str, key: str, payload: Any, count: int = 1) -> list[Call]:
    """``count`` runs ask Check and claim at once; each one told ``proceed`` then does the side effect, records it."""
    run_ids = [f"drill-run-{next(drill.numbers)}" for _ in range(count)]
    answers = _at_once(count, lambda index: _claim(drill, step, key, payload, run_ids[index]))
    claims = [call for call, _ in answers]
    records = [_record(drill, call, answer) for call, answer in answers if call.is_claim(Decision.PROCEED)]
    return claims + records


def _claim(drill: _Drill, step: str, key: str, payload: Any, run_id: str) -> tuple[Call, ClaimResponse]:
    started = perf_counter()
    body = claim_body(
        scope=drill.scope, key=drill.keys[key], payload=payload, run_id=run_id, flow=drill.flow, source=drill.source
    )
    answer: ClaimResponse = drill.client.call("check_and_claim", body=body).model
    drill.held.took(answer)
    call = Call(
        step,
        key,
        CHECK_AND_CLAIM,
        run_id,
        answer.decision.value,
        _ms(started),
        attempt=answer.attempt,
        target_record_id=answer.result.target_record_id if answer.result else None,
        conflict_id=answer.conflict_id,
        reason=answer.reason,
    )
    return call, answer


def _record(drill: _Drill, claimed: Call, answer: ClaimResponse) -> Call:
    # The side effect: a record the target system would hold. Nothing is created anywhere.
    target = made_up_record_id()
    started = perf_counter()
    try:
        view = drill.client.record_result(
            answer.claim_id,
            claim_token=answer.claim_token or "",
            outcome=Outcome.SUCCEEDED.value,
            target_record_id=target,
        ).model
    except ApiError as exc:
        if not _explained(exc):
            raise
        drill.held.done(answer.claim_id)
        return _refusal(claimed, RECORD_RESULT, exc, started, target_record_id=target)
    drill.held.done(answer.claim_id)
    return Call(
        claimed.step,
        claimed.key,
        RECORD_RESULT,
        claimed.run_id,
        view.status.value,
        _ms(started),
        attempt=view.attempt,
        target_record_id=view.target_record_id,
    )


def _refusal(context: Call, action: str, exc: ApiError, started: float, **ids: Any) -> Call:
    """The call ``action`` (in the step, key and run of ``context``) as the service refused it."""
    code = exc.code or f"HTTP {exc.status}"
    return Call(
        context.step,
        context.key,
        action,
        context.run_id,
        code,
        _ms(started),
        reason=exc.message,
        refused=exc.status,
        **ids,
    )


def _dismiss(drill: _Drill, changed: list[Call]) -> list[Call]:
    """Dismiss the conflicts the changed payload opened; a caller without the reviewer role leaves them open."""
    return [_dismiss_one(drill, call) for call in changed if call.conflict_id]


def _dismiss_one(drill: _Drill, changed: Call) -> Call:
    started = perf_counter()
    conflict_id = changed.conflict_id or ""
    try:
        conflict = drill.client.resolve_conflict(
            conflict_id, decision=Resolution.DISMISS.value, reviewer=REVIEWER, note=DISMISS_NOTE
        ).model
    except ApiError as exc:
        if not (_explained(exc) or exc.status == FORBIDDEN):
            raise
        return _refusal(changed, DISMISS, exc, started, conflict_id=conflict_id)
    decision = conflict.resolution.decision.value if conflict.resolution else conflict.status.value
    return Call(changed.step, changed.key, DISMISS, changed.run_id, decision, _ms(started), conflict_id=conflict_id)


def _lookup(drill: _Drill, key: str) -> Lookup:
    try:
        # The whole history: every answer must be in it, past its first page too.
        answer = drill.client.with_whole_history(drill.client.lookup_claim(drill.scope, drill.keys[key]))
    except ApiError as exc:
        if not _explained(exc):
            raise
        return Lookup(key, None, error=str(exc))
    return Lookup(key, answer.model, answer.raw)


def _notes(calls: Sequence[Call]) -> list[str]:
    return [
        f"Conflict {call.conflict_id} was left open: this caller may not resolve conflicts (Entra ID: the "
        f"OnceGate.Reviewer role). Dismiss it with `oncegate conflicts resolve {call.conflict_id} --decision "
        "dismiss`, or leave it to the scope's owner."
        for call in calls
        if call.action == DISMISS and call.refused == FORBIDDEN
    ]


# -- checking what was answered -----------------------------------------------------------------


def _checks(calls: Sequence[Call], lookups: list[Lookup], concurrency: int) -> list[Check]:
    """Each promise of the contract the drill exercised, with the deviations it saw."""
    recorded = {key: _recorded(calls, key) for key in KEYS}
    return [
        Check(
            "Triggered twice in a row: the first run proceeds, the second is a duplicate",
            _decisions(calls, FIRST, AGAIN),
        ),
        Check(f"{concurrency} runs at once on the done record: all duplicate", _decisions(calls, BURST)),
        Check(
            f"{concurrency} runs at once on a new record: one proceeds, the rest are in_progress; then a duplicate",
            (*_decisions(calls, RACE, AFTER), *_one_proceed(calls, RACE)),
        ),
        Check(
            "The changed payload is a conflict; the drill dismisses it, or leaves it open without the reviewer role",
            _conflict(calls),
        ),
        Check(
            "The business result happened once per key, and every duplicate returned it",
            tuple(deviation for key in KEYS for deviation in _once(calls, key, recorded[key])),
        ),
        Check(
            "Each claim, read back, succeeded once and its history holds every answer",
            tuple(deviation for lookup in lookups for deviation in _history(calls, lookup, recorded[lookup.key])),
        ),
    ]


def _who(call: Call) -> str:
    return f"{call.step}: {call.run_id} (key {call.key})"


def _decisions(calls: Sequence[Call], *steps: str) -> tuple[str, ...]:
    return tuple(
        f"{_who(call)} was told {call.answer}, expected {' or '.join(sorted(EXPECTED[call.step]))}: {call.reason}"
        for call in calls
        if call.is_claim() and call.step in steps and call.answer not in EXPECTED[call.step]
    )


def _one_proceed(calls: Sequence[Call], step: str) -> tuple[str, ...]:
    proceeded = [call.run_id or "" for call in calls if call.step == step and call.is_claim(Decision.PROCEED)]
    if len(proceeded) == 1:
        return ()
    runs = f" ({', '.join(proceeded)})" if proceeded else ""
    return (f"{step}: {len(proceeded)} runs were told proceed{runs}; exactly one must be.",)


def _conflict(calls: Sequence[Call]) -> tuple[str, ...]:
    deviations = list(_decisions(calls, CHANGED))
    for call in calls:
        if call.step == CHANGED and call.is_claim(Decision.CONFLICT) and not call.conflict_id:
            deviations.append(f"{_who(call)} was told conflict without a conflictId.")
        if call.action == DISMISS and call.refused not in (None, FORBIDDEN):
            deviations.append(f"Dismissing conflict {call.conflict_id} was refused: {call.answer}: {call.reason}")
    return tuple(deviations)


def _recorded(calls: Sequence[Call], key: str) -> str | None:
    """The record id of the key's first result recorded as succeeded."""
    return next(
        (
            call.target_record_id
            for call in calls
            if call.key == key and call.action in RESULTS and call.answer == ClaimStatus.SUCCEEDED
        ),
        None,
    )


def _once(calls: Sequence[Call], key: str, recorded: str | None) -> Iterator[str]:
    mine = [call for call in calls if call.key == key]
    records = [call for call in mine if call.action in RESULTS]
    if len(records) != 1:
        done = ", ".join(f"{call.run_id} made {call.target_record_id}" for call in records) or "no run proceeded"
        yield f"key {key}: the side effect was done {len(records)} times ({done}); once expected."
    for call in records:
        if call.refused is not None:
            yield (
                f"{_who(call)} did the side effect ({call.target_record_id}), but Record result was refused: "
                f"{call.answer}: {call.reason}"
            )
        elif call.answer != ClaimStatus.SUCCEEDED:
            yield f"{_who(call)} recorded succeeded, but the claim is {call.answer}."
    for call in mine:
        if call.is_claim(Decision.DUPLICATE) and call.target_record_id != recorded:
            yield (
                f"{_who(call)} was told duplicate with target record {call.target_record_id}, "
                f"not the recorded {recorded}."
            )


def _answered(calls: Sequence[Call], key: str) -> Counter[tuple[str, str]]:
    """The history entries the key's answers should have left, by event and outcome."""
    events = {
        **dict.fromkeys(CLAIMS, EventKind.CLAIM),
        **dict.fromkeys(RESULTS, EventKind.RESULT),
        DISMISS: EventKind.RESOLUTION,
    }
    answered = [call for call in calls if call.key == key and call.refused is None]
    return Counter((events[call.action].value, call.answer) for call in answered)


def _history(calls: Sequence[Call], lookup: Lookup, recorded: str | None) -> Iterator[str]:
    claim = lookup.claim
    if claim is None:
        yield f"key {lookup.key}: its claim could not be read back: {lookup.error}"
        return
    if claim.status is not ClaimStatus.SUCCEEDED or claim.target_record_id != recorded:
        yield (
            f"key {lookup.key}: the claim is {claim.status.value} with target record {claim.target_record_id}; "
            f"expected succeeded with {recorded}."
        )
    expected = _answered(calls, lookup.key)
    held: Counter[tuple[str, str]] = Counter()
    for entry in claim.history or []:
        # Answers alike are one entry with their count.
        held[entry.kind.value, entry.outcome] += entry.count or 1
    for event, outcome in sorted(expected.keys() | held.keys()):
        if expected[event, outcome] != held[event, outcome]:
            yield (
                f"key {lookup.key}: the history holds {held[event, outcome]} '{event} {outcome}' entries; "
                f"the drill was answered that {expected[event, outcome]} times."
            )
