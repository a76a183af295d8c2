"""A small HTTP client of a OnceGate deployment: what the ``oncegate`` command calls.

Each action is called at the route and method of its entry in the operation table
(``oncegate.entrypoints.operations``), and its answer parsed with the entry's response model;
the raw JSON is kept beside it for ``--json``. Every failure the command expects is a ``ClientError``::

    ClientError          the command cannot do what was asked; printed without a traceback
    ├── ApiError         the service answered with an error status (4xx: exit 2, 5xx: exit 3)
    ├── Unreachable      no usable answer: refused, DNS, TLS, timeout, not JSON (exit 3)
    └── SignInError      Microsoft Entra ID refused, or a sign-in setting is missing (exit 2)

Credentials go to the ``--url`` host only: redirects are not followed, and a ``nextLink``
is followed on that host whatever host name the service wrote into it.

A call that only reads (a GET, and Lookup) answered 429 or 503 is asked again after the
``Retry-After`` the answer gave (a second when a front end gave none), up to ``ATTEMPTS`` times in all; the
service's own 503 without one (``not_configured``) is not, as no wait mends it. One that changes something is
never sent twice by the client, whatever it was answered: a person decides whether to run it again.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from email.message import Message
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from urllib.parse import quote, urlencode, urlsplit

from pydantic import BaseModel, ValidationError

from oncegate.cli.values import BadSetting, port_setting
from oncegate.domain.copies import frozen
from oncegate.models import (
    ClaimAttentionList,
    ClaimHistory,
    ClaimList,
    ClaimManyAnswer,
    ClaimView,
    ConflictList,
    ConflictView,
    ErrorBody,
    FlowList,
    FlowRef,
    FlowView,
    Health,
    OverlapList,
    RecordResultsAnswer,
    RegisterFlowRequest,
    ScopeList,
    ScopeView,
    SetScopeRequest,
)

if TYPE_CHECKING:
    from oncegate.entrypoints.operations import Operation

TIMEOUT_SECONDS = 30.0
USAGE_EXIT = 2
SERVICE_EXIT = 3
SNIPPET_CHARS = 200
# Asking again: the statuses that say "not now" (busy, or the store briefly unavailable), how often a read is
# sent in all, the wait when the answer gave no Retry-After, and the longest wait a command sits through.
RETRIED_STATUSES = (429, 503)
ATTEMPTS = 3
DEFAULT_RETRY_AFTER = 1.0
MAX_RETRY_AFTER = 60.0
# The actions that only read although they are POSTs (the business key travels in the body).
READS_SENT_AS_POST = frozenset({"lookup_claim"})

Model = TypeVar("Model", bound=BaseModel)
Page = TypeVar("Page", ClaimAttentionList, ClaimHistory, ClaimList, ConflictList, FlowList, OverlapList, ScopeList)


class ClientError(Exception):
    """A failure the command reports on stderr and turns into its exit status."""

    exit_code = USAGE_EXIT
    # The error code a script reads with --json, where the service gave none: the command's own refusal.
    error_code = "invalid_usage"

    def report(self, options: Mapping[str, str] | None = None) -> str:
        """The lines printed on stderr; ``options`` names the command's option of each field of the request."""
        return str(self)

    def as_json(self) -> dict[str, Any]:
        """What ``--json`` prints on stdout: the service's error body, in its shape when the command refused."""
        return {"error": {"code": self.error_code, "message": str(self), "details": []}}


