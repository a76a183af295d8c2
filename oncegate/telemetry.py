"""Telemetry for Application Insights: one custom event per answer an operator counts, through OpenTelemetry.

Each event is a log record on the ``oncegate.events`` logger carrying the Azure Monitor
exporter's custom-event attribute, so that it lands in ``customEvents`` under its name, its
dimensions in ``customDimensions`` (as text: ``toint()`` and ``todouble()`` them in KQL)::

    OnceGate.Check              every Check and claim answer but a 503: the decision, or the refusal's code;
                                one per item of Check and claim many too (``bulk`` true)
    OnceGate.Result             every Record result answer but a 503; one per item of Record results too
    OnceGate.Review             every Review claim answer but a 503
    OnceGate.ConflictResolved   every Resolve conflict answer but a 503
    OnceGate.Unavailable        every 503, of any action, instead of the action's own event: store_unavailable,
                                signin_unavailable, clock_skew (with the skew), or not_configured naming the
                                setting (a key secret the store does not know, a wiped store among them)
    OnceGate.Purge              every run of the retention purge
    OnceGate.Watch              every run of the attention watch: claims needing attention, open conflicts
    OnceGate.Attention          per run of the watch, one per scope and reason of the claims needing attention
    OnceGate.OpenConflicts      per run of the watch, one per scope of the open conflicts

:data:`EVENTS` names each event's dimensions; docs/operations.md documents them, and the tests hold
the workbook's and the alerts' queries to them. No event carries a business key, a payload or a value
of it, a fingerprint, a claim token, result data, a run id, a claim id or who signed in: only names of
scopes and flows, of the parts of a payload a conflict found changed (JSON Pointers, which the
sensitive-data check reads as it reads every stored text), codes, counts and times.

Off unless ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set. Then the first answer sets up the Azure
Monitor OpenTelemetry distro (``configure_azure_monitor``, as the Functions Python worker documents
it) for this logger alone. The logger does not propagate, so the Functions host never also logs
these records as traces. Off, an answer costs the read of a flag (:data:`sending`, which the pipeline reads
instead of entering :func:`answering`), and a Table Storage request the read of a context variable; SQLite
statements are traced only with telemetry on (a traced statement costs SQLite the expansion of its text).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import field

from oncegate.domain.copies import frozen, mutable

CONNECTION_STRING_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
LOGGER_NAME = "oncegate.events"
# The attribute that makes the Azure Monitor exporter send a log record as a custom event of that name.
EVENT_NAME_ATTRIBUTE = "microsoft.custom_event.name"
# The distro's instrumentations trace every library call (each Table Storage request a dependency):
# a span per store round trip on the claim path, which these events count instead.
INSTRUMENTATIONS = ("azure_sdk", "django", "fastapi", "flask", "psycopg2", "requests", "urllib", "urllib3")

Value = str | int | float | bool

# -- dimensions ---------------------------------------------------------------------------------------
ACTION = "action"  # the action answered, e.g. check_and_claim (a timer's function for a timer)
HTTP_STATUS = "httpStatus"
ERROR_CODE = "errorCode"  # the error body's code; absent from a 200
SETTING = "setting"  # with not_configured: the setting to fix, e.g. ONCEGATE_KEY_SECRET
CLOCK_SKEW_SECONDS = "clockSkewSeconds"  # with clock_skew: how far this instance's clock is ahead of the store's
ROUND_TRIPS = "roundTrips"  # store requests (Table Storage) or statements (SQLite) the answer cost
LATENCY_MS = "latencyMs"  # from the request reaching OnceGate to the answer rendered
SCOPE = "scope"
FLOW_NAME = "flowName"
FLOW_ENVIRONMENT = "flowEnvironment"
DECISION = "decision"
WARNINGS = "warnings"  # the answer's warnings, comma-separated
# With conflict: the parts of the payload that changed, a JSON array of JSON Pointers (names, never values).
CHANGED_PARTS = "changedParts"
# With the warning another_flow_copy: the flow that holds or did the claim, not the one asking.
HOLDER_FLOW_NAME = "holderFlowName"
HOLDER_FLOW_ENVIRONMENT = "holderFlowEnvironment"
OUTCOME = "outcome"
RETRYABLE = "retryable"
BULK = "bulk"  # true for an item of a bulk call (Check and claim many, Record results); absent for a single call
RESOLUTION = "resolution"
ORIGIN = "source"  # a conflict's origin: claim or reported (the dimension keeps its first name)
DELETED = "deleted"
EXAMINED = "examined"
KEPT = "kept"
PAGES = "pages"
FINISHED = "finished"
STORE_FAILED = "storeFailed"
WATCH_RUN = "watchRun"  # one id per run of the watch: its Watch, Attention and OpenConflicts events share it
CLAIMS = "claims"
CONFLICTS = "conflicts"
REASON = "reason"  # why a claim needs attention: lease_expired, unknown or failed_unreviewed
OLDEST_SINCE = "oldestSince"  # UTC, ISO 8601: since when the oldest of them has waited
# A store filled from an export (issue 35): the export's time, and until when the keys done after it are forgotten.
TARGET = "target"  # Perform once: the declared target called
TARGET_STATUS = "targetStatus"  # Perform once: the status the target answered this request's call (none: no answer)
TARGET_FAILURE = "targetFailure"  # Perform once: timeout, broken, too_large, refused or not_connected
LOOKED_UP = "lookedUp"  # Perform once: true when OnceGate looked the record up at the target for this answer
EXPORTED_AT = "exportedAt"
FORGOTTEN_UNTIL = "forgottenUntil"


@frozen
class Event:
    """A custom event: its name in ``customEvents`` and the dimensions it may carry."""

    name: str
    dimensions: frozenset[str]


_ANSWER = frozenset({HTTP_STATUS, ERROR_CODE, ROUND_TRIPS, LATENCY_MS})
_FLOW = frozenset({SCOPE, FLOW_NAME, FLOW_ENVIRONMENT})
CHECK = Event(
    "OnceGate.Check",
    _ANSWER | _FLOW | {DECISION, WARNINGS, CHANGED_PARTS, HOLDER_FLOW_NAME, HOLDER_FLOW_ENVIRONMENT, BULK},
)
RESULT = Event("OnceGate.Result", _ANSWER | _FLOW | {OUTCOME, RETRYABLE, BULK})
PERFORM = Event(
    "OnceGate.Perform", _ANSWER | _FLOW | {DECISION, WARNINGS, TARGET, TARGET_STATUS, TARGET_FAILURE, LOOKED_UP}
)
REVIEW = Event("OnceGate.Review", _ANSWER | {SCOPE})
CONFLICT_RESOLVED = Event("OnceGate.ConflictResolved", _ANSWER | {SCOPE, RESOLUTION, ORIGIN})
UNAVAILABLE = Event("OnceGate.Unavailable", _ANSWER | _FLOW | {ACTION, SETTING, CLOCK_SKEW_SECONDS})
PURGE = Event("OnceGate.Purge", frozenset({DELETED, EXAMINED, KEPT, PAGES, FINISHED, STORE_FAILED, LATENCY_MS}))
WATCH = Event("OnceGate.Watch", frozenset({WATCH_RUN, CLAIMS, CONFLICTS, EXPORTED_AT, FORGOTTEN_UNTIL}))
ATTENTION = Event("OnceGate.Attention", frozenset({WATCH_RUN, SCOPE, REASON, CLAIMS, OLDEST_SINCE}))
OPEN_CONFLICTS = Event("OnceGate.OpenConflicts", frozenset({WATCH_RUN, SCOPE, CONFLICTS, OLDEST_SINCE}))
EVENTS = (CHECK, RESULT, PERFORM, REVIEW, CONFLICT_RESOLVED, UNAVAILABLE, PURGE, WATCH, ATTENTION, OPEN_CONFLICTS)

logger = logging.getLogger(__name__)
_events = logging.getLogger(LOGGER_NAME)
_events.setLevel(logging.INFO)
_events.propagate = False
_setup_lock = threading.Lock()
# Whether events are sent: None until the first answer asks, then whether the distro was set up. Read, not called,
# on the way of an answer: off, an answer runs no code of this module (issue 32's walk).
sending: bool | None = None


def enabled() -> bool:
    """Whether events are sent; the first call sets the distro up when a connection string is set."""
    known = sending
    return _set_up_once() if known is None else known


def _set_up_once() -> bool:
    global sending
    with _setup_lock:
        if sending is None:
            sending = _set_up()
        return sending


def _set_up() -> bool:
    connection_string = os.environ.get(CONNECTION_STRING_SETTING)
    if not connection_string:
        return False
    try:
        from azure.monitor.opentelemetry import configure_azure_monitor

        # The exporter signs in as APPLICATIONINSIGHTS_AUTHENTICATION_STRING says (the app's identity):
        # the component takes no telemetry on its instrumentation key alone.
        configure_azure_monitor(
            connection_string=connection_string,
            logger_name=LOGGER_NAME,
            enable_live_metrics=False,
            enable_performance_counters=False,
            instrumentation_options={name: {"enabled": False} for name in INSTRUMENTATIONS},
        )
    except Exception:
        # Telemetry must never cost an answer: without it, OnceGate answers as before.
        logger.exception("Application Insights telemetry could not be set up; no events are sent")
        return False
    return True


def emit(event: Event, dimensions: Mapping[str, Value | None]) -> None:
    """Send one event with those of ``dimensions`` it declares (None: absent)."""
    if not enabled():
        return
    kept = {name: value for name, value in dimensions.items() if value is not None and name in event.dimensions}
    _events.info(event.name, extra={EVENT_NAME_ATTRIBUTE: event.name, **kept})


# -- one HTTP answer ----------------------------------------------------------------------------------


@mutable
class _Answer:
    event: Event | None
    started: float
    round_trips: int = 0
    dimensions: dict[str, Value | None] = field(default_factory=dict)


# The answer being made in this context; None when telemetry is off or outside an answer.
_CURRENT: ContextVar[_Answer | None] = ContextVar("oncegate_telemetry_answer", default=None)


@frozen
class Answered:
    """An answer's event made and not yet sent: what ``answering`` keeps when told to keep it."""

    event: Event
    dimensions: dict[str, Value | None]

    def unavailable(self, code: str) -> Answered:
        """The same answer turned into a 503 after all, as Unavailable with its action, scope and flow."""
        return Answered(UNAVAILABLE, {**self.dimensions, HTTP_STATUS: 503, ERROR_CODE: code})

    def send(self) -> None:
        emit(self.event, self.dimensions)


