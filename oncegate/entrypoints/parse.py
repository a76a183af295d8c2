"""Reading a request, as every entry of the operation table shares it: bodies, queries, route ids, commands,
and personal data in what it stores.

The pipeline (:mod:`oncegate.entrypoints.http`) reads each request with these before an entry's own
``parse`` makes the service's command (:mod:`oncegate.service.commands`), so that a service never
sees a wire model. Bad input is refused here before any write, and never becomes a 500: bodies are
strict JSON (below), an action refuses query parameters it does not take, and cursors are
opened here, at the edge (``oncegate.cursors``): only a cursor the list handed out gets through.

A body is read as strict JSON (:func:`read_object`): one object, unique members, finite numbers, Unicode text.

Python's ``json`` accepts what the contract refuses: ``NaN`` and ``Infinity``, numbers that
overflow to infinity (``1e400``, which would be stored as ``null``: data silently altered), a
member given twice (the last one silently wins), and a lone surrogate written as an escape
(``"\\ud800"``), which is not a character: UTF-8 cannot encode it, so every digest, HMAC and
canonical JSON made of the string failed with a 500 (issue 31; I-JSON, RFC 7493 §2.1, refuses it).
The decoder's hooks mark each where it occurs (an escape in the text, for a surrogate), and a walk
over the decoded body names the first by its path, as a validation error names a field. Done once
here, it holds for every string of every body, whatever its model declares.

Personal data in what a request stores besides its key is found by one walk of its stored fields
(:class:`SensitiveDataGuard`), under one policy. Checked at the edge, on the wire's request, before its
command reaches a service: the fields are named as the caller sent them (``data.customer.email``), and a
refused request has read nothing.

Flows store result data, target record ids, error texts, release reasons and conflict reports as
sent; people store review and resolution notes, a flow's notes and a scope's description. Each
string there (in JSON, every member's name and value and every array item, however nested) is read
by the detectors of :mod:`oncegate.domain.sensitive`, with the names of the members that hold it
(``cardNumber`` says its digits are a card's). Neighbouring strings, of one object or one array,
are also read together, as one text: a card number split into two fields (``"4111 1111"``,
``"1111 1111"``) is one card. All under ``ONCEGATE_SENSITIVE_DATA``:

- ``reject``: the request is refused before the service reads or writes anything for it, with
  ``400 sensitive_data`` naming each field (``data.customer.email``), never the value;
- ``warn``: it is stored, and the answer carries the warning ``sensitive_data``;
- ``off``: nothing is looked at.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import re
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError

from oncegate.cursors import CursorSeal
from oncegate.domain.limits import MAX_ITEMS, json_size
from oncegate.domain.records import Flow
from oncegate.domain.sensitive import SensitivePolicy, sensitive_findings
from oncegate.domain.warnings import SENSITIVE_DATA
from oncegate.errors import InvalidRequest, NotFound, SensitiveData, TooLarge
from oncegate.service.commands import Paging

if TYPE_CHECKING:
    # Named in annotations only: the command's client reads the operation table without the Functions library.
    import azure.functions as func

    from oncegate.models import FlowRef, ListPageQuery, ReportConflictRequest

logger = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)

MAX_BODY_BYTES = 64 * 1024
# A bulk call's body: its items, each up to a single call's body, and room for the list around them (issue 24).
MAX_BULK_BODY_BYTES = (MAX_ITEMS + 1) * MAX_BODY_BYTES
# The ids a route may carry, each checked before anything is read: a malformed one is no record (404). Compiled (re's
# cache) where a route first carries one: Check and claim's carries none, and a new process compiles no pattern it
# never matches (issue 36's cold start).
ROUTE_IDS = {"claimId": r"[a-z2-7]{52}", "conflictId": r"[a-z2-7]{24}"}
CLAIM_ID_PATTERN, CONFLICT_ID_PATTERN = ROUTE_IDS["claimId"], ROUTE_IDS["conflictId"]

# The host reads the function key from ``code`` (ONCEGATE_AUTH=key): every action takes it, none reads it.
HOST_PARAMS = frozenset({"code"})
# Query parameters holding a sealed cursor.
CURSOR_PARAMS = ("cursor", "state")


def parse_body(
    request: func.HttpRequest, model: type[Model], *, limit: int = MAX_BODY_BYTES, items: str | None = None
) -> Model:
    """The JSON object body as ``model``; 413 when over ``limit`` bytes, 400 naming each bad field.

    ``items`` names a bulk call's list, whose items are refused one by one (see :func:`read_object`).
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
        details = [(_target(error["loc"], error["type"]), _message(error)) for error in exc.errors()]
        too_large = [message for _, message in details if "bytes as JSON" in message]
        if too_large:
            raise TooLarge(too_large[0], target=details[0][0]) from exc
        raise InvalidRequest(f"The request is not valid: {details[0][1]} ({details[0][0]}).", details=details) from exc


