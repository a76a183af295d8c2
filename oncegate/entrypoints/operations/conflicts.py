"""The operations on conflicts: report, list, the polling trigger, get and resolve."""

from __future__ import annotations

from typing import Any

from oncegate import telemetry
from oncegate.domain.records import Conflict
from oncegate.domain.statuses import ConflictStatus
from oncegate.entrypoints import render
from oncegate.entrypoints.operations.table import Call, Designer, Operation, Reply
from oncegate.entrypoints.parse import run_of, with_param
from oncegate.entrypoints.principal import Role
from oncegate.errors import InvalidRequest
from oncegate.models import (
    ADVANCED,
    IMPORTANT,
    ConflictList,
    ConflictView,
    ListConflictsQuery,
    PollConflictsQuery,
    ReportConflictRequest,
    ResolveConflictRequest,
)
from oncegate.service.commands.conflicts import ListConflicts, ReportConflict, ResolveConflict

POLL_BATCH_SIZE = 50
POLL_INTERVAL_SECONDS = 60
PAGEABLE = {"x-ms-pageable": {"nextLinkName": "nextLink"}}


def _reported(call: Call[Any, Any], reported: tuple[Conflict, list[str]]) -> ConflictView:
    conflict, warnings = reported
    view = render.conflict_view(conflict)
    return view.model_copy(update={"warnings": [*(view.warnings or []), *warnings]}) if warnings else view


def _statuses(params: dict[str, Any]) -> dict[str, Any]:
    """``all`` for every status, which only this action reads; said here, as the model's refusal would not name it."""
    statuses = [*(status.value for status in ConflictStatus), "all"]
    if params.get("status") not in (None, *statuses):
        raise InvalidRequest(
            f"status must be {', '.join(statuses[:-1])} or {statuses[-1]}, not {params['status']!r}.", target="status"
        )
    return {**params, "status": None} if params.get("status") == "all" else params


def _list(call: Call[None, ListConflictsQuery]) -> ListConflicts:
    query = call.query
    return ListConflicts(status=query.status, scope=query.scope, limit=query.top, cursor=query.cursor)


def _polled(call: Call[None, PollConflictsQuery], polled: tuple[list[Conflict], str]) -> Reply:
    """The Logic Apps polling contract: 202 while nothing is new, 200 with the new conflicts.

    Either way ``Location`` carries the state to poll with next, so each conflict is delivered once.
    """
    conflicts, state = polled
    # Sealed for the trigger's own list, its route's path, whose query the pipeline opens the state with.
    sealed = call.sealing.seal(state, ON_CONFLICT_REPORTED.route)
    # A full batch may have more behind it: poll again at once, so a backlog drains without waiting (issue 13).
    wait = 0 if len(conflicts) >= POLL_BATCH_SIZE else POLL_INTERVAL_SECONDS
    headers = {"Location": with_param(call.address, "state", sealed), "Retry-After": str(wait)}
    if not conflicts:
        return Reply(202, None, headers)
    return Reply(200, ConflictList(value=[render.conflict_view(conflict) for conflict in conflicts]), headers)


def _resolution(call: Call[ResolveConflictRequest, None]) -> ResolveConflict:
    body = call.body
    telemetry.describe({telemetry.RESOLUTION: body.decision.value})
    reviewer = call.caller or body.reviewer  # who signed in (Entra ID), whatever the body says
    if reviewer is None:
        raise InvalidRequest("reviewer is required: who decided.", target="reviewer")
    return ResolveConflict(decision=body.decision, reviewer=reviewer, note=body.note)


REPORT_CONFLICT = Operation(
    name="report_conflict",
    route="conflicts",
    method="POST",
    body=ReportConflictRequest,
    response=ConflictView,
    parse=lambda call: ReportConflict(**run_of(call.body), reason=call.body.reason, details=call.body.details),
    stores=lambda call, command: f"a conflict reported by run {call.body.run_id}",
    serve=lambda services, call, command: services.conflicts.report_conflict(command),
    render=_reported,
    designer=Designer(
        operation_id="ReportConflict",
        summary="Report conflict",
        description=(
            "Opens a conflict that the flow found itself, such as a target record that holds different data. "
            "Reporting the same data for the same key again returns the same open conflict."
        ),
        visibility=ADVANCED,
        success="The conflict, open until its owner resolves it.",
        errors=(400, 404, 413, 503),
        body_description="The business key, the data the flow has and what differs.",
    ),
)

