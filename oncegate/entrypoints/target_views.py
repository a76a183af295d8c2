"""A declared target as the wire shows it (issue 34): ``GET /api/targets`` and ``oncegate targets list --json`` alike.

A secret is named at most (``auth``), never shown: the declaration holds no secret to show.
"""

from __future__ import annotations

from oncegate.domain.target_declarations import auth_text
from oncegate.domain.targets import Target
from oncegate.models.targets import TargetList, TargetView


def target_view(target: Target) -> TargetView:
    """The target's declaration, who declared it and when."""
    return TargetView(
        name=target.name,
        base_url=target.base_url,
        timeout_seconds=target.timeout_seconds,
        lookup_path=target.lookup_path,
        auth=auth_text(target),
        allow_cidrs=list(target.allow_cidrs),
        honours_idempotency_key=target.honours_idempotency_key,
        success_statuses=list(target.success_statuses),
        retryable_statuses=list(target.retryable_statuses),
        record_pointer=target.record_pointer,
        kept_headers=list(target.kept_headers),
        kept_pointers=list(target.kept_pointers),
        declared_by=target.declared_by,
        declared_at=target.declared_at,
    )


def target_list(targets: list[Target]) -> TargetList:
    """Every declared target, by name."""
    return TargetList(value=[target_view(target) for target in targets])
