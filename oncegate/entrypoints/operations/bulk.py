"""The bulk calls (issue 24), Check and claim many and Record results: their entries and their own work.

Each reads its items one by one: an item is its single call's body, its entry performed as the pipeline performs
it (:func:`oncegate.entrypoints.http.perform`; ``operations.claims``, ``operations.claim_records``), with that
call's telemetry event marked ``bulk``; ``oncegate.service.bulk`` orders the items that share a claim. Where the
store writes one at a time (SQLite), Check and claim many parses its items first and claims their new keys
together (``oncegate.service.new_claims``, issue 36), rendered as the single call renders. Their entries live here,
apart from the single calls', so a process whose first request is a single call loads none of it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from oncegate import telemetry
from oncegate.domain.copies import frozen, replaced
from oncegate.domain.decisions import ClaimAnswer, Intent
from oncegate.domain.keys import normalise_key, normalise_scope
from oncegate.entrypoints import error_map, http
from oncegate.entrypoints.error_map import error_info
from oncegate.entrypoints.operations.claim_records import RECORD_RESULT
from oncegate.entrypoints.operations.claims import CHECK_AND_CLAIM
from oncegate.entrypoints.operations.table import Call, Designer, Members, Operation
from oncegate.entrypoints.parse import CLAIM_ID_PATTERN, MAX_BULK_BODY_BYTES, item_body
from oncegate.errors import InvalidRequest, NotConfigured, NotFound, OnceGateError, StoreUnavailable
from oncegate.models import (
    IMPORTANT,
    BulkItems,
    ClaimItem,
    ClaimManyAnswer,
    ClaimManyRequest,
    ClaimView,
    RecordResultRequest,
    RecordResultsAnswer,
    RecordResultsRequest,
    ResultEntry,
    ResultItem,
)

if TYPE_CHECKING:
    from oncegate.bootstrap import Services


def claim_each(services: Services, call: Call[Any, Any], items: list[Any], single: Operation) -> list[Members]:
    """Check and claim for each item, as if sent one after another in order (``oncegate.service.bulk``).

    Where the store writes one at a time, the items are read and parsed first and their new keys claimed
    together (:func:`_claim_new`); an item parsed then is decided from that parse if it is left to go alone.
    Each entry is the members of a ``ClaimManyEntry``, the single call's rendered as it renders them.
    """
    digest = _call_digest(items)
    kept: list[list[telemetry.Answered]] = [[] for _ in items]
    parsed: dict[int, _Parsed] = {}

    def apply(place: tuple[int, Any]) -> Members:
        index, item = place
        read = parsed.get(index)
        if read is None:
            return _claim_item(services, call, single, index, item, digest, kept[index])
        with _item_answer(telemetry.CHECK, "check_and_claim_many", kept[index]):
            return _rendered(single, read, services.claims.decide_for(read.intent))

    answers = services.bulk.each(
        list(enumerate(items)),
        apply,
        same=_same_key,
        ahead=lambda: _claim_new(services, call, single, items, digest, parsed, kept),
    )
    _send_item_events(kept, answers, "check_and_claim_many")
    return [_claim_entry(item, answer) for item, answer in zip(items, answers, strict=True)]


@frozen
class _Parsed:
    """An item of Check and claim many read and parsed once, before any of the call's claims is made (issue 36)."""

    body: ClaimItem
    intent: Intent
    # What its business data earned (``sensitive_data``), added to its answer as the single call adds them.
    warnings: list[str]


