"""Storage round trips per action, counted at the store boundary.

Table Storage: HTTP requests, counted by the SDK's ``raw_request_hook`` (once per request sent,
retries included; an entity-group transaction is one request). SQLite: statements, counted by
``sqlite3.Connection.set_trace_callback`` (``BEGIN`` and ``COMMIT`` included; in-process calls,
not network round trips). Each action runs on a claim of its own, set up beforehand without
counting, a few times over; the counts are the same every time unless an action races.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.rig import SECRET, STORES, Calls, Rig, claim_request, new_key
from oncegate.domain.keys import KeyHasher
from oncegate.models import (
    ClaimRequest,
    ClaimResponse,
    HeartbeatRequest,
    RecordResultRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
)
from tests.gate import Gate

REPEATS = 3


class Clock:
    """Time moved by hand, so a lease runs out without waiting."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Flows:
    """The calls a flow makes, on one service and one clock."""

    service: Gate
    clock: Clock

    def claim(self, key: str, run: str, *, amount: float = 10.0, lease: int = 300) -> ClaimResponse:
        body = {**claim_request(key, run, amount=amount), "leaseSeconds": lease}
        return self.service.check_and_claim(ClaimRequest.model_validate(body))

    def succeed(self, answer: ClaimResponse) -> None:
        request = RecordResultRequest.model_validate(
            {"claimToken": answer.claim_token, "outcome": "succeeded", "targetRecordId": "ERP-1"}
        )
        self.service.record_result(answer.claim_id, request)

    def done(self, key: str) -> ClaimResponse:
        answer = self.claim(key, "run-1")
        self.succeed(answer)
        return answer

    def conflict(self, key: str) -> ClaimResponse:
        self.done(key)
        return self.claim(key, "run-2", amount=99.0)

    def expired(self, key: str) -> ClaimResponse:
        answer = self.claim(key, "run-1", lease=60)
        self.clock.advance(61)
        return answer

    def resolve(self, conflict: ClaimResponse, decision: str) -> None:
        request = ResolveConflictRequest.model_validate({"decision": decision, "reviewer": "ops@contoso"})
        self.service.resolve_conflict(conflict.conflict_id or "", request)


Setup = Callable[[Flows, str], Any]
Measured = Callable[[Flows, str, Any], object]
BACKGROUND = "new claim when the inventory refresh and count flush are due"

# (action, what the claim looks like before, the call counted)
ACTIONS: list[tuple[str, Setup, Measured]] = [
    ("new claim (proceed)", lambda f, k: None, lambda f, k, _: f.claim(k, "run-1")),
    ("duplicate of a finished claim", Flows.done, lambda f, k, _: f.claim(k, "run-2")),
    ("in-progress answer", lambda f, k: f.claim(k, "run-1"), lambda f, k, _: f.claim(k, "run-2")),
    ("record result", lambda f, k: f.claim(k, "run-1"), lambda f, k, answer: f.succeed(answer)),
    ("conflict (opens it)", Flows.done, lambda f, k, _: f.claim(k, "run-2", amount=99.0)),
    ("conflict (already open)", Flows.conflict, lambda f, k, _: f.claim(k, "run-3", amount=99.0)),
    ("reconcile (lease ran out)", Flows.expired, lambda f, k, _: f.claim(k, "run-2")),
    ("same run asks again (lost proceed)", lambda f, k: f.claim(k, "run-1"), lambda f, k, _: f.claim(k, "run-1")),
    (
        "same run asks again (lost reconcile)",
        lambda f, k: (f.expired(k), f.claim(k, "run-2")),
        lambda f, k, _: f.claim(k, "run-2"),
    ),
    (
        "release",
        lambda f, k: f.claim(k, "run-1"),
        lambda f, k, a: f.service.release(a.claim_id, ReleaseRequest(claim_token=a.claim_token, reason="none")),
    ),
    (
        "heartbeat",
        lambda f, k: f.claim(k, "run-1"),
        lambda f, k, a: f.service.heartbeat(a.claim_id, HeartbeatRequest(claim_token=a.claim_token)),
    ),
    ("get claim with history", Flows.done, lambda f, k, answer: f.service.get_claim(answer.claim_id)),
    (
        "report conflict",
        Flows.done,
        lambda f, k, _: f.service.report_conflict(
            ReportConflictRequest.model_validate({**claim_request(k, "run-9", amount=99.0), "reason": "ERP differs"})
        ),
    ),
    ("resolve conflict (keep_original)", Flows.conflict, lambda f, k, c: f.resolve(c, "keep_original")),
    ("resolve conflict (accept_new)", Flows.conflict, lambda f, k, c: f.resolve(c, "accept_new")),
    # Once per interval per instance (oncegate.service.inventory): the registry is read again and the
    # counts kept in memory are merged into the store. Every other action is counted with neither due.
    (BACKGROUND, lambda f, k: f.clock.advance(3600), lambda f, k, _: f.claim(k, "run-1")),
]


@dataclass(frozen=True)
class RoundTrips:
    """Round trips of one action on one store: the median of the repeats, and whether they all agreed."""

    median: float
    steady: bool


def measure(rig: Rig) -> dict[str, dict[str, RoundTrips]]:
    """action -> store -> round trips."""
    results: dict[str, dict[str, RoundTrips]] = {name: {} for name, _, _ in ACTIONS}
    for kind in STORES:
        calls = Calls()
        clock = Clock()
        flows = Flows(Gate(rig.store(kind, "roundtrips", calls=calls), KeyHasher(SECRET), clock=clock), clock)
        for name, setup, measured in ACTIONS:
            counts = []
            for _ in range(REPEATS):
                key = new_key()
                before_setup = setup(flows, key)
                if name != BACKGROUND:
                    flows.claim(new_key(), "run-warm-up")
                before = calls.count
                measured(flows, key, before_setup[-1] if isinstance(before_setup, tuple) else before_setup)
                counts.append(calls.count - before)
            results[name][kind] = RoundTrips(statistics.median(counts), len(set(counts)) == 1)
    return results
