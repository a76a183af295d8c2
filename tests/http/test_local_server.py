"""The local server under load: 32 flows at once for one key, and many requests one after another."""

from __future__ import annotations

import os
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.http.client import Reply, ServerApi

IN_FLIGHT = 32
SEQUENTIAL = 100
OPEN_FILES = "/proc/self/fd"
FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}


@pytest.mark.parametrize("store_kind", ["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def test_32_requests_in_flight_for_one_key_get_exactly_one_proceed(
    local_server: tuple[str, int], store_kind: str
) -> None:
    api = ServerApi(local_server)
    barrier = threading.Barrier(IN_FLIGHT)

    def ask(index: int) -> Reply:
        body = {
            "scope": "erp.create-order",
            "key": "ORDER-rush",
            "fingerprint": "v1",
            "runId": f"run-{index}",
            "flow": FLOW,
        }
        barrier.wait(timeout=30)
        return api.call("check_and_claim", body)

    with ThreadPoolExecutor(IN_FLIGHT) as pool:
        replies = list(pool.map(ask, range(IN_FLIGHT)))

    assert [reply.status for reply in replies] == [200] * IN_FLIGHT
    assert Counter(reply.body["decision"] for reply in replies) == {"proceed": 1, "in_progress": IN_FLIGHT - 1}
    winner = next(index for index, reply in enumerate(replies) if reply.body["decision"] == "proceed")
    leases = {reply.body["holder"]["leaseExpiresAt"] for reply in replies if "holder" in reply.body}
    assert leases == {replies[winner].body["leaseExpiresAt"]}
    history = api.call("get_claim", route={"claimId": replies[winner].body["claimId"]}).body["history"]
    # The losers' in_progress answers are one line with their count (on Table Storage, a few more lines may
    # keep answers that lost the count's race too often).
    assert sum(entry.get("count", 1) for entry in history) == IN_FLIGHT
    assert history[0]["outcome"] == "proceed"


@pytest.mark.skipif(not os.path.isdir(OPEN_FILES), reason="counts open files through /proc")
def test_requests_one_after_another_leave_no_open_files_behind(local_server: tuple[str, int]) -> None:
    api = ServerApi(local_server)
    api.call("health")
    before = len(os.listdir(OPEN_FILES))

    statuses = {api.call("health").status for _ in range(SEQUENTIAL)}

    # Each request runs on a thread of its own; a store connection per thread left open would add two per request.
    assert statuses == {200}
    assert len(os.listdir(OPEN_FILES)) - before < SEQUENTIAL // 10
