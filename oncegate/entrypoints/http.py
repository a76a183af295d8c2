"""HTTP handling shared by the Azure Functions app and the local server.

Each action is a plain function ``(services, request) -> model`` (or a whole response, for the
polling trigger) that calls the one service it needs; :func:`respond` calls it with the services
``oncegate.bootstrap`` built, and renders the model or a Microsoft REST API guidelines error
body. Bad input is rejected here or in the services before any write, and never becomes a 500:
bodies are strict JSON (see ``strict_json``), an action refuses query parameters it does not take,
and cursors are sealed here, at the edge (see ``oncegate.cursors``).

The module runs past 400 lines on purpose: it holds one short function per action of the route
table, and the parsing and rendering they share; apart, each action would import its own half.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import azure.functions as func
from pydantic import BaseModel, ValidationError

from oncegate import bootstrap, telemetry
from oncegate.bootstrap import Services
from oncegate.config import AuthMode, ConfigError
from oncegate.domain.keys import normalise_key, normalise_scope
from oncegate.domain.statuses import ConflictStatus
from oncegate.domain.waiting import Waiting
from oncegate.domain.warnings import ANOTHER_FLOW_COPY
from oncegate.entrypoints import actions, bearer, performing, waits
from oncegate.entrypoints.principal import Principal, Role
from oncegate.entrypoints.routes import allowed_methods, function_routes
from oncegate.entrypoints.strict_json import read_object
from oncegate.errors import (
    AccessDenied,
    InvalidRequest,
    MethodNotAllowed,
    NotConfigured,
    NotFound,
    OnceGateError,
    StoreUnavailable,
    TooLarge,
)
from oncegate.models import (
    MAX_ITEMS,
    BulkItems,
    ClaimAttentionList,
    ClaimHistory,
    ClaimItem,
    ClaimList,
    ClaimManyAnswer,
    ClaimManyEntry,
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictList,
    ConflictView,
    ErrorBody,
    ErrorDetail,
    ErrorInfo,
    FindClaimsQuery,
    FlowList,
    FlowRef,
    FlowView,
    Health,
    HeartbeatRequest,
    ListClaimsQuery,
    ListConflictsQuery,
    ListPageQuery,
    LookupRequest,
    OverlapList,
    PerformRequest,
    PerformResponse,
    PollConflictsQuery,
    RecordResultRequest,
    RecordResultsAnswer,
    RegisterFlowRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ResultEntry,
    ResultItem,
    ReviewClaimRequest,
    ScopeList,
    ScopeView,
    SetScopeRequest,
    WaitQuery,
    json_size,
)

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
# A bulk call's body: its items, each up to a single call's body, and room for the list around them (issue 24).
MAX_BULK_BODY_BYTES = (MAX_ITEMS + 1) * MAX_BODY_BYTES
BULK_ROUTES = frozenset({"claims/batch", "claims/results"})
CLAIM_ID_PATTERN = re.compile(r"[a-z2-7]{52}")
CONFLICT_ID_PATTERN = re.compile(r"[a-z2-7]{24}")
POLL_BATCH_SIZE = 50
POLL_INTERVAL_SECONDS = 60
JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}
# The host reads the function key from ``code`` (ONCEGATE_AUTH=key): every action takes it, none reads it.
HOST_PARAMS = frozenset({"code"})
# Query parameters holding a sealed cursor.
CURSOR_PARAMS = ("cursor", "state")
# Any of these without ``attention`` makes GET /api/claims find claims by where they came from (issue 16).
FIND_FILTERS = frozenset({"source", "reference", "status", "since"})

Model = TypeVar("Model", bound=BaseModel)
Dimensions = dict[str, telemetry.Value | None]
Action = Callable[[Services, func.HttpRequest], BaseModel | func.HttpResponse]
A = TypeVar("A", bound=Action)
_READS_QUERY: set[Action] = set()
_EVENTS: dict[Action, telemetry.Event] = {}


def reads_query(action: A) -> A:
    """Mark an action that reads and checks its own query parameters; the others take none."""
    _READS_QUERY.add(action)
    return action


def sends(event: telemetry.Event) -> Callable[[A], A]:
    """Mark an action whose every answer but a 503 sends ``event``; the others send only their 503s."""

    def mark(action: A) -> A:
        _EVENTS[action] = event
        return action

    return mark


# Who ``respond`` signed in for the action it runs (None with function keys). Set for each request and
# without a default: an action run outside ``respond`` fails instead of acting for nobody.
_SIGNED_IN: ContextVar[Principal | None] = ContextVar("signed_in")


def respond(request: func.HttpRequest, action: Action, *, role: Role | None = Role.FLOW) -> func.HttpResponse:
    """Run one action for a caller holding ``role`` (None: anyone) and render its answer or its error.

    The answer sends the action's telemetry event, or ``OnceGate.Unavailable`` for a 503 (``oncegate.telemetry``).
    """
    with telemetry.answering(_EVENTS.get(action), getattr(action, "__name__", "action")):
        response = _answer(request, action, role)
        telemetry.describe({telemetry.HTTP_STATUS: response.status_code})
        return response


def _answer(request: func.HttpRequest, action: Action, role: Role | None) -> func.HttpResponse:
    try:
        signed_in = _SIGNED_IN.set(authorize(request, role))
        try:
            if action not in _READS_QUERY:
                own_params(request, ())
            answer = action(bootstrap.get_services(), request)
        finally:
            _SIGNED_IN.reset(signed_in)
        return answer if isinstance(answer, func.HttpResponse) else render(200, answer)
    except OnceGateError as exc:
        return _refused(exc)
    except ConfigError as exc:
        # function_app.py logged it once at start and loaded every function anyway: each answers this
        # until the setting is fixed (the platform restarts the app when a setting changes).
        return _refused(NotConfigured(f"OnceGate is not configured: {exc}", target=exc.setting))
    except Exception:
        logger.exception("Unexpected error in %s %s", request.method, urlsplit(request.url).path)
        return _refused(OnceGateError("The service failed unexpectedly; nothing more is known."))


def _refused(exc: OnceGateError) -> func.HttpResponse:
    setting = exc.target if isinstance(exc, NotConfigured) else None
    telemetry.describe({telemetry.ERROR_CODE: exc.code, telemetry.SETTING: setting})
    return render_error(exc)


def render(status: int, model: BaseModel, headers: dict[str, str] | None = None) -> func.HttpResponse:
    body = model.model_dump_json(by_alias=True, exclude_none=True)
    return func.HttpResponse(body, status_code=status, headers={**JSON_HEADERS, **(headers or {})})


# The wire's name of each record a store may find missing.
RECORD_FIELDS = {"claim": "claimId", "conflict": "conflictId"}


def error_info(exc: OnceGateError) -> ErrorInfo:
    """The error as the body of any refusal says it: its code, message and details."""
    target = exc.target
    if target is None and isinstance(exc, NotFound) and exc.record is not None:
        target = RECORD_FIELDS[exc.record]
    raw_details = exc.details if isinstance(exc, InvalidRequest) else ([(target, exc.message)] if target else [])
    details = [ErrorDetail(target=target, message=message) for target, message in raw_details]
    return ErrorInfo(code=exc.code, message=exc.message, details=details)


def render_error(exc: OnceGateError) -> func.HttpResponse:
    body = ErrorBody(error=error_info(exc))
    headers = {"Retry-After": str(exc.retry_after_seconds)} if isinstance(exc, StoreUnavailable) else {}
    if isinstance(exc, AccessDenied) and exc.challenge:
        headers["WWW-Authenticate"] = exc.challenge
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = ", ".join(exc.allowed)
    if exc.status >= 500 and not isinstance(exc, StoreUnavailable):
        logger.error("Answering %s: %s", exc.code, exc.message)
    return render(exc.status, body, headers)


# -- who is calling -----------------------------------------------------------------------


def authorize(request: func.HttpRequest, role: Role | None) -> Principal | None:
    """The signed-in caller in Entra ID mode, checked for ``role``; None with function keys or no role.

    With function keys the host has already checked the key. In Entra ID mode the caller is who the
    bearer token names, validated here (``bearer``); ``X-MS-CLIENT-PRINCIPAL`` is never read, in
    either mode: it proves nothing where the platform does not block unauthenticated callers.
    """
    settings = bootstrap.get_settings()
    if role is None or settings.auth is not AuthMode.ENTRA:
        return None
    if settings.entra is None:
        raise ConfigError("ONCEGATE_ENTRA_TENANT_ID", "ONCEGATE_AUTH=entra needs the Entra ID settings.")
    principal = bearer.validator(settings.entra).principal(request.headers.get("Authorization"))
    if not principal.may(role):
        raise AccessDenied(403, "forbidden", f"{principal.name} lacks the app role {role.value} for this action.")
    return principal


def signed_reviewer(body: Model) -> Model:
    """``body`` with its ``reviewer`` set to who signed in (Entra ID mode), whatever the body says.

    The actions that record a reviewer are served with ``role=Role.REVIEWER``: ``respond`` checked it.
    """
    principal = _SIGNED_IN.get()
    return body if principal is None else body.model_copy(update={"reviewer": principal.name})


# -- parsing --------------------------------------------------------------------------------


def body_limit(path: str) -> int:
    """The most bytes a body may have at ``path`` (below ``/api/``): a bulk call's body holds 100 items."""
    return MAX_BULK_BODY_BYTES if path.strip("/") in BULK_ROUTES else MAX_BODY_BYTES


