"""The Perform once sample, ``connector/samples/perform-workflow.json``, run against a stand-in target (issue 34).

The sample's definition runs in this process (``wdl.py``) against the app's own functions, its target the
order system the deployment declares (``orderTarget``, ``erp-orders`` by default), here
:class:`~tests.support.target_server.StandInTarget`, a real HTTP server on 127.0.0.1. The order is made
once whether the connector action is sent twice by the engine (its first answer lost) or the whole run
comes twice.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import Settings
from oncegate.domain.keys import KeyHasher
from oncegate.domain.targets import Target
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from tests.cli.test_governance import STORE_SETTINGS
from tests.conftest import KEY_SECRET, FakeClock
from tests.connector.test_samples import PERFORM_WORKFLOW
from tests.gate import Gate
from tests.infra.test_logic_app import ORDER, PARAMETERS
from tests.infra.wdl import Call, Run
from tests.support.target_server import Answer, StandInTarget


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(PERFORM_WORKFLOW.read_text(encoding="utf-8"))["definition"]
    return document


@pytest.fixture
def store_kind() -> str:
    return "sqlite"


@pytest.fixture
def stand_in() -> Iterator[StandInTarget]:
    with StandInTarget() as target:
        yield target


@pytest.fixture
def service(open_store: Callable[[], ClaimStore], clock: FakeClock, stand_in: StandInTarget) -> Iterator[Gate]:
    """The app's services, their outbound adapter allowed loopback, and the sample's target declared."""
    gate = Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, targets_allow_loopback=True)
    gate.store.save_target(
        Target(
            name="erp-orders",
            base_url=stand_in.base_url,
            timeout_seconds=5,
            lookup_path="/orders?reference={reference}",
            record_pointer="/id",
            kept_pointers=("/id", "/reference"),
        )
    )
    yield gate
    gate.close()


def run(definition: dict[str, Any], call: Call, name: str, order: dict[str, Any] = ORDER) -> Run:
    return Run(definition, order, call, PARAMETERS, name=name).start()


def sample_body(definition: dict[str, Any], name: str) -> Any:
    """What the sample's Perform once sends for the test order in run ``name``."""
    loop = definition["actions"]["Until_the_answer_is_settled"]["actions"]
    return Run(definition, ORDER, lambda *_: (0, None), PARAMETERS, name=name).evaluate(
        loop["Create_the_order_once"]["inputs"]["body"]
    )


def answer(done: Run) -> dict[str, Any]:
    assert done.response is not None, f"no answer; statuses {done.statuses}"
    assert done.response["statusCode"] == 200
    body: dict[str, Any] = done.response["body"]
    return body


def test_the_action_sent_twice_makes_the_order_once(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget
) -> None:
    answers: list[tuple[int, Any]] = []

    def sent_twice(method: str, path: str, body: Any) -> tuple[int, Any]:
        # The engine sends the action again after an answer it never got: the first answer is lost.
        if path == "/api/perform":
            answers.append(call_app(method, path, body))
        return call_app(method, path, body)

    done = run(definition, sent_twice, "run-1")

    assert [status for status, _ in answers] == [200]
    assert answers[0][1]["decision"] == "performed"
    assert answer(done)["decision"] == "duplicate"
    assert answer(done)["orderId"] == answers[0][1]["targetRecordId"]
    assert done.statuses["Use_the_order_made_before"] == "Succeeded"
    assert [r.method for r in stand_in.received] == ["POST"], "the order was sent to the target twice"
    assert len(stand_in.records) == 1


def test_the_same_order_twice_is_made_once_then_reused(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget
) -> None:
    first = run(definition, call_app, "run-1")
    second = run(definition, call_app, "run-2")

    assert answer(first)["decision"] == "performed"
    assert first.statuses["Use_the_new_order"] == "Succeeded"
    assert answer(second)["decision"] == "duplicate"
    assert answer(second)["orderId"] == answer(first)["orderId"] is not None
    assert answer(second)["claimId"] == answer(first)["claimId"]
    assert len(stand_in.received) == 1
    assert len(stand_in.records) == 1
    sent = json.loads(stand_in.received[0].body)
    assert sent["reference"] == ORDER["orderNumber"]
    assert sent["amount"] == ORDER["amount"]
    assert stand_in.received[0].headers.get("Idempotency-Key")


def test_the_same_order_number_with_other_data_is_a_conflict_and_nothing_is_sent(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget
) -> None:
    run(definition, call_app, "run-1")
    changed = run(definition, call_app, "run-2", {**ORDER, "amount": 999.0})

    assert answer(changed)["decision"] == "conflict"
    assert changed.statuses["Hand_the_conflict_to_its_owner"] == "Succeeded"
    assert len(stand_in.received) == 1


# A fault at the sample's one connector call, under the engine's default retry policy (4 retries): how many
# calls it strikes, and whether each was applied before its answer was lost.
CALL_FAULTS = {
    "call refused once": (1, False),
    "call applied, answer lost": (1, True),
    "call applied, server down through the retries": (5, True),
}


