"""Many flows at once over HTTP, then an audit of every key's history against the calls really made.

Each business key is triggered ``duplicates`` times (redelivery, re-runs, a copied flow), the
triggers of one key side by side in the queue so that different clients send them at about
the same moment. Every ``changed_every``-th key has one trigger carrying a changed payload.
A client follows the answer as a flow does: on ``proceed`` it records ``succeeded``.

The audit reads each claim back (``GET /api/claims/{id}``) and checks it against the client's
own log: exactly one ``succeeded``, with the winner's target record; one claim event per Check
and claim call, with the same decisions the clients were given; each conflict answer present
and open in the conflict list.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}
JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Workload:
    """How many clients send how many keys, each how many times, and how often a payload changes."""

    clients: int
    keys: int
    duplicates: int
    changed_every: int = 10
    scope: str = "load.create-order"


@dataclass(frozen=True)
class Trigger:
    """One Check and claim sent by one flow run, and what it was told."""

    key: str
    run_id: str
    changed: bool
    decision: str
    claim_id: str
    conflict_id: str | None
    target_record_id: str | None
    seconds: float


@dataclass
class LoadReport:
    """What the clients saw: every trigger, every HTTP status, and the wall time."""

    workload: Workload
    triggers: list[Trigger] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def by_key(self) -> dict[str, list[Trigger]]:
        keys: dict[str, list[Trigger]] = defaultdict(list)
        for trigger in self.triggers:
            keys[trigger.key].append(trigger)
        return keys


class Client:
    """One keep-alive connection to the local server: each client thread sends its triggers over its own."""

    def __init__(self, address: tuple[str, int], report: LoadReport, lock: threading.Lock) -> None:
        self._connection = http.client.HTTPConnection(*address, timeout=60)
        self._report, self._lock = report, lock

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        raw = None if body is None else json.dumps(body)
        self._connection.request(method, path, raw, JSON)
        response = self._connection.getresponse()
        answer = json.loads(response.read())
        with self._lock:
            self._report.statuses[response.status] += 1
        return response.status, answer

    def trigger(self, workload: Workload, key: str, index: int) -> Trigger:
        changed = index == workload.duplicates - 1 and _key_number(key) % workload.changed_every == 0
        run_id = f"{key}-run-{index}"
        body = {
            "scope": workload.scope,
            "key": key,
            "payload": {"order": key, "amount": 11.5 if changed else 10.0},
            "runId": run_id,
            "flow": FLOW,
        }
        started = time.perf_counter()
        status, answer = self.call("POST", "/api/claims", body)
        seconds = time.perf_counter() - started
        if status != 200:
            raise AssertionError(f"Check and claim for {key} answered {status}: {answer}")
        target = None
        if answer["decision"] == "proceed":
            target = f"ERP-{key}-{index}"
            result = {"claimToken": answer["claimToken"], "outcome": "succeeded", "targetRecordId": target}
            status, recorded = self.call("POST", f"/api/claims/{answer['claimId']}/result", result)
            if status != 200:
                raise AssertionError(f"Record result for {key} answered {status}: {recorded}")
        elif answer["decision"] == "duplicate":
            target = answer["result"]["targetRecordId"]
        decision, claim_id, conflict_id = answer["decision"], answer["claimId"], answer.get("conflictId")
        return Trigger(key, run_id, changed, decision, claim_id, conflict_id, target, seconds)

    def close(self) -> None:
        self._connection.close()


def _key_number(key: str) -> int:
    return int(key.rsplit("-", 1)[1])


def run(address: tuple[str, int], workload: Workload, *, prefix: str = "SO") -> LoadReport:
    """Send every trigger of ``workload`` from ``workload.clients`` threads released together."""
    report = LoadReport(workload)
    lock = threading.Lock()
    tasks = iter([(f"{prefix}-{k}", d) for k in range(workload.keys) for d in range(workload.duplicates)])
    start = threading.Barrier(workload.clients + 1)

    def client_loop() -> None:
        client = Client(address, report, lock)
        start.wait(timeout=60)
        try:
            while True:
                with lock:
                    task = next(tasks, None)
                if task is None:
                    return
                trigger = client.trigger(workload, *task)
                with lock:
                    report.triggers.append(trigger)
        except Exception as exc:
            with lock:
                report.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            client.close()

    threads = [threading.Thread(target=client_loop) for _ in range(workload.clients)]
    for thread in threads:
        thread.start()
    start.wait(timeout=60)
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    report.seconds = time.perf_counter() - began
    return report


def audit(address: tuple[str, int], report: LoadReport) -> list[str]:
    """Every disagreement between the stored claims and what the clients were told; empty when all agree."""
    keys = list(report.by_key().values())
    lock = threading.Lock()
    clients = report.workload.clients

    def check(share: list[list[Trigger]]) -> list[str]:
        client = Client(address, report, lock)
        try:
            return [problem for triggers in share for problem in _check_key(client, triggers)]
        finally:
            client.close()

    with ThreadPoolExecutor(clients) as pool:
        shares = [keys[index::clients] for index in range(clients)]
        problems = [problem for found in pool.map(check, shares) for problem in found]
    problems += _conflict_list_problems(address, report, lock)
    expected = report.workload.keys * report.workload.duplicates
    if len(report.triggers) != expected:
        problems.append(f"{len(report.triggers)} triggers answered, {expected} sent")
    return problems + report.errors


def _check_key(client: Client, triggers: list[Trigger]) -> list[str]:
    key = triggers[0].key
    status, claim = client.call("GET", f"/api/claims/{triggers[0].claim_id}")
    if status != 200:
        return [f"{key}: GET claim answered {status}"]
    problems = []
    history = [*claim["history"], *_rest_of_history(client, claim)]
    winners = [trigger for trigger in triggers if trigger.decision == "proceed"]
    results = [entry for entry in history if entry["event"] == "result"]
    claim_events: Counter[str] = Counter()
    for entry in history:
        if entry["event"] == "claim":
            claim_events[entry["outcome"]] += entry.get("count", 1)  # answers alike are one entry with their count
    if len(winners) != 1:
        problems.append(f"{key}: {len(winners)} proceed answers")
    elif claim.get("targetRecordId") != winners[0].target_record_id:
        problems.append(f"{key}: target {claim.get('targetRecordId')}, winner recorded {winners[0].target_record_id}")
    if claim["status"] != "succeeded" or [entry["outcome"] for entry in results] != ["succeeded"]:
        problems.append(f"{key}: status {claim['status']}, results {[entry['outcome'] for entry in results]}")
    decisions = Counter(trigger.decision for trigger in triggers)
    if claim_events != decisions:
        problems.append(f"{key}: history has claim events {dict(claim_events)}, clients were told {dict(decisions)}")
    if winners:
        mismatched = sum(1 for trigger in triggers if trigger.changed != winners[0].changed)
        if decisions["conflict"] != mismatched:
            problems.append(f"{key}: {decisions['conflict']} conflict answers for {mismatched} changed payloads")
    duplicates = {trigger.target_record_id for trigger in triggers if trigger.decision == "duplicate"}
    if duplicates - {claim.get("targetRecordId")}:
        problems.append(f"{key}: duplicates were given {duplicates}, the claim holds {claim.get('targetRecordId')}")
    return problems


def _rest_of_history(client: Client, claim: dict[str, Any]) -> list[dict[str, Any]]:
    """The history entries after the first page Get claim gives, page by page from its ``historyNextLink``."""
    rest: list[dict[str, Any]] = []
    link = claim.get("historyNextLink")
    while link:
        parts = urlsplit(link)
        status, page = client.call("GET", f"{parts.path}?{parts.query}")
        assert status == 200, page
        rest.extend(page["value"])
        link = page.get("nextLink")
    return rest


def _conflict_list_problems(address: tuple[str, int], report: LoadReport, lock: threading.Lock) -> list[str]:
    answered = {trigger.conflict_id for trigger in report.triggers if trigger.conflict_id}
    client = Client(address, report, lock)
    listed: set[str] = set()
    path: str | None = "/api/conflicts?" + urlencode({"status": "open", "scope": report.workload.scope, "top": 50})
    try:
        while path:
            status, page = client.call("GET", path)
            if status != 200:
                return [f"GET conflicts answered {status}"]
            listed |= {conflict["conflictId"] for conflict in page["value"]}
            link = page.get("nextLink")
            path = None if link is None else f"{urlsplit(link).path}?{urlsplit(link).query}"
    finally:
        client.close()
    return [] if listed == answered else [f"open conflicts {len(listed)}, conflict answers for {len(answered)}"]
