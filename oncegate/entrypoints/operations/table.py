"""What one entry of the operation table declares, and the values its steps read and answer.

An :class:`Operation` declares an action once: where the app serves it (route, method, role), what it
reads (body or query model) and answers (response model), the telemetry event it sends, the designer
text of the connector, and its three steps: ``parse`` the wire's request into the service's command,
``serve`` it with one service method, ``render`` the result as the response model (or straight as its JSON
members: :data:`Members`). A :class:`Call` is the
request its steps read, a :class:`Reply` an answer other than a plain 200.

The entries are declarations: the one pipeline (:mod:`oncegate.entrypoints.http`) reads the request into a
``Call`` and runs the entry's steps (:func:`~oncegate.entrypoints.http.perform`), as the bulk actions and the
tests' ``Gate`` do without HTTP (:func:`~oncegate.entrypoints.http.answer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel

from oncegate import models, telemetry
from oncegate.cursors import CursorSeal
from oncegate.domain.copies import frozen
from oncegate.domain.waiting import Waiting
from oncegate.entrypoints.parse import MAX_BODY_BYTES
from oncegate.entrypoints.principal import Role
from oncegate.models import Visibility

if TYPE_CHECKING:
    from types import ModuleType

    from oncegate.bootstrap import Services

Body = TypeVar("Body")
Query = TypeVar("Query")

Dimensions = dict[str, telemetry.Value | None]
# An answer's JSON members as the wire names them, rendered straight from the service's answer where no response
# model need be made per request (Check and claim's, issue 32's shapes); its entry's ``response`` still declares them.
Members = dict[str, Any]


@frozen(kw_only=True)
class Call(Generic[Body, Query]):
    """One request as the pipeline read it, checked: what an entry's steps read instead of HTTP.

    ``link`` makes the address of a list's next page from a store cursor; called without HTTP (the
    tests' ``Gate``), it is the cursor itself. ``address`` is the request's own URL, for the answers
    that point back at the app (a history's link, a poll's Location); empty without HTTP, as ``seal`` is None.
    """

    body: Body = None  # type: ignore[assignment]
    query: Query = None  # type: ignore[assignment]
    params: Mapping[str, Any] = field(default_factory=dict)
    ids: Mapping[str, str] = field(default_factory=dict)
    # Who signed in (Entra ID), as the record names them; None with function keys. The edge checked their roles.
    caller: str | None = None
    address: str = ""
    # The app's address that every route sits below (``https://host/api/``), for an answer naming another action's.
    root: str = ""
    link: Callable[[str | None], str | None] = lambda cursor: cursor
    # The service's cursor seal, for what an answer hands out to come back with (a ticket, a state); None without HTTP.
    seal: CursorSeal | None = None

    @property
    def sealing(self) -> CursorSeal:
        assert self.seal is not None, "only an HTTP call hands out sealed addresses"
        return self.seal

    @property
    def claim_id(self) -> str:
        return self.ids["claimId"]

    @property
    def conflict_id(self) -> str:
        return self.ids["conflictId"]


class Reply(NamedTuple):
    """An answer other than a plain 200: its status, body (a model, or its members; None: empty) and headers.

    ``waiting`` is the run Check and claim (wait) keeps waiting for the holder, and ``at`` the path (below the
    app's root) of the address it polls: over HTTP, the 202's ``Location``, its ticket sealed in.
    """

    status: int
    model: BaseModel | Members | None
    headers: Mapping[str, str] = {}
    waiting: Waiting | None = None
    at: str = ""


@frozen(kw_only=True)
class Designer:
    """What the connector's designer shows for the operation: the text no model field can carry.

    The operation id is spelled out rather than derived from the function's name because flows refer
    to it: renaming a function must not rename an action under the flows that use it.
    """

    operation_id: str
    summary: str
    description: str
    visibility: Visibility
    success: str
    errors: Sequence[int]
    body_description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    conflict_description: str = ""
    # An action that may answer 202 with Location and Retry-After, which the engine polls (issue 25): its text.
    accepted: str = ""


@frozen(kw_only=True)
class Operation:
    """One action of the contract, declared once (see :mod:`oncegate.entrypoints.operations`)."""

    # The app's function: its name is the function's (function keys and telemetry are per function).
    name: str
    route: str
    method: str
    # The response model, or its name in :mod:`oncegate.models` where the entry's module need not import it (an answer
    # written as its members): read as :attr:`response_model`, which imports the model when it is first read.
    response: type[BaseModel] | str
    designer: Designer
    parse: Callable[[Call[Any, Any]], Any]
    serve: Callable[[Services, Call[Any, Any], Any], Any]
    render: Callable[[Call[Any, Any], Any], BaseModel | Members | Reply]
    body: type[BaseModel] | None = None
    # The query's model, or its name in :mod:`oncegate.models` where the entry's module need not import it (a query no
    # other entry of the module reads): read as :attr:`query_model`, as :attr:`response` is.
    query: type[BaseModel] | str | None = None
    # Who may call it in Entra ID mode; None: anyone, without a function key either (health).
    role: Role | None = Role.FLOW
    # Sent for every answer but a 503 (which sends OnceGate.Unavailable); None: only the 503s are sent.
    event: telemetry.Event | None = None
    # What the request stores, for the sensitive-data check's log line (``claim <id>``); None: nothing free.
    stores: Callable[[Call[Any, Any], Any], str] | None = None
    # The answer's dimensions for the event, once its warnings are all in.
    describe: Callable[[Any], Dimensions] | None = None
    # The list whose cursors the query carries, sealed for it; the route's own by default.
    list_name: str = ""
    # A query's parameters as the model reads them (a value only this action takes, a default).
    adjust: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # The operation that serves the request in this one's place, chosen by its query parameters.
    instead: Callable[[Mapping[str, str]], Operation | None] | None = None
    body_limit: int = MAX_BODY_BYTES
    # A bulk call's list, whose items are refused one by one (``parse.read_object``), and the model the
    # body is read as, its items left to the entry: ``body`` is what the connector declares.
    items: str | None = None
    reads: type[BaseModel] | None = None
    # Whether the connector offers it to makers: an operators' action (targets, issue 34) is served, never offered.
    in_connector: bool = True
    # Whether ``render`` writes the answer as the JSON members ``response`` declares (Check and claim's): no request
    # then makes the model, and the app does not build it when the entry's function is first called.
    as_members: bool = False

    @property
    def response_model(self) -> type[BaseModel]:
        """The response model the entry declares: what the connector, the command's client and an answer without
        HTTP read. Named, it is imported here, so a process whose first call never makes it loads no model's module
        for it (issue 36's cold start)."""
        response = self.response
        if isinstance(response, str):
            model: type[BaseModel] = getattr(models, response)
            return model
        return response

    @property
    def query_model(self) -> type[BaseModel] | None:
        """The query's model, imported when first read where the entry names it: Check and claim's wait's, which a
        first Check and claim never builds (issue 36's cold start)."""
        query = self.query
        if isinstance(query, str):
            model: type[BaseModel] = getattr(models, query)
            return model
        return query

    def path(self, **ids: str) -> str:
        """The route with its parameters filled in, below ``/api/``."""
        return self.route.format(**ids)


def held(module: ModuleType) -> tuple[Operation, ...]:
    """The entries a module of the table holds: its ``OPERATIONS``, after its ``SINGLE`` where it splits them to
    keep the connector's order (``claim_records``). The app finds a function's entry by it, as the list's writer
    finds each entry's module."""
    return (*getattr(module, "SINGLE", ()), *module.OPERATIONS)