def parse_body(
    request: func.HttpRequest, model: type[Model], *, limit: int = MAX_BODY_BYTES, items: str | None = None
) -> Model:
    """The JSON object body as ``model``; 413 when over ``limit`` bytes, 400 naming each bad field.

    ``items`` names a bulk call's list, whose items are refused one by one (see ``strict_json.read_object``).
    """
    raw = request.get_body() or b""
    if len(raw) > limit:
        raise TooLarge(f"The request body is over {limit} bytes.", target="body")
    if not raw.strip():
        raise InvalidRequest("The body must be a JSON object.", target="body")
    return validate(model, read_object(raw, items=items))


def item_body(model: type[Model], item: Any) -> Model:
    """One item of a bulk call read as its single call's body: 413 over that call's limit, 400 naming each bad field.

    The fields are named as in the single call's refusal (``key``, not ``items.3.key``): the item's answer
    stands in the item's place.
    """
    if isinstance(item, InvalidRequest):
        raise item  # refused as JSON already: a member given twice, a number that is not finite
    if not isinstance(item, dict):
        raise InvalidRequest("Each item must be a JSON object, as the single action's body is.", target="body")
    if json_size(item) > MAX_BODY_BYTES:
        raise TooLarge(f"The item is over {MAX_BODY_BYTES} bytes as JSON, the single action's limit.", target="body")
    return validate(model, item)


