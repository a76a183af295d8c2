"""What Perform once's tests send: a request body, and the outbound adapter the service calls targets through."""

from __future__ import annotations

from typing import Any

from oncegate.domain.records import CALL_DEADLINE_MARGIN

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