@pytest.mark.parametrize("fault", sorted(CALL_FAULTS))
def test_a_fault_at_the_call_makes_the_order_once_and_the_run_again_reuses_it(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget, fault: str
) -> None:
    strikes, applied = CALL_FAULTS[fault]
    struck: list[int] = []

    def faulty(method: str, path: str, body: Any) -> tuple[int, Any]:
        if path == "/api/perform" and len(struck) < strikes:
            struck.append(1)
            if applied:
                call_app(method, path, body)
            raise ConnectionError(path)
        return call_app(method, path, body)

    first = Run(definition, ORDER, faulty, PARAMETERS, name="run-1", retries=4).start()
    again = run(definition, call_app, "run-2")

    assert len(struck) == strikes
    if strikes <= 4:
        assert answer(first)["decision"] in ("performed", "duplicate")
    assert answer(again)["decision"] == "duplicate"
    assert len(stand_in.records) == 1
    assert [r.method for r in stand_in.received] == ["POST"], "the order was sent to the target twice"
    assert answer(again)["orderId"] == stand_in.records[0].record_id


def test_an_order_made_whose_answer_the_target_lost_is_found_by_the_same_run_asking_again_as_told(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The order system makes the order, then answers 503: the outcome is unknown until its look-up tells. The run
    asks Perform once again after Retry After Seconds (the call's deadline and margin), which looks the order up:
    the run itself ends with the order, and a person is needed for nothing. The sample handed this reconcile to a
    person."""
    stand_in.script(Answer(status=503, body=b"{}"))
    waits: list[float] = []
    answers: list[Any] = []

    def sent(method: str, path: str, body: Any) -> tuple[int, Any]:
        status, answered = call_app(method, path, body)
        answers.append(answered)
        return status, answered

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.advance(seconds)

    done = Run(definition, ORDER, sent, PARAMETERS, name="run-1", sleep=sleep).start()

    assert [(told["decision"], "claimToken" in told) for told in answers] == [
        ("reconcile", False),
        ("duplicate", False),
    ]
    # The target's 5 s, the 14 s margin for the instances' clocks, up to the whole second (the clock is at .123456 s).
    assert waits == [answers[0]["retryAfterSeconds"]] == [20]
    assert answer(done)["decision"] == "duplicate"
    assert answer(done)["orderId"] == stand_in.records[0].record_id
    assert done.statuses["Use_the_order_made_before"] == "Succeeded"
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert len(stand_in.records) == 1


def test_a_run_that_comes_while_the_call_is_in_doubt_waits_for_its_deadline_and_gets_the_order_found(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """Another run's call answered 503; this run comes before that call's deadline, when no look-up can tell yet: its
    wait ends with reconcile without a token, and it asks again as told."""
    stand_in.script(Answer(status=503, body=b"{}"))
    status, told = call_app("POST", "/api/perform", sample_body(definition, "run-1"))
    assert (status, told["decision"]) == (200, "reconcile")
    answers: list[Any] = []

    def sent(method: str, path: str, body: Any) -> tuple[int, Any]:
        answers.append(call_app(method, path, body)[1])
        return 200, answers[-1]

    # The engine's Delay of Retry After Seconds moves the test's clock, as the wait's polls do.
    second = Run(definition, ORDER, sent, PARAMETERS, name="run-2", sleep=clock.advance).start()

    assert [(told["decision"], "claimToken" in told) for told in answers] == [
        ("reconcile", False),
        ("duplicate", False),
    ]
    assert answer(second)["orderId"] == stand_in.records[0].record_id
    assert len(stand_in.writes()) == 1, "the order was sent to the target twice"


def test_a_reconcile_the_look_up_could_not_settle_goes_to_a_person_and_nothing_is_sent_again(
    definition: dict[str, Any], call_app: Call, stand_in: StandInTarget, clock: FakeClock
) -> None:
    """The look-up itself answers 503: OnceGate hands the run the claim to reconcile (with a Claim Token). The sample
    stops asking there (asking again on its own token would be told in_progress until its lease ran out) and hands
    it to a person, naming the claim."""
    stand_in.script(Answer(status=503, body=b"{}"), Answer(status=503, body=b"{}"))

    done = Run(definition, ORDER, call_app, PARAMETERS, name="run-1", sleep=clock.advance).start()

    assert answer(done)["decision"] == "reconcile"
    assert done.statuses["A_person_settles_the_order"] == "Succeeded"
    assert done.outputs["A_person_settles_the_order"]["claimId"] == answer(done)["claimId"]
    assert [request.method for request in stand_in.received] == ["POST", "GET"]
    assert len(stand_in.records) == 1


def documented_declaration() -> list[str]:
    """The arguments of the deployment step docs/deploy.md gives to declare the sample's target."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text(encoding="utf-8")
    (block,) = [block for block in text.split("```sh\n")[1:] if "oncegate targets set erp-orders" in block]
    words = shlex.split(block.split("```")[0].replace("\\\n", " "))
    return words[words.index("oncegate") + 1 :]


def test_the_documented_deployment_step_declares_the_target_the_sample_names(
    definition: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "oncegate.db"
    for name in (*STORE_SETTINGS, "ONCEGATE_TARGETS_ALLOW_LOOPBACK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(path))
    bootstrap.build_services(Settings.from_environment()).close()

    code = main(documented_declaration())

    assert code == 0, capsys.readouterr().err
    store = SqliteStore(path)
    try:
        declared = store.get_target(definition["parameters"]["orderTarget"]["defaultValue"])
    finally:
        store.close()
    # What the sample's answer reads: the order's id at /id, found again by its reference after an unknown outcome.
    assert declared.record_pointer == "/id"
    assert declared.lookup_path == "/orders?reference={reference}"
    assert declared.base_url.startswith("https://")