def _target(location: tuple[int | str, ...], kind: str = "") -> str:
    if kind == RECURSION:
        # The path down a value nested past the validator's depth is hundreds of parts of the JSON value's own
        # ("payload.list.0.list.0..."): the field the caller sent is what it names.
        location = location[:1]
    # Tagged-union and JSON value internals add location parts a caller never wrote; keep the field path.
    return ".".join(str(part) for part in location if not str(part).startswith(("function-", "json-"))) or "body"


def _message(error: Any) -> str:
    if error["type"] == RECURSION:
        return "nests objects and arrays deeper than this service reads"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


# pydantic's error for a value nested past its validator's depth (about 250 levels).
RECURSION = "recursion_depth_exceeded"


def checked_id(name: str, value: str, pattern: str) -> str:
    """A route's id as given; 404 naming it when it has not the id's shape, so no store reads it."""
    if not re.fullmatch(pattern, value):
        raise NotFound(f"No {'claim' if name == 'claimId' else 'conflict'} has the id {value!r}.", target=name)
    return value


def own_params(request: func.HttpRequest, taken: Collection[str]) -> dict[str, Any]:
    """The caller's query parameters; 400 naming any the action does not take, or any given more than once,
    so none is silently ignored."""
    params = {name: value for name, value in request.params.items() if name.lower() not in HOST_PARAMS}
    unknown = sorted(set(params) - set(taken))
    if unknown:
        takes = ", ".join(sorted(taken)) or "none"
        raise InvalidRequest(
            f"{unknown[0]!r} is not a parameter of this action, which takes {takes}.",
            details=[(name, "not a parameter of this action") for name in unknown],
        )
    _refuse_repeated(request.url)
    return params


def _refuse_repeated(address: str) -> None:
    """400 naming a query parameter given more than once (``?top=5&top=500``), as a member given twice in a body
    is: ``params`` holds one value a name, so the others would be silently dropped (the local server kept the
    last). Read from the address, as the caller sent it."""
    if "&" not in address:  # one parameter or none: nothing to repeat
        return
    seen: set[str] = set()
    for name, _ in parse_qsl(urlsplit(address).query, keep_blank_values=True):
        if name.lower() in HOST_PARAMS:
            continue
        if name in seen:
            raise InvalidRequest(
                f"The query parameter {name!r} is given more than once; give it once.",
                details=[(name, "given more than once")],
            )
        seen.add(name)


def query_params(request: func.HttpRequest, model: type[BaseModel], list_name: str, seal: CursorSeal) -> dict[str, Any]:
    """The parameters ``model`` declares, its cursor opened: only a cursor this list handed out gets through."""
    params = own_params(request, [field.alias or name for name, field in model.model_fields.items()])
    for name in CURSOR_PARAMS:
        if params.get(name):  # blank means none, as it did before cursors were sealed
            params[name] = seal.open(params[name], list_name, target=name)
    return params


def next_link(request: func.HttpRequest, cursor: str | None, list_name: str, seal: CursorSeal) -> str | None:
    """The next page's URL, its cursor sealed for this list; None on the last page."""
    if cursor is None:
        return None
    return with_param(request.url, "cursor", seal.seal(cursor, list_name))