@contextmanager
def answering(event: Event | None, action: str, *, kept: list[Answered] | None = None) -> Iterator[None]:
    """Time one answer of ``action`` and count its round trips; emit ``event`` at the end (Unavailable for a 503).

    ``event`` None: the action has no event of its own, and only a 503 is sent. With ``kept``, the event is
    added to it instead of sent: a bulk call's item is told its final answer only once the call has been
    committed (``oncegate.service.bulk``), and sends its event then.
    """
    if not enabled():
        yield
        return
    answer = _Answer(event, time.perf_counter(), dimensions={ACTION: action})
    token = _CURRENT.set(answer)
    try:
        yield
    finally:
        _CURRENT.reset(token)
    status = answer.dimensions.get(HTTP_STATUS)
    sent = UNAVAILABLE if status == 503 else answer.event
    if sent is not None:
        answer.dimensions[ROUND_TRIPS] = answer.round_trips
        answer.dimensions[LATENCY_MS] = round((time.perf_counter() - answer.started) * 1000, 2)
        made = Answered(sent, answer.dimensions)
        if kept is None:
            made.send()
        else:
            kept.append(made)


def describing() -> bool:
    """Whether an answer is being made to describe: dimensions built otherwise are thrown away (issue 36).

    Never true while :data:`sending` is not: the answer's own steps check the flag first (``sending and
    describing()``), and run no code of this module with telemetry off."""
    return _CURRENT.get() is not None


def describe(dimensions: Mapping[str, Value | None]) -> None:
    """Add dimensions to the answer being made; nothing outside one (or with telemetry off)."""
    answer = _CURRENT.get()
    if answer is not None:
        answer.dimensions.update(dimensions)


def round_trips() -> int:
    """The store round trips counted so far for the answer being made; 0 outside one (or with telemetry off)."""
    answer = _CURRENT.get()
    return answer.round_trips if answer is not None else 0


def round_trip(*_: object) -> None:
    """Count one store round trip for the answer being made: a ``raw_request_hook``, a SQLite trace callback."""
    answer = _CURRENT.get()
    if answer is not None:
        answer.round_trips += 1