def validate(model: type[Model], data: dict[str, Any]) -> Model:
    """``data`` as ``model``, read by the wire names only: ``run_id`` is an unknown field, as any other is."""
    try:
        return model.model_validate(data, by_name=False)
    except ValidationError as exc:
        details = [(_target(error["loc"]), _message(error)) for error in exc.errors()]
        too_large = [message for _, message in details if "bytes as JSON" in message]
        if too_large:
            raise TooLarge(too_large[0], target=details[0][0]) from exc
        raise InvalidRequest(f"The request is not valid: {details[0][1]} ({details[0][0]}).", details=details) from exc


def _target(location: tuple[int | str, ...]) -> str:
    # Tagged-union and JSON value internals add location parts a caller never wrote; keep the field path.
    return ".".join(str(part) for part in location if not str(part).startswith(("function-", "json-"))) or "body"


def _message(error: Any) -> str:
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def route_id(request: func.HttpRequest, name: str, pattern: re.Pattern[str]) -> str:
    value = str(request.route_params.get(name, ""))
    if not pattern.fullmatch(value):
        raise NotFound(f"No {'claim' if name == 'claimId' else 'conflict'} has the id {value!r}.", target=name)
    return value


def own_params(request: func.HttpRequest, taken: Collection[str]) -> dict[str, Any]:
    """The caller's query parameters; 400 naming any the action does not take, so none is silently ignored."""
    params = {name: value for name, value in request.params.items() if name.lower() not in HOST_PARAMS}
    unknown = sorted(set(params) - set(taken))
    if unknown:
        takes = ", ".join(sorted(taken)) or "none"
        raise InvalidRequest(
            f"{unknown[0]!r} is not a parameter of this action, which takes {takes}.",
            details=[(name, "not a parameter of this action") for name in unknown],
        )
    return params


def query_params(request: func.HttpRequest, model: type[BaseModel], list_name: str) -> dict[str, Any]:
    """The parameters ``model`` declares, its cursor opened: only a cursor this list handed out gets through."""
    params = own_params(request, [field.alias or name for name, field in model.model_fields.items()])
    seal = bootstrap.get_cursor_seal()
    for name in CURSOR_PARAMS:
        if params.get(name):  # blank means none, as it did before cursors were sealed
            params[name] = seal.open(params[name], list_name, target=name)
    return params


