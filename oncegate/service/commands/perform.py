"""What Perform once takes (issue 34)."""

from __future__ import annotations

from typing import Any

from oncegate.domain.copies import frozen
from oncegate.domain.records import Flow
from oncegate.service.commands import BusinessData


@frozen(kw_only=True)
class PerformOnce(BusinessData):
    """Perform once: the call OnceGate makes itself for this business key, at most once (issue 34).

    ``target`` names a declared target, ``path`` a path under its base URL (never a URL); ``body`` is JSON.
    """

    run_id: str
    target: str
    method: str
    path: str
    headers: dict[str, str]
    body: Any = None
    flow: Flow | None = None
    reference: str | None = None
