"""Check and claim never hands a run the claim of a Perform once whose call is under way.

A Perform once records its call on its claim before sending it; the run that holds the claim asking Perform once
again is told ``in_progress``. Check and claim with that run's run id, flow and data was recognised as the holder
asking again and answered ``proceed`` with the claim's token: released with it while the call was under way, the
claim went to the next Perform once, which sent the call again (the target made two orders). The run id and flow
can be read from the claim by anyone allowed to read claims. Perform once now records its call in the write that
grants its claim, a run holding a grant by its token is never called on by Perform once, and a call sent after a
look-up is recorded under a grant of its own; each test pauses the store where the gap was and counts the target's
writes (or the token's use).
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim, HistoryEvent
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.targets import Target
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.http.client import Api
from tests.http.test_governance import run_timer
from tests.perform.calls import PAST_DEADLINE, perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, Record, StandInTarget


def test_check_and_claim_by_the_run_making_a_call_is_told_in_progress_and_gets_no_token(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget
) -> None:
    declared.declare(with_target(erp, timeout_seconds=30))
    body = {**perform_body("SO-mixed", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool, stand_in.released():
        held = pool.submit(api.call, "perform_once", body)
        stand_in.wait_for(1)
        asked = api.call("check_and_claim", same_run)
        waited = api.call("check_and_claim", {**same_run, "wait": True, "maxWaitSeconds": 60})
        by_another = api.call("perform_once", {**body, "runId": "run-B"})
        stand_in.release()
        performed = held.result(timeout=30)
    after = api.call("perform_once", {**body, "runId": "run-C"})

    assert (asked.status, asked.body["decision"], asked.body.get("claimToken")) == (200, "in_progress", None)
    assert (waited.body["decision"], waited.body.get("claimToken")) == ("in_progress", None)
    assert by_another.body["decision"] == "in_progress"
    assert performed.body["decision"] == "performed"
    assert after.body["decision"] == "duplicate"
    assert len(stand_in.writes()) == 1


class Pausing:
    """A store that stops once at the first write of a claim ``when`` picks, until ``go`` is set: after the write
    (``when`` is told "created", or "taken over" for a claim a new attempt takes over) or before it ("recording",
    the claim's outcome)."""

    def __init__(self, store: ClaimStore) -> None:
        self._store = store
        self.when: Callable[[Claim, str], bool] = lambda claim, write: False
        self.paused, self.go = threading.Event(), threading.Event()

    def create_claim(self, claim: Claim, event: HistoryEvent) -> Claim:
        stored = self._store.create_claim(claim, event)
        self._pause(claim, "created")
        return stored

    def update_claim(self, claim: Claim, event: HistoryEvent | None = None, **how: Any) -> Claim:
        if claim.status is not ClaimStatus.IN_PROGRESS:
            self._pause(claim, "recording")
        stored = self._store.update_claim(claim, event, **how)
        if how.get("relabelled"):
            self._pause(claim, "taken over")
        return stored

    def _pause(self, claim: Claim, write: str) -> None:
        if self.when(claim, write) and not self.paused.is_set():
            self.paused.set()
            assert self.go.wait(timeout=30), "never let go on"

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.fixture
def pausing(
    service: Gate, open_store: Callable[[], ClaimStore], clock: FakeClock, local_server: tuple[str, int]
) -> Iterator[Pausing]:
    """The local server's service over a store that pauses (the other fixtures' store's data); let go at the end."""
    store = Pausing(open_store())
    gate = Gate(store, KeyHasher(KEY_SECRET), clock=clock, targets_allow_loopback=True)
    bootstrap.use_services(gate.services)
    try:
        yield store
    finally:
        store.go.set()
        bootstrap.use_services(service.services)


def _release(api: Api, answer: dict[str, Any]) -> int:
    route = {"claimId": answer["claimId"]}
    return api.call("release_claim", {"claimToken": answer["claimToken"], "reason": "changed"}, route=route).status


@pytest.mark.parametrize("taken_over", [False, True], ids=["new claim", "claim taken over"])
def test_check_and_claim_between_perform_onces_claim_and_its_call_gets_no_token(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, pausing: Pausing, taken_over: bool
) -> None:
    """Perform once claimed the key, then recorded its call in a second write: a Check and claim of the same run, flow
    and data in between was the holder asking again, answered ``proceed`` with the claim's token; released with it
    while the call was under way, the claim went to run-B's Perform once, which sent the call again (two orders)."""
    declared.declare(with_target(erp, timeout_seconds=30))
    body = {**perform_body("SO-between", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    if taken_over:
        earlier = api.call("check_and_claim", {**same_run, "runId": "run-0"}).body
        assert _release(api, earlier) == 200
    pausing.when = lambda claim, write: claim.run_id == "run-A" and write in ("created", "taken over")
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool, stand_in.released():
        held = pool.submit(api.call, "perform_once", body)
        assert pausing.paused.wait(timeout=30), "Perform once never claimed"
        asked = api.call("check_and_claim", same_run)
        pausing.go.set()
        stand_in.wait_for(1)
        released_by_it = _release(api, asked.body) if asked.body.get("claimToken") else None
        by_another = api.call("perform_once", {**body, "runId": "run-B"})
        stand_in.release()
        performed = held.result(timeout=30)

    assert len(stand_in.writes()) == 1
    assert (asked.body["decision"], asked.body.get("claimToken"), released_by_it) == ("in_progress", None, None)
    assert by_another.body["decision"] == "in_progress"
    assert performed.body["decision"] == "performed"


def test_perform_once_by_the_run_holding_check_and_claims_grant_makes_no_call(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, pausing: Pausing
) -> None:
    """A run granted ``proceed`` by Check and claim that then asked Perform once (same run, flow and data) was the
    holder asking again: Perform once sent the call on the claim while the run kept its token, and a release with it
    before the call's outcome was recorded let run-B's Perform once send it again (two orders). The claim is the
    run's to act on as Check and claim told it: Perform once answers ``in_progress``, and sends nothing."""
    body = {**perform_body("SO-held", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    granted = api.call("check_and_claim", same_run).body
    assert granted["decision"] == "proceed"
    pausing.when = lambda claim, write: claim.run_id == "run-A" and write == "recording"
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(api.call, "perform_once", body)
        held.add_done_callback(lambda _: pausing.paused.set())
        assert pausing.paused.wait(timeout=30), "Perform once neither called nor answered"
        released_by_it = _release(api, granted)
        by_another = api.call("perform_once", {**body, "runId": "run-B"})
        pausing.go.set()
        by_the_holder = held.result(timeout=30)

    assert len(stand_in.writes()) == 1
    told = by_the_holder.body
    assert (told["decision"], told.get("claimToken"), told["retryAfterSeconds"]) == ("in_progress", None, 60)
    assert released_by_it == 200
    assert by_another.body["decision"] == "performed"


def test_check_and_claim_during_perform_onces_look_up_gets_no_token_and_one_order_is_made(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Perform once took a call in doubt over and looked it up at the target: a Check and claim of the same run, flow
    and data during the look-up was the holder asking again, answered ``reconcile`` with the claim's token. The flow
    looked the order up, found none, and made it itself, while Perform once's look-up found nothing and sent the
    call again (two orders). The grant that looks up is marked from its own write: the run is told in_progress."""
    declared.declare(with_target(erp, honours_idempotency_key=True, timeout_seconds=30))
    body = {**perform_body("SO-again", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    stand_in.script(Answer(status=503, commit=False))
    assert api.call("perform_once", {**body, "runId": "run-0"}).body["decision"] == "reconcile"
    clock.advance(30 + PAST_DEADLINE)
    stand_in.script(Answer(status=404, body=b"{}", commit=False, late=True))
    with ThreadPoolExecutor(1) as pool, stand_in.released():
        held = pool.submit(api.call, "perform_once", body)
        stand_in.wait_for(2)  # Perform once's look-up is at the target, its answer held
        asked = api.call("check_and_claim", same_run)
        if asked.body.get("claimToken"):
            _flow_acts(stand_in, body["reference"])  # told: look it up, else do the side effect
        stand_in.release()
        performed = held.result(timeout=30)
    claim = api.call("get_claim", route={"claimId": asked.body["claimId"]}).body

    assert len(stand_in.records) == 1
    told = asked.body
    assert (told["decision"], told.get("claimToken"), told["retryAfterSeconds"]) == ("in_progress", None, 60)
    assert [request.method for request in stand_in.received] == ["POST", "GET", "POST"]
    assert (performed.body["decision"], claim["status"]) == ("performed", "succeeded")


def test_a_claim_handed_to_the_flow_after_a_look_up_that_could_not_tell_is_the_runs_when_it_asks_again(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The look-up mark is taken off when Perform once hands the claim to the flow: the run asking Check and claim
    again (its answer lost) is the holder, told reconcile with the same token, and records what it found with it."""
    declared.declare(with_target(erp, timeout_seconds=30))
    body = {**perform_body("SO-handed", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    stand_in.script(Answer(status=503, commit=False))
    assert api.call("perform_once", {**body, "runId": "run-0"}).body["decision"] == "reconcile"
    clock.advance(30 + PAST_DEADLINE)
    stand_in.script(Answer(status=503, commit=False))
    handed = api.call("perform_once", body).body

    asked = api.call("check_and_claim", same_run).body
    route = {"claimId": asked["claimId"]}
    failed = {"claimToken": asked.get("claimToken"), "outcome": "failed", "retryable": True, "error": "none found"}
    recorded = api.call("record_result", failed, route=route)

    assert handed["decision"] == "reconcile"
    assert (asked["decision"], asked.get("claimToken")) == ("reconcile", handed["claimToken"])
    assert recorded.status == 200
    assert [request.method for request in stand_in.received] == ["POST", "GET"]


def _flow_acts(stand_in: StandInTarget, reference: str) -> None:
    """What a flow holding a reconcile does with its own HTTP actions: look the order up, and make it if none is."""
    if stand_in.look_up(f"/orders?reference={reference}") is not None:
        return  # found: the flow records it
    order = json.dumps({"reference": reference, "amount": 10}).encode()
    headers = {"Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(f"{stand_in.base_url}/orders", order, headers), timeout=10):
        pass


def test_perform_once_asked_to_wait_by_the_run_holding_the_grant_answers_at_once(
    api: Api, erp: Target, stand_in: StandInTarget
) -> None:
    """The run holds the claim itself: there is no other run to wait for, so no poll address, and nothing sent."""
    body = {**perform_body("SO-waits", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    assert api.call("check_and_claim", same_run).body["decision"] == "proceed"

    told = api.call("perform_once", {**body, "wait": True, "maxWaitSeconds": 60})

    assert (told.status, told.body["decision"], told.headers.get("Location")) == (200, "in_progress", None)
    assert stand_in.received == []


@pytest.mark.parametrize("deadline", ["soon", "2030-01-01T00:00:00", 17, "2030-01-01T00:00:00+00:00"])
def test_a_flows_own_result_data_named_call_neither_breaks_perform_once_nor_the_watch(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock, deadline: object
) -> None:
    """A Check and claim flow's result data is its own: one naming a member ``call`` with a ``deadline`` that is not
    a time with its zone (a word, a time without a zone, a number) answered 500 to every Perform once of the key,
    and stopped the attention watch's look-ups for every claim in doubt. One with its zone, years on and sent at no
    time, was taken for a call still under way: every Perform once of the key was told in_progress until then."""
    body = {**perform_body("SO-own", run="run-A"), "payload": {"amount": 10}}
    own = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    granted = api.call("check_and_claim", own).body
    data = {"call": {"target": "erp", "deadline": deadline}}
    unknown = {"claimToken": granted["claimToken"], "outcome": "unknown", "error": "timed out", "data": data}
    assert api.call("record_result", unknown, route={"claimId": granted["claimId"]}).status == 200
    stand_in.script(Answer(status=503))
    assert api.call("perform_once", perform_body("SO-other")).body["decision"] == "reconcile"
    clock.advance(erp.timeout_seconds + 31)  # past the other call's deadline, and a lease of Perform once's after

    run_timer("watch_claims_needing_attention")
    asked = api.call("perform_once", {**body, "runId": "run-B"})

    assert [request.method for request in stand_in.received] == ["POST", "GET", "GET"]
    assert asked.status == 200, asked.body
    assert asked.body["decision"] == "reconcile"


def test_check_and_claim_before_a_call_in_doubts_deadline_is_told_in_progress_and_one_order_is_made(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Perform once's call got 504 from a gateway while the order system went on making the order. Until the call's
    deadline no look-up can tell, and Perform once says in_progress; Check and claim handed a run the claim to
    reconcile at once, so the flow looked the order up, found none yet, and made it itself (two orders)."""
    declared.declare(with_target(erp, timeout_seconds=30))
    body = {**perform_body("SO-gateway", run="run-A"), "payload": {"amount": 10}}
    stand_in.script(Answer(status=504, commit=False))
    assert api.call("perform_once", body).body["decision"] == "reconcile"
    clock.advance(5)
    asked = api.call(
        "check_and_claim", {key: body[key] for key in ("scope", "key", "flow", "payload")} | {"runId": "run-B"}
    )
    if asked.body["decision"] == "reconcile":
        _flow_acts(stand_in, "SO-gateway")  # finds no order yet, and makes one
    stand_in.records.append(Record("order-0", "SO-gateway", None))  # the order system made the call's after all

    assert len(stand_in.records) == 1, "the order was made twice"

    assert (asked.body["decision"], asked.body.get("claimToken")) == ("in_progress", None)
    assert 1 <= asked.body["retryAfterSeconds"] <= 25 + PAST_DEADLINE
    clock.advance(25 + PAST_DEADLINE)
    later = api.call("perform_once", {**body, "runId": "run-C"}).body
    assert (later["decision"], later["targetRecordId"]) == ("duplicate", "order-0")


def test_check_and_claim_waiting_on_a_call_in_doubt_is_told_so_and_polls_until_its_deadline(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """No run holds a claim whose Perform once call ended in doubt: a Check and claim that waits is told the call may
    still be under way (not that another run is doing the side effect, with "or stop"), asked to poll no later than
    the call's deadline, and once it passed the poll hands the run the claim to reconcile."""
    declared.declare(with_target(erp, timeout_seconds=30))
    body = {**perform_body("SO-waits", run="run-A"), "payload": {"amount": 10}}
    stand_in.script(Answer(status=504, commit=False))
    assert api.call("perform_once", body).body["decision"] == "reconcile"
    clock.advance(27 + PAST_DEADLINE)  # the call is over 3 s from now: its deadline, the margin, up to the second
    own = {key: body[key] for key in ("scope", "key", "flow", "payload")} | {"runId": "run-B"}

    waited = api.call("check_and_claim", {**own, "wait": True, "maxWaitSeconds": 600})

    assert (waited.status, waited.body["decision"], waited.body.get("claimToken")) == (202, "in_progress", None)
    assert "in doubt" in waited.body["reason"], waited.body
    assert "Another run" not in waited.body["reason"], waited.body
    assert waited.body["retryAfterSeconds"] == 3, "polled after the call's deadline, not before"
    assert f"retry in {waited.body['retryAfterSeconds']} s" in waited.body["reason"]
    clock.advance(3)
    polled = api.follow(waited.headers["location"])
    assert (polled.status, polled.body["decision"]) == (200, "reconcile"), polled.body
    assert polled.body["claimToken"]