class ApiError(ClientError):
    """The service answered with an error status; ``code`` is its ``error.code`` when it sent one."""

    def __init__(
        self,
        status: int,
        code: str | None,
        message: str,
        details: list[tuple[str | None, str]] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code or f'HTTP {status}'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        # Seconds to wait before asking again, when the answer says "not now" (429, 503); else None.
        self.retry_after = retry_after
        # Busy (429) is the service's state, not the command's fault: exit 3, as a 5xx.
        self.exit_code = SERVICE_EXIT if status >= 500 or status == 429 else USAGE_EXIT

    def report(self, options: Mapping[str, str] | None = None) -> str:
        # One detail repeats the message, which names its field: said once, unless the field is an option the
        # person typed (attempt is --attempt), which its line then names. Several are each listed.
        named = [(_option_of(target, options or {}), message) for target, message in self.details]
        repeated = len(named) == 1 and named[0][1] in self.message and named[0][0] == self.details[0][0]
        details = [] if repeated else named
        return "\n".join([str(self), *(f"  {target or 'body'}: {message}" for target, message in details)])

    def as_json(self) -> dict[str, Any]:
        details = [{"target": target, "message": message} for target, message in self.details]
        code = self.code or f"http_{self.status}"
        return {"error": {"code": code, "message": self.message, "details": details, "status": self.status}}


def _option_of(target: str | None, options: Mapping[str, str]) -> str | None:
    """The option that sent the field ``target`` names (``keyPattern``, ``fingerprintInclude[0]``), else the target."""
    field = (target or "").split("[", 1)[0].split(".", 1)[0]
    return options.get(field, target)


class Unreachable(ClientError):
    """No usable answer from the service."""

    exit_code = SERVICE_EXIT
    error_code = "unreachable"


class SignInError(ClientError):
    """Signing in to Microsoft Entra ID failed, or a sign-in setting is missing."""

    error_code = "signin_failed"


@frozen
class Answer(Generic[Model]):
    """A successful answer: the JSON as received and the same parsed as the service's model."""

    raw: Any
    model: Model


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the function key or token to wherever it points: report it instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def default_url(environ: Mapping[str, str]) -> str:
    """Where ``oncegate serve`` listens by default: this machine, on PORT when it is set (as ``make run`` does).

    A PORT that is not a port is a bad setting (exit 2), not a service that cannot be reached.
    """
    try:
        return f"http://127.0.0.1:{port_setting(environ)}"
    except BadSetting as exc:
        raise ClientError(str(exc)) from exc


def base_url(url: str, named: str = "--url") -> str:
    """``scheme://host[:port]`` of a deployment; ``/api`` after it is allowed and dropped.

    ``named`` is where the address came from (``--url`` or ``ONCEGATE_URL``), for a refusal to name it.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.rstrip("/") not in ("", "/api"):
        scheme = "" if "://" in url else " (http:// or https:// comes first)"
        raise ClientError(
            f"{named} must be the function app's address, like https://<function app host>, not {url!r}{scheme}."
        )
    return f"{parts.scheme}://{parts.netloc}"


class Client:
    """Calls one deployment's actions, with a function key or an Entra ID token.

    ``token`` is called once, before the first request, so a command that fails earlier signs nobody in.
    Threads may share one client: each request opens its own connection, and the first sign-in is
    made once under a lock.
    """

    def __init__(
        self,
        url: str,
        *,
        named: str = "--url",
        function_key: str | None = None,
        token: Callable[[], str] | None = None,
        timeout: float = TIMEOUT_SECONDS,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.url = base_url(url, named)
        self._notify = notify or (lambda line: None)
        parts = urlsplit(self.url)
        if (function_key or token) and parts.scheme == "http" and not _is_loopback(parts.hostname):
            raise ClientError(f"Refusing to send credentials to {parts.hostname} over plain http: use https://.")
        self._headers = {"Accept": "application/json"}
        if function_key:
            self._headers["x-functions-key"] = function_key
        self._token = token
        self._token_lock = threading.Lock()
        self._timeout = timeout
        self._opener = urllib.request.build_opener(_NoRedirect)
        # Whether a call that changes something has been sent: what a command stopped before it ended may have done.
        self.sent_change = False

    def call(
        self,
        name: str,
        *,
        ids: Mapping[str, str] | None = None,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
    ) -> Answer[Any]:
        """The action of the operation table's entry ``name``, at its route and method, answered as its model."""
        operation = _operation(name)
        path = operation.path(**{name: quote(value, safe="") for name, value in (ids or {}).items()})
        params = urlencode(_present(dict(query or {})))
        target = f"/api/{path}?{params}" if params else f"/api/{path}"
        reads = operation.method == "GET" or name in READS_SENT_AS_POST
        return self._call(operation.response_model, operation.method, target, body, retried=reads)

    def pages(self, name: str, query: Mapping[str, Any]) -> Iterator[Answer[Any]]:
        """The list of the entry ``name`` page by page, following ``nextLink`` (on this client's host) as far as the
        caller iterates."""
        first = self.call(name, query=query)
        return self._following(_operation(name).response_model, first)

    def get_claim(self, claim_id: str) -> Answer[ClaimView]:
        return self.call("get_claim", ids={"claimId": claim_id})

    def lookup_claim(self, scope: str, key: str) -> Answer[ClaimView]:
        """The claim of a business key: the key travels in the body, never in the URL."""
        return self.call("lookup_claim", body={"scope": scope, "key": key})

    def check_and_claim_many(self, items: list[dict[str, Any]]) -> Answer[ClaimManyAnswer]:
        """Check and claim many: each item a Check and claim body (:func:`claim_body`), answered in its place."""
        return self.call("check_and_claim_many", body={"items": items})

    def record_results(self, items: list[dict[str, Any]]) -> Answer[RecordResultsAnswer]:
        """Record results: each item a Record result body with its ``claimId``, answered in its place."""
        return self.call("record_results", body={"items": items})

    def record_result(
        self, claim_id: str, *, claim_token: str, outcome: str, target_record_id: str | None
    ) -> Answer[ClaimView]:
        wanted = {"claimToken": claim_token, "outcome": outcome, "targetRecordId": target_record_id}
        return self.call("record_result", ids={"claimId": claim_id}, body=_present(wanted))

    def release_claim(self, claim_id: str, *, claim_token: str, reason: str | None) -> Answer[ClaimView]:
        wanted = {"claimToken": claim_token, "reason": reason}
        return self.call("release_claim", ids={"claimId": claim_id}, body=_present(wanted))

    def attention_pages(self, *, scope: str | None, top: int | None) -> Iterator[Answer[ClaimAttentionList]]:
        """The claims needing attention page by page, oldest first."""
        return self.pages("list_claims_needing_attention", {"attention": "true", "scope": scope, "top": top})

    def claim_pages(self, *, filters: dict[str, str | None], top: int | None) -> Iterator[Answer[ClaimList]]:
        """The claims of a source system, reference, status or first received, page by page (issue 16)."""
        return self.pages("list_claims", {**filters, "top": top})

    def review_claim(
        self, claim_id: str, *, reviewer: str | None, note: str | None, settlement: dict[str, Any] | None = None
    ) -> Answer[ClaimView]:
        """Acknowledge a failure that is not retryable; with ``settlement`` (outcome, attempt, targetRecordId,
        data), settle an attempt in doubt."""
        wanted = {"reviewer": reviewer, "note": note, **(settlement or {})}
        return self.call("review_claim", ids={"claimId": claim_id}, body=_present(wanted))

    def conflict_pages(self, *, status: str, scope: str | None, top: int | None) -> Iterator[Answer[ConflictList]]:
        """The conflict list page by page, following ``nextLink`` as far as the caller iterates."""
        return self.pages("list_conflicts", {"status": status, "scope": scope, "top": top})

    def flow_pages(self, *, top: int | None) -> Iterator[Answer[FlowList]]:
        """The flow inventory page by page."""
        return self.pages("list_flows", {"top": top})

    def overlap_pages(self, *, top: int | None) -> Iterator[Answer[OverlapList]]:
        """The pairs of flows that met each other's claims, page by page."""
        return self.pages("list_flow_overlaps", {"top": top})

    def scope_pages(self, *, top: int | None) -> Iterator[Answer[ScopeList]]:
        """The side-effect catalogue page by page."""
        return self.pages("list_scopes", {"top": top})

    def register_flow(self, name: str, environment: str, settings: Mapping[str, Any]) -> Answer[FlowView]:
        """Register a flow with the settings named in ``settings`` by field name (``owner``); None resets one to its
        default, and a setting not named stays as it is."""
        body = {"name": name, "environment": environment, **_aliased(RegisterFlowRequest, settings)}
        return self.call("register_flow", body=body)

    def set_scope(self, scope: str, settings: Mapping[str, Any]) -> Answer[ScopeView]:
        """Set the scope's settings named in ``settings`` by field name (``lease_seconds``); None resets one to its
        default, and a setting not named stays as it is."""
        return self.call("set_scope", body={"scope": scope, **_aliased(SetScopeRequest, settings)})

    def get_conflict(self, conflict_id: str) -> Answer[ConflictView]:
        return self.call("get_conflict", ids={"conflictId": conflict_id})

    def resolve_conflict(
        self, conflict_id: str, *, decision: str, reviewer: str | None, note: str | None
    ) -> Answer[ConflictView]:
        wanted = {"decision": decision, "reviewer": reviewer, "note": note}
        return self.call("resolve_conflict", ids={"conflictId": conflict_id}, body=_present(wanted))

    def health(self) -> Answer[Health]:
        return self.call("health")

    def with_whole_history(self, answer: Answer[ClaimView]) -> Answer[ClaimView]:
        """The claim with its whole history: the pages after the first, from ``historyNextLink`` on."""
        link = answer.model.history_next_link
        if link is None:
            return answer
        history = _operation("list_claim_history").response_model
        pages = list(self._following(history, self._call(history, "GET", _target(link))))
        raw = {key: value for key, value in answer.raw.items() if key != "historyNextLink"}
        raw["history"] = [*raw.get("history", []), *(entry for page in pages for entry in page.raw["value"])]
        return Answer(raw, ClaimView.model_validate(raw))

    def _following(self, model: type[Any], page: Answer[Any]) -> Iterator[Answer[Any]]:
        yield page
        while page.model.next_link:
            page = self._call(model, "GET", _target(page.model.next_link))
            yield page

    def _call(
        self, model: type[Model], method: str, target: str, body: Any = None, *, retried: bool = True
    ) -> Answer[Model]:
        if not retried:
            self.sent_change = True
        raw = self._sent(method, target, body) if retried else self._send(method, target, body, reads=False)
        try:
            return Answer(raw, model.model_validate(raw))
        except ValidationError as exc:
            raise Unreachable(f"{self.url}{target} answered JSON that is not a OnceGate {model.__name__}.") from exc

    def _signed_in(self) -> dict[str, str]:
        """The headers of every request, with the bearer token once the first request has signed in."""
        with self._token_lock:
            if self._token is not None:
                self._headers["Authorization"] = f"Bearer {self._token()}"
                self._token = None
        return self._headers

    def _sent(self, method: str, target: str, body: Any) -> Any:
        """A read, sent again after the Retry-After of each "not now" answer, ``ATTEMPTS`` times in all at most."""
        attempt = 1
        while True:
            try:
                return self._send(method, target, body, reads=True)
            except ApiError as exc:
                wait = exc.retry_after
                if wait is None or wait > MAX_RETRY_AFTER or attempt == ATTEMPTS:
                    raise
                said = exc.code or f"HTTP {exc.status}"
            attempt += 1
            self._notify(f"{said}: asking again in {wait:g} s ({attempt} of {ATTEMPTS})")
            pause(wait)

    def _send(self, method: str, target: str, body: Any, *, reads: bool) -> Any:
        """One request; ``reads``: it changes nothing (a GET, or a lookup sent as a POST)."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = self._signed_in()
        headers = headers if data is None else {**headers, "Content-Type": "application/json"}
        request = urllib.request.Request(self.url + target, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                return _json(response.read(), f"{self.url}{target}")
        except urllib.error.HTTPError as exc:
            with exc:
                raise _api_error(exc.code, exc.reason, exc.headers, exc.read()) from exc
        except (OSError, http.client.HTTPException) as exc:
            # URLError (refused, DNS, TLS) and timeouts are OSErrors; a broken answer is an HTTPException.
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(reason, TimeoutError):
                raise Unreachable(_no_answer(self.url, self._timeout, reads=reads)) from exc
            raise Unreachable(
                f"Cannot reach {self.url}: {reason}. Is the service running there (oncegate serve), and is --url right?"
            ) from exc


def _no_answer(url: str, timeout: float, *, reads: bool) -> str:
    """A request the service took and did not answer in time: reachable, but slow or stuck, and a change sent may
    have been made (a person looks before sending it again)."""
    said = f"{url} took the request but did not answer within {timeout:g} s: the service or its store is slow."
    if reads:
        return said
    return f"{said} What was asked may have been done: look (claims show, conflicts show) before running it again."


def _operation(name: str) -> Operation:
    # Imported when a command first calls an action: the table brings the service's modules, which a command
    # that calls none (--help, serve, signin) need not load.
    from oncegate.entrypoints.operations import BY_NAME

    return BY_NAME[name]


def claim_body(
    *,
    scope: str,
    key: str,
    payload: Any,
    run_id: str,
    flow: FlowRef,
    source: str | None = None,
    reference: str | None = None,
) -> dict[str, Any]:
    """A Check and claim body, alone or as an item of Check and claim many; ``source`` and ``reference`` only when
    given."""
    body = {"scope": scope, "key": key, "payload": payload, "runId": run_id, "flow": flow.model_dump()}
    return {**body, **_present({"source": source, "reference": reference})}


def _target(link: str) -> str:
    """A link's path and query: followed on this client's host, whatever host the service wrote into it."""
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


def _aliased(request: type[BaseModel], settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` named by their field names (``lease_seconds``) as the request's fields on the wire."""
    fields = request.model_fields
    return {fields[name].alias or name: value for name, value in settings.items()}


def _present(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields that have a value: the service applies its own default to one left out."""
    return {name: value for name, value in fields.items() if value is not None}


def _json(raw: bytes, where: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise Unreachable(f"{where} did not answer JSON: {raw[:SNIPPET_CHARS]!r}") from exc


def _api_error(status: int, reason: str, headers: Message, raw: bytes) -> ApiError:
    wait = _retry_after(headers.get("Retry-After")) if status in RETRIED_STATUSES else None
    try:
        error = ErrorBody.model_validate_json(raw).error
    except ValidationError:
        return ApiError(status, None, _without_error_body(status, reason, headers, raw), retry_after=wait)
    details = [(detail.target, detail.message) for detail in error.details]
    retry_after = headers.get("Retry-After")
    message = f"{error.message} (retry after {retry_after} s)" if retry_after else error.message
    # The service says when to ask again where waiting helps (store_unavailable, clock_skew): its own 503 without a
    # Retry-After (not_configured: a setting, the key secret, a store refused or half restored) no wait mends.
    return ApiError(status, error.code, message, details, retry_after=wait if retry_after else None)


def _retry_after(said: str | None) -> float:
    """The seconds a Retry-After header asks to wait: a number of seconds, or an HTTP date; one second without it."""
    if said is None:
        return DEFAULT_RETRY_AFTER
    if said.strip().isdigit():
        return float(said)
    try:
        when = parsedate_to_datetime(said)
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER
    return max(0.0, (when - datetime.now(UTC)).total_seconds()) if when.tzinfo else DEFAULT_RETRY_AFTER


def pause(seconds: float) -> None:
    """Wait before asking again (a test replaces it to count the waits)."""
    time.sleep(seconds)


def _without_error_body(status: int, reason: str, headers: Message, raw: bytes) -> str:
    # The Functions host (a wrong function key) and App Service authentication answer without OnceGate's body.
    if status in (401, 403):
        return (
            f"{reason}: the deployment did not accept the credentials; give a function key "
            "(--key or ONCEGATE_FUNCTION_KEY) or sign in with --entra."
        )
    if 300 <= status < 400:
        return f"{reason}: redirected to {headers.get('Location')}; use that address as --url."
    return f"{reason}: {raw[:SNIPPET_CHARS]!r}" if raw else str(reason)
