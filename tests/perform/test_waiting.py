"""While one run's call is under way, another run is told in_progress, or waits at a poll address that never calls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from oncegate.domain.records import CALL_DEADLINE_MARGIN
from oncegate.domain.targets import Target
from tests.conftest import FakeClock
from tests.http.client import Api, Reply
from tests.perform.calls import perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget

MARGIN = int(CALL_DEADLINE_MARGIN.total_seconds())


@pytest.fixture
def slow_erp(declared: Declared, erp: Target) -> Target:
    """The order system given time enough for a second run to come while the first call is under way."""
    return declared.declare(with_target(erp, timeout_seconds=30))


def perform(api: Api, **fields: Any) -> Reply:
    return api.call("perform_once", perform_body(**fields))


def test_a_second_run_waits_at_a_poll_address_and_gets_what_the_holder_got(
    api: Api, slow_erp: Target, stand_in: StandInTarget
) -> None:
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        asked = perform(api, run="run-2", wait=True, maxWaitSeconds=600)
        polled = api.follow(asked.headers["location"])
        stand_in.release()
        held = holder.result(timeout=30)
    done = api.follow(asked.headers["location"])

    assert (asked.status, asked.body["decision"]) == (202, "in_progress")
    assert int(asked.headers["retry-after"]) >= 1
    assert (polled.status, polled.body["decision"]) == (202, "in_progress")
    assert (held.status, held.body["decision"]) == (200, "performed")
    assert (done.status, done.body["decision"]) == (200, "duplicate")
    assert done.body["response"] == held.body["response"]
    assert done.body["targetRecordId"] == held.body["targetRecordId"] == "order-1"
    assert len(stand_in.writes()) == 1


def test_without_wait_a_second_run_is_told_in_progress_with_retry_after(
    api: Api, slow_erp: Target, stand_in: StandInTarget
) -> None:
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        second = perform(api, run="run-2")
        stand_in.release()
        holder.result(timeout=30)
    assert (second.status, second.body["decision"]) == (200, "in_progress")
    assert second.body["retryAfterSeconds"] >= 1
    assert len(stand_in.writes()) == 1


def test_the_same_run_asking_again_while_its_call_is_under_way_never_sends_twice(
    api: Api, slow_erp: Target, stand_in: StandInTarget
) -> None:
    """An engine that retries a call that took long sends the very request again: the call is recorded before it
    leaves, so the second request finds it and is told in_progress."""
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        again = perform(api, run="run-1")
        stand_in.release()
        assert first.result(timeout=30).body["decision"] == "performed"
    assert again.body["decision"] == "in_progress"
    assert len(stand_in.writes()) == 1


def test_a_poll_address_of_check_and_claim_is_refused_at_perform_s(
    api: Api, slow_erp: Target, stand_in: StandInTarget
) -> None:
    """A Check and claim poll may grant the claim; Perform once's poll never calls: neither takes the other's ticket."""
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        asked = perform(api, run="run-2", wait=True)
        location = asked.headers["location"].replace("/api/perform/", "/api/claims/")
        refused = api.follow(location)
        stand_in.release()
        holder.result(timeout=30)
    assert (refused.status, refused.code, refused.targets) == (400, "invalid_request", ["ticket"])


def test_a_wait_that_ends_in_doubt_says_when_to_run_again_and_that_run_looks_the_record_up(
    api: Api, slow_erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """A flow told reconcile without a claim token runs Perform once again after Retry After Seconds, as the recipe
    and the designer say: the poll that ended the wait in doubt left the field out, so a Delay on it failed."""
    stand_in.script(Answer(status=502, late=True))
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        asked = perform(api, run="run-2", wait=True, maxWaitSeconds=600)
        stand_in.release()
        held = holder.result(timeout=30)
    ended = api.follow(asked.headers["location"])
    clock.advance(ended.body["retryAfterSeconds"])
    again = perform(api, run="run-2")

    assert held.body["decision"] == "reconcile"
    assert (ended.status, ended.body["decision"]) == (200, "reconcile")
    assert "claimToken" not in ended.body
    # The call's deadline, as the holder was told it (the stamps of one instance are a microsecond apart).
    assert ended.body["retryAfterSeconds"] == held.body["retryAfterSeconds"] > slow_erp.timeout_seconds - 1
    assert (again.body["decision"], again.body["targetRecordId"], again.body["lookedUp"]) == (
        "duplicate",
        "order-1",
        True,
    )
    assert len(stand_in.writes()) == 1


def test_a_wait_that_runs_out_says_when_to_ask_again_as_check_and_claim_s_does(
    api: Api, slow_erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Max Wait Seconds ran out while another run's call is under way: in_progress with retryAfterSeconds, which the
    designer and the contract tell a flow to wait; the poll that ended the wait left it out."""
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        asked = perform(api, run="run-2", wait=True, maxWaitSeconds=10)
        polled = api.follow(asked.headers["location"])
        clock.advance(11)
        ran_out = api.follow(polled.headers["location"])
        stand_in.release()
        holder.result(timeout=30)

    assert (asked.status, polled.status, ran_out.status, ran_out.body["decision"]) == (202, 202, 200, "in_progress")
    for waiting in (asked, polled):
        assert int(waiting.headers["retry-after"]) == waiting.body["retryAfterSeconds"]
        assert f"in {waiting.body['retryAfterSeconds']} s" in waiting.body["reason"]
    # The holder's lease (the target's 30 s plus 30 s) has 49 s left.
    assert ran_out.body["retryAfterSeconds"] == 2 * slow_erp.timeout_seconds - 11
    assert f"in {ran_out.body['retryAfterSeconds']} s" in ran_out.body["reason"]
    assert len(stand_in.writes()) == 1


