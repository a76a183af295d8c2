"""A target's answer nested deep: Perform once records the call it made, never a 500 that leaves it in doubt."""

from __future__ import annotations

import pytest

from oncegate.domain.limits import MAX_NESTING
from oncegate.domain.targets import Target
from tests.http.client import Api
from tests.perform.calls import perform_body
from tests.support.target_server import Answer, StandInTarget


def nested_reference(depth: int) -> bytes:
    """The order as the stand-in writes it, its kept reference an object ``depth`` levels deep."""
    return b'{"id":"order-1","reference":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def test_an_answer_nested_past_the_decoder_is_performed_without_its_body(
    api: Api, erp: Target, stand_in: StandInTarget
) -> None:
    # 100,000 levels, 600 KB: within the answer's 1 MiB, far past what the JSON decoder's stack takes.
    stand_in.script(Answer(status=201, body=nested_reference(100_000), headers={"Content-Type": "application/json"}))

    reply = api.call("perform_once", perform_body())

    assert reply.status == 200, reply.body
    assert (reply.body["decision"], reply.body["response"]) == ("performed", {"status": 201})
    again = api.call("perform_once", perform_body(run="run-2"))
    assert (again.status, again.body["decision"]) == (200, "duplicate")
    assert len(stand_in.writes()) == 1


@pytest.mark.parametrize(("depth", "kept"), [(MAX_NESTING - 2, True), (MAX_NESTING, False), (250, False)])
def test_a_kept_body_nested_past_the_limit_is_left_out_and_said_so(
    api: Api, erp: Target, stand_in: StandInTarget, depth: int, kept: bool
) -> None:
    stand_in.script(Answer(status=201, body=nested_reference(depth), headers={"Content-Type": "application/json"}))

    reply = api.call("perform_once", perform_body())

    assert reply.status == 200, reply.body
    assert reply.body["targetRecordId"] == "order-1"
    assert ("body" in reply.body["response"]) is kept
    assert ("response_not_kept" in reply.body.get("warnings", [])) is not kept
    claim = api.call("get_claim", route={"claimId": reply.body["claimId"]})
    assert claim.status == 200, claim.body
