"""Every answer a flow gets from Perform once is what the connector's definition declares for its status.

The connector's conformance suite generates requests from the definition against a store with no target
declared, so it meets Perform once's refusals only; here each decision a flow branches on is reached against a
stand-in target, and its body is checked against the definition as a Swagger client reads it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest

from oncegate.domain.targets import Target
from tests.conftest import FakeClock
from tests.connector.spec import DEFINITIONS, load, operation, resolve
from tests.http.client import Api, Reply
from tests.perform.calls import perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def undeclared(reply: Reply, operation_id: str) -> list[str]:
    """What in ``reply`` the definition does not allow for its status (the operation's own response schema)."""
    definition = load(DEFINITIONS["key"])
    responses = operation(definition, operation_id).spec["responses"]
    assert str(reply.status) in responses, f"{operation_id} does not declare {reply.status}"
    schema = {**resolve(definition, responses[str(reply.status)]["schema"]), "definitions": definition["definitions"]}
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = validator.iter_errors(reply.body)
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in errors]


def perform(api: Api, key: str, **fields: Any) -> Reply:
    return api.call("perform_once", perform_body(key, **fields))


def test_every_decision_of_perform_once_is_as_the_connector_declares(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget, clock: FakeClock
) -> None:
    slow = declared.declare(with_target(erp, name="slow-erp", timeout_seconds=30))
    stand_in.script(
        Answer(status=201),  # performed, then duplicate
        Answer(status=422, commit=False),  # failed, not retryable; then blocked
        Answer(status=503, commit=False),  # the outcome unknown: reconcile
        Answer(hang_up=True),  # nothing came back at all: reconcile
        Answer(late=True),  # the holder's call under way while another run waits
    )
    replies = {
        "performed": perform(api, "SO-1"),
        "duplicate": perform(api, "SO-1", run="run-2"),
        "conflict": perform(api, "SO-1", run="run-3", body={"reference": "SO-1", "amount": 11}),
        "failed": perform(api, "SO-2"),
        "blocked": perform(api, "SO-2", run="run-2"),
        "reconcile, an answer in doubt": perform(api, "SO-3"),
        "in_progress, before the deadline": perform(api, "SO-3", run="run-2"),
        "reconcile, no answer": perform(api, "SO-4"),
    }
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(perform, api, "SO-5", target=slow.name)
        stand_in.wait_for(5)
        replies["in_progress, waiting"] = waiting = perform(api, "SO-5", run="run-2", target=slow.name, wait=True)
        stand_in.release()
        replies["performed, by the holder"] = holder.result(timeout=30)
    replies["duplicate, at the poll"] = api.follow(waiting.headers["location"])

    assert {what: (reply.status, reply.body.get("decision")) for what, reply in replies.items()} == {
        "performed": (200, "performed"),
        "duplicate": (200, "duplicate"),
        "conflict": (200, "conflict"),
        "failed": (200, "failed"),
        "blocked": (200, "blocked"),
        "reconcile, an answer in doubt": (200, "reconcile"),
        "in_progress, before the deadline": (200, "in_progress"),
        "reconcile, no answer": (200, "reconcile"),
        "in_progress, waiting": (202, "in_progress"),
        "performed, by the holder": (200, "performed"),
        "duplicate, at the poll": (200, "duplicate"),
    }
    operations = {what: "WaitForPerform" if "poll" in what else "PerformOnce" for what in replies}
    found = {what: undeclared(reply, operations[what]) for what, reply in replies.items()}
    assert {what: errors for what, errors in found.items() if errors} == {}
