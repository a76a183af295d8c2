"""Perform once in the domain's words: what a target's reply means for the claim, and what of it is kept (issue 34).

Perform once makes the side effect itself: it claims the key, records that the call is being sent,
calls the target and records the outcome. The pure parts live here; :mod:`oncegate.service.perform`
reads, calls and writes around them::

    reply                                   the claim          the flow is told
    a success status (2xx, or declared)     succeeded          performed (later: duplicate)
    408, 429, 3xx, 5xx                      unknown            reconcile (a look-up settles it later)
    timeout, broken, too large after send   unknown            reconcile
    another 4xx                             failed             failed (retryable if the target says so)
    nothing sent (refused, not connected)   failed, retryable  failed

A claim Perform once made keeps its call in ``data`` under ``call`` (the target, the method and the call's
deadline, never the path or body: they may carry what must not be kept), or, while it looks an earlier call in doubt
up, a look-up mark under ``lookUp``; once it has an answer, the response kept under ``response``: the status, the
headers and body parts the target declares. An attempt that took a call in doubt over keeps that call under
``earlierCall`` until it makes one of its own: a look-up goes where the call went, never to the target a later
request names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from oncegate.domain.copies import frozen
from oncegate.domain.fingerprint_rules import applied, rules, segments
from oncegate.domain.limits import DATA_LIMIT_BYTES, MAX_NESTING, TARGET_RECORD_ID_MAX_LENGTH, json_depth, json_size
from oncegate.domain.records import CALL, LOOK_UP, Claim, looked_up_call
from oncegate.domain.statuses import Outcome
from oncegate.domain.targets import Failure, Target, TargetReply

# Perform once's lease is the target's time plus this: the call, its recording, and room for a slow store.
LEASE_MARGIN = timedelta(seconds=30)
# The members of a Perform once claim's data: its call (records.CALL, which the decision table reads too) and the
# response the target gave.
RESPONSE = "response"
# What a response kept may take of a claim's data: the data limit, less room for the call and the JSON around it.
RESPONSE_BUDGET = DATA_LIMIT_BYTES - 1024
# A look-up's placeholders, as a target's lookupPath names them.
PLACEHOLDERS = ("reference", "idempotencyKey")


class PerformDecision(StrEnum):
    """What Perform once tells the flow."""

    PERFORMED = "performed"
    DUPLICATE = "duplicate"
    IN_PROGRESS = "in_progress"
    CONFLICT = "conflict"
    BLOCKED = "blocked"
    FAILED = "failed"
    RECONCILE = "reconcile"


@frozen(kw_only=True)
class KeptResponse:
    """What is kept of a target's answer: its status, the declared headers and the declared body parts."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None

    def as_data(self) -> dict[str, Any]:
        kept: dict[str, Any] = {"status": self.status}
        if self.headers:
            kept["headers"] = self.headers
        if self.body is not None:
            kept["body"] = self.body
        return kept

    @classmethod
    def of_data(cls, data: Any) -> KeptResponse | None:
        """The response a claim's data keeps; None when it keeps none (not made by Perform once; a tombstone; a call
        that got no answer, whose kept status is null)."""
        if not isinstance(data, dict) or not isinstance(data.get(RESPONSE), dict):
            return None
        kept = data[RESPONSE]
        status = kept.get("status")
        if not isinstance(status, int):
            return None
        headers = kept.get("headers")
        return cls(status=status, headers=dict(headers) if isinstance(headers, dict) else {}, body=kept.get("body"))


@frozen(kw_only=True)
class Settled:
    """How one reply settles the attempt that sent it: the outcome to record, and what the flow is told."""

    outcome: Outcome
    decision: PerformDecision
    error: str | None = None
    retryable: bool | None = None


def fingerprint_payload(target: str, method: str, path: str, body: Any) -> dict[str, Any]:
    """What a Perform once without ``payload`` or ``fingerprint`` is fingerprinted by: the call it would make."""
    return {"target": target, "method": method.upper(), "path": path, "body": body}


def lease_of(target: Target) -> timedelta:
    """Perform once's lease: at least the target's whole call, plus room to record it."""
    return timedelta(seconds=target.timeout_seconds) + LEASE_MARGIN


def call_mark(target: Target, method: str, sent_at: datetime) -> dict[str, Any]:
    """What the claim records before the call leaves: the target, the method, when it was sent and its deadline."""
    deadline = sent_at + timedelta(seconds=target.timeout_seconds)
    return {
        CALL: {"target": target.name, "method": method.upper(), "sentAt": _time(sent_at), "deadline": _time(deadline)}
    }


