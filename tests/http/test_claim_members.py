"""Check and claim's answer, written from the decision table's ``ClaimAnswer`` as JSON members
(``claims.claim_members``, issue 32's shapes), is byte for byte what ``ClaimResponse`` wrote before.

No ``ClaimResponse`` is made per request any more; it stays the wire model the connector, the docs and the clients
are made from. The oracle below is how 67b15cc rendered the answer (:func:`as_the_model_had_it`, copied as it
was): for any answer the table can give, every decision and status, with or without each optional part, the
body written is the model's ``model_dump_json(by_alias=True, exclude_none=True)`` to the byte (its members and
their order, None left out, times as the model writes them, enum values, a kept value nested too deep shown as
its JSON text), validates as ``ClaimResponse`` into the same model, and gives the telemetry event the same
dimensions. Check and claim many's entries, made of the same members, are held to ``ClaimManyEntry`` alike.
Through the app on both stores, each decision the service gives (and the wait's 202 and its final answer, and the
warnings the pipeline adds) is answered with the oracle's bytes for the ``ClaimAnswer`` it rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from oncegate import telemetry
from oncegate.domain.decisions import ClaimAnswer, LeaseHolder
from oncegate.domain.keys import KeyHasher
from oncegate.domain.limits import MAX_NESTING
from oncegate.domain.records import EarlierAttempt, Flow
from oncegate.domain.sensitive import SensitivePolicy
from oncegate.domain.statuses import AnswerStatus, ClaimStatus, Decision
from oncegate.domain.warnings import ANOTHER_FLOW_COPY, SENSITIVE_DATA
from oncegate.entrypoints import error_map, http, render
from oncegate.entrypoints.operations import bulk, claims
from oncegate.entrypoints.operations.bulk import CHECK_AND_CLAIM_MANY
from oncegate.entrypoints.operations.table import Call, Dimensions, Members
from oncegate.errors import InvalidRequest
from oncegate.models import (
    ClaimManyAnswer,
    ClaimManyEntry,
    ClaimResponse,
    ClaimResult,
    EarlierAttemptView,
    FlowRef,
    Holder,
)
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.http.client import Api
from tests.http.test_actions import claim_body, ok
from tests.support.records import claim

# -- the oracle: how 67b15cc rendered the answer --------------------------------------------------------------


def as_the_model_had_it(answer: ClaimAnswer) -> ClaimResponse:
    """``claims.claim_response`` of 67b15cc: the ClaimResponse made from the answer."""
    holder, earlier, result = answer.holder, answer.earlier_attempt, answer.result
    return ClaimResponse(
        decision=answer.decision,
        claim_id=answer.claim_id,
        status=answer.status,
        attempt=answer.attempt,
        reason=answer.reason,
        warnings=list(answer.warnings),
        claim_token=answer.claim_token,
        idempotency_key=answer.idempotency_key,
        lease_expires_at=answer.lease_expires_at,
        retry_after_seconds=answer.retry_after_seconds,
        holder=Holder(flow=render.flow_ref(holder.flow), lease_expires_at=holder.lease_expires_at) if holder else None,
        result=ClaimResult(
            target_record_id=result.target_record_id,
            data=result.data,
            completed_at=result.completed_at,
            run_id=result.run_id,
            flow=render.flow_ref(result.flow),
        )
        if result
        else None,
        earlier_attempt=EarlierAttemptView(
            attempt=earlier.attempt,
            run_id=earlier.run_id,
            flow=render.flow_ref(earlier.flow),
            status=earlier.status,
            started_at=earlier.started_at,
            lease_expires_at=earlier.lease_expires_at,
            error=earlier.error,
        )
        if earlier
        else None,
        conflict_id=answer.conflict_id,
        changed_parts=list(answer.changed) or None,
        more_changed_parts=answer.more_changed or None,
    )


def dimensions_the_model_gave(answer: ClaimResponse) -> Dimensions:
    """``claims.decision_dimensions`` of 67b15cc, over the model."""
    holder = answer.holder.flow if answer.holder else answer.result.flow if answer.result else None
    copy = holder if ANOTHER_FLOW_COPY in answer.warnings else None
    return {
        telemetry.DECISION: answer.decision.value,
        telemetry.WARNINGS: ",".join(answer.warnings) or None,
        telemetry.CHANGED_PARTS: json.dumps(answer.changed_parts) if answer.changed_parts else None,
        telemetry.HOLDER_FLOW_NAME: copy.name if copy else None,
        telemetry.HOLDER_FLOW_ENVIRONMENT: copy.environment if copy else None,
    }


def dumped(model: ClaimResponse | ClaimManyAnswer) -> bytes:
    """What ``http.render`` wrote for a model: its JSON by wire names, None left out."""
    return model.model_dump_json(by_alias=True, exclude_none=True).encode()


def written(members: Members) -> bytes:
    """What the pipeline writes for an answer rendered as its members."""
    return bytes(http.render(200, members).get_body())


# -- any answer the table can give ----------------------------------------------------------------------------

# Any text but a lone surrogate, which no request can carry (tests/http/test_lone_surrogates.py).
TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
# UTC as the service writes times, microseconds or none, and another offset a store might give back.
TIMES = st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))]), min_value=datetime(2000, 1, 1))
# A flow as a request names it (1 to 256 characters each): no claim holds another.
NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12)
FLOWS = st.none() | st.builds(Flow, NAMES, NAMES)
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT
JSON = st.recursive(JSON_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3))


@st.composite
def nested(draw: st.DrawFn) -> Any:
    """A value nested about as deep as an answer may show it: at the limit, or past it (shown as its JSON text)."""
    value: Any = draw(JSON_LEAVES)
    for _ in range(draw(st.integers(MAX_NESTING - 2, MAX_NESTING + 2))):
        value = [value] if draw(st.booleans()) else {"a": value}
    return value


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


RESULTS = st.builds(
    lambda run_id, flow, target, data, completed: claim(
        run_id=run_id, flow=flow, target_record_id=target, data=data, completed_at=completed
    ),
    TEXT,
    FLOWS,
    optional(TEXT),
    JSON | nested(),
    optional(TIMES),
)
EARLIER = st.builds(
    EarlierAttempt,
    attempt=st.integers(1, 10**6),
    run_id=TEXT,
    flow=FLOWS,
    status=st.sampled_from(ClaimStatus),
    started_at=TIMES,
    lease_expires_at=optional(TIMES),
    error=optional(TEXT),
)
WARNINGS = st.lists(st.sampled_from([ANOTHER_FLOW_COPY, "no_fingerprint", "no_flow", "source_differs"]) | TEXT)
ANSWERS = st.builds(
    ClaimAnswer,
    st.sampled_from(Decision),
    TEXT,
    TEXT,
    claim_id=TEXT,
    status=st.sampled_from(AnswerStatus),
    attempt=st.integers(0, 10**6),
    warnings=WARNINGS,
    claim_token=optional(TEXT),
    idempotency_key=optional(TEXT),
    lease_expires_at=optional(TIMES),
    retry_after_seconds=optional(st.integers(0, 10**6)),
    holder=optional(st.builds(LeaseHolder, flow=FLOWS, lease_expires_at=optional(TIMES))),
    result=optional(RESULTS),
    earlier_attempt=optional(EARLIER),
    conflict_id=optional(TEXT),
    changed=st.lists(TEXT, max_size=4).map(tuple),
    more_changed=st.integers(0, 100),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANSWERS)
def test_any_answer_is_written_as_the_model_wrote_it(answer: ClaimAnswer) -> None:
    members = claims.claim_members(answer)
    model = as_the_model_had_it(answer)

    assert written(members) == dumped(model)
    assert ClaimResponse.model_validate(members) == model
    assert claims.decision_dimensions(members) == dimensions_the_model_gave(model)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANSWERS, st.lists(TEXT, min_size=1, max_size=2), optional(TEXT))
def test_check_and_claim_many_writes_each_entry_as_the_models_wrote_it(
    answer: ClaimAnswer, warnings: list[str], reference: str | None
) -> None:
    """An item's answer with what its data earned, then its reference; and an item refused alone."""
    item = {"reference": reference} if reference is not None else {}
    said = claims.claim_members(answer)
    said = {**said, "warnings": [*said["warnings"], *warnings]}  # as bulk._rendered adds the item's
    refused = InvalidRequest("The item is not an object.")
    entries = [bulk._claim_entry(item, said), bulk._claim_entry(item, refused)]
    members = CHECK_AND_CLAIM_MANY.render(Call(), entries)
    assert isinstance(members, dict)

    model = as_the_model_had_it(answer).model_copy(update={"warnings": [*answer.warnings, *warnings]})
    fields = {name: getattr(model, name) for name in ClaimResponse.model_fields}
    expected = ClaimManyAnswer(
        value=[
            ClaimManyEntry.model_construct(**fields, **item),
            ClaimManyEntry(**item, error=error_map.error_info(refused)),
        ]
    )
    assert written(members) == dumped(expected)
    assert ClaimManyAnswer.model_validate(members) == ClaimManyAnswer.model_validate_json(dumped(expected))