def test_a_wait_on_a_call_in_doubt_is_told_to_ask_again_when_its_poll_comes(
    api: Api, slow_erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """run-1's call ended in doubt (503) 30 s before its deadline; run-2 waits on it. Its poll comes in 5 s, as
    Check and claim's wait on such a call; the reason said to ask again in 30 s, Retry-After 5."""
    stand_in.script(Answer(status=503))
    assert perform(api, run="run-1").body["decision"] == "reconcile"
    clock.advance(4)

    asked = perform(api, run="run-2", wait=True, maxWaitSeconds=600)
    polled = api.follow(asked.headers["location"])

    assert (asked.status, polled.status) == (202, 200), (asked.body, polled.body)
    seconds = asked.body["retryAfterSeconds"]
    assert int(asked.headers["retry-after"]) == seconds == 5
    assert asked.body["reason"].endswith(f"ask again in {seconds} s."), asked.body["reason"]
    assert "is in doubt" in asked.body["reason"], asked.body
    # The call's deadline is 26 s away, and a look-up waits the margin for the instances' clocks past it, up to the
    # whole second (the clock is at .123456 s).
    assert (polled.body["decision"], polled.body["retryAfterSeconds"]) == ("reconcile", 27 + MARGIN), polled.body
    assert len(stand_in.writes()) == 1


def test_the_same_run_asking_again_while_its_call_is_under_way_is_told_it_is_its_own(
    api: Api, slow_erp: Target, stand_in: StandInTarget
) -> None:
    """The engine sent the very request again (without and with Wait) while the first one's call is under way: it
    was told another run was doing the side effect (retry or stop), or making the call; it is this run's own call."""
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(perform, api, run="run-1")
        stand_in.wait_for(1)
        again = perform(api, run="run-1")
        waiting = perform(api, run="run-1", wait=True, maxWaitSeconds=600)
        polled = api.follow(waiting.headers["location"])
        checked = api.call("check_and_claim", _as_check_and_claim(perform_body(run="run-1")))
        stand_in.release()
        assert first.result(timeout=30).body["decision"] == "performed"

    assert (again.status, waiting.status, polled.status, checked.status) == (200, 202, 202, 200)
    assert checked.body["decision"] == "in_progress", checked.body
    for told in (again, waiting, polled, checked):
        reason, seconds = told.body["reason"], told.body["retryAfterSeconds"]
        assert reason.startswith("This run's Perform once call (or look-up of an earlier one) is under way"), reason
        assert f"ask again in {seconds} s" in reason, reason
    assert len(stand_in.writes()) == 1


def _as_check_and_claim(body: dict[str, Any]) -> dict[str, Any]:
    """The Check and claim of the same run for the same business data: a Perform once without payload is
    fingerprinted by the call it makes."""
    call = {name: body[name] for name in ("target", "method", "path", "body")}
    return {"scope": body["scope"], "key": body["key"], "runId": body["runId"], "flow": body["flow"], "payload": call}
