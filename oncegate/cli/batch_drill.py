"""The batch drill (``oncegate drill --batch``): the same records fired in bulk calls, racing single calls.

A scheduled import sends its rows in Check and claim many while a flow triggered per row sends
the same records one by one; the drill acts as both, on ``RECORDS`` fresh test keys:

1. ``B1 race``: N racers start at once, each asking for every record once in an order of its own.
   Even racers send one Check and claim many of all the records, and record what they were told
   to do in one Record results; odd racers send one Check and claim per record, and record each
   result as it comes (Record result). Each record must be told ``proceed`` exactly once across all
   racers; every other answer is ``in_progress`` or, once its result is recorded, ``duplicate``.
2. ``B2 again``: one Check and claim many of the same records, one of them twice, from a new run:
   every item ``duplicate``, with its record's result.

Then each record's claim is read back: succeeded once, with the record id its one result
recorded, and its history holding every answer the drill was given. The checks and the report are
the single drill's (:mod:`oncegate.cli.drill`), whose helpers this module shares: an item of a bulk
call is held to what its single call promises.
"""

from __future__ import annotations

import itertools
import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from http import HTTPStatus
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

from oncegate.cli.client import ApiError, Client, claim_body
from oncegate.cli.drill import (
    BATCH_AGAIN,
    BATCH_RACE,
    CHECK_AND_CLAIM_MANY,
    FLOW_NAME,
    PAYLOAD,
    RECORD_RESULTS,
    Call,
    Check,
    Report,
    _at_once,
    _claim,
    _decisions,
    _Drill,
    _explained,
    _history,
    _lookup,
    _ms,
    _once,
    _record,
    _recorded,
    _refusal,
    _register_command,
    _release_held,
    made_up_record_id,
    new_key,
)
from oncegate.domain.statuses import Decision, Outcome
from oncegate.entrypoints import error_map
from oncegate.models import FlowRef

# Enough records that a racer's calls overlap the others' for a while, few enough for one bulk call.
RECORDS = 20


def labels() -> list[str]:
    """The records' labels in the report, R01 to R20: each stands for a key of its own."""
    return [f"R{n:02d}" for n in range(1, RECORDS + 1)]


def run_batch_drill(
    client: Client,
    *,
    scope: str,
    source: str | None = None,
    concurrency: int,
    on_step: Callable[[str], None] = lambda _: None,
) -> Report:
    """Race bulk calls and single calls on new records, send them again in one batch, read every claim back."""
    health = client.health().model
    now = datetime.now(UTC)
    flow = FlowRef(name=FLOW_NAME, environment=urlsplit(client.url).hostname or client.url)
    base = new_key(now)
    keys = {label: f"{base}-{label.lower()}" for label in labels()}
    numbers = itertools.count(1)
    drill = _Drill(client, scope, flow, keys, numbers, source)
    report = Report(
        url=client.url,
        scope=scope,
        source=source,
        concurrency=concurrency,
        flow=flow,
        keys=keys,
        calls=[],
        lookups=[],
        checks=[],
        notes=[],
        store=f"{health.store} at {health.store_location}" if health.store_location else health.store,
        batch=True,
    )
    batches, singles = (concurrency + 1) // 2, concurrency // 2
    try:
        on_step(
            f"drill {BATCH_RACE}: {concurrency} racers on {RECORDS} records, "
            f"{batches} in batches and {singles} in single calls"
        )
        calls = [call for racer in _at_once(concurrency, lambda index: _race(drill, index)) for call in racer]
        blocked = next((call for call in calls if call.is_claim(Decision.BLOCKED)), None)
        if blocked is None:
            on_step(f"drill {BATCH_AGAIN}: 1 batch of {RECORDS + 1} items, one record twice")
            calls += _batch(drill, BATCH_AGAIN, [*labels(), labels()[0]], f"drill-run-{next(numbers)}")
            blocked = next((call for call in calls if call.is_claim(Decision.BLOCKED)), None)
    except KeyboardInterrupt:
        raise _release_held(drill) from None
    if blocked is not None:
        return replace(report, calls=calls, blocked=blocked, fix=_register_command(client.url, flow))
    on_step("drill: reading each record's claim back")
    lookups = [_lookup(drill, label) for label in keys]
    return replace(report, calls=calls, lookups=lookups, checks=_checks(calls, lookups, concurrency))


def _race(drill: _Drill, index: int) -> list[Call]:
    """Racer ``index`` asks for every record once, in an order of its own: in one batch when even, else one by one."""
    order = random.Random(f"{index}-{secrets.token_hex(4)}").sample(labels(), RECORDS)
    if index % 2 == 0:
        return _batch(drill, BATCH_RACE, order, f"drill-run-{next(drill.numbers)}")
    calls: list[Call] = []
    for label in order:
        claimed, answer = _claim(drill, BATCH_RACE, label, PAYLOAD, f"drill-run-{next(drill.numbers)}")
        calls.append(claimed)
        if claimed.is_claim(Decision.PROCEED):
            calls.append(_record(drill, claimed, answer))
    return calls


