"""Unknown outcomes settled without the maker: the attention watch looks a call in doubt up, and never sends it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.targets import Target
from oncegate.models import ClaimRequest
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.http.client import Api
from tests.http.test_governance import run_timer
from tests.perform.calls import FLOW, PAST_DEADLINE, perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, Record, StandInTarget

# The lease a Check and claim run takes the claim to reconcile with, in the tests that let it run out.
LEASE = 60


def perform(api: Api, **fields: object) -> dict[str, object]:
    reply = api.call("perform_once", perform_body(**fields))  # type: ignore[arg-type]
    assert reply.status == 200, reply.body
    body: dict[str, object] = reply.body
    return body


def test_the_watch_finds_a_call_in_doubt_at_its_target_and_the_next_run_is_a_duplicate(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    stand_in.script(Answer(late=True))
    first = perform(api)
    stand_in.release()
    assert first["decision"] == "reconcile"
    run_timer("watch_claims_needing_attention")  # before the deadline: no look-up yet
    assert [request.method for request in stand_in.received] == ["POST"]
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)

    run_timer("watch_claims_needing_attention")
    later = perform(api, run="run-2")

    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert (later["decision"], later["targetRecordId"]) == ("duplicate", "order-1")
    claim = api.call("get_claim", route={"claimId": str(first["claimId"])}).body
    assert (claim["status"], claim["targetRecordId"]) == ("succeeded", "order-1")


def test_the_watch_never_sends_a_call_in_doubt_again_even_to_a_target_that_honours_the_key(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    declared.declare(with_target(erp, honours_idempotency_key=True))
    stand_in.script(Answer(status=503, commit=False))
    perform(api)
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)

    run_timer("watch_claims_needing_attention")

    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert stand_in.records == []


def handed_to_run_2(api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock) -> dict[str, object]:
    """An order made at ``erp`` whose answer was lost; run-2 took the claim over, its look-up could not tell, and it
    was handed the claim to reconcile; it never recorded, and its lease ran out. The key's payload names no target."""
    stand_in.script(Answer(status=503), Answer(status=503, body=b"{}"))
    first = perform(api, payload={"order": "SO-1001"})
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)
    handed = perform(api, run="run-2", payload={"order": "SO-1001"})
    assert (first["decision"], handed["decision"], handed["lookedUp"]) == ("reconcile", "reconcile", True)
    assert handed["claimToken"]
    clock.advance(erp.timeout_seconds + 31)
    return handed


