"""Every request and response body of the contract, as pydantic models; import them from here.

A package rather than one module because each field carries its designer text next to it (issue 11),
which made one module of about a thousand lines. The modules follow the aggregates: ``claim_requests``
(and ``claim_waits``, the poll of its wait) and ``claim_views``, ``conflicts``, ``inventory``, ``health`` (with
the error body), ``paging`` (a list's page, which a Check and claim never reads); ``base`` holds what they share:
wire naming, size limits, field types and :func:`~oncegate.models.base.designer`.

The modules do without ``from __future__ import annotations``: with it, pydantic evaluates every field's
annotation again from its text when the class is made, a sixth of what importing them costs (issue 36).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oncegate.domain.limits import (
        DATA_LIMIT_BYTES,
        DEFAULT_LEASE_SECONDS,
        DEFAULT_RETENTION_DAYS,
        DETAILS_LIMIT_BYTES,
        MAX_ITEMS,
        MAX_LEASE_SECONDS,
        MAX_RETENTION_DAYS,
        MIN_LEASE_SECONDS,
        MIN_RETENTION_DAYS,
    )
    from oncegate.models.base import (
        ADVANCED,
        IMPORTANT,
        INTERNAL,
        MAX_CURSOR_LENGTH,
        LeaseSeconds,
        Scope,
        Text256,
        Visibility,
        designer,
        json_size,
    )
    from oncegate.models.bulk import (
        BulkItems,
        ClaimManyAnswer,
        ClaimManyEntry,
        ClaimManyRequest,
        RecordResultsAnswer,
        RecordResultsRequest,
        ResultEntry,
        ResultItem,
    )
    from oncegate.models.claim_records import (
        ClaimAttentionList,
        ClaimHistory,
        ClaimList,
        ClaimNeedingAttention,
        ClaimView,
        FindClaimsQuery,
        HeartbeatRequest,
        HistoryEntry,
        ListClaimsQuery,
        LookupRequest,
        RecordResultRequest,
        ReleaseRequest,
        ReviewClaimRequest,
    )
    from oncegate.models.claim_requests import (
        BusinessIntent,
        ClaimItem,
        ClaimRequest,
        FlowRef,
    )
    from oncegate.models.claim_views import (
        ClaimResponse,
        ClaimResult,
        EarlierAttemptView,
        Holder,
    )
    from oncegate.models.claim_waits import WaitQuery
    from oncegate.models.conflicts import (
        ConflictList,
        ConflictResolution,
        ConflictView,
        ListConflictsQuery,
        PollConflictsQuery,
        ReportConflictRequest,
        ResolveConflictRequest,
    )
    from oncegate.models.health import ErrorBody, ErrorDetail, ErrorInfo, Health, RestoredStore
    from oncegate.models.inventory import (
        ClaimCounts,
        FlowList,
        FlowView,
        OverlapList,
        OverlapView,
        RegisterFlowRequest,
        ScopeList,
        ScopeView,
        SetScopeRequest,
        SourceCount,
    )
    from oncegate.models.paging import ListPageQuery
    from oncegate.models.perform import PerformRequest, PerformResponse, TargetResponse

# Where each name below lives: a module of models is imported when one of its names is first asked for.
_WHERE: dict[str, tuple[str, ...]] = {
    "oncegate.domain.limits": (
        "DATA_LIMIT_BYTES",
        "DEFAULT_LEASE_SECONDS",
        "DEFAULT_RETENTION_DAYS",
        "DETAILS_LIMIT_BYTES",
        "MAX_LEASE_SECONDS",
        "MAX_RETENTION_DAYS",
        "MIN_LEASE_SECONDS",
        "MAX_ITEMS",
        "MIN_RETENTION_DAYS",
    ),
    "oncegate.models.base": (
        "ADVANCED",
        "IMPORTANT",
        "INTERNAL",
        "MAX_CURSOR_LENGTH",
        "LeaseSeconds",
        "Scope",
        "Text256",
        "Visibility",
        "designer",
        "json_size",
    ),
    "oncegate.models.bulk": (
        "BulkItems",
        "ClaimManyAnswer",
        "ClaimManyEntry",
        "ClaimManyRequest",
        "RecordResultsAnswer",
        "RecordResultsRequest",
        "ResultEntry",
        "ResultItem",
    ),
    "oncegate.models.claim_records": (
        "ClaimAttentionList",
        "ClaimHistory",
        "ClaimList",
        "ClaimNeedingAttention",
        "ClaimView",
        "FindClaimsQuery",
        "HeartbeatRequest",
        "HistoryEntry",
        "ListClaimsQuery",
        "LookupRequest",
        "RecordResultRequest",
        "ReleaseRequest",
        "ReviewClaimRequest",
    ),
    "oncegate.models.claim_requests": (
        "BusinessIntent",
        "ClaimItem",
        "ClaimRequest",
        "FlowRef",
    ),
    "oncegate.models.claim_waits": ("WaitQuery",),
    "oncegate.models.claim_views": (
        "ClaimResponse",
        "ClaimResult",
        "EarlierAttemptView",
        "Holder",
    ),
    "oncegate.models.conflicts": (
        "ConflictList",
        "ConflictResolution",
        "ConflictView",
        "ListConflictsQuery",
        "PollConflictsQuery",
        "ReportConflictRequest",
        "ResolveConflictRequest",
    ),
    "oncegate.models.health": (
        "ErrorBody",
        "ErrorDetail",
        "ErrorInfo",
        "Health",
        "RestoredStore",
    ),
    "oncegate.models.inventory": (
        "ClaimCounts",
        "FlowList",
        "FlowView",
        "OverlapList",
        "OverlapView",
        "RegisterFlowRequest",
        "ScopeList",
        "ScopeView",
        "SetScopeRequest",
        "SourceCount",
    ),
    "oncegate.models.paging": ("ListPageQuery",),
    "oncegate.models.perform": (
        "PerformRequest",
        "PerformResponse",
        "TargetResponse",
    ),
}
_HOME = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "ADVANCED",
    "DATA_LIMIT_BYTES",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_RETENTION_DAYS",
    "DETAILS_LIMIT_BYTES",
    "IMPORTANT",
    "INTERNAL",
    "MAX_CURSOR_LENGTH",
    "MAX_ITEMS",
    "MAX_LEASE_SECONDS",
    "MAX_RETENTION_DAYS",
    "MIN_LEASE_SECONDS",
    "MIN_RETENTION_DAYS",
    "BulkItems",
    "BusinessIntent",
    "ClaimAttentionList",
    "ClaimCounts",
    "ClaimHistory",
    "ClaimItem",
    "ClaimList",
    "ClaimManyAnswer",
    "ClaimManyEntry",
    "ClaimManyRequest",
    "ClaimNeedingAttention",
    "ClaimRequest",
    "ClaimResponse",
    "ClaimResult",
    "ClaimView",
    "ConflictList",
    "ConflictResolution",
    "ConflictView",
    "EarlierAttemptView",
    "ErrorBody",
    "ErrorDetail",
    "ErrorInfo",
    "FindClaimsQuery",
    "FlowList",
    "FlowRef",
    "FlowView",
    "Health",
    "HeartbeatRequest",
    "HistoryEntry",
    "Holder",
    "LeaseSeconds",
    "ListClaimsQuery",
    "ListConflictsQuery",
    "ListPageQuery",
    "LookupRequest",
    "OverlapList",
    "OverlapView",
    "PerformRequest",
    "PerformResponse",
    "PollConflictsQuery",
    "RecordResultRequest",
    "RecordResultsAnswer",
    "RecordResultsRequest",
    "RegisterFlowRequest",
    "ReleaseRequest",
    "ReportConflictRequest",
    "ResolveConflictRequest",
    "RestoredStore",
    "ResultEntry",
    "ResultItem",
    "ReviewClaimRequest",
    "Scope",
    "ScopeList",
    "ScopeView",
    "SetScopeRequest",
    "SourceCount",
    "TargetResponse",
    "Text256",
    "Visibility",
    "WaitQuery",
    "designer",
    "json_size",
]


def __getattr__(name: str) -> Any:
    """A model (or limit) of this package, its module imported on first use: a process loads the models it uses."""
    try:
        module = _HOME[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
