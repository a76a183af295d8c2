"""Bulk calls against the single calls they replace (issue 24), on SQLite and Table Storage side by side.

* the time of one Check and claim many of 100 new keys over HTTP, against the same 100 Check and
  claim calls sent one after another by one caller (one kept-alive connection); Record results
  against 100 Record result calls likewise;
* storage requests per item of a bulk call (Table Storage requests, SQLite statements): a new claim,
  a result;
* the connector calls of a 1,000-row import with 10% of its rows repeated, counted as a flow makes
  them: Check and claim many per 100 rows, Record results per 100 proceeds.

``python -m bench.bulk`` runs this part alone and prints its table.
"""

from __future__ import annotations

import http.client
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.rig import SECRET, STORES, Calls, Rig, claim_request, new_key
from oncegate.domain.keys import KeyHasher
from oncegate.models import ClaimRequest, RecordResultRequest
from tests.gate import Gate

ITEMS = 100
ROWS = 1000
REPEATED = 0.1


class Caller:
    """One caller on one kept-alive connection, as a flow's connection sends its actions one after another."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.connection = http.client.HTTPConnection(*address, timeout=120)
        self.calls = 0

    def post(self, path: str, body: Any) -> Any:
        self.calls += 1
        self.connection.request("POST", f"/api/{path}", json.dumps(body), {"Content-Type": "application/json"})
        response = self.connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, answer
        return answer

    def close(self) -> None:
        self.connection.close()


def _results(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"claimId": a["claimId"], "claimToken": a["claimToken"], "outcome": "succeeded", "targetRecordId": "ERP-1"}
        for a in answers
        if a.get("decision") == "proceed"
    ]


def http_times(rig: Rig, kind: str, rounds: int) -> dict[str, float]:
    """Median seconds of 100 single calls one after another, and of the bulk call doing the same."""
    times: dict[str, list[float]] = {"claims": [], "claim many": [], "results": [], "record results": []}
    with rig.server(kind, f"bulk-http-{kind}") as address:
        caller = Caller(address)
        try:
            for _ in range(rounds):
                items = [claim_request(new_key(), "run-1") for _ in range(ITEMS)]
                began = time.perf_counter()
                singles = [caller.post("claims", item) for item in items]
                times["claims"].append(time.perf_counter() - began)
                began = time.perf_counter()
                for result in _results(singles):
                    claim_id = result.pop("claimId")
                    caller.post(f"claims/{claim_id}/result", result)
                times["results"].append(time.perf_counter() - began)

                items = [claim_request(new_key(), "run-1") for _ in range(ITEMS)]
                began = time.perf_counter()
                many = caller.post("claims/batch", {"items": items})["value"]
                times["claim many"].append(time.perf_counter() - began)
                began = time.perf_counter()
                caller.post("claims/results", {"items": _results(many)})
                times["record results"].append(time.perf_counter() - began)
        finally:
            caller.close()
    return {name: statistics.median(values) for name, values in times.items()}


def requests_per_item(rig: Rig, kind: str) -> dict[str, float]:
    """Storage requests (Table Storage) or statements (SQLite) per item of a bulk call of 100."""
    calls = Calls()
    services = Gate(rig.store(kind, f"bulk-trips-{kind}", calls=calls), KeyHasher(SECRET)).services
    services.claims.health()  # the store's marks read first, as by a started instance
    requests = [ClaimRequest.model_validate(claim_request(new_key(), "run-1")) for _ in range(ITEMS)]
    before = calls.count
    answers = services.bulk.each(requests, services.claims.check_and_claim, same=lambda request: request.key)
    claimed = (calls.count - before) / ITEMS
    results = [
        (answer.claim_id, RecordResultRequest(claim_token=answer.claim_token or "", outcome="succeeded"))
        for answer in answers
        if not isinstance(answer, Exception)
    ]
    before = calls.count
    services.bulk.each(results, lambda item: services.results.record_result(*item), same=lambda item: item[0])
    recorded = (calls.count - before) / ITEMS
    services.bulk.close()
    return {"new claim": claimed, "result": recorded}


def import_calls(rig: Rig, kind: str) -> int:
    """Connector calls of a 1,000-row import with 10% of its rows repeated, as the recipe's flow makes them."""
    keys = [new_key() for _ in range(int(ROWS * (1 - REPEATED)))]
    rows = keys + random.Random(24).sample(keys, ROWS - len(keys))
    random.Random(25).shuffle(rows)
    with rig.server(kind, f"bulk-import-{kind}") as address:
        caller = Caller(address)
        try:
            for start in range(0, ROWS, ITEMS):
                page = rows[start : start + ITEMS]
                items = [claim_request(key, f"import/{start + n}") for n, key in enumerate(page)]
                proceeds = _results(caller.post("claims/batch", {"items": items})["value"])
                for chunk in range(0, len(proceeds), ITEMS):
                    caller.post("claims/results", {"items": proceeds[chunk : chunk + ITEMS]})
            return caller.calls
        finally:
            caller.close()


def measure(rig: Rig, *, rounds: int = 3) -> dict[str, dict[str, float]]:
    """Every figure of this part, per store."""
    figures: dict[str, dict[str, float]] = {}
    for kind in STORES:
        times = http_times(rig, kind, rounds)
        figures[kind] = {
            **{f"{name} s": value for name, value in times.items()},
            "claim many / claims": times["claim many"] / times["claims"],
            "record results / results": times["record results"] / times["results"],
            **{f"requests per {name}": value for name, value in requests_per_item(rig, kind).items()},
            "connector calls, 1,000-row import": import_calls(rig, kind),
        }
    return figures


def markdown(figures: dict[str, dict[str, float]]) -> str:
    names = list(next(iter(figures.values())))
    lines = ["| bulk calls (issue 24) | " + " | ".join(figures) + " |", "| --- |" + " --- |" * len(figures)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{figures[kind][name]:.3g}" for kind in figures) + " |")
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as workdir, Rig(Path(workdir)) as rig:
        print(markdown(measure(rig, rounds=3 if "--quick" not in sys.argv else 1)))


if __name__ == "__main__":
    main()
