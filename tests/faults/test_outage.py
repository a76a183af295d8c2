"""A Table Storage outage under the running local server: every action answers 503 with Retry-After, then recovers.

Azurite keeps its data on disk here, so stopping it is an outage, not a wipe: after it starts
again the claims made before must be there, unchanged, and new claims must work at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.domain.keys import KeyHasher
from oncegate.stores.tables.store import TableStore
from tests.conftest import KEY_SECRET
from tests.gate import Gate
from tests.http.client import Reply, ServerApi
from tests.load.served import served
from tests.support.azurite import CONNECTION_STRING_VARIABLE, Azurite

pytestmark = pytest.mark.azurite

SCOPE = "erp.create-order"
FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[Azurite]:
    """An Azurite of this test's own, keeping its data on disk, so that it can be stopped without losing it."""
    if os.environ.get(CONNECTION_STRING_VARIABLE):
        pytest.skip(f"{CONNECTION_STRING_VARIABLE} names an emulator this test cannot stop")
    azurite = Azurite(tmp_path, location=tmp_path / "data")
    azurite.start()
    yield azurite
    azurite.stop()


@pytest.fixture
def api(emulator: Azurite) -> Iterator[ServerApi]:
    # No SDK retries: each request during the outage fails at once instead of backing off for seconds.
    store = TableStore(TableServiceClient.from_connection_string(emulator.connection_string, retry_total=0))
    with served(Gate(store, KeyHasher(KEY_SECRET))) as address:
        yield ServerApi(address)
    store.close()


def ask(api: ServerApi, key: str, run: str, fingerprint: str = "v1") -> dict[str, Any]:
    reply = api.call(
        "check_and_claim", {"scope": SCOPE, "key": key, "fingerprint": fingerprint, "runId": run, "flow": FLOW}
    )
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


def result(api: ServerApi, answer: dict[str, Any], target: str) -> Reply:
    body = {"claimToken": answer["claimToken"], "outcome": "succeeded", "targetRecordId": target}
    return api.call("record_result", body, route={"claimId": answer["claimId"]})


def test_an_outage_answers_every_action_503_with_retry_after_and_claims_work_again_after_it(
    api: ServerApi, emulator: Azurite
) -> None:
    done = ask(api, "ORDER-done", "run-1")
    assert result(api, done, "ERP-1").status == 200
    held = ask(api, "ORDER-held", "run-2")
    conflict = ask(api, "ORDER-done", "run-3", fingerprint="v2")
    assert (held["decision"], conflict["decision"]) == ("proceed", "conflict")
    done_route, conflict_route = {"claimId": done["claimId"]}, {"conflictId": conflict["conflictId"]}
    before = api.call("get_claim", route=done_route).body
    token = {"claimToken": held["claimToken"]}
    held_route = {"claimId": held["claimId"]}
    during: dict[str, dict[str, Any]] = {
        "check_and_claim": {"body": {"scope": SCOPE, "key": "ORDER-new", "fingerprint": "v1", "runId": "run-4"}},
        "record_result": {
            "body": {**token, "outcome": "succeeded", "targetRecordId": "ERP-2"},
            "route": held_route,
        },
        "release_claim": {"body": {**token, "reason": "cancelled"}, "route": held_route},
        "renew_claim": {"body": {**token, "leaseSeconds": 600}, "route": held_route},
        "get_claim": {"route": done_route},
        "lookup_claim": {"body": {"scope": SCOPE, "key": "ORDER-done"}},
        "report_conflict": {
            "body": {"scope": SCOPE, "key": "ORDER-done", "fingerprint": "v3", "runId": "run-5", "reason": "ERP"}
        },
        "list_conflicts": {"params": {"status": "open"}},
        "on_conflict_reported": {"params": {"scope": SCOPE}},
        "get_conflict": {"route": conflict_route},
        "resolve_conflict": {"body": {"decision": "dismiss", "reviewer": "ops@contoso"}, "route": conflict_route},
        "health": {},
    }

    emulator.stop()
    try:
        replies = {name: api.call(name, **arguments) for name, arguments in during.items()}
    finally:
        emulator.start()

    for name, reply in replies.items():
        assert (name, reply.status, reply.code) == (name, 503, "store_unavailable"), reply.body
        assert int(reply.headers["retry-after"]) > 0, name
    # Nothing said before the outage was lost, and the service answers again without a restart of its own.
    assert api.call("get_claim", route=done_route).body == before
    assert api.call("health").status == 200
    again = ask(api, "ORDER-new", "run-4")
    assert (again["decision"], again["attempt"]) == ("proceed", 1)
    assert result(api, held, "ERP-2").body["status"] == "succeeded"
    assert api.call("get_conflict", route=conflict_route).body["status"] == "open"
    duplicate = ask(api, "ORDER-done", "run-6")
    assert (duplicate["decision"], duplicate["result"]["targetRecordId"]) == ("duplicate", "ERP-1")
