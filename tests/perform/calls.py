"""What Perform once's tests send: a request body, and one Perform once answered without HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oncegate.domain.records import CALL_DEADLINE_MARGIN
from oncegate.entrypoints import http
from oncegate.entrypoints.operations import BY_NAME, Call
from oncegate.models import PerformRequest, PerformResponse

if TYPE_CHECKING:
    from tests.gate import Gate

FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}


# Seconds past a call's recorded deadline after which any instance judges it over and looks it up (the margin for
# the instances' clocks, and one more).
PAST_DEADLINE = int(CALL_DEADLINE_MARGIN.total_seconds()) + 1


def perform_body(
    key: str = "SO-1001", *, run: str = "run-1", scope: str = "erp.create-order", **fields: Any
) -> dict[str, Any]:
    """A Perform once body creating an order by POST /orders, its reference the key."""
    return {
        "scope": scope,
        "key": key,
        "runId": run,
        "flow": FLOW,
        "reference": key,
        "target": "erp",
        "method": "POST",
        "path": "/orders",
        "body": {"reference": key, "amount": 10},
        **fields,
    }


def perform(service: Gate, key: str, run: str) -> PerformResponse:
    """Perform once for ``key`` by ``run``, through the entry's steps as the app runs them, without HTTP."""
    request = PerformRequest.model_validate(perform_body(key, run=run), by_name=False)
    answer: PerformResponse = http.answer(BY_NAME["perform_once"], service.services, Call(body=request))
    return answer