def look_up_mark(started_at: datetime) -> dict[str, Any]:
    """What a claim taken over to look an earlier call up records in the write that grants it, until the look-up
    settles it: no request is the holder asking again meanwhile (Intent.is_holder_of)."""
    return {LOOK_UP: {"startedAt": _time(started_at)}}


def called_target(claim: Claim | None) -> str | None:
    """The target the call a look-up of ``claim`` must find went to."""
    call = looked_up_call(claim) if claim is not None else None
    name = call.get("target") if call else None
    return name if isinstance(name, str) else None


def _time(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def settled_by(target: Target, reply: TargetReply) -> Settled:
    """What ``reply`` makes of the attempt that sent it (see the module's table)."""
    if reply.failure is not None:
        reason = reply.reason or reply.failure.value
        if not reply.sent:
            return Settled(
                outcome=Outcome.FAILED,
                decision=PerformDecision.FAILED,
                error=f"Nothing was sent to target {target.name}: {reason}.",
                retryable=True,
            )
        return Settled(
            outcome=Outcome.UNKNOWN,
            decision=PerformDecision.RECONCILE,
            error=f"The call to target {target.name} was sent and {_failure_text(reply.failure)}: {reason}.",
        )
    status = reply.status or 0
    if succeeded(target, status):
        return Settled(outcome=Outcome.SUCCEEDED, decision=PerformDecision.PERFORMED)
    if 400 <= status < 500 and status not in (408, 429):
        retryable = status in target.retryable_statuses
        return Settled(
            outcome=Outcome.FAILED,
            decision=PerformDecision.FAILED,
            error=f"Target {target.name} refused the call with {status}.",
            retryable=retryable,
        )
    return Settled(
        outcome=Outcome.UNKNOWN,
        decision=PerformDecision.RECONCILE,
        error=f"Target {target.name} answered {status}: it may have acted.",
    )


def _failure_text(failure: Failure) -> str:
    return {
        Failure.TIMEOUT: "no answer came in time",
        Failure.BROKEN: "the connection broke before the whole answer",
        Failure.TOO_LARGE: "its answer was over the bound",
    }.get(failure, failure.value)


def succeeded(target: Target, status: int) -> bool:
    """Whether ``status`` is one of the target's success statuses (every 2xx unless it declares its own)."""
    return status in target.success_statuses if target.success_statuses else 200 <= status < 300


def json_body(reply: TargetReply) -> Any:
    """The reply's body as JSON; None when it is empty or not JSON."""
    if not reply.body:
        return None
    try:
        return json.loads(reply.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        # RecursionError: arrays or objects nested some thousands deep, which the answer's 1 MiB holds easily.
        return None


def record_id(target: Target, body: Any) -> str | None:
    """The record the target made, where its ``record_pointer`` points in the answer's JSON body."""
    if target.record_pointer is None or body is None:
        return None
    found: Any = body
    for token in segments(target.record_pointer):
        if isinstance(found, dict) and token in found:
            found = found[token]
        elif isinstance(found, list) and token.isdigit() and int(token) < len(found):
            found = found[int(token)]
        else:
            return None
    if isinstance(found, bool) or not isinstance(found, str | int):
        return None
    text = str(found)
    return text if 0 < len(text) <= TARGET_RECORD_ID_MAX_LENGTH else None


def kept_response(target: Target, reply: TargetReply, body: Any) -> tuple[KeptResponse, list[str]]:
    """What of the reply is kept, and what could not be (``body`` over the data limit: dropped, and said so)."""
    wanted = {name.lower() for name in target.kept_headers}
    headers = {name: value for name, value in reply.headers.items() if name.lower() in wanted}
    parts = applied(body, rules(0, include=target.kept_pointers)) if target.kept_pointers and body is not None else None
    kept = KeptResponse(status=reply.status, headers=headers, body=parts)
    dropped: list[str] = []
    # Nested past what a stored value may be (as result data), no answer showing the claim could be written.
    if json_size(kept.as_data()) > RESPONSE_BUDGET or json_depth(parts) > MAX_NESTING:
        kept = KeptResponse(status=reply.status, headers=headers)
        dropped.append("response.body")
    if json_size(kept.as_data()) > RESPONSE_BUDGET:
        kept = KeptResponse(status=reply.status)
        dropped.append("response.headers")
    return kept, dropped


def lookup_path(template: str, values: Mapping[str, str | None]) -> str | None:
    """The look-up path for one claim, each placeholder replaced by its value percent-encoded; None when a value
    the template names is missing (a claim without a reference cannot be looked up by one)."""
    path = template
    for name in PLACEHOLDERS:
        placeholder = "{" + name + "}"
        if placeholder in path:
            value = values.get(name)
            if not value:
                return None
            path = path.replace(placeholder, quote(value, safe=""))
    return path
