"""Two runs of the bulk import sample, ``connector/samples/bulk-workflow.json``, at once on overlapping rows.

deploy.md's bulk import is triggered by a list of rows; two triggers of overlapping lists (a list sent again while
its first run still works, two schedules meeting) run side by side, on threads of their own against one app over
the real store. Each run's rows end proceeded, skipped as done or held (another run holds them), never failed;
the stand-in ERP gets each order once, and every claim ends succeeded with the order its run recorded. The run
after them finds every row done.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus
from tests.conftest import KEY_SECRET, FakeClock
from tests.connector.spec import load
from tests.connector.test_samples import BULK_WORKFLOW
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.infra.test_bulk_workflow import SCOPE, Erp, claims_of, outcome
from tests.infra.test_logic_app import PARAMETERS
from tests.infra.wdl import Call, Run

# Rows of two lists: the first run's rows 0 to 59, the second's 30 to 89, so that 30 rows are in both; on Table
# Storage fewer (its bulk calls write an item a request each, the same for every item).
ROWS = {"sqlite": (60, 30), "tables": (24, 12)}
RETRIES = 4


def rows_of(start: int, count: int) -> list[dict[str, Any]]:
    return [
        {"rowId": f"row-{n}", "orderNumber": f"SO-{n:04d}", "customer": "Contoso", "amount": 10.0 + n}
        for n in range(start, start + count)
    ]


class MeetingErp(Erp):
    """The stand-in ERP, answering the two runs' calls one at a time, as one system would; each run's first order
    waits for the other's, so that both have claimed their first page before either records a result."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._meeting = threading.Barrier(2)
        self._met: set[int] = set()

    def __call__(self, request: dict[str, Any]) -> tuple[int, Any]:
        if request["method"] == "POST" and threading.get_ident() not in self._met:
            self._met.add(threading.get_ident())
            self._meeting.wait(timeout=30)
        with self._lock:
            return super().__call__(request)


def test_two_runs_of_the_bulk_import_on_overlapping_rows_make_each_order_once(
    call_app: Call, service: Gate, clock: FakeClock, store_kind: str
) -> None:
    definition = load(BULK_WORKFLOW)["definition"]
    count, shift = ROWS[store_kind]
    lists = [rows_of(0, count), rows_of(shift, count)]
    erp = MeetingErp()
    start = threading.Barrier(2)

    def run(rows: list[dict[str, Any]], name: str) -> Run:
        return Run(
            definition,
            {"rows": rows},
            call_app,
            PARAMETERS,
            name=name,
            retries=RETRIES,
            target=erp,
            sleep=clock.advance,
        ).start()

    def racing(index: int) -> Run:
        start.wait(timeout=30)
        return run(lists[index], f"run-{index}")

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(racing, range(2)))
    answers = [outcome(done) for done in runs]
    # The runs met: a run told in_progress for rows the other held asked for them again in a later pass.
    assert sum(done.sent.count(("post", "/api/claims/batch")) for done in runs) > len(runs)

    every = {row["orderNumber"] for rows in lists for row in rows}
    assert erp.orders() == dict.fromkeys(every, 1), "an order missing or made twice"
    for rows, answer in zip(lists, answers, strict=True):
        assert answer["failed"] == [], answer
        told = answer["proceeded"] + answer["skippedAsDone"] + answer["held"]
        assert sorted(told) == sorted(row["rowId"] for row in rows), answer
    assert not set(answers[0]["proceeded"]) & set(answers[1]["proceeded"]), "a row proceeded in both runs"
    hasher = KeyHasher(KEY_SECRET)
    assert claims_of(FaultyStore(service.store, Fault.AFTER), SCOPE) == {
        hasher.claim_id(SCOPE, order): (ClaimStatus.SUCCEEDED, made) for order, made in erp.made
    }
    after = outcome(run(rows_of(0, count + shift), "run-after"))
    assert (after["proceeded"], after["held"], after["failed"]) == ([], [], [])
