"""A Perform once call ends by the deadline its claim records, however long the writes before it took.

The claim records the call with ``sentAt`` (the request's arrival) and ``deadline`` (``sentAt`` plus the target's
``timeoutSeconds``) before anything leaves; another run's Perform once, or the attention watch, looks the call up
once that deadline has passed. A store slow to write the mark (Table Storage throttled, a lock wait on SQLite) used
to leave the call its whole ``timeoutSeconds`` from when it left: still in flight after the recorded deadline, when a
look-up finds nothing yet and a target that does not honour the key is sent it again, two orders. Each test runs on
both stores, the store slowed through the suite's fault-injecting store, against a stand-in target on loopback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.performing import fingerprint_payload, lease_of
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.targets import Target
from oncegate.models import ClaimRequest, ClaimResponse
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.perform.calls import FLOW, PAST_DEADLINE, perform, perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget

# The write before the call leaves that the store is slow to answer: the history's "sending" line, the last one.
SLOW_CALL = "add_event"
# How long the slow store takes on the real clock, of a target's 2 s: the call has 0.8 s left when it leaves.
SLOW_WRITE_SECONDS = 1.2
TIMEOUT_SECONDS = 2
# What the end of a call may lag its deadline by on a loaded machine: the watchdog's wake-up and the outcome's write.
LAG = timedelta(seconds=0.6)


def slowed(open_store: Callable[[], ClaimStore], clock: Callable[[], datetime]) -> tuple[Gate, FaultyStore]:
    store = FaultyStore(open_store(), Fault.BEFORE)  # fails nothing unless armed; interleave only slows
    return Gate(store, KeyHasher(KEY_SECRET), clock=clock, targets_allow_loopback=True), store


@pytest.fixture
def on_fake_clock(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Iterator[tuple[Gate, FaultyStore]]:
    gate, store = slowed(open_store, clock)
    yield gate, store
    gate.close()


@pytest.fixture
def on_real_clock(open_store: Callable[[], ClaimStore]) -> Iterator[tuple[Gate, FaultyStore]]:
    gate, store = slowed(open_store, lambda: datetime.now(UTC))
    yield gate, store
    gate.close()


def claim_body(key: str, run: str) -> dict[str, object]:
    """A Check and claim body for the key Perform once's body names, with the data it names."""
    body = perform_body(key, run=run)
    return {
        "scope": body["scope"],
        "key": key,
        "runId": run,
        "flow": FLOW,
        "payload": fingerprint_payload("erp", "POST", "/orders", body["body"]),
    }


def recorded_deadline(service: Gate, claim_id: str) -> datetime:
    data = service.store.get_claim(claim_id).data
    assert isinstance(data, dict)
    return datetime.fromisoformat(data["call"]["deadline"])


