"""What Perform once's tests send: a request body, and the outbound adapter the service calls targets through."""

from __future__ import annotations

from typing import Any

FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}


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