def _claim_new(
    services: Services,
    call: Call[Any, Any],
    single: Operation,
    items: list[Any],
    digest: str,
    parsed: dict[int, _Parsed],
    kept: list[list[telemetry.Answered]],
) -> dict[int, Members]:
    """The answers of the items whose keys were new, claimed together (``oncegate.service.new_claims``).

    Only the first item of each key is parsed here, and claimed here unless its single call would do more than
    make a first claim; the others, and those whose claim was there, are answered one after another after it.
    """
    seen: set[Hashable] = set()
    firsts: list[int] = []
    for index, item in enumerate(items):
        same = _same_key((index, item))
        if same in seen:
            continue
        seen.add(same)
        read = _parse(services, call, single, index, item, digest)
        if read is None:
            continue
        parsed[index] = read
        if not services.new_claims.alone(read.intent):
            firsts.append(index)
    before = telemetry.round_trips()
    made = services.new_claims.claim([parsed[index].intent for index in firsts])
    # Each item claimed together counts its share of the write they shared, rounded up, as its round trips.
    share = -(-(telemetry.round_trips() - before) // max(1, len(firsts)))
    answered: dict[int, Members] = {}
    for index, told in zip(firsts, made, strict=True):
        if told is not None:
            with _item_answer(telemetry.CHECK, "check_and_claim_many", kept[index]):
                for _ in range(share):
                    telemetry.round_trip()
                answered[index] = _rendered(single, parsed[index], told)
    return answered


def _parse(
    services: Services, call: Call[Any, Any], single: Operation, index: int, item: Any, digest: str
) -> _Parsed | None:
    """The item read and parsed as its single call would, or None where that refuses it (or fails): the item is
    then performed as a call of its own (:func:`_claim_item`), which refuses it in its own answer."""
    if not isinstance(item, dict) or "wait" in item:
        return None
    try:
        body = item_body(ClaimItem, item)
        item_call: Call[ClaimItem, None] = Call(body=body, caller=call.caller)
        command = _command(single, item_call, digest, index)
        assert single.stores is not None, "Check and claim says what it stores"
        warnings = services.sensitive_data.check(body, single.stores(item_call, command))
        intent = services.new_claims.identified(command, signed_in=item_call.caller)
    except Exception:  # met again, and answered, where the item is performed alone
        return None
    return _Parsed(body, intent, warnings)


def _rendered(single: Operation, read: _Parsed, told: ClaimAnswer) -> Members:
    """The answer as the single call renders it (``http.perform``): its warnings added, described."""
    response = single.render(Call(body=read.body), (told, None))  # the single call's own rendering
    assert isinstance(response, dict), "an item never waits"
    if read.warnings:
        response = {**response, "warnings": [*response["warnings"], *read.warnings]}
    if telemetry.describing():
        single.parse(Call(body=read.body))  # describes the item's scope and flow, as its single call's parse does
        if single.describe is not None:
            telemetry.describe(single.describe(response))
    return response


def _call_digest(items: list[Any]) -> str:
    """A short digest of a bulk call's items: the same call sent again (a retry) has the same one."""
    # An item refused as JSON already stands as its refusal: its text is enough to tell the calls apart.
    canonical = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def item_run_id(run_id: str, digest: str, index: int) -> str:
    """An item's own run: a Select gives every item the flow run's id, and two rows with one key must not both be
    that run asking again (each would be given the claim). The same call sent again names the same runs, so a
    retried call is given its claims back; another call, or another row, is another run."""
    return f"{run_id}#{digest}.{index + 1}"


def _claim_item(
    services: Services,
    call: Call[Any, Any],
    single: Operation,
    index: int,
    item: Any,
    digest: str,
    kept: list[telemetry.Answered],
) -> Members:
    """One item of Check and claim many: the single call's entry, telemetry and answer."""
    with _item_answer(telemetry.CHECK, "check_and_claim_many", kept):
        # An item is a Check and claim body but for wait: a bulk call answers at once (issue 25).
        if isinstance(item, dict) and "wait" in item:
            message = (
                "The items of Check and claim many do not wait: each is answered at once, in_progress included. "
                "Leave wait out, or send the record alone to Check and claim with wait."
            )
            raise InvalidRequest(message, details=[("wait", message)])
        body = item_body(ClaimItem, item)
        item_call: Call[ClaimItem, None] = Call(body=body, caller=call.caller)
        answer = http.perform(single, services, item_call, _command(single, item_call, digest, index)).model
        assert isinstance(answer, dict), "an item never waits"
        return answer


def _command(single: Operation, item_call: Call[ClaimItem, None], digest: str, index: int) -> Any:
    """The item's Check and claim, parsed by the single call's entry, naming the item's own run (no model copied)."""
    return replaced(single.parse(item_call), run_id=item_run_id(item_call.body.run_id, digest, index))


def _same_key(place: tuple[int, Any]) -> Hashable:
    """The claim an item of Check and claim many is for, as far as its scope and key tell before it is read."""
    item = place[1]
    try:
        return normalise_scope(item["scope"]), normalise_key(item["key"])
    except (TypeError, KeyError, InvalidRequest):
        return id(item)  # refused when read: its place in no claim's order matters


def _claim_entry(item: Any, answer: Members | OnceGateError) -> Members:
    """An item's entry, in ``ClaimManyEntry``'s order: the single call's members and the item's reference, or the
    reference and the item's error."""
    reference = item.get("reference") if isinstance(item, dict) else None
    given = {"reference": reference} if isinstance(reference, str) else {}
    if isinstance(answer, OnceGateError):
        return {**given, "error": error_info(answer)}
    return {**answer, **given}


def record_each(services: Services, call: Call[Any, Any], items: list[Any], single: Operation) -> list[ResultEntry]:
    """Record result for each item: items for the same claim one after another, in order."""
    kept: list[list[telemetry.Answered]] = [[] for _ in items]
    answers = services.bulk.each(
        list(enumerate(items)),
        lambda place: _result_item(services, call, single, place[1], kept[place[0]]),
        same=_same_claim,
    )
    _send_item_events(kept, answers, "record_results")
    return [_result_entry(item, answer) for item, answer in zip(items, answers, strict=True)]


def _result_item(
    services: Services, call: Call[Any, Any], single: Operation, item: Any, kept: list[telemetry.Answered]
) -> ClaimView:
    """One item of Record results: the single call's entry, telemetry and answer."""
    with _item_answer(telemetry.RESULT, "record_results", kept):
        body = item_body(ResultItem, item)
        if not re.fullmatch(CLAIM_ID_PATTERN, body.claim_id):
            raise NotFound(f"No claim has the id {body.claim_id!r}.", target="claimId")
        result = RecordResultRequest(**{name: getattr(body, name) for name in RecordResultRequest.model_fields})
        claim: ClaimView = http.answer(
            single, services, Call(body=result, ids={"claimId": body.claim_id}, caller=call.caller)
        )
        return claim


def _same_claim(place: tuple[int, Any]) -> Hashable:
    item = place[1]
    claim_id = item.get("claimId") if isinstance(item, dict) else None
    return claim_id if isinstance(claim_id, str) else id(item)


def _result_entry(item: Any, answer: ClaimView | OnceGateError) -> ResultEntry:
    if isinstance(answer, OnceGateError):
        claim_id = item.get("claimId") if isinstance(item, dict) else None
        given = {"claim_id": claim_id} if isinstance(claim_id, str) else {}
        return ResultEntry(**given, error=error_info(answer))
    fields = _fields(answer)
    fields["error_message"] = fields.pop("error")
    return ResultEntry(**fields)


def _fields(model: Any) -> dict[str, Any]:
    """A model's fields by name, nested models kept as they are."""
    return {name: getattr(model, name) for name in type(model).model_fields}


@contextmanager
def _item_answer(event: telemetry.Event, action: str, kept: list[telemetry.Answered]) -> Iterator[None]:
    """One item of a bulk call makes the event its single call sends, or Unavailable for its 503, marked bulk; it is
    kept, and sent once the item's answer is final (:func:`_send_item_events`)."""
    refused: OnceGateError | None = None
    with telemetry.answering(event, action, kept=kept):
        telemetry.describe({telemetry.BULK: True})
        try:
            yield
        except OnceGateError as exc:
            # Caught inside the answer, as the pipeline catches a single call's: an answer left by an exception is
            # none.
            setting = exc.target if isinstance(exc, NotConfigured) else None
            said = error_map.answered(exc)
            telemetry.describe({telemetry.HTTP_STATUS: said.status.value, telemetry.ERROR_CODE: said.code})
            telemetry.describe({telemetry.SETTING: setting})
            refused = exc
        else:
            telemetry.describe({telemetry.HTTP_STATUS: 200})
    if refused is not None:
        raise refused


def _send_item_events(kept: list[list[telemetry.Answered]], answers: Sequence[Any], action: str) -> None:
    """Each item's event, for the answer it was finally given: an item answered ``store_unavailable`` sends
    Unavailable, whether it met the outage, was not tried after it, or was lost with a commit that failed."""
    for made, answer in zip(kept, answers, strict=True):
        if isinstance(answer, StoreUnavailable):
            untried = telemetry.Answered(telemetry.UNAVAILABLE, {telemetry.ACTION: action})
            made = [event.unavailable(error_map.code(answer)) for event in made or [untried]]
        for event in made:
            event.send()


# -- the table's entries -------------------------------------------------------------------------------------

CHECK_AND_CLAIM_MANY = Operation(
    name="check_and_claim_many",
    route="claims/batch",
    method="POST",
    body=ClaimManyRequest,
    response=ClaimManyAnswer,
    as_members=True,
    parse=lambda call: call.body.items,
    serve=lambda services, call, items: claim_each(services, call, items, CHECK_AND_CLAIM),
    render=lambda call, entries: {"value": entries},  # ClaimManyAnswer's members
    body_limit=MAX_BULK_BODY_BYTES,
    items="items",
    reads=BulkItems,
    designer=Designer(
        operation_id="CheckAndClaimMany",
        summary="Check and claim many",
        description=(
            "Check and claim for up to 100 records in one call, such as the rows of an import. Each item is a Check "
            "and claim body and gets the answer Check and claim would give it, in the items' order, or an error for "
            "that item alone. Items never wait. Filter the answers on decision: proceed carries the claim token and "
            "the item's reference, so the flow finds its row. When any item has the error store_unavailable, send "
            "the whole call again, unchanged, and use its answers instead: items the store kept get their claims back."
        ),
        visibility=IMPORTANT,
        success="One answer per item, in order: the decision, or that item's error.",
        errors=(400, 413, 503),
        body_description="The records to check and claim: an array built with a Select action.",
    ),
)

RECORD_RESULTS = Operation(
    name="record_results",
    route="claims/results",
    method="POST",
    body=RecordResultsRequest,
    response=RecordResultsAnswer,
    parse=lambda call: call.body.items,
    serve=lambda services, call, items: record_each(services, call, items, RECORD_RESULT),
    render=lambda call, entries: RecordResultsAnswer(value=entries),
    body_limit=MAX_BULK_BODY_BYTES,
    items="items",
    reads=BulkItems,
    designer=Designer(
        operation_id="RecordResults",
        summary="Record results",
        description=(
            "Records the results of up to 100 side effects in one call, each with its claim ID and claim token, as "
            "Record result records one. Each item is answered in its place: the claim, or an error for that item "
            "alone, such as stale_claim. Sending the same results again changes nothing: when any item has the error "
            "store_unavailable, send the whole call again, unchanged."
        ),
        visibility=IMPORTANT,
        success="One answer per item, in order: the claim with its result, or that item's error.",
        errors=(400, 413, 503),
        body_description="The results to record: an array built with a Select action after the side effects.",
    ),
)

OPERATIONS = (CHECK_AND_CLAIM_MANY, RECORD_RESULTS)