def test_a_look_up_after_a_takeover_asks_the_target_the_call_went_to_not_the_one_a_later_request_names(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The earlier call is kept through each takeover, as its idempotency key is: a run naming another target (one
    that honours the key) is answered with the record the first call made, and the other target gets nothing."""
    with StandInTarget() as other:
        declared.declare(with_target(erp, name="erp-next", base_url=other.base_url, honours_idempotency_key=True))
        handed_to_run_2(api, erp, stand_in, clock)

        third = perform(api, run="run-3", target="erp-next", payload={"order": "SO-1001"})

        assert (third["decision"], third["targetRecordId"], third["lookedUp"]) == ("duplicate", "order-1", True)
        assert other.received == [], "the look-up or a second call went to a target the first call never reached"
    assert [request.method for request in stand_in.received] == ["POST", "GET", "GET"]
    assert len(stand_in.records) == 1


def test_the_watch_looks_up_a_claim_handed_to_a_run_that_never_recorded(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    handed = handed_to_run_2(api, erp, stand_in, clock)

    run_timer("watch_claims_needing_attention")

    claim = api.call("get_claim", route={"claimId": str(handed["claimId"])}).body
    assert (claim["status"], claim["targetRecordId"]) == ("succeeded", "order-1")
    assert claim["data"]["call"]["target"] == "erp"
    assert [request.method for request in stand_in.received] == ["POST", "GET", "GET"]


@pytest.mark.parametrize("data", ["the ERP search timed out", {"note": "timed out"}], ids=["text", "object"])
def test_an_unknown_recorded_after_the_watch_settled_the_claim_is_refused_as_an_attempt_that_ended(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock, data: object
) -> None:
    """The run handed the claim to reconcile records unknown once the watch found the order: its attempt ended
    (succeeded, the call found kept in data.call). That is 409 stale_claim naming outcome, whatever the data; with
    data that is no object it was 400 naming data, saying the claim carries a call in doubt, which it no longer does."""
    handed = handed_to_run_2(api, erp, stand_in, clock)
    run_timer("watch_claims_needing_attention")
    route = {"claimId": str(handed["claimId"])}
    kept = api.call("get_claim", route=route).body
    assert kept["status"] == "succeeded", kept

    unknown = {"claimToken": handed["claimToken"], "outcome": "unknown", "data": data}
    refused = api.call("record_result", unknown, route=route)

    assert (refused.status, refused.body["error"]["code"]) == (409, "stale_claim"), refused.body
    assert [detail["target"] for detail in refused.body["error"]["details"]] == ["outcome"], refused.body
    assert api.call("get_claim", route=route).body == kept


def test_a_call_in_doubt_at_a_target_removed_since_is_neither_looked_up_nor_sent_anywhere_else(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The target the call went to was removed: no look-up can tell what it did, and another target that honours the
    key has never seen it. The run is handed the claim to reconcile, and nothing is sent."""
    with StandInTarget() as other:
        declared.declare(with_target(erp, name="erp-next", base_url=other.base_url, honours_idempotency_key=True))
        stand_in.script(Answer(status=503))
        perform(api, payload={"order": "SO-1001"})
        assert declared.store.delete_target("erp")
        clock.advance(erp.timeout_seconds + PAST_DEADLINE)

        second = perform(api, run="run-2", target="erp-next", payload={"order": "SO-1001"})

        assert (second["decision"], second["status"]) == ("reconcile", "in_progress")
        assert second["claimToken"]
        assert "target erp, which the call went to, is no longer declared" in str(second["reason"])
        assert other.received == []
    assert [request.method for request in stand_in.received] == ["POST"]


def test_a_call_in_doubt_without_the_reference_its_look_up_needs_says_so(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The target's look-up finds the record by reference and the flow gave none: the answer says what is missing,
    not that no look-up is declared (the operator declared one)."""
    stand_in.script(Answer(status=503))
    perform(api, reference=None)
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)

    second = perform(api, run="run-2", reference=None)

    assert second["decision"] == "reconcile"
    assert "lookedUp" not in second
    assert "the claim has no reference for the target's look-up" in str(second["reason"])
    assert [request.method for request in stand_in.received] == ["POST"]


def test_the_watch_reaches_every_call_in_doubt_although_more_than_its_limit_are_never_found(
    api: Api, service: Gate, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Each run of the watch looks up at most its limit of calls in doubt. It took the first ones as the store lists
    them: calls the target never made, looked up again on every run, kept the watch from the others for good."""
    stand_in.script(*(Answer(status=503, commit=False) for _ in range(3)))
    claims = {perform(api, key=f"SO-{n}", reference=f"SO-{n}")["claimId"]: f"SO-{n}" for n in range(3)}
    listed = [
        claim.claim_id for claim in service.store.list_claims(ClaimFilter((ClaimStatus.UNKNOWN,)), limit=10).items
    ]
    last = claims[listed[-1]]
    stand_in.records.append(Record("order-late", last, None))  # made after all, where the look-up finds it
    perform_once = service.services.perform

    runs = 0
    while service.store.get_claim(listed[-1]).status is not ClaimStatus.SUCCEEDED and runs < 30:
        clock.advance(15 * 60)
        perform_once.look_up_all_in_doubt(limit=1)
        runs += 1

    assert service.store.get_claim(listed[-1]).target_record_id == "order-late", f"not reached in {runs} runs"
    assert len(stand_in.writes()) == 3


def test_the_watch_draws_only_calls_a_look_up_can_tell_of(
    api: Api, service: Gate, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Calls in doubt at a target that declares no look-up (a mailer) stay in doubt for good: the watch can ask
    nothing of them, yet they took their share of its draw. With a limit of 1 and 20 of them, the one order the
    look-up would find waited many runs; only calls it can look up are drawn, so it is reached in the first."""
    with StandInTarget() as mailer:
        declared.declare(with_target(erp, name="mailer", base_url=mailer.base_url, lookup_path=None))
        mailer.script(*(Answer(status=503, commit=False) for _ in range(20)))
        for n in range(20):
            assert perform(api, key=f"MAIL-{n}", target="mailer")["decision"] == "reconcile"
        assert [request.method for request in mailer.received] == ["POST"] * 20
    stand_in.script(Answer(status=503, commit=False))
    order = perform(api, key="SO-late", reference="SO-late")
    stand_in.records.append(Record("order-late", "SO-late", None))  # made after all, where the look-up finds it
    clock.advance(15 * 60)

    assert service.services.perform.look_up_all_in_doubt(limit=1) == 1

    assert service.store.get_claim(str(order["claimId"])).target_record_id == "order-late"
    assert [request.method for request in stand_in.received] == ["POST", "GET"]


def test_a_check_and_claim_run_that_records_unknown_leaves_the_call_in_doubt_where_it_went(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Perform once's call to erp ended in doubt; once its deadline passed, a Check and claim run of the key took
    the claim to reconcile, could not tell either, and recorded unknown. The call is still in doubt where it went: a
    later Perform once naming another target (one that honours the key) must look it up at erp, never send it."""
    payload = {"order": "SO-1001"}
    with StandInTarget() as other:
        declared.declare(with_target(erp, name="erp-next", base_url=other.base_url, honours_idempotency_key=True))
        handed = _handed_by_check_and_claim(api, stand_in, erp, clock, payload)
        unknown = {"claimToken": handed["claimToken"], "outcome": "unknown", "error": "the ERP search timed out"}
        route = {"claimId": handed["claimId"]}
        recorded = api.call("record_result", unknown, route=route)
        history = api.call("get_claim", route=route).body["history"]
        clock.advance(1)
        repeated = api.call("record_result", unknown, route=route)
        assert (recorded.status, repeated.status) == (200, 200)
        assert api.call("get_claim", route=route).body["history"] == history, "the same result was recorded again"
        assert recorded.body["data"]["earlierCall"]["target"] == "erp"

        third = perform(api, run="run-3", target="erp-next", payload=payload)
        clock.advance(erp.timeout_seconds + 60)
        again = perform(api, run="run-3", target="erp-next", payload=payload)

        assert other.received == [], "the look-up or a second call went to a target the first call never reached"
    assert (third["decision"], third.get("targetRecordId")) == ("duplicate", "order-1"), third
    assert (again["decision"], again.get("targetRecordId")) == ("duplicate", "order-1"), again
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert len(stand_in.records) == 1


def test_a_run_s_own_member_named_call_leaves_the_call_in_doubt_where_it_went(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """As above, but the run records unknown with data of its own naming a member call (its courier's): that is no
    call of Perform once's, so the call in doubt stays beside it and a later Perform once naming another target looks
    it up at erp, never makes the order there."""
    payload = {"order": "SO-1001"}
    with StandInTarget() as other:
        declared.declare(with_target(erp, name="erp-next", base_url=other.base_url, honours_idempotency_key=True))
        handed = _handed_by_check_and_claim(api, stand_in, erp, clock, payload)
        own = {"call": {"carrier": "ups", "target": "erp-next", "deadline": "2024-05-01T09:00:00Z"}}
        unknown = {"claimToken": handed["claimToken"], "outcome": "unknown", "data": own}
        recorded = api.call("record_result", unknown, route={"claimId": handed["claimId"]})
        assert recorded.status == 200, recorded.body
        assert recorded.body["data"] == {**own, "earlierCall": recorded.body["data"]["earlierCall"]}
        assert recorded.body["data"]["earlierCall"]["target"] == "erp"

        perform(api, run="run-3", target="erp-next", payload=payload)
        clock.advance(erp.timeout_seconds + 60)
        again = perform(api, run="run-3", target="erp-next", payload=payload)

        assert other.received == [], "the look-up or a second call went to a target the first call never reached"
    assert (again["decision"], again.get("targetRecordId")) == ("duplicate", "order-1"), again
    assert len(stand_in.records) == 1


@pytest.mark.parametrize("sent", ["2024-05-01T08:00:00", "2026-12-07T10:00:00"], ids=["before", "years-later"])
def test_a_run_s_own_call_shaped_as_perform_once_s_leaves_the_call_in_doubt_where_it_went(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock, sent: str
) -> None:
    """As above, but the run's own member call says when it was sent and a deadline 30 s later, as Perform once's
    mark does (the run's own call to erp-next, say): it is still the run's data, not the call in doubt, which stays
    beside it and is the one a later Perform once naming erp-next looks up, at erp. Taken for the call, it sent the
    order to erp-next too (sent before), or kept the claim in_progress until its deadline years away."""
    payload = {"order": "SO-1001"}
    with StandInTarget() as other:
        declared.declare(with_target(erp, name="erp-next", base_url=other.base_url, honours_idempotency_key=True))
        handed = _handed_by_check_and_claim(api, stand_in, erp, clock, payload)
        own = {
            "call": {
                "target": "erp-next",
                "method": "POST",
                "sentAt": f"{sent}Z",
                "deadline": f"{sent[:-2]}30Z",
            }
        }
        unknown = {"claimToken": handed["claimToken"], "outcome": "unknown", "data": own}
        recorded = api.call("record_result", unknown, route={"claimId": handed["claimId"]})
        assert recorded.status == 200, recorded.body
        assert recorded.body["data"]["call"] == own["call"], "the run's own data was changed"
        assert recorded.body["data"]["earlierCall"]["target"] == "erp", recorded.body

        perform(api, run="run-3", target="erp-next", payload=payload)
        clock.advance(erp.timeout_seconds + 60)
        again = perform(api, run="run-3", target="erp-next", payload=payload)

        assert other.received == [], "the look-up or a second call went to a target the first call never reached"
    assert (again["decision"], again.get("targetRecordId")) == ("duplicate", "order-1"), again
    assert len(stand_in.records) == 1


def test_an_unknown_whose_data_is_no_object_is_refused_while_the_claim_carries_a_call_in_doubt(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The call in doubt has no room beside data that is no object: dropped with it, a later Perform once naming
    another target that honours the key made the order there too. The record is refused (400 naming data), nothing
    recorded; the claim's lease runs out and the next Perform once looks the call up where it went."""
    payload = {"order": "SO-1001"}
    with StandInTarget() as other:
        declared.declare(with_target(erp, name="erp-next", base_url=other.base_url, honours_idempotency_key=True))
        handed = _handed_by_check_and_claim(api, stand_in, erp, clock, payload)
        route = {"claimId": handed["claimId"]}
        kept = api.call("get_claim", route=route).body
        unknown = {"claimToken": handed["claimToken"], "outcome": "unknown", "data": "the ERP search timed out"}
        refused = api.call("record_result", unknown, route=route)
        assert refused.status == 400, refused.body
        assert [detail["target"] for detail in refused.body["error"]["details"]] == ["data"], refused.body
        assert api.call("get_claim", route=route).body == kept, "a refused result changed the claim"

        clock.advance(LEASE + 1)  # run-2's lease runs out
        again = perform(api, run="run-3", target="erp-next", payload=payload)

        assert other.received == [], "the look-up or a second call went to a target the first call never reached"
    assert (again["decision"], again.get("targetRecordId")) == ("duplicate", "order-1"), again
    assert len(stand_in.records) == 1


def test_an_unknown_from_a_run_taken_over_on_another_instance_is_refused_for_its_token_not_its_data(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock, new_service: Callable[[], Gate]
) -> None:
    """Run-2 took the claim to reconcile on this instance, which remembers it carrying the call in doubt; its lease
    ran out and run-3 took the claim over on another instance. Run-2's unknown, with data that is no object, is
    refused for its token (409 stale_claim naming claimToken), as it is on a fresh read: decided on the claim this
    instance remembered, it was 400 naming data, and a flow that changed its data was refused again."""
    payload = {"order": "SO-1001"}
    handed = _handed_by_check_and_claim(api, stand_in, erp, clock, payload)
    clock.advance(LEASE + 1)  # run-2's lease runs out
    other = new_service()
    try:
        own = {"scope": "erp.create-order", "key": "SO-1001", "runId": "run-3", "flow": FLOW, "payload": payload}
        taken = other.check_and_claim(ClaimRequest.model_validate(own, by_name=False))
    finally:
        other.close()
    assert taken.decision.value == "reconcile", taken

    unknown = {"claimToken": handed["claimToken"], "outcome": "unknown", "data": "the ERP search timed out"}
    refused = api.call("record_result", unknown, route={"claimId": handed["claimId"]})

    assert (refused.status, refused.body["error"]["code"]) == (409, "stale_claim"), refused.body
    assert [detail["target"] for detail in refused.body["error"]["details"]] == ["claimToken"], refused.body


def _handed_by_check_and_claim(
    api: Api, stand_in: StandInTarget, erp: Target, clock: FakeClock, payload: Mapping[str, object]
) -> dict[str, Any]:
    """Perform once's call to erp made the order and ended in doubt (503); after its deadline a Check and claim run
    took the claim to reconcile."""
    stand_in.script(Answer(status=503))
    assert perform(api, payload=payload)["decision"] == "reconcile"
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)
    own = {"scope": "erp.create-order", "key": "SO-1001", "runId": "run-2", "flow": FLOW, "payload": payload}
    handed: dict[str, Any] = api.call("check_and_claim", {**own, "leaseSeconds": LEASE}).body
    assert handed["decision"] == "reconcile", handed
    return handed


@pytest.mark.parametrize("asking", ["perform_once", "check_and_claim"])
def test_a_check_and_claim_run_s_own_call_sent_after_its_record_is_no_call_in_doubt(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock, asking: str
) -> None:
    """A Check and claim run, no Perform once call on the claim, records unknown with data of its own whose member
    call has Perform once's shape, sent years after the record (its courier's pick-up, say). Perform once writes its
    mark when it sends, so this is no call: taken for one, the key stayed in_progress for every run until its
    deadline, years away. The next run is handed the claim to reconcile; Perform once looks the record up first."""
    sent = clock.now + timedelta(days=3 * 365)
    own = {
        "call": {"target": "erp", "method": "POST", "sentAt": _z(sent), "deadline": _z(sent + timedelta(seconds=30))}
    }
    first = {"scope": "erp.create-order", "key": "SO-1001", "runId": "run-1", "flow": FLOW, "payload": {"n": 1}}
    claimed = api.call("check_and_claim", first).body
    unknown = {"claimToken": claimed["claimToken"], "outcome": "unknown", "data": own}
    recorded = api.call("record_result", unknown, route={"claimId": claimed["claimId"]})
    assert (recorded.status, recorded.body["data"]) == (200, own), recorded.body
    clock.advance(LEASE)  # past any call a Perform once of this attempt could have made

    if asking == "perform_once":
        performed = perform(api, run="run-2", payload={"n": 1})
        assert performed["decision"] == "reconcile", performed
        assert [request.method for request in stand_in.received] == ["GET"], "the look-up was not made"
    else:
        checked = api.call("check_and_claim", {**first, "runId": "run-2"}).body
        assert checked["decision"] == "reconcile", checked


def _z(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