def next_link(request: func.HttpRequest, cursor: str | None, list_name: str) -> str | None:
    """The next page's URL, its cursor sealed for this list; None on the last page."""
    if cursor is None:
        return None
    return _with_param(request, "cursor", bootstrap.get_cursor_seal().seal(cursor, list_name))


def _with_param(request: func.HttpRequest, name: str, value: str) -> str:
    """The request's own URL with one query parameter set, e.g. the next page's cursor."""
    parts = urlsplit(request.url)
    query = [(key, kept) for key, kept in parse_qsl(parts.query) if key != name]
    return str(urlunsplit(parts._replace(query=urlencode([*query, (name, value)]))))


# -- actions ----------------------------------------------------------------------------------


@sends(telemetry.CHECK)
def check_and_claim(services: Services, request: func.HttpRequest) -> ClaimResponse | func.HttpResponse:
    principal = _SIGNED_IN.get()
    signed_in = principal.name if principal else None
    body = parse_body(request, ClaimRequest)
    telemetry.describe(_flow_dimensions(body.scope, body.flow))
    if body.wait:
        return _waited(request, *actions.check_and_wait(services, body, signed_in=signed_in))
    answer = actions.check_and_claim(services, body, signed_in=signed_in)
    telemetry.describe(_decision_dimensions(answer))
    return answer


@reads_query
@sends(telemetry.CHECK)
def wait_for_claim(services: Services, request: func.HttpRequest) -> ClaimResponse | func.HttpResponse:
    """A poll of Check and claim (wait): 202 while the holder holds the lease, else the answer (issue 25)."""
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    query = validate(WaitQuery, own_params(request, ["ticket"]))
    principal = _SIGNED_IN.get()
    waiting = waits.open_ticket(query.ticket, claim_id, bootstrap.get_cursor_seal())
    telemetry.describe({telemetry.SCOPE: waiting.scope})
    return _waited(request, *actions.poll(services, waiting, signed_in=principal.name if principal else None))


def _waited(
    request: func.HttpRequest, answer: ClaimResponse, waiting: Waiting | None
) -> ClaimResponse | func.HttpResponse:
    """The answer, or 202 with the poll address while the run still waits (the Logic Apps asynchronous pattern)."""
    telemetry.describe(_decision_dimensions(answer))
    if waiting is None:
        return answer
    ticket = waits.seal(waiting, answer.claim_id, bootstrap.get_cursor_seal())
    parts = urlsplit(request.url)
    path = f"{parts.path[: parts.path.rindex('/claims')]}/{waits.poll_list(answer.claim_id)}"
    # Only the host's own parameters (a function key in ``code``) go along with the ticket.
    kept = [(name, value) for name, value in parse_qsl(parts.query) if name.lower() in HOST_PARAMS]
    location = urlunsplit(parts._replace(path=path, query=urlencode([*kept, ("ticket", ticket)])))
    retry_after = answer.retry_after_seconds or 1
    return render(202, answer, {"Location": location, "Retry-After": str(retry_after)})


@sends(telemetry.PERFORM)
def perform_once(services: Services, request: func.HttpRequest) -> PerformResponse | func.HttpResponse:
    """Perform once (issue 34): the call made once; 202 to a poll address while another run makes it, if asked."""
    principal = _SIGNED_IN.get()
    body = parse_body(request, PerformRequest)
    telemetry.describe({**_flow_dimensions(body.scope, body.flow), telemetry.TARGET: body.target})
    answer, waiting = performing.perform_once(services, body, signed_in=principal.name if principal else None)
    return _performed(request, answer, waiting)


@reads_query
@sends(telemetry.PERFORM)
def wait_for_perform(services: Services, request: func.HttpRequest) -> PerformResponse | func.HttpResponse:
    """A poll of Perform once (wait): 202 while the holder makes the call, then what it got; it never calls."""
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    query = validate(WaitQuery, own_params(request, ["ticket"]))
    waiting = waits.open_ticket(query.ticket, claim_id, bootstrap.get_cursor_seal(), polls=waits.perform_poll_list)
    telemetry.describe({telemetry.SCOPE: waiting.scope})
    return _performed(request, *performing.poll(services, waiting, claim_id))


