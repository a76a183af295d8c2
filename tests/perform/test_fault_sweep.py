"""A fault at every step of Perform once, in the store and at the target: the target never acts twice (issue 34).

Each round runs one Perform once for a key of its own with the store failing at its nth call (``Fault.BEFORE``:
the write did not land; ``Fault.AFTER``: it landed and the answer was lost), while the target answers one way:
it commits and answers, it commits and hangs up, or it answers 503. The flow's retry sends the same request
again; then, once every lease and deadline is over, one more run settles the key. Whatever failed where:

- the target made at most one record for the key, and a request that could have acted reached it at most once
  (a look-up is a GET, which acts on nothing);
- the key ends ``succeeded`` with the record the target holds, answered ``performed`` or ``duplicate``.

Rounds go on until the action runs out of store calls to fail.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Outcome
from oncegate.domain.targets import Target
from oncegate.entrypoints import http
from oncegate.entrypoints.operations import BY_NAME, Call
from oncegate.errors import StoreUnavailable
from oncegate.models import PerformResponse, RecordResultRequest
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.perform.calls import perform
from tests.support.target_server import Answer, StandInTarget

MAX_CALLS = 20
# Past every lease (the target's second and 30 s) and every call's deadline.
EVERY_LEASE_OVER = 120
TARGET_ANSWERS = {
    "answers": Answer(status=201),
    "hangs-up": Answer(hang_up=True),
    "answers-503": Answer(status=503),
}


@pytest.fixture(params=[fault.value for fault in Fault])
def faulty(request: pytest.FixtureRequest, open_store: object, clock: FakeClock) -> Iterator[tuple[Gate, FaultyStore]]:
    store = FaultyStore(open_store(), Fault(request.param))  # type: ignore[operator]
    gate = Gate(store, KeyHasher(KEY_SECRET), clock=clock, targets_allow_loopback=True)
    yield gate, store
    gate.close()


def forget_script(stand_in: StandInTarget) -> None:
    with stand_in._changed:  # the stand-in's own lock: its scripted answers are a list of its own
        stand_in._scripted.clear()


def reconciled(service: Gate, answer: PerformResponse, key: str) -> PerformResponse:
    """What a flow does with reconcile when the target holds nothing: record failed, retryable, and run again."""
    assert answer.claim_token is not None, answer
    failed = RecordResultRequest(
        claim_token=answer.claim_token, outcome=Outcome.FAILED, retryable=True, error="not found"
    )
    http.answer(BY_NAME["record_result"], service.services, Call(body=failed, ids={"claimId": answer.claim_id}))
    return perform(service, key, "run-again")


@pytest.mark.parametrize("target_answer", list(TARGET_ANSWERS))
def test_a_fault_at_every_store_call_and_a_cut_target_never_act_twice(
    faulty: tuple[Gate, FaultyStore], erp_store: Target, stand_in: StandInTarget, clock: FakeClock, target_answer: str
) -> None:
    service, store = faulty
    for round_ in range(1, MAX_CALLS + 1):
        key = f"SO-{target_answer}-{round_}"
        stand_in.script(TARGET_ANSWERS[target_answer])
        store.arm(round_)
        try:
            with contextlib.suppress(StoreUnavailable):
                perform(service, key, "run-1")
        finally:
            calls = store.disarm()
        fired = store.fired
        forget_script(stand_in)  # an answer scripted for a call the fault kept from leaving is not the look-up's
        with contextlib.suppress(StoreUnavailable):
            perform(service, key, "run-1")  # the flow's retry policy sends the very request again
        clock.advance(EVERY_LEASE_OVER)
        settled = perform(service, key, "run-late")
        if settled.decision.value == "reconcile":
            # The call was recorded and the store lost the answer, so it never left; nothing tells that from a call
            # that did, and the look-up found nothing: the flow reconciles, as the contract says, and runs again.
            assert [record for record in stand_in.records if record.reference == key] == []
            settled = reconciled(service, settled, key)
        sent = [request for request in stand_in.writes() if key in request.body.decode()]
        made = [record for record in stand_in.records if record.reference == key]
        assert len(sent) <= 1, f"round {round_} ({fired}): the target was called {len(sent)} times"
        assert len(made) == 1, f"round {round_} ({fired}): {made} {settled}"
        assert settled.decision.value in ("performed", "duplicate"), settled
        assert settled.target_record_id == made[0].record_id
        if fired is None:
            break
    assert store.fired is None, f"Perform once made {MAX_CALLS} storage calls and went on"
    assert calls