def _batch(drill: _Drill, step: str, order: Sequence[str], run_id: str) -> list[Call]:
    """One Check and claim many of the records in ``order`` (a Select gives every item the run's id); the items
    told proceed do the side effect and are recorded in one Record results."""
    items = [
        claim_body(
            scope=drill.scope,
            key=drill.keys[label],
            payload=PAYLOAD,
            run_id=run_id,
            flow=drill.flow,
            source=drill.source,
            reference=label,
        )
        for label in order
    ]
    started = perf_counter()
    entries = drill.client.check_and_claim_many(items).model.value
    ms = _ms(started)
    claims = []
    for number, (label, entry) in enumerate(zip(order, entries, strict=True), 1):
        item_run = f"{run_id} item {number}"
        if entry.error is not None:
            claims.append(_item_refusal(step, label, CHECK_AND_CLAIM_MANY, item_run, entry.error, ms))
            continue
        drill.held.took(entry)
        claims.append(
            Call(
                step,
                label,
                CHECK_AND_CLAIM_MANY,
                item_run,
                entry.decision.value,
                ms,
                attempt=entry.attempt,
                target_record_id=entry.result.target_record_id if entry.result else None,
                conflict_id=entry.conflict_id,
                reason=entry.reason,
            )
        )
    told = [(call, entry) for call, entry in zip(claims, entries, strict=True) if call.is_claim(Decision.PROCEED)]
    return claims + (_record_all(drill, told) if told else [])


def _record_all(drill: _Drill, told: list[tuple[Call, Any]]) -> list[Call]:
    """The side effect of each item told proceed, then their results in one Record results."""
    # The side effect: a record the target system would hold. Nothing is created anywhere.
    targets = [made_up_record_id() for _ in told]
    items = [
        {
            "claimId": entry.claim_id,
            "claimToken": entry.claim_token,
            "outcome": Outcome.SUCCEEDED.value,
            "targetRecordId": target,
        }
        for (_, entry), target in zip(told, targets, strict=True)
    ]
    started = perf_counter()
    try:
        entries = drill.client.record_results(items).model.value
    except ApiError as exc:
        if not _explained(exc):
            raise
        for _, entry in told:
            drill.held.done(entry.claim_id)
        return [
            _refusal(call, RECORD_RESULTS, exc, started, target_record_id=target)
            for (call, _), target in zip(told, targets, strict=True)
        ]
    ms = _ms(started)
    recorded = []
    for (claimed, sent), target, entry in zip(told, targets, entries, strict=True):
        drill.held.done(sent.claim_id)
        if entry.error is not None:
            refused = _item_refusal(claimed.step, claimed.key, RECORD_RESULTS, claimed.run_id, entry.error, ms)
            recorded.append(replace(refused, target_record_id=target))
            continue
        status = entry.status.value
        recorded.append(
            Call(
                claimed.step,
                claimed.key,
                RECORD_RESULTS,
                claimed.run_id,
                status,
                ms,
                attempt=entry.attempt,
                target_record_id=entry.target_record_id,
            )
        )
    return recorded


def _item_refusal(step: str, label: str, action: str, run_id: str | None, error: Any, ms: float) -> Call:
    """An item refused alone, in its place in a bulk call: the status its single call would have answered."""
    status = error_map.CODE_STATUS.get(error.code, HTTPStatus.BAD_REQUEST)
    return Call(step, label, action, run_id, error.code, ms, reason=error.message, refused=status.value)


def _checks(calls: Sequence[Call], lookups: list[Any], concurrency: int) -> list[Check]:
    """What the batch drill exercised: one proceed per record across bulk and single calls, one result each."""
    recorded = {label: _recorded(calls, label) for label in labels()}
    batches, singles = (concurrency + 1) // 2, concurrency // 2
    return [
        Check(
            f"{concurrency} racers at once on {RECORDS} new records, {batches} in batches and {singles} in single "
            "calls: each record proceeds once, every other answer is in_progress or duplicate",
            (*_decisions(calls, BATCH_RACE), *_one_proceed_each(calls)),
        ),
        Check(
            "The same records again in one batch, one of them twice: every item is a duplicate",
            _decisions(calls, BATCH_AGAIN),
        ),
        Check(
            "The business result happened once per record, and every duplicate returned it",
            tuple(deviation for label in labels() for deviation in _once(calls, label, recorded[label])),
        ),
        Check(
            "Each record's claim, read back, succeeded once and its history holds every answer",
            tuple(deviation for lookup in lookups for deviation in _history(calls, lookup, recorded[lookup.key])),
        ),
    ]


def _one_proceed_each(calls: Sequence[Call]) -> tuple[str, ...]:
    deviations = []
    for label in labels():
        told = [call.run_id or "" for call in calls if call.key == label and call.is_claim(Decision.PROCEED)]
        if len(told) != 1:
            runs = f" ({', '.join(told)})" if told else ""
            deviations.append(f"record {label}: {len(told)} runs were told proceed{runs}; exactly one must be.")
    return tuple(deviations)