def _performed(
    request: func.HttpRequest, answer: PerformResponse, waiting: Waiting | None
) -> PerformResponse | func.HttpResponse:
    telemetry.describe(
        {
            telemetry.DECISION: answer.decision.value,
            telemetry.WARNINGS: ",".join(answer.warnings) or None,
            telemetry.LOOKED_UP: answer.looked_up,
        }
    )
    if waiting is None:
        return answer
    ticket = waits.seal(waiting, answer.claim_id, bootstrap.get_cursor_seal(), polls=waits.perform_poll_list)
    parts = urlsplit(request.url)
    path = f"{parts.path[: parts.path.rindex('/perform')]}/{waits.perform_poll_list(answer.claim_id)}"
    kept = [(name, value) for name, value in parse_qsl(parts.query) if name.lower() in HOST_PARAMS]
    location = urlunsplit(parts._replace(path=path, query=urlencode([*kept, ("ticket", ticket)])))
    retry_after = answer.retry_after_seconds or 1
    return render(202, answer, {"Location": location, "Retry-After": str(retry_after)})


@sends(telemetry.RESULT)
def record_result(services: Services, request: func.HttpRequest) -> ClaimView:
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    body = parse_body(request, RecordResultRequest)
    telemetry.describe({telemetry.OUTCOME: body.outcome.value, telemetry.RETRYABLE: body.retryable})
    claim = actions.record_result(services, claim_id, body)
    telemetry.describe(_flow_dimensions(claim.scope, claim.flow))
    return claim


def check_and_claim_many(services: Services, request: func.HttpRequest) -> ClaimManyAnswer:
    """Check and claim for each item, as if sent one after another in order (issue 24; ``oncegate.service.bulk``)."""
    principal = _SIGNED_IN.get()
    signed_in = principal.name if principal else None
    items = parse_body(request, BulkItems, limit=MAX_BULK_BODY_BYTES, items="items").items
    call = _call_digest(items)
    kept: list[list[telemetry.Answered]] = [[] for _ in items]
    answers = services.bulk.each(
        list(enumerate(items)),
        lambda place: _claim_item(services, *place, call, signed_in, kept[place[0]]),
        same=_same_key,
    )
    _send_item_events(kept, answers, "check_and_claim_many")
    return ClaimManyAnswer(value=[_claim_entry(item, answer) for item, answer in zip(items, answers, strict=True)])


def _call_digest(items: list[Any]) -> str:
    """A short digest of a bulk call's items: the same call sent again (a retry) has the same one."""
    # An item refused as JSON already stands as its refusal: its text is enough to tell the calls apart.
    canonical = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def item_run_id(run_id: str, call: str, index: int) -> str:
    """An item's own run: a Select gives every item the flow run's id, and two rows with one key must not both be
    that run asking again (each would be given the claim). The same call sent again names the same runs, so a
    retried call is given its claims back; another call, or another row, is another run."""
    return f"{run_id}#{call}.{index + 1}"


def _claim_item(
    services: Services, index: int, item: Any, call: str, signed_in: str | None, kept: list[telemetry.Answered]
) -> ClaimResponse:
    """One item of Check and claim many: the single call's service, telemetry and answer."""
    with _item_answer(telemetry.CHECK, "check_and_claim_many", kept):
        # An item is a Check and claim body but for wait: a bulk call answers at once (issue 25).
        if isinstance(item, dict) and "wait" in item:
            message = (
                "The items of Check and claim many do not wait: each is answered at once, in_progress included. "
                "Leave wait out, or send the record alone to Check and claim with wait."
            )
            raise InvalidRequest(message, details=[("wait", message)])
        body = item_body(ClaimItem, item)
        body = body.model_copy(update={"run_id": item_run_id(body.run_id, call, index)})
        telemetry.describe(_flow_dimensions(body.scope, body.flow))
        answer = actions.check_and_claim(services, body, signed_in=signed_in)
        telemetry.describe(_decision_dimensions(answer))
        return answer


def _same_key(place: tuple[int, Any]) -> Hashable:
    """The claim an item of Check and claim many is for, as far as its scope and key tell before it is read."""
    item = place[1]
    try:
        return normalise_scope(item["scope"]), normalise_key(item["key"])
    except (TypeError, KeyError, InvalidRequest):
        return id(item)  # refused when read: its place in no claim's order matters


