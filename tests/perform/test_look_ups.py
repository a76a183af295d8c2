"""Unknown outcomes settled without the maker: the attention watch looks a call in doubt up, and never sends it."""

from __future__ import annotations

from oncegate.domain.targets import Target
from tests.conftest import FakeClock
from tests.http.client import Api
from tests.http.test_governance import run_timer
from tests.perform.calls import perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget


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
    clock.advance(erp.timeout_seconds + 1)

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
    clock.advance(erp.timeout_seconds + 1)

    run_timer("watch_claims_needing_attention")

    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert stand_in.records == []
