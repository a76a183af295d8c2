"""What Report conflict, Resolve conflict and List conflicts take."""

from __future__ import annotations

from typing import Any

from oncegate.domain.copies import frozen
from oncegate.domain.records import Flow
from oncegate.domain.statuses import ConflictStatus, Resolution
from oncegate.service.commands import BusinessData, Paging


@frozen(kw_only=True)
class ReportConflict(BusinessData):
    """A conflict the flow found itself, about the claim of this key."""

    run_id: str
    flow: Flow | None = None
    reason: str
    details: Any = None


@frozen(kw_only=True)
class ResolveConflict:
    """A reviewer's decision on a conflict."""

    decision: Resolution
    reviewer: str
    note: str | None = None


@frozen(kw_only=True)
class ListConflicts(Paging):
    """The conflicts of one status and scope, or all."""

    status: ConflictStatus | None = None
    scope: str | None = None
