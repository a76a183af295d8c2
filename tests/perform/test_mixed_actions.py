"""Check and claim never hands a run the claim of a Perform once whose call is under way.

A Perform once records its call on its claim before sending it; the run that holds the claim asking Perform once
again is told ``in_progress``. Check and claim with that run's run id, flow and data was recognised as the holder
asking again and answered ``proceed`` with the claim's token: released with it while the call was under way, the
claim went to the next Perform once, which sent the call again (the target made two orders). The run id and flow
can be read from the claim by anyone allowed to read claims.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from oncegate.domain.targets import Target
from tests.http.client import Api
from tests.perform.calls import perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget


@contextmanager
def released(stand_in: StandInTarget) -> Iterator[None]:
    try:
        yield
    finally:
        stand_in.release()


def test_check_and_claim_by_the_run_making_a_call_is_told_in_progress_and_gets_no_token(
    api: Api, declared: Declared, erp: Target, stand_in: StandInTarget
) -> None:
    declared.declare(with_target(erp, timeout_seconds=30))
    body = {**perform_body("SO-mixed", run="run-A"), "payload": {"amount": 10}}
    same_run: dict[str, Any] = {key: body[key] for key in ("scope", "key", "runId", "flow", "payload")}
    stand_in.script(Answer(late=True))
    with ThreadPoolExecutor(1) as pool, released(stand_in):
        held = pool.submit(api.call, "perform_once", body)
        stand_in.wait_for(1)
        asked = api.call("check_and_claim", same_run)
        waited = api.call("check_and_claim", {**same_run, "wait": True, "maxWaitSeconds": 60})
        by_another = api.call("perform_once", {**body, "runId": "run-B"})
        stand_in.release()
        performed = held.result(timeout=30)
    after = api.call("perform_once", {**body, "runId": "run-C"})

    assert (asked.status, asked.body["decision"], asked.body.get("claimToken")) == (200, "in_progress", None)
    assert (waited.body["decision"], waited.body.get("claimToken")) == ("in_progress", None)
    assert by_another.body["decision"] == "in_progress"
    assert performed.body["decision"] == "performed"
    assert after.body["decision"] == "duplicate"
    assert len(stand_in.writes()) == 1
