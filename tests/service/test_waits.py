"""Check and claim (wait) in the service on both stores: who may poll, and fingerprint rules changing meanwhile.

The engine's side (202, Location, Retry-After) is tested over HTTP in ``tests/http/test_waiting.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from oncegate.domain.statuses import Decision
from oncegate.domain.waiting import Waiting
from oncegate.errors import InvalidRequest
from oncegate.models import ClaimRequest, ClaimResponse, HeartbeatRequest
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW, KEY, SCOPE, claim, record, register, release, set_scope
from tests.service.test_concurrency import RACERS, race

ORDER = {"order": "SO-1", "amount": 10, "modified": "09:00"}
WAIT = 900


def wait(service: Gate, run: str, *, signed_in: str | None = None, **fields: Any) -> Waiting:
    fields = {"payload": ORDER, "max_wait_seconds": WAIT, **fields}
    request = ClaimRequest(scope=SCOPE, key=KEY, run_id=run, flow=FLOW, wait=True, **fields)
    answer, waiting = service.check_and_wait(request, signed_in=signed_in)
    assert answer.decision is Decision.IN_PROGRESS
    assert waiting is not None
    return waiting


def poll(service: Gate, waiting: Waiting, signed_in: str | None = None) -> ClaimResponse:
    return service.poll(waiting, signed_in=signed_in)[0]


def test_only_the_signed_in_caller_that_waits_may_poll(service: Gate) -> None:
    service.check_and_claim(ClaimRequest(scope=SCOPE, key=KEY, run_id="run-0", flow=FLOW, payload=ORDER))
    waiting = wait(service, "run-1", signed_in="ana@contoso.com")

    with pytest.raises(InvalidRequest) as refused:
        poll(service, waiting, signed_in="mallory@contoso.com")
    with pytest.raises(InvalidRequest):
        poll(service, waiting)

    assert refused.value.target == "ticket"
    assert poll(service, waiting, signed_in="ana@contoso.com").decision is Decision.IN_PROGRESS


def test_another_instance_answers_the_poll(new_service: Callable[[], Gate], clock: FakeClock) -> None:
    first, second = new_service(), new_service()
    held = claim(first, run="run-0", payload=ORDER)
    waiting = wait(first, "run-1")
    record(first, held, "failed", error="ERP down", retryable=True)

    answer = poll(second, waiting)

    assert (answer.decision, answer.attempt) == (Decision.PROCEED, 2)


def test_a_rule_change_during_the_wait_compares_under_the_claims_rules(service: Gate) -> None:
    set_scope(service, fingerprint_ignore=["/modified"])
    held = claim(service, run="run-0", payload=ORDER)
    waiting = wait(service, "run-1", payload={**ORDER, "modified": "10:00"})
    set_scope(service, fingerprint_include=["/order"])
    record(service, held, "succeeded", target_record_id="ERP-1")

    assert poll(service, waiting).decision is Decision.DUPLICATE


def test_rules_set_during_the_wait_reach_the_claim_taken_over_meanwhile(service: Gate) -> None:
    held = claim(service, run="run-0", payload=ORDER)
    waiting = wait(service, "run-1")
    set_scope(service, fingerprint_ignore=["/modified"])
    record(service, held, "failed", error="ERP down", retryable=True)
    third = claim(service, run="run-2", payload={**ORDER, "modified": "10:00"})

    # Under the rules now current, the third run's data is the claim's: it takes the claim over (issue 33). The
    # waiting run's poll address carries its fingerprints, not its members: compared under the claim's version
    # (none), its data differs from the third run's.
    assert third.decision is Decision.PROCEED
    assert poll(service, waiting).decision is Decision.CONFLICT


def test_a_key_claimed_again_under_rules_the_wait_never_saw_ends_it_naming_the_ticket(service: Gate) -> None:
    held = claim(service, run="run-0", payload=ORDER)
    waiting = wait(service, "run-1")
    set_scope(service, fingerprint_ignore=["/modified"])
    # The claim is deleted (retention, say) and the key claimed again, under the new rules.
    service.store.delete_claim(service.store.get_claim(held.claim_id))
    claim(service, run="run-2", payload=ORDER)

    with pytest.raises(InvalidRequest) as refused:
        poll(service, waiting)

    assert refused.value.target == "ticket"


def test_runs_waiting_on_one_holder_poll_at_once_when_it_releases_and_exactly_one_proceeds(
    new_service: Callable[[], Gate],
) -> None:
    service = new_service()
    held = claim(service, run="run-0", payload=ORDER)
    waiting = [wait(service, f"run-{i + 1}") for i in range(RACERS)]
    release(service, held)

    answers = race(new_service, lambda instance, i: poll(instance, waiting[i]))

    assert Counter(answer.decision for answer in answers) == {Decision.PROCEED: 1, Decision.IN_PROGRESS: RACERS - 1}
    winner = next(i for i, answer in enumerate(answers) if answer.decision is Decision.PROCEED)
    # The winner's engine polling again is the same run: its own grant back; the others still wait for it.
    assert poll(service, waiting[winner]).claim_token == answers[winner].claim_token


def in_progress_answers(service: Gate, claim_id: str) -> int:
    """The ``in_progress`` answers the claim's history counts."""
    return sum(entry.count or 1 for entry in service.history(claim_id)[0] if entry.outcome == "in_progress")