def _claim_entry(item: Any, answer: ClaimResponse | OnceGateError) -> ClaimManyEntry:
    reference = item.get("reference") if isinstance(item, dict) else None
    given = {"reference": reference} if isinstance(reference, str) else {}
    if isinstance(answer, OnceGateError):
        return ClaimManyEntry(**given, error=error_info(answer))
    return ClaimManyEntry(**_fields(answer), **given)


def record_results(services: Services, request: func.HttpRequest) -> RecordResultsAnswer:
    """Record result for each item (issue 24): items for the same claim one after another, in order."""
    items = parse_body(request, BulkItems, limit=MAX_BULK_BODY_BYTES, items="items").items
    kept: list[list[telemetry.Answered]] = [[] for _ in items]
    answers = services.bulk.each(
        list(enumerate(items)), lambda place: _result_item(services, place[1], kept[place[0]]), same=_same_claim
    )
    _send_item_events(kept, answers, "record_results")
    return RecordResultsAnswer(value=[_result_entry(item, answer) for item, answer in zip(items, answers, strict=True)])


def _result_item(services: Services, item: Any, kept: list[telemetry.Answered]) -> ClaimView:
    """One item of Record results: the single call's service, telemetry and answer."""
    with _item_answer(telemetry.RESULT, "record_results", kept):
        body = item_body(ResultItem, item)
        if not CLAIM_ID_PATTERN.fullmatch(body.claim_id):
            raise NotFound(f"No claim has the id {body.claim_id!r}.", target="claimId")
        telemetry.describe({telemetry.OUTCOME: body.outcome.value, telemetry.RETRYABLE: body.retryable})
        result = RecordResultRequest(**{name: getattr(body, name) for name in RecordResultRequest.model_fields})
        claim = actions.record_result(services, body.claim_id, result)
        telemetry.describe(_flow_dimensions(claim.scope, claim.flow))
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


def _fields(model: BaseModel) -> dict[str, Any]:
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
            # Caught inside the answer, as respond catches a single call's: an answer left by an exception is none.
            setting = exc.target if isinstance(exc, NotConfigured) else None
            telemetry.describe({telemetry.HTTP_STATUS: exc.status, telemetry.ERROR_CODE: exc.code})
            telemetry.describe({telemetry.SETTING: setting})
            refused = exc
        else:
            telemetry.describe({telemetry.HTTP_STATUS: 200})
    if refused is not None:
        raise refused


def _send_item_events(
    kept: list[list[telemetry.Answered]], answers: Sequence[BaseModel | OnceGateError], action: str
) -> None:
    """Each item's event, for the answer it was finally given: an item answered ``store_unavailable`` sends
    Unavailable, whether it met the outage, was not tried after it, or was lost with a commit that failed."""
    for made, answer in zip(kept, answers, strict=True):
        if isinstance(answer, StoreUnavailable):
            untried = telemetry.Answered(telemetry.UNAVAILABLE, {telemetry.ACTION: action})
            made = [event.unavailable(answer.code) for event in made or [untried]]
        for event in made:
            event.send()


def release_claim(services: Services, request: func.HttpRequest) -> ClaimView:
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    return actions.release(services, claim_id, parse_body(request, ReleaseRequest))


def renew_claim(services: Services, request: func.HttpRequest) -> ClaimView:
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    return actions.heartbeat(services, claim_id, parse_body(request, HeartbeatRequest))


def get_claim(services: Services, request: func.HttpRequest) -> ClaimView:
    return _with_history_link(request, *actions.get_claim(services, route_id(request, "claimId", CLAIM_ID_PATTERN)))


def lookup_claim(services: Services, request: func.HttpRequest) -> ClaimView:
    return _with_history_link(request, *actions.lookup(services, parse_body(request, LookupRequest)))


@reads_query
def list_claim_history(services: Services, request: func.HttpRequest) -> ClaimHistory:
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    list_name = _history_list(claim_id)
    query = validate(ListPageQuery, query_params(request, ListPageQuery, list_name))
    entries, cursor = actions.history(services, claim_id, query)
    return ClaimHistory(value=entries, next_link=next_link(request, cursor, list_name))


def _history_list(claim_id: str) -> str:
    # Each claim's history is a list of its own: a cursor of one claim's history is refused by another's.
    return f"claims/{claim_id}/history"