def wire_names(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


def test_an_answer_with_every_part_writes_every_member_the_model_declares() -> None:
    """A member added to ClaimResponse (or to a part of it) and not written by ``claim_members`` fails here: the
    oracle above knows only the members 67b15cc had."""
    at = datetime(2024, 5, 1, 8, 30, 15, 123456, tzinfo=UTC)
    flow = Flow("Create order", "Default")
    earlier = EarlierAttempt(
        attempt=1, run_id="run-1", flow=flow, status=ClaimStatus.UNKNOWN, started_at=at, lease_expires_at=at, error="x"
    )
    result = claim(run_id="run-1", flow=flow, target_record_id="SO-1", data={"n": 1}, completed_at=at)
    answer = ClaimAnswer(
        Decision.RECONCILE,
        "",
        "Look it up.",
        claim_id="c",
        status=AnswerStatus.UNKNOWN,
        attempt=2,
        warnings=["no_flow"],
        claim_token="t",
        idempotency_key="k",
        lease_expires_at=at,
        retry_after_seconds=5,
        holder=LeaseHolder(flow=flow, lease_expires_at=at),
        result=result,
        earlier_attempt=earlier,
        conflict_id="f",
        changed=("/total",),
        more_changed=2,
    )

    members = claims.claim_members(answer)

    assert set(members) == wire_names(ClaimResponse)
    assert set(members["holder"]) == wire_names(Holder)
    assert set(members["result"]) == wire_names(ClaimResult)
    assert set(members["lastAttempt"]) == wire_names(EarlierAttemptView)
    assert set(members["holder"]["flow"]) == set(members["result"]["flow"]) == wire_names(FlowRef)
    assert written(members) == dumped(as_the_model_had_it(answer))


def test_an_answer_nested_past_the_limit_shows_its_data_as_its_json_text() -> None:
    """The property's deepest values, spelled out: shown as text, as ``SHOWN_JSON`` shows it."""
    deep: Any = "leaf"
    for _ in range(MAX_NESTING + 1):
        deep = [deep]
    answer = ClaimAnswer(Decision.DUPLICATE, "", "Done.", result=claim(data=deep), status=AnswerStatus.SUCCEEDED)

    members = claims.claim_members(answer)

    assert isinstance(members["result"]["data"], str)
    assert written(members) == dumped(as_the_model_had_it(answer))


# -- through the app, on both stores --------------------------------------------------------------------------


@pytest.fixture
def store_kind(request: pytest.FixtureRequest) -> str:
    """SQLite, or the store a test names: the answers through the app carry what each store keeps (times, data)."""
    kind: str = getattr(request, "param", "sqlite")
    return kind


@pytest.fixture
def service(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Gate:
    """Personal data in what a request stores is answered with a warning (``ONCEGATE_SENSITIVE_DATA=warn``), which
    the pipeline adds after the answer's own."""
    return Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, sensitive_data=SensitivePolicy.WARN)


@pytest.fixture
def told(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[ClaimAnswer, bytes]]]:
    """Each Check and claim answer the app renders, beside the bytes it wrote for it."""
    answers: list[ClaimAnswer] = []
    pairs: list[tuple[ClaimAnswer, bytes]] = []
    members_of, render_as = claims.claim_members, http.render

    def members(answer: ClaimAnswer) -> Members:
        answers.append(answer)
        return members_of(answer)

    def rendering(status: int, model: Any, headers: dict[str, str] | None = None) -> Any:
        response = render_as(status, model, headers)
        if isinstance(model, dict):
            pairs.append((answers.pop(), bytes(response.get_body())))
        return response

    monkeypatch.setattr(claims, "claim_members", members)
    monkeypatch.setattr(http, "render", rendering)
    yield pairs
    assert not answers, "an answer rendered as members and never written"