def with_param(address: str, name: str, value: str) -> str:
    """An address with one query parameter set, e.g. the next page's cursor."""
    parts = urlsplit(address)
    query = [(key, kept) for key, kept in parse_qsl(parts.query) if key != name]
    return str(urlunsplit(parts._replace(query=urlencode([*query, (name, value)]))))


# -- what several commands share ------------------------------------------------------------------------------


def flow_of(ref: FlowRef | None) -> Flow | None:
    return _flow(ref.name, ref.environment) if ref else None


# The few flows that call an instance, each made once (issue 36): the same record every request of a flow names, so
# the inventory's tallies find it by identity, without comparing names.
@functools.lru_cache(maxsize=1024)
def _flow(name: str, environment: str) -> Flow:
    return Flow(name, environment)


def run_of(request: ReportConflictRequest) -> dict[str, Any]:
    """What Report conflict says as Check and claim does: the key, its business data, and the run asking."""
    return {
        "scope": request.scope,
        "key": request.key,
        "payload": request.payload,
        "fingerprint": request.fingerprint,
        "source": request.source,
        "run_id": request.run_id,
        "flow": flow_of(request.flow),
    }


def paging(query: ListPageQuery) -> Paging:
    return Paging(limit=query.top, cursor=query.cursor)


# -- strict JSON ----------------------------------------------------------------------------------------------

# A path into the body as a linked list (parent, part): extending one costs the same at any depth.
Path: TypeAlias = tuple["Path", str] | None
# UTF-8 cannot carry a surrogate (D800 to DFFF): one can only come from an escape. A surrogate pair decodes to
# one character, and an escaped backslash before "ud800" is plain text; the walk tells those apart.
# Compiled (re's cache) for the first body holding a \u escape, which a flow's seldom does (issue 36's cold start).
SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F]"


class _NonFinite(str):
    """A number that is not finite, as it was written."""


class _Duplicated(dict[str, Any]):
    """An object that gave ``member`` more than once."""

    member = ""


def read_object(raw: bytes, *, items: str | None = None) -> dict[str, Any]:
    """The body as a JSON object; 400 naming the body, or the field at fault, for anything else.

    With ``items``, the name of a bulk call's list: a defect inside one item refuses that item alone. The item
    is replaced by its refusal (an ``InvalidRequest`` naming the field within the item, as the single call's
    refusal would), and the caller answers it in the item's place; a defect outside the items refuses the body.
    """
    marked: list[bool] = []

    def number(literal: str) -> float | str:
        value = float(literal)
        if math.isfinite(value):
            return value
        marked.append(True)
        return _NonFinite(literal)

    def constant(name: str) -> str:
        marked.append(True)
        return _NonFinite(name)

    def members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found = dict(pairs)
        if len(found) == len(pairs):
            return found
        marked.append(True)
        return _duplicated(found, pairs)

    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_float=number, parse_constant=constant, object_pairs_hook=members)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # RecursionError: arrays nested a few thousand deep fit in 64 KiB and exhaust the decoder's stack.
        raise InvalidRequest(f"The body is not valid UTF-8 JSON: {exc}", target="body") from exc
    if marked or ("\\u" in text and re.search(SURROGATE_ESCAPE, text)):
        listed = data.get(items) if items is not None and type(data) is dict else None
        if not isinstance(listed, list) or _defect({name: value for name, value in data.items() if name != items}):
            defect = _defect(data)
            if defect is not None:
                raise defect
            if marked:
                raise _first_defect(data)
        else:
            data[items] = [_defect(item) or item for item in listed]
    if not isinstance(data, dict):
        raise InvalidRequest("The body must be a JSON object.", target="body")
    return data


def _duplicated(found: dict[str, Any], pairs: list[tuple[str, Any]]) -> _Duplicated:
    seen: set[str] = set()
    duplicated = _Duplicated(found)
    for name, _ in pairs:
        if name in seen:
            duplicated.member = name
            break
        seen.add(name)
    return duplicated