def _with_history_link(request: func.HttpRequest, view: ClaimView, cursor: str | None) -> ClaimView:
    """The claim with the link to its history's next page, built on the request's own address (Get claim's or
    Look up claim's): both sit under ``.../claims/``."""
    if cursor is None:
        return view
    parts = urlsplit(request.url)
    path = f"{parts.path[: parts.path.rindex('/claims/')]}/{_history_list(view.claim_id)}"
    sealed = bootstrap.get_cursor_seal().seal(cursor, _history_list(view.claim_id))
    link = urlunsplit(parts._replace(path=path, query=urlencode([("cursor", sealed)])))
    return view.model_copy(update={"history_next_link": link})


@reads_query
def list_claims_needing_attention(services: Services, request: func.HttpRequest) -> ClaimAttentionList | ClaimList:
    """The claims needing attention (``attention=true``), or the claims found by where they came from (issue 16)."""
    if "attention" not in request.params and FIND_FILTERS & set(request.params):
        return list_claims(services, request)
    query = validate(ListClaimsQuery, {"attention": "false", **query_params(request, ListClaimsQuery, "claims")})
    if not query.attention:
        raise InvalidRequest(
            "Add attention=true for the claims that need a person, or filter by source, reference, status or since "
            "(a list of every claim is not offered). Get claim and Look up claim show any one claim.",
            target="attention",
        )
    claims, cursor = actions.claims_needing_attention(services, query)
    return ClaimAttentionList(value=claims, next_link=next_link(request, cursor, "claims"))


@reads_query
def list_claims(services: Services, request: func.HttpRequest) -> ClaimList:
    """Claims by where they came from, at ``GET /api/claims`` with a filter and at ``GET /api/claim-list``.

    The second route is the connector's List claims: a connector has one action per path and method, and
    ``GET /api/claims`` is List claims needing attention's.
    """
    filters = validate(FindClaimsQuery, query_params(request, FindClaimsQuery, "claims-found"))
    if not FIND_FILTERS & set(request.params):
        raise InvalidRequest(
            "Give source, reference, status or since: a list of every claim is not offered.", target="source"
        )
    found, cursor = actions.list_claims(services, filters)
    return ClaimList(value=found, next_link=next_link(request, cursor, "claims-found"))


@sends(telemetry.REVIEW)
def review_claim(services: Services, request: func.HttpRequest) -> ClaimView:
    claim_id = route_id(request, "claimId", CLAIM_ID_PATTERN)
    claim = actions.review(services, claim_id, signed_reviewer(parse_body(request, ReviewClaimRequest)))
    telemetry.describe({telemetry.SCOPE: claim.scope})
    return claim


def report_conflict(services: Services, request: func.HttpRequest) -> ConflictView:
    return actions.report_conflict(services, parse_body(request, ReportConflictRequest))


@reads_query
def list_conflicts(services: Services, request: func.HttpRequest) -> ConflictList:
    params = query_params(request, ListConflictsQuery, "conflicts")
    statuses = [*(status.value for status in ConflictStatus), "all"]
    if params.get("status") not in (None, *statuses):
        # Said here: the model's own refusal would not name "all", which only this action reads.
        raise InvalidRequest(
            f"status must be {', '.join(statuses[:-1])} or {statuses[-1]}, not {params['status']!r}.", target="status"
        )
    if params.get("status") == "all":
        params["status"] = None
    conflicts, cursor = actions.list_conflicts(services, validate(ListConflictsQuery, params))
    return ConflictList(value=conflicts, next_link=next_link(request, cursor, "conflicts"))


@reads_query
def poll_conflicts(services: Services, request: func.HttpRequest) -> func.HttpResponse:
    """The Logic Apps polling contract: 202 while nothing is new, 200 with the new conflicts.

    Either way ``Location`` carries the state to poll with next, so each conflict is delivered once.
    """
    query = validate(PollConflictsQuery, query_params(request, PollConflictsQuery, "conflict-events"))
    conflicts, state = actions.poll_conflicts(services, scope=query.scope, state=query.state, limit=POLL_BATCH_SIZE)
    sealed = bootstrap.get_cursor_seal().seal(state, "conflict-events")
    # A full batch may have more behind it: poll again at once, so a backlog drains without waiting (issue 13).
    wait = 0 if len(conflicts) >= POLL_BATCH_SIZE else POLL_INTERVAL_SECONDS
    headers = {"Location": _with_param(request, "state", sealed), "Retry-After": str(wait)}
    if not conflicts:
        return func.HttpResponse(status_code=202, headers=headers)
    return render(200, ConflictList(value=conflicts), headers)


