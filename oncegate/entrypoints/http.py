"""The one HTTP pipeline every action runs, driven by its entry of the operation table.

``function_app.py`` declares one Azure function per entry (:func:`function`); each runs
:func:`respond`: the caller signed in and checked for the entry's role, the query parameters it takes
(any other is refused), the route's ids and the strict JSON body read as the entry declares them
(``oncegate.entrypoints.parse``), the entry's steps run (:func:`perform`: parse, the sensitive-data check,
serve, render, as the entry of :mod:`oncegate.entrypoints.operations` declares them), and the answer or a
Microsoft REST API guidelines error body rendered. Every answer sends the entry's telemetry event, or
``OnceGate.Unavailable`` for a 503. Bad input is refused before any write, and never becomes a 500.

The services are the process's, built by the composition root (``oncegate.bootstrap``) on the first request
and taken as they are on every later one. The bulk actions and the tests' ``Gate`` run an entry's steps
without HTTP (:func:`answer`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import azure.functions as func
from pydantic import BaseModel
from pydantic_core import to_json

from oncegate import bootstrap, telemetry
from oncegate.bootstrap import Services
from oncegate.config import AuthMode, ConfigError
from oncegate.cursors import CursorSeal
from oncegate.entrypoints import waits
from oncegate.entrypoints.operations import listed_entry
from oncegate.entrypoints.operations.functions import Listed
from oncegate.entrypoints.operations.table import Call, Members, Operation, Reply
from oncegate.entrypoints.parse import (
    HOST_PARAMS,
    MAX_BODY_BYTES,
    MAX_BULK_BODY_BYTES,
    ROUTE_IDS,
    checked_id,
    next_link,
    own_params,
    parse_body,
    query_params,
    validate,
)
from oncegate.entrypoints.principal import Principal, Role
from oncegate.errors import (
    MethodNotAllowed,
    NotConfigured,
    NotFound,
    OnceGateError,
    RoleMissing,
    StoreUnavailable,
)

logger = logging.getLogger(__name__)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_BULK_BODY_BYTES",
    "answer",
    "body_limit",
    "function",
    "perform",
    "render",
    "render_error",
    "respond",
]

JSON_HEADERS = {"Content-Type": "application/json; charset=utf-8"}


def function(listed: Listed) -> Callable[[func.HttpRequest], func.HttpResponse]:
    """The Azure function of one entry, named as the entry: the worker indexes it by that name, and binds ``req``.

    The entry itself is read from its module of the table when the function is first called (:func:`entry`).
    """

    def serve(req: func.HttpRequest) -> func.HttpResponse:
        try:
            operation = entry(listed)
        except Exception:
            # An entry whose module does not import (a broken deployment) answers the contract's 500 like any
            # other failure, and is tried again on the next call: the cache keeps only entries that loaded.
            logger.exception("The action %s could not be loaded", listed.name)
            return render_error(OnceGateError("The service failed unexpectedly; nothing more is known."))
        return respond(req, operation)

    serve.__name__ = serve.__qualname__ = listed.name
    return serve


@functools.cache
def entry(listed: Listed) -> Operation:
    """The entry of the table a listed function serves, its module imported on first use (issue 36's cold start).

    As function_app imports the app's modules, the collector waits while an entry's are imported (its models, its
    service) and its own models are built (their validators and serializers, which its first call builds anyway):
    nothing they make is garbage, and the collector walked it again and again while it was made (about 0.5 ms of a
    first claim). Once they are made, it leaves them out of every later collection (gc.freeze).
    """
    with _collector_paused():
        operation = listed_entry(listed)
        for model in (
            operation.body,
            operation.query_model,
            None if operation.as_members else operation.response_model,
        ):
            if model is not None:
                model.model_rebuild()
    return operation


# The entries being made at once (their first calls, in handler threads of their own), and whether the collector ran
# before the first of them turned it off: the last to end turns it back on. Each on its own, a thread that asked while
# another had it off and turned it off after that one turned it on again left it off for the worker's life.
_making = threading.Lock()
_made_at_once = 0
_collected_before = True


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    global _made_at_once, _collected_before
    with _making:
        if not _made_at_once:
            _collected_before = gc.isenabled()
            gc.disable()
        _made_at_once += 1
    try:
        yield
    finally:
        with _making:
            _made_at_once -= 1
            if not _made_at_once:
                gc.freeze()
                if _collected_before:
                    gc.enable()


def respond(request: func.HttpRequest, operation: Operation) -> func.HttpResponse:
    """Run one entry for a caller holding its role and render its answer or its error, sending its event."""
    if telemetry.sending is False:  # off: nothing to time, count or send, so no code of telemetry runs
        return _answer(request, operation)
    with telemetry.answering(operation.event, operation.name):
        response = _answer(request, operation)
        telemetry.describe({telemetry.HTTP_STATUS: response.status_code})
        return response


def _answer(request: func.HttpRequest, operation: Operation) -> func.HttpResponse:
    try:
        signed_in = authorize(request, operation.role)
        if operation.query is None and operation.instead is None:
            own_params(request, ())
        # The process's services once built: the composition root is called only until it has built them.
        services = bootstrap.services_built or bootstrap.get_services()
        operation = (operation.instead and operation.instead(request.params)) or operation
        call = read(request, operation, signed_in, services.cursor_seal)
        return _rendered(call, perform(operation, services, call))
    except OnceGateError as exc:
        return _refused(exc)
    except ConfigError as exc:
        # function_app.py logged it once at start and loaded every function anyway: each answers this
        # until the setting is fixed (the platform restarts the app when a setting changes).
        return _refused(NotConfigured(f"OnceGate is not configured: {exc}", target=exc.setting))
    except Exception:
        logger.exception("Unexpected error in %s %s", request.method, urlsplit(request.url).path)
        return _refused(OnceGateError("The service failed unexpectedly; nothing more is known."))


def perform(operation: Operation, services: Services, call: Call[Any, Any], command: Any = None) -> Reply:
    """The entry's steps for one call: parse (unless given the command), check what the request stores, serve and
    render; the answer, its warnings added, described. What the bulk actions and the tests' ``Gate`` run without
    HTTP too (:func:`answer`)."""
    command = operation.parse(call) if command is None else command
    stores = operation.stores
    warnings = services.sensitive_data.check(call.body, stores(call, command)) if stores else []
    result = operation.serve(services, call, command)
    rendered = operation.render(call, result)
    reply = rendered if isinstance(rendered, Reply) else Reply(200, rendered)
    if warnings and reply.model is not None:
        reply = reply._replace(model=_warned(reply.model, warnings))
    describe = operation.describe
    if telemetry.sending and describe is not None and reply.model is not None and telemetry.describing():
        telemetry.describe(describe(reply.model))
    return reply


def _warned(answer: BaseModel | Members, warnings: list[str]) -> BaseModel | Members:
    """The answer with ``warnings`` after its own (the request's sensitive data: ``services.sensitive_data``)."""
    if isinstance(answer, dict):
        return {**answer, "warnings": [*answer["warnings"], *warnings]}
    earlier = getattr(answer, "warnings", None) or []
    return answer.model_copy(update={"warnings": [*earlier, *warnings]})


def answer(operation: Operation, services: Services, call: Call[Any, Any], command: Any = None) -> Any:
    """The entry's response model for a call without HTTP (Record results' items, the tests' ``Gate``): an answer
    rendered as its members is validated as the entry's response model, as a client reads it."""
    model = perform(operation, services, call, command).model
    return operation.response_model.model_validate(model) if isinstance(model, dict) else model


def read(
    request: func.HttpRequest, operation: Operation, signed_in: Principal | None, seal: CursorSeal
) -> Call[Any, Any]:
    """The request as ``operation`` declares it: its route's ids, its query (cursors opened by ``seal``), its body."""
    given = request.route_params
    route = operation.route
    # The ids the route names (``claimId`` in ``claims/{claimId}/result``), each checked for its shape.
    ids = {
        name: checked_id(name, str(given.get(name, "")), shape)
        for name, shape in ROUTE_IDS.items()
        if f"{{{name}}}" in route
    }
    own = route.format(**ids)
    list_name = operation.list_name or own
    params: dict[str, Any] = {}
    query = None
    if operation.query is not None:  # the model read only for an entry with a query (a name is looked up then)
        model = operation.query_model
        assert model is not None
        params = query_params(request, model, list_name, seal)
        query = validate(model, operation.adjust(params) if operation.adjust else params)
    body = None
    model = operation.reads or operation.body
    if model is not None:
        body = parse_body(request, model, limit=operation.body_limit, items=operation.items)
    return Call(
        body=body,
        query=query,
        params=params,
        ids=ids,
        caller=signed_in.name if signed_in else None,
        address=request.url,
        root=_root(request.url, own),
        link=lambda cursor: next_link(request, cursor, list_name, seal),
        seal=seal,
    )


def _root(address: str, own: str) -> str:
    """The address every route sits below (``https://host/api/``): the request's own, without its route's path."""
    parts = urlsplit(address)
    path = parts.path.rstrip("/")
    # The host matches routes whatever their case.
    root = path[: -len(own)] if path.lower().endswith(f"/{own.lower()}") else f"{path}/"
    return str(urlunsplit(parts._replace(path=root, query="", fragment="")))


def _rendered(call: Call[Any, Any], reply: Reply) -> func.HttpResponse:
    headers = dict(reply.headers)
    if reply.waiting is not None:
        headers |= _poll_address(call, reply)
    if reply.model is None:
        return func.HttpResponse(status_code=reply.status, headers=headers)
    return render(reply.status, reply.model, headers)


def _poll_address(call: Call[Any, Any], reply: Reply) -> dict[str, str]:
    """Where the engine polls a waiting run (the Logic Apps asynchronous pattern), and when (issue 25)."""
    assert reply.waiting is not None
    if isinstance(reply.model, dict):  # Check and claim's answer, rendered as its members
        retry_after = reply.model.get("retryAfterSeconds")
    else:  # Perform once's model
        retry_after = getattr(reply.model, "retry_after_seconds", None)
    # Sealed for the address it is polled at, a route of the table: Check and claim's, or Perform once's (issue 34).
    ticket = waits.seal(reply.waiting, reply.at, call.sealing)
    # Only the host's own parameters (a function key in ``code``) go along with the ticket.
    kept = [(name, value) for name, value in parse_qsl(urlsplit(call.address).query) if name.lower() in HOST_PARAMS]
    location = f"{call.root}{reply.at}?{urlencode([*kept, ('ticket', ticket)])}"
    return {"Location": location, "Retry-After": str(retry_after or 1)}


def _refused(exc: OnceGateError) -> func.HttpResponse:
    if telemetry.sending:
        from oncegate.entrypoints import error_map

        setting = exc.target if isinstance(exc, NotConfigured) else None
        telemetry.describe({telemetry.ERROR_CODE: error_map.code(exc), telemetry.SETTING: setting})
    return render_error(exc)


def render(status: int, model: BaseModel | Members, headers: dict[str, str] | None = None) -> func.HttpResponse:
    """The answer's JSON: a model's dump by its wire names, None left out; members (Check and claim's) written by
    the same serializer as the model's dump writes them (times, numbers, text), their None already left out."""
    if isinstance(model, dict):
        body: str | bytes = to_json(model, by_alias=True, exclude_none=True, inf_nan_mode="null")
    else:
        body = model.model_dump_json(by_alias=True, exclude_none=True)
    return func.HttpResponse(body, status_code=status, headers={**JSON_HEADERS, **(headers or {})})


def render_error(exc: OnceGateError) -> func.HttpResponse:
    # The error table and the error body's models come with the first refusal: an answered request never reads them.
    from oncegate.entrypoints import error_map
    from oncegate.models import ErrorBody

    said = error_map.answered(exc)
    if said.status >= 500 and not isinstance(exc, StoreUnavailable):
        logger.error("Answering %s: %s", said.code, exc.message)

    return render(said.status.value, ErrorBody(error=error_map.error_info(exc)), error_map.headers(exc))


def authorize(request: func.HttpRequest, role: Role | None) -> Principal | None:
    """The signed-in caller in Entra ID mode, checked for ``role``; None with function keys or no role.

    With function keys the host has already checked the key. In Entra ID mode the caller is who the
    bearer token names, validated here (``bearer``); ``X-MS-CLIENT-PRINCIPAL`` is never read, in
    either mode: it proves nothing where the platform does not block unauthenticated callers.
    """
    settings = bootstrap.settings_read or bootstrap.get_settings()
    if role is None or settings.auth is not AuthMode.ENTRA:
        return None
    if settings.entra is None:
        raise ConfigError("ONCEGATE_ENTRA_TENANT_ID", "ONCEGATE_AUTH=entra needs the Entra ID settings.")
    # Imported in Entra ID mode alone: an app on function keys never loads the token checks (issue 36).
    from oncegate.entrypoints import bearer

    principal = bearer.validator(settings.entra).principal(request.headers.get("Authorization"))
    if not principal.may(role):
        raise RoleMissing(f"{principal.name} lacks the app role {role.value} for this action.")
    return principal


def body_limit(path: str) -> int:
    """The most bytes a body may have at ``path`` (below ``/api/``): a bulk call's body holds 100 items."""
    return _body_limits().get(path.strip("/"), MAX_BODY_BYTES)


@functools.cache
def _body_limits() -> dict[str, int]:
    # Read from the table when first asked: its bulk entries perform their items through this module.
    from oncegate.entrypoints.operations import OPERATIONS

    return {operation.route: operation.body_limit for operation in OPERATIONS if operation.body_limit != MAX_BODY_BYTES}


def unknown_route(app: func.FunctionApp, request: func.HttpRequest) -> func.HttpResponse:
    """404 for a path no action serves, 405 naming the allowed methods for a known path.

    Not an action, so not through :func:`respond`: it reads neither the services nor the caller, and
    answers the same whether or not the app is configured.
    """
    from oncegate.entrypoints.routes import allowed_methods, function_routes  # what an action never reads

    path = request.route_params.get("path", "")
    # Named as the caller sent it: the host's route parameter of an empty catch-all is not text (issue 13).
    sent = urlsplit(request.url).path
    allowed = allowed_methods(function_routes(app), path.strip("/"))
    if allowed:
        message = f"{request.method} is not allowed at {sent}; use {', '.join(allowed)}."
        return render_error(MethodNotAllowed(message, allowed=allowed))
    return render_error(NotFound(f"No action is served at {sent}.", target="path"))