@pytest.mark.parametrize("store_kind", ["sqlite", pytest.param("tables", marks=pytest.mark.azurite)], indirect=True)
@pytest.mark.parametrize("api", ["functions"], indirect=True)
def test_every_decision_through_the_app_is_written_as_the_model_wrote_it(
    api: Api, clock: FakeClock, told: list[tuple[ClaimAnswer, bytes]]
) -> None:
    seen: list[tuple[int, str]] = []

    def check(body: dict[str, Any]) -> dict[str, Any]:
        reply = api.call("check_and_claim", body)
        seen.append((reply.status, reply.body["decision"]))
        return dict(reply.body)

    first = check(claim_body(key="ORDER-1", leaseSeconds=60))
    check(claim_body(key="ORDER-1", run="run-2"))  # in_progress: held by run-1
    waiting = api.call("check_and_claim", claim_body(key="ORDER-1", run="run-3", wait=True, maxWaitSeconds=30))
    seen.append((waiting.status, waiting.body["decision"]))
    done = {"claimToken": first["claimToken"], "outcome": "succeeded", "targetRecordId": "SO-1", "data": {"n": None}}
    ok(api.call("record_result", done, route={"claimId": first["claimId"]}))
    polled = api.follow(waiting.headers["location"])  # the holder done: the waiting run's final answer
    seen.append((polled.status, polled.body["decision"]))
    check(claim_body(key="ORDER-1", run="run-4"))  # duplicate
    check(claim_body(key="ORDER-1", run="run-5", payload={"customer": "C-9", "total": 1}))  # conflict
    check(claim_body(key="ORDER-2", leaseSeconds=60))
    clock.advance(61)
    check(claim_body(key="ORDER-2", run="run-2"))  # reconcile: run-1's lease ran out without a result
    held = check(claim_body(key="ORDER-3"))
    failed = {"claimToken": held["claimToken"], "outcome": "failed", "retryable": False, "error": "bad VAT"}
    ok(api.call("record_result", failed, route={"claimId": held["claimId"]}))
    check(claim_body(key="ORDER-3", run="run-2"))  # blocked: a person must act
    check(claim_body(key="ORDER-4", reference="ana@contoso.com"))  # the pipeline adds sensitive_data

    assert seen == [
        (200, "proceed"),
        (200, "in_progress"),
        (202, "in_progress"),
        (200, "duplicate"),
        (200, "duplicate"),
        (200, "conflict"),
        (200, "proceed"),
        (200, "reconcile"),
        (200, "proceed"),
        (200, "blocked"),
        (200, "proceed"),
    ]
    assert len(told) == len(seen)
    for answer, body in told:
        sent = json.loads(body)["warnings"]
        assert sent[: len(answer.warnings)] == list(answer.warnings)
        added = sent[len(answer.warnings) :]  # the request's own (services.sensitive_data), after the answer's
        assert body == dumped(as_the_model_had_it(answer).model_copy(update={"warnings": [*answer.warnings, *added]}))
    assert SENSITIVE_DATA in json.loads(told[-1][1])["warnings"]  # added by the pipeline, not the answer