def get_conflict(services: Services, request: func.HttpRequest) -> ConflictView:
    return actions.get_conflict(services, route_id(request, "conflictId", CONFLICT_ID_PATTERN))


@sends(telemetry.CONFLICT_RESOLVED)
def resolve_conflict(services: Services, request: func.HttpRequest) -> ConflictView:
    conflict_id = route_id(request, "conflictId", CONFLICT_ID_PATTERN)
    resolution = signed_reviewer(parse_body(request, ResolveConflictRequest))
    telemetry.describe({telemetry.RESOLUTION: resolution.decision.value})
    conflict = actions.resolve_conflict(services, conflict_id, resolution)
    telemetry.describe({telemetry.SCOPE: conflict.scope, telemetry.ORIGIN: conflict.origin.value})
    return conflict


@reads_query
def list_flows(services: Services, request: func.HttpRequest) -> FlowList:
    flows, cursor = actions.list_flows(services, _page_query(request, "flows"))
    return FlowList(value=flows, next_link=next_link(request, cursor, "flows"))


def register_flow(services: Services, request: func.HttpRequest) -> FlowView:
    return actions.register_flow(services, parse_body(request, RegisterFlowRequest))


@reads_query
def list_flow_overlaps(services: Services, request: func.HttpRequest) -> OverlapList:
    overlaps, cursor = actions.list_overlaps(services, _page_query(request, "flows/overlaps"))
    return OverlapList(value=overlaps, next_link=next_link(request, cursor, "flows/overlaps"))


@reads_query
def list_scopes(services: Services, request: func.HttpRequest) -> ScopeList:
    scopes, cursor = actions.list_scopes(services, _page_query(request, "scopes"))
    return ScopeList(value=scopes, next_link=next_link(request, cursor, "scopes"))


def set_scope(services: Services, request: func.HttpRequest) -> ScopeView:
    return actions.set_scope(services, parse_body(request, SetScopeRequest))


def _page_query(request: func.HttpRequest, list_name: str) -> ListPageQuery:
    return validate(ListPageQuery, query_params(request, ListPageQuery, list_name))


def _flow_dimensions(scope: str, flow: FlowRef | None) -> Dimensions:
    """The scope (lowercase, as stored) and the flow of an answer, for its telemetry event."""
    return {
        telemetry.SCOPE: scope.lower(),
        telemetry.FLOW_NAME: flow.name if flow else None,
        telemetry.FLOW_ENVIRONMENT: flow.environment if flow else None,
    }


def _decision_dimensions(answer: ClaimResponse) -> Dimensions:
    """The decision and warnings of a Check and claim answer, and the other flow a copy of a flow met."""
    holder = answer.holder.flow if answer.holder else answer.result.flow if answer.result else None
    copy = holder if ANOTHER_FLOW_COPY in answer.warnings else None
    return {
        telemetry.DECISION: answer.decision.value,
        telemetry.WARNINGS: ",".join(answer.warnings) or None,
        telemetry.CHANGED_PARTS: json.dumps(answer.changed_parts) if answer.changed_parts else None,
        telemetry.HOLDER_FLOW_NAME: copy.name if copy else None,
        telemetry.HOLDER_FLOW_ENVIRONMENT: copy.environment if copy else None,
    }


def health(services: Services, request: func.HttpRequest) -> Health:
    """The service's health, naming the store it runs on (and the store that does not answer)."""
    where = services.store_location
    try:
        answer = actions.health(services)
    except StoreUnavailable as exc:
        if where is None:
            raise
        raise StoreUnavailable(f"The {services.store.kind} store at {where} does not answer: {exc.message}") from exc
    return answer.model_copy(update={"store_location": where})


def unknown_route(app: func.FunctionApp, request: func.HttpRequest) -> func.HttpResponse:
    """404 for a path no action serves, 405 naming the allowed methods for a known path.

    Not an action, so not through :func:`respond`: it reads neither the services nor the caller, and
    answers the same whether or not the app is configured.
    """
    path = request.route_params.get("path", "")
    # Named as the caller sent it: the host's route parameter of an empty catch-all is not text (issue 13).
    sent = urlsplit(request.url).path
    allowed = allowed_methods(function_routes(app), path.strip("/"))
    if allowed:
        message = f"{request.method} is not allowed at {sent}; use {', '.join(allowed)}."
        return render_error(MethodNotAllowed(message, allowed=allowed))
    return render_error(NotFound(f"No action is served at {sent}.", target="path"))
