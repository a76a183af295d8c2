"""Perform once through HTTP on both stores, against a stand-in target on loopback (issue 34)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from oncegate.domain.targets import Target, TargetAuth
from tests.conftest import FakeClock
from tests.http.client import Api
from tests.perform.calls import PAST_DEADLINE, perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def perform(api: Api, **fields: object) -> dict[str, object]:
    reply = api.call("perform_once", perform_body(**fields))  # type: ignore[arg-type]
    assert reply.status == 200, reply.body
    body: dict[str, object] = reply.body
    return body


def test_performed_then_duplicate_with_the_same_response(api: Api, erp: Target, stand_in: StandInTarget) -> None:
    first = perform(api)
    again = perform(api, run="run-2")
    assert first["decision"] == "performed"
    assert first["targetRecordId"] == "order-1"
    assert first["response"] == {"status": 201, "body": {"id": "order-1", "reference": "SO-1001"}}
    assert (again["decision"], again["response"], again["targetRecordId"]) == (
        "duplicate",
        first["response"],
        "order-1",
    )
    (sent,) = stand_in.writes()
    assert sent.header("Idempotency-Key") == first["idempotencyKey"]
    assert len(stand_in.records) == 1


def test_late_target_run_four_times_one_record_then_the_record_the_look_up_found(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The target commits and answers after the call's time: the outcome is unknown; after the deadline the next
    run looks the record up and is answered duplicate with it; the target is never called twice."""
    stand_in.script(Answer(late=True))
    answers = [perform(api, run="run-1")]
    stand_in.release()
    assert answers[0]["decision"] == "reconcile"
    answers.append(perform(api, run="run-2"))  # before the deadline: no look-up can tell yet
    assert answers[1]["decision"] == "in_progress"
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)
    answers += [perform(api, run=f"run-{n}") for n in (3, 4)]
    assert [answer["decision"] for answer in answers] == ["reconcile", "in_progress", "duplicate", "duplicate"]
    assert answers[-1]["targetRecordId"] == "order-1"
    assert (
        answers[-1]["response"]
        == answers[-2]["response"]
        == {
            "status": 200,
            "body": {"id": "order-1", "reference": "SO-1001"},
        }
    )
    assert answers[2]["lookedUp"] is True
    assert len(stand_in.writes()) == 1
    assert len(stand_in.records) == 1


def test_changed_data_is_a_conflict_and_nothing_is_sent(api: Api, erp: Target, stand_in: StandInTarget) -> None:
    perform(api)
    changed = perform(api, run="run-2", body={"reference": "SO-1001", "amount": 11})
    assert changed["decision"] == "conflict"
    assert changed["conflictId"]
    assert len(stand_in.writes()) == 1


def test_a_4xx_is_failed_and_a_declared_retryable_one_may_be_run_again(
    api: Api, erp: Target, declared: Declared, stand_in: StandInTarget
) -> None:
    stand_in.script(Answer(status=422, commit=False, body=b'{"error":"amount"}'))
    failed = perform(api)
    assert (failed["decision"], failed["retryable"]) == ("failed", False)
    assert perform(api, run="run-2")["decision"] == "blocked"
    declared.declare(with_target(erp, retryable_statuses=(409,)))
    stand_in.script(Answer(status=409, commit=False))
    retry = perform(api, key="SO-1002")
    assert (retry["decision"], retry["retryable"]) == ("failed", True)
    assert perform(api, key="SO-1002", run="run-2")["decision"] == "performed"


def test_nothing_sent_is_failed_and_retryable(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget
) -> None:
    declared.declare(with_target(erp, base_url="http://127.0.0.1:9"))  # nothing listens on the discard port
    failed = perform(api)
    assert (failed["decision"], failed["retryable"], failed["status"]) == ("failed", True, "failed")
    declared.declare(erp)
    assert perform(api, run="run-2")["decision"] == "performed"
    assert len(stand_in.writes()) == 1


def test_5xx_is_unknown_and_without_a_look_up_the_flow_reconciles(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    declared.declare(with_target(erp, lookup_path=None))
    stand_in.script(Answer(status=503))
    first = perform(api)
    assert (first["decision"], first["status"]) == ("reconcile", "unknown")
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)
    second = perform(api, run="run-2")
    assert second["decision"] == "reconcile"
    assert second["claimToken"]
    assert second["idempotencyKey"] == first["idempotencyKey"]
    assert len(stand_in.writes()) == 1


def test_not_found_is_sent_again_under_the_same_key_only_to_a_target_that_honours_it(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    declared.declare(with_target(erp, honours_idempotency_key=True))
    stand_in.script(Answer(status=503, commit=False))
    first = perform(api)
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)
    second = perform(api, run="run-2")
    assert second["decision"] == "performed"
    first_call, second_call = stand_in.writes()
    assert first_call.header("Idempotency-Key") == second_call.header("Idempotency-Key") == first["idempotencyKey"]


def test_undeclared_target_is_refused_and_nothing_is_stored(api: Api, erp: Target, stand_in: StandInTarget) -> None:
    reply = api.call("perform_once", perform_body(target="nowhere"))
    assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", ["target"])
    assert stand_in.received == []


def test_a_look_up_answering_success_without_a_record_found_nothing(
    api: Api, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """A search answering 200 with an empty list found nothing: never settled as done without a record."""
    stand_in.script(Answer(status=503, commit=False), Answer(status=200, body=b"[]", commit=False))
    perform(api)
    clock.advance(erp.timeout_seconds + PAST_DEADLINE)
    second = perform(api, run="run-2")
    assert (second["decision"], second["status"]) == ("reconcile", "in_progress")
    assert "targetRecordId" not in second
    assert [request.method for request in stand_in.received] == ["POST", "GET"]


REFUSED_PARTS: dict[str, tuple[dict[str, Any], str]] = {
    "Authorization": ({"headers": {"Authorization": "Bearer from-the-flow"}}, "headers.Authorization"),
    "Cookie": ({"headers": {"Cookie": "session=1"}}, "headers.Cookie"),
    "the target's secret header": ({"headers": {"X-Api-Key": "guess"}}, "headers.X-Api-Key"),
    "a value with CR LF": ({"headers": {"X-Trace": "a\r\nHost: evil"}}, "headers.X-Trace"),
    "a path above the base URL": ({"path": "/orders/../../admin"}, "path"),
}


@pytest.mark.parametrize("part", sorted(REFUSED_PARTS))
def test_a_header_or_path_a_target_is_never_sent_is_400_before_anything_is_claimed(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, part: str
) -> None:
    """Claimed and answered failed (retryable), the flow retrying as told would fail the same way for ever: the
    request is refused naming the part, nothing is claimed, and the same run sent as it should be is performed."""
    declared.declare(with_target(erp, auth=TargetAuth.SECRET, auth_value="X-Api-Key=erp-key"))
    fields, named = REFUSED_PARTS[part]
    for _ in range(2):
        reply = api.call("perform_once", perform_body(**fields))
        assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", [named]), reply.body
    assert "nothing was claimed" in reply.body["error"]["message"].lower()
    assert "from-the-flow" not in json.dumps(reply.body)
    assert "evil" not in json.dumps(reply.body)
    looked_up = api.call("lookup_claim", {"scope": "erp.create-order", "key": "SO-1001"})
    assert looked_up.status == 404, looked_up.body
    assert stand_in.received == []
    declared.declare(erp)
    assert perform(api)["decision"] == "performed"
    assert len(stand_in.received) == 1
