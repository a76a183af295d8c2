"""The walk of one Check and claim: which of OnceGate's modules run code for it, from the Azure function to its
answer, on each store (issue 32).

A request that crosses thirty modules is thirty files for a reader to follow and thirty places for its cost to
hide. The walk is measured as the issue measures it: the profiler records every function called while the app's
own ``check_and_claim`` function answers one new key (a ``proceed``, the most common answer), after a first
call has warmed the instance (its settings, rules and key ring read). The bound is what the code reaches now:
a module added to the path fails this test, which names every module walked, so the corridor does not grow
back unseen. Raise the bound only for a module that is a room of its own, and say which in the commit.

Each module walked is named below with the room it is, as ``test_shapes`` names each type made: a module that
joins the path fails here even when another has left it, and a reader looking for the next cut sees at once why
each of the rest is walked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import azure.functions as func
import pytest

from tests.http.client import FUNCTIONS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "oncegate"
# The modules one Check and claim runs, besides function_app.py (which declares the function and runs none of
# its code per request). Measured on main efb2e08: 33 on SQLite, 35 on Table Storage; 26 on both on main 1b489f1;
# 23 and 22 once the Tables error translation joined entities.py, canonical JSON members.py, the Intent
# decisions.py, and the personal-data check of what a request stores parse.py; 22 and 21 once the pipeline read
# telemetry's flag instead of entering it with telemetry off; 21 and 20 once the inventory counted in its own
# tallies, usage.py only merging them into the store; 20 and 19 once keys.py made every keyed digest of a
# request, members.py only comparing member digests under a scope's rules; 18 and 17 once the pipeline took the
# process's services and settings once built (bootstrap.py called only until then) and ran an entry's steps itself
# (table.py only declares, its Call holding the caller's name); 17 and 16 once the core took the safeguard's standing
# reading of the key ring as it is, asking the safeguard (safeguard.py) only for a new one; 16 and 15 once the
# stored format was split by direction (row_writing.py: records as rows, held to a row's limits, which took in
# large_values.py's write side; row_reading.py: rows of every release read back), a claim being written, not read.
# Each module left is a room of its own (below): taking another off the path would merge two rooms, move a helper
# into a module it has nothing to do with, or hide its code from this measure (a method written by ``exec``, whose
# file is no file of OnceGate's).
MOST_MODULES = {"sqlite": 16, "tables": 15}

# Why each module runs for one new key, on both stores.
WALKED = {
    "oncegate/entrypoints/http.py": "the one pipeline every action runs",
    "oncegate/entrypoints/parse.py": "reading any request: its strict JSON body, its query, personal data it stores",
    "oncegate/entrypoints/operations/claims.py": "Check and claim's entry: the intent made of the body, the answer",
    "oncegate/service/claims.py": "the claim service: it reads, asks the decision table, writes and retries",
    "oncegate/service/core.py": "what every claim service shares: the intent identified, writes counted and remembered",
    "oncegate/service/inventory.py": "the scopes' rules and leases, the flows' refusals, and the counts of both",
    "oncegate/domain/sensitive.py": "the personal-data detectors, which read every key",
    "oncegate/domain/keys.py": "every digest keyed with the secret: claim id, fingerprint, token, idempotency key",
    "oncegate/domain/decisions.py": "the decision table, and the answer it tells",
    # Helpers of every layer, each used by modules of the domain, the services and both stores.
    "oncegate/domain/copies.py": "a record with some fields changed, at a fraction of dataclasses.replace's cost",
    "oncegate/bounded.py": "the bounded memory of an instance's own last writes (the core's claims, the Azure store's)",
    # The write side of the stored format: a claim is written, never read back, so row_reading.py is not walked.
    "oncegate/stores/row_writing.py": "records as the rows both stores write, held to Table Storage's limits on a row",
}
STORE_WALKED = {
    "sqlite": {
        "oncegate/stores/sqlite.py": "the SQLite store's ports over a connection a thread",
        # The store's module imports its new claims' and backups' (its mixins), which write these rows too.
        "oncegate/stores/sqlite_rows.py": "the rows the store, its new claims and its backups write",
        "oncegate/stores/sqlite_locks.py": "the queue of a process's writers, and the lock across processes",
        "oncegate/stores/paging.py": "times as fixed-width text that sorts: SQLite's time columns, lists' places",
    },
    "tables": {
        "oncegate/stores/tables/claims.py": "the Azure store's claims port",
        "oncegate/stores/tables/entities.py": "what every port of the Azure store shares: keys, entities, its errors",
        "oncegate/stores/tables/batch.py": "the entity-group transaction, a claim and its history line in one request",
    },
}


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Both stores: the walk differs below the store's port."""
    kind: str = request.param
    return kind


def check_and_claim(key: str) -> func.HttpResponse:
    body = {
        "scope": "erp.order",
        "key": key,
        "flow": {"name": "Create order", "environment": "Default"},
        "runId": f"run-{key}",
        "payload": {"amount": 1},
    }
    request = func.HttpRequest(
        "POST",
        "http://localhost:7071/api/claims",
        body=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    response: func.HttpResponse = FUNCTIONS["check_and_claim"].get_user_function()(request)
    return response


def walked(key: str) -> tuple[func.HttpResponse, list[str]]:
    """The answer to one Check and claim, and the modules of ``oncegate`` whose functions ran for it, in order."""
    modules: dict[str, None] = {}
    package = f"{PACKAGE}/"

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(package):
            modules.setdefault(str(Path(frame.f_code.co_filename).relative_to(ROOT)), None)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        response = check_and_claim(key)
    finally:
        sys.setprofile(previous)
    return response, list(modules)


def test_one_check_and_claim_runs_in_few_modules(store_kind: str) -> None:
    assert check_and_claim("ORDER-1").status_code == 200  # warms the instance: settings, rules, key ring

    response, modules = walked("ORDER-2")

    assert response.status_code == 200
    assert json.loads(response.get_body())["decision"] == "proceed"
    listed = "\n".join(modules)
    assert len(modules) <= MOST_MODULES[store_kind], f"{len(modules)} modules on {store_kind}:\n{listed}"
    unnamed = set(modules) - set(WALKED) - set(STORE_WALKED[store_kind])
    assert not unnamed, f"walked on {store_kind} and not named as a room: {sorted(unnamed)}\n{listed}"
    # The measure itself: it sees the pipeline, the service, the decision and the store.
    store = "oncegate/stores/sqlite.py" if store_kind == "sqlite" else "oncegate/stores/tables/claims.py"
    for module in ("oncegate/entrypoints/http.py", "oncegate/service/claims.py", "oncegate/domain/decisions.py", store):
        assert module in modules, f"{module} not walked:\n{listed}"
    # Work this answer need not do: telemetry is off (the pipeline reads its flag), and the inventory's counts are
    # merged into the store only once their interval is over (the clock here never moves); the services were built
    # and the settings read by the first call (the composition root), the entry is a declaration the pipeline runs,
    # and the key ring read by the first call stands (the safeguard reads the marks again after its interval). A new
    # claim is written and answered from what was written: no row is read back into a record.
    unneeded = (
        "oncegate/telemetry.py",
        "oncegate/service/usage.py",
        "oncegate/bootstrap.py",
        "oncegate/entrypoints/operations/table.py",
        "oncegate/service/safeguard.py",
        "oncegate/stores/row_reading.py",
    )
    for module in unneeded:
        assert module not in modules, f"{module} walked:\n{listed}"