LIST_CONFLICTS = Operation(
    name="list_conflicts",
    route="conflicts",
    method="GET",
    query=ListConflictsQuery,
    response=ConflictList,
    adjust=_statuses,
    parse=_list,
    serve=lambda services, call, command: services.conflicts.list_conflicts(command),
    render=lambda call, found: ConflictList(
        value=[render.conflict_view(conflict) for conflict in found[0]], next_link=call.link(found[1])
    ),
    designer=Designer(
        operation_id="ListConflicts",
        summary="List conflicts",
        description="Lists conflicts, the open ones unless another status is chosen, optionally for one scope only.",
        visibility=ADVANCED,
        success="One page of conflicts, with the link to the next page.",
        errors=(400, 503),
        extra=PAGEABLE,
    ),
)

ON_CONFLICT_REPORTED = Operation(
    name="on_conflict_reported",
    route="conflict-events",
    method="GET",
    query=PollConflictsQuery,
    response=ConflictList,
    parse=lambda call: call.query,
    serve=lambda services, call, query: services.conflicts.poll_conflicts(
        scope=query.scope, state=query.state, limit=POLL_BATCH_SIZE
    ),
    render=_polled,
    designer=Designer(
        operation_id="OnConflictReported",
        summary="When a conflict is reported",
        description=(
            "Starts the flow for each new conflict, whether Check and claim found it or a flow reported it. Each "
            "conflict is delivered once; conflicts opened before the flow was turned on are not delivered."
        ),
        visibility=IMPORTANT,
        success="The new conflicts, oldest first.",
        errors=(400, 503),
        extra={
            "x-ms-trigger": "batch",
            "x-ms-trigger-hint": "To see it work now, claim a key again with changed data.",
        },
    ),
)

GET_CONFLICT = Operation(
    name="get_conflict",
    route="conflicts/{conflictId}",
    method="GET",
    response=ConflictView,
    parse=lambda call: call.conflict_id,
    serve=lambda services, call, conflict_id: services.conflicts.get_conflict(conflict_id),
    render=lambda call, conflict: render.conflict_view(conflict),
    designer=Designer(
        operation_id="GetConflict",
        summary="Get conflict",
        description="Gets one conflict, with the owner's resolution once it has one.",
        visibility=ADVANCED,
        success="The conflict, with its resolution once it has one.",
        errors=(404, 503),
    ),
)

RESOLVE_CONFLICT = Operation(
    name="resolve_conflict",
    route="conflicts/{conflictId}/resolve",
    method="POST",
    role=Role.REVIEWER,
    body=ResolveConflictRequest,
    response=ConflictView,
    event=telemetry.CONFLICT_RESOLVED,
    parse=_resolution,
    stores=lambda call, command: f"conflict {call.conflict_id}",
    serve=lambda services, call, command: services.conflicts.resolve_conflict(call.conflict_id, command),
    render=lambda call, conflict: render.conflict_view(conflict),
    describe=lambda view: {telemetry.SCOPE: view.scope, telemetry.ORIGIN: view.origin.value},
    designer=Designer(
        operation_id="ResolveConflict",
        summary="Resolve conflict",
        description=(
            "Records the owner's decision on an open conflict and applies it to the claim: accept the new data so "
            "that its next claim may proceed, keep the original so that the new data counts as a duplicate, or "
            "dismiss the conflict."
        ),
        visibility=IMPORTANT,
        success="The conflict, resolved with the owner's decision.",
        errors=(400, 404, 409, 413, 503),
        body_description="The owner's decision and who made it.",
        conflict_description=(
            "The conflict was already resolved another way (conflict_resolved), or the claim's attempt is still "
            "in progress or unknown, so new data cannot be accepted yet (claim_busy)."
        ),
    ),
)

OPERATIONS = (REPORT_CONFLICT, LIST_CONFLICTS, ON_CONFLICT_REPORTED, GET_CONFLICT, RESOLVE_CONFLICT)