@pytest.mark.parametrize("ending", ["succeeded", "deadline"])
def test_polls_are_written_once_when_the_wait_ends_and_the_history_counts_every_answer(
    service: Gate, clock: FakeClock, ending: str
) -> None:
    """Issue 36: a poll nothing changed for writes nothing; the poll ending the wait counts them all, once."""
    held = claim(service, run="run-0", payload=ORDER, lease_seconds=3600)
    waiting: Waiting | None = wait(service, "run-1")
    polls = 5
    for _ in range(polls):
        clock.advance(10)
        assert waiting is not None
        answer, waiting = service.poll(waiting)
        assert answer.decision is Decision.IN_PROGRESS

    during = in_progress_answers(service, held.claim_id)
    if ending == "succeeded":
        record(service, held, "succeeded", target_record_id="ERP-1")
    else:
        clock.advance(WAIT)
    assert waiting is not None
    answer, after = service.poll(waiting)

    assert during == 1  # the wait's first answer only: the polls wrote nothing
    assert after is None
    assert answer.decision is (Decision.DUPLICATE if ending == "succeeded" else Decision.IN_PROGRESS)
    assert in_progress_answers(service, held.claim_id) == 1 + polls + (ending == "deadline")


def test_a_poll_address_of_the_release_before_counts_its_polls_as_then(service: Gate, clock: FakeClock) -> None:
    held = claim(service, run="run-0", payload=ORDER, lease_seconds=3600)
    waiting: Waiting | None = replace(wait(service, "run-1"), unwritten=None)
    for _ in range(3):
        clock.advance(10)
        assert waiting is not None
        waiting = service.poll(waiting)[1]
    record(service, held, "succeeded", target_record_id="ERP-1")
    assert waiting is not None

    assert poll(service, waiting).decision is Decision.DUPLICATE
    assert in_progress_answers(service, held.claim_id) == 4


def test_a_renewed_lease_starts_a_series_and_the_answers_before_it_are_counted(service: Gate, clock: FakeClock) -> None:
    held = claim(service, run="run-0", payload=ORDER, lease_seconds=600)
    waiting: Waiting | None = wait(service, "run-1")
    for renew in (False, True, False):
        if renew:
            service.heartbeat(held.claim_id, HeartbeatRequest(claim_token=held.claim_token, lease_seconds=3600))
        clock.advance(10)
        assert waiting is not None
        waiting = service.poll(waiting)[1]
    record(service, held, "succeeded", target_record_id="ERP-1")
    assert waiting is not None

    assert poll(service, waiting).decision is Decision.DUPLICATE
    assert in_progress_answers(service, held.claim_id) == 4


@pytest.mark.parametrize("flow_enabled", [True, False])
def test_a_poll_after_the_claim_was_purged_writes_only_its_own_answer(
    service: Gate, clock: FakeClock, flow_enabled: bool
) -> None:
    """The answers a wait left unwritten were the purged claim's: they went with its history. The poll claims the
    key anew and its claim shows only that grant, or it is blocked and writes nothing (before, both wrote them back,
    as the new claim's own answers or as a line of a claim that no longer exists)."""
    set_scope(service, retention_days=1)
    held = claim(service, run="run-0", payload=ORDER, lease_seconds=3600)
    waiting: Waiting | None = wait(service, "run-1", max_wait_seconds=86_400)
    for _ in range(3):
        clock.advance(10)
        assert waiting is not None
        waiting = service.poll(waiting)[1]
    release(service, held)
    # The engine's next poll comes late (the flow was suspended), after retention deleted the released claim.
    clock.advance(86_400 + 60)
    service.retention.purge()
    register(service, enabled=flow_enabled)
    assert waiting is not None

    answer = poll(service, waiting)

    expected = (Decision.PROCEED, 1) if flow_enabled else (Decision.BLOCKED, 0)
    assert (answer.decision, answer.attempt) == expected
    # The claim id is the key's, under either claim: the new one's history, or none for a key left unclaimed.
    assert [(event.outcome, event.run_id) for event in service.store.list_events(held.claim_id)] == (
        [("proceed", "run-1")] if flow_enabled else []
    )