def test_a_call_whose_deadline_passed_while_the_store_wrote_its_mark_is_not_sent_and_may_be_tried_again(
    on_fake_clock: tuple[Gate, FaultyStore], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    service, store = on_fake_clock
    # The store answers the write before the call leaves only after the call's whole time.
    store.interleave(1, SLOW_CALL, lambda: clock.advance(erp_store.timeout_seconds + PAST_DEADLINE))
    try:
        first = perform(service, "SO-1", "run-1")
    finally:
        store.disarm()
    assert stand_in.writes() == [], "a call sent after its recorded deadline can meet a look-up that finds nothing yet"
    assert (first.decision.value, first.retryable) == ("failed", True), first
    assert first.reason.startswith("Nothing was sent to target erp: the call's deadline"), first.reason
    claim = service.store.get_claim(first.claim_id)
    assert (claim.status, claim.retryable) == (ClaimStatus.FAILED, True)
    again = perform(service, "SO-1", "run-1")  # the flow's retry, as told
    assert again.decision.value == "performed", again
    assert [record.reference for record in stand_in.records] == ["SO-1"]


def test_a_call_left_late_by_a_slow_store_ends_by_the_deadline_its_claim_records(
    on_real_clock: tuple[Gate, FaultyStore], declared_erp: Target, stand_in: StandInTarget
) -> None:
    service, store = on_real_clock
    stand_in.script(Answer(late=True))  # the target takes longer than the call's whole time
    store.interleave(1, SLOW_CALL, lambda: time.sleep(SLOW_WRITE_SECONDS))  # the slow store itself, not a wait
    with stand_in.released():
        try:
            answer = perform(service, "SO-2", "run-1")
        finally:
            store.disarm()
        ended = datetime.now(UTC)
    deadline = recorded_deadline(service, answer.claim_id)
    assert answer.decision.value == "reconcile", answer
    assert "no answer came in time" in answer.reason, answer.reason
    assert ended <= deadline + LAG, f"the call was still under way {ended - deadline} after its recorded deadline"


@pytest.fixture
def declared_erp(open_store: Callable[[], ClaimStore], erp_store: Target) -> Target:
    return Declared(open_store()).declare(with_target(erp_store, timeout_seconds=TIMEOUT_SECONDS))


def test_a_look_up_left_late_by_a_slow_store_is_not_made_once_the_grant_that_took_the_call_over_ran_out(
    on_fake_clock: tuple[Gate, FaultyStore], erp_store: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    service, store = on_fake_clock
    stand_in.script(Answer(status=503, commit=False))  # the call ends in doubt: the target made nothing
    first = perform(service, "SO-3", "run-1")
    assert first.decision.value == "reconcile", first
    clock.advance(erp_store.timeout_seconds + PAST_DEADLINE)  # past the call's deadline: the next one looks it up
    # The store answers the write that takes the call over only once that grant's lease ran out.
    store.interleave(1, "update_claim", lambda: clock.advance(lease_of(erp_store).total_seconds() + 1))
    try:
        second = perform(service, "SO-3", "run-2")
    finally:
        store.disarm()
    assert [request.method for request in stand_in.received] == ["POST"], "no look-up outlives its grant"
    assert second.decision.value == "reconcile", second
    assert "the look-up could not tell" in second.reason, second.reason


def test_a_call_sent_again_after_a_slow_look_up_holds_its_claim_until_its_own_deadline(
    on_fake_clock: tuple[Gate, FaultyStore],
    erp_store: Target,
    open_store: Callable[[], ClaimStore],
    stand_in: StandInTarget,
    clock: FakeClock,
) -> None:
    """A look-up that found nothing at a target honouring the key sends the call again, recorded by a write of its
    own with a deadline of its own. The grant that took the call over was leased when the look-up began: a look-up
    (or the writes before it) that took longer than the margin left that lease ending before the call's new deadline,
    and a Check and claim in between was handed the claim to reconcile while the call was under way: it looks, finds
    nothing yet, and makes the order itself, a second one."""
    service, store = on_fake_clock
    erp = Declared(open_store()).declare(with_target(erp_store, timeout_seconds=10, honours_idempotency_key=True))
    other = Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock)
    stand_in.script(Answer(status=503, commit=False))  # the first call ends in doubt: the target made nothing
    first = perform(service, "SO-4", "run-1")
    assert first.decision.value == "reconcile", first
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)  # past its deadline: the next Perform once looks it up
    margin = lease_of(erp).total_seconds() - erp.timeout_seconds
    told: list[ClaimResponse] = []

    def meanwhile() -> None:
        clock.advance(erp.timeout_seconds - 1)  # past the takeover's lease, within the call's own deadline
        told.append(other.check_and_claim(ClaimRequest.model_validate(claim_body("SO-4", "run-3"), by_name=False)))

    def slow_look_up() -> None:
        clock.advance(margin + 1)  # the look-up (or the write before it) took longer than the lease's margin
        store.interleave(1, "update_claim", meanwhile)  # the call recorded, not yet sent

    store.interleave(1, "update_claim", slow_look_up)  # the grant that takes the call over, to look it up
    try:
        second = perform(service, "SO-4", "run-2")
    finally:
        store.disarm()
        other.close()
    assert [request.method for request in stand_in.received] == ["POST", "GET", "POST"]
    assert second.decision.value == "performed", second
    assert told[0].decision.value == "in_progress", told[0]
    assert told[0].claim_token is None
    assert len(stand_in.records) == 1


@pytest.mark.parametrize("look_up", ["not-made", "timed-out"])
def test_a_grant_whose_lease_ran_out_before_its_look_up_could_tell_is_handed_to_no_run(
    on_fake_clock: tuple[Gate, FaultyStore],
    erp_store: Target,
    open_store: Callable[[], ClaimStore],
    stand_in: StandInTarget,
    clock: FakeClock,
    look_up: str,
) -> None:
    """The grant that took a call in doubt over ran out before its look-up could tell: the store answered its write
    only after the lease (the look-up then not made), or the look-up took what the lease left and timed out. Handed
    to the run with its claim token, that grant was already free for any other run to take: a Check and claim took
    the claim to reconcile meanwhile, both runs looked, found nothing and made the order, two orders. It is given
    back in doubt, and the run told to run Perform once again, which looks the call up."""
    service, store = on_fake_clock
    stand_in.script(Answer(status=503, commit=False))  # the call ends in doubt: the target made nothing
    assert perform(service, "SO-6", "run-1").decision.value == "reconcile"
    clock.advance(erp_store.timeout_seconds + PAST_DEADLINE)  # past the call's deadline: the next one looks it up
    lease = lease_of(erp_store).total_seconds()
    looking = None
    if look_up == "not-made":
        store.interleave(1, "update_claim", lambda: clock.advance(lease + 1))
    else:
        # The look-up has half a second of the lease left, and the target answers it only after: it times out, the
        # lease run out on the service's clock meanwhile.
        stand_in.script(Answer(late=True))
        store.interleave(1, "update_claim", lambda: clock.advance(lease - 0.5))
        looking = threading.Thread(target=lambda: (stand_in.wait_for(2), clock.advance(1)))
        looking.start()
    try:
        with stand_in.released():
            second = perform(service, "SO-6", "run-2")
    finally:
        store.disarm()
        if looking is not None:
            looking.join(timeout=10)
    assert second.decision.value == "reconcile", second
    assert second.claim_token is None, f"run-2 was handed a grant whose lease ran out at {second.lease_expires_at}"
    assert "the look-up could not tell" in second.reason, second.reason
    other = Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock)
    try:
        taken = other.check_and_claim(ClaimRequest.model_validate(claim_body("SO-6", "run-3"), by_name=False))
    finally:
        other.close()
    assert (taken.decision.value, taken.attempt) == ("reconcile", second.attempt + 1), taken