def _first_defect(data: Any) -> InvalidRequest:
    """The refusal of the first marked value, in document order."""
    return _defect(data) or InvalidRequest("The body is not valid JSON for this service.", target="body")


def _defect(data: Any) -> InvalidRequest | None:
    """The refusal of the first marked value in ``data``, in document order; None when it has none."""
    stack: list[tuple[Any, Path]] = [(data, None)]
    while stack:  # iterative: the body may be nested as deep as the decoder allows
        node, path = stack.pop()
        if isinstance(node, _NonFinite):
            return _refusal(path, f"{node} is not a finite number")
        if isinstance(node, str) and not _is_text(node):
            return _refusal(path, _LONE_SURROGATE)
        if isinstance(node, _Duplicated):
            return _refusal((path, node.member), f"the member {node.member!r} is given more than once")
        if isinstance(node, dict) and (name := next((name for name in node if not _is_text(name)), None)):
            return _refusal((path, name.encode("utf-8", "backslashreplace").decode("ascii")), _LONE_SURROGATE)
        parts = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        stack.extend((child, (path, str(part))) for part, child in reversed(list(parts)))
    return None


_LONE_SURROGATE = "a lone surrogate (an escape from \\ud800 to \\udfff not in a pair) is not a character"


def _is_text(text: str) -> bool:
    """Whether ``text`` is Unicode text: no lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refusal(path: Path, message: str) -> InvalidRequest:
    parts: list[str] = []
    while path is not None:
        path, part = path
        parts.append(part)
    target = ".".join(reversed(parts)) or "body"
    return InvalidRequest(f"The request is not valid: {message} ({target}).", details=[(target, message)])


# -- Personal data in what a request stores --------------------------------------------------------------------

# In a target, a member name that is itself personal data: the target must not quote it.
HIDDEN_NAME = "*"

# The fields each request stores as sent. Left out on purpose, and listed in NOT_LOOKED_AT:
# - the key: only its HMAC is stored, and it has its own check (ONCEGATE_SENSITIVE_KEYS);
# - the payload: only its keyed fingerprint is stored;
# - the reviewer: the processing record names who decided, on purpose; a flow's or scope's owner is
#   the contact who answers for it, on purpose too;
# - the run id and flow: the caller's run as Power Automate names it, kept to recognise the run;
# - tokens, outcomes, decisions, flags, numbers, presets and scope names: no free text;
# - how long a run waits for the holder: stored nowhere (the poll address carries the run's request);
# - fingerprint rules: pointers name members of a payload a scope's owner chose, and Dataverse's annotations
#   read as e-mail addresses (totalamount@OData.Community.Display.V1.FormattedValue) to the check.
# By the model's name (``oncegate.models``): a process checks the requests of its actions without importing the others'.
STORED_FIELDS: dict[str, tuple[str, ...]] = {
    "ClaimRequest": ("source", "reference"),
    "ClaimItem": ("source", "reference"),
    "PerformRequest": ("source", "reference"),
    "RecordResultRequest": ("target_record_id", "data", "error"),
    "ReleaseRequest": ("reason",),
    "ReviewClaimRequest": ("note", "target_record_id", "data"),
    "ReportConflictRequest": ("source", "reason", "details"),
    "ResolveConflictRequest": ("note",),
    "RegisterFlowRequest": ("notes",),
    "SetScopeRequest": ("description", "key_pattern"),
}
NOT_LOOKED_AT = frozenset(
    {"key", "payload", "fingerprint", "reviewer", "owner", "run_id", "flow", "name", "environment", "scope"}
    | {"claim_token", "outcome", "retryable", "decision", "enabled", "lease_seconds", "retention_days", "attempt"}
    | {"horizon_days"}
    # Perform once's call: sent to the target, never stored (the claim keeps the target's name and the method).
    | {"target", "method", "path", "headers", "body"}
    | {"wait", "max_wait_seconds", "fingerprint_include", "fingerprint_ignore", "fingerprint_preset"}
)


def stored_findings(request: BaseModel) -> list[tuple[str, str]]:
    """Each place in ``request``'s stored fields that seems to carry personal data: (target, what), in order."""
    # A field not sent (None) holds nothing to find: not walked, nor its wire name looked up (most claims send no
    # source or reference: the model's fields are a property that builds its answer, issue 36).
    sent = [
        (name, value)
        for name in STORED_FIELDS.get(type(request).__name__, ())
        if (value := getattr(request, name)) is not None
    ]
    if not sent:
        return []
    fields = type(request).model_fields
    return [found for name, value in sent for found in _walk(value, fields[name].alias or name)]


def value_findings(value: Any, path: str) -> list[str]:
    """What personal data each string of ``value`` seems to carry, named by place (``response.body.customer``):
    the check of what a service keeps that no request sent (a target's answer, for Perform once)."""
    return [what for _, what in _walk(value, path)]


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """The personal data in every string of ``value``: members' names and values, array items, however nested."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:  # iterative: data may be nested as deep as the JSON decoder allows
        node, where = stack.pop()
        if isinstance(node, str):
            if found := sensitive_findings(node, context=where):
                yield where, f"{where} seems to contain {_listed(found)}"
            continue
        children: list[tuple[Any, str]] = []
        if isinstance(node, dict):
            for name, child in node.items():
                named = sensitive_findings(name)
                if named:
                    yield where, f"a member name in {where} seems to contain {_listed(named)}"
                children.append((child, f"{where}.{HIDDEN_NAME if named else name}"))
        elif isinstance(node, list):
            children = [(child, f"{where}.{index}") for index, child in enumerate(node)]
        yield from _split(children)
        stack.extend(reversed(children))


def _split(children: list[tuple[Any, str]]) -> Iterator[tuple[str, str]]:
    """What two neighbouring strings carry together and neither alone: a number split across two fields."""
    for (first, first_at), (second, second_at) in itertools.pairwise(children):
        if not (isinstance(first, str) and isinstance(second, str)):
            continue
        # A space between: the two fields read as two groups of one number ("4111 1111" and "1111 1111").
        together = sensitive_findings(f"{first} {second}", context=f"{first_at} {second_at}")
        if not together:
            continue
        alone = {*sensitive_findings(first, context=first_at), *sensitive_findings(second, context=second_at)}
        if split := [finding for finding in together if finding not in alone]:
            yield first_at, f"{first_at} and {second_at} together seem to contain {_listed(split)}"


def _listed(findings: list[str]) -> str:
    return " and ".join(findings)


class SensitiveDataGuard:
    """The one check of what a request stores; each action calls it first, before any read or write."""

    def __init__(self, policy: SensitivePolicy) -> None:
        self.policy = policy

    def check(self, request: BaseModel, subject: str) -> list[str]:
        """The warnings ``request`` earned; under ``reject``, ``SensitiveData`` (nothing is stored yet).

        ``subject`` names what the request is about (``claim <id>``) in the warning logged under ``warn``.
        """
        if self.policy is SensitivePolicy.OFF:
            return []
        found = stored_findings(request)
        if not found:
            return []
        if self.policy is SensitivePolicy.REJECT:
            raise SensitiveData(_stored_refusal(found), target=found[0][0], details=found)
        # Named, never quoted: where personal data is stored, for whoever means to turn reject on.
        logger.warning(
            "Personal data stored as sent for %s (ONCEGATE_SENSITIVE_DATA=warn): %s",
            subject,
            "; ".join(what for _, what in found),
        )
        return [SENSITIVE_DATA]


def _stored_refusal(found: list[tuple[str, str]]) -> str:
    more = f" (and {len(found) - 1} more, listed in details)" if len(found) > 1 else ""
    return (
        f"This request would store personal data: {found[0][1]}{more}. Keep it out of what OnceGate stores "
        "(an internal record id instead). Nothing was stored."
    )
