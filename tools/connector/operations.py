"""What the designer shows for each action and trigger: the text that no model field can carry.

Keyed by the name of the app's function (``function_app.py``), which gives the route and method:
the generator stops when a function has no entry here, or an entry names no function. The
operation id is spelled out rather than derived from the function's name because flows refer to
it: renaming a Python function must not rename an action under the flows that use it. The text
is kept here, not in the functions' docstrings, because it is structured (visibility, answers,
errors, paging) and ``function_app.py``, which Azure runs, stays one thin function per route.

The module runs past 400 lines on purpose: it is one table, an entry of designer text per action,
and makers read the actions' texts side by side; split, the table would have two halves to keep alike.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel

from oncegate import models
from oncegate.entrypoints.http import CLAIM_ID_PATTERN, CONFLICT_ID_PATTERN
from oncegate.models import ADVANCED, IMPORTANT, INTERNAL, Visibility


@dataclass(frozen=True)
class Operation:
    """One action or trigger of the connector: its designer text, its body or query and its answers."""

    operation_id: str
    summary: str
    description: str
    visibility: Visibility
    response: str
    success: str
    errors: Sequence[int]
    body: type[BaseModel] | None = None
    body_description: str = ""
    query: type[BaseModel] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    conflict_description: str = ""
    # Whether the caller must be signed in (Entra ID): every action but health, which is anonymous.
    signed_in: bool = True
    # An action that may answer 202 with Location and Retry-After, which the engine polls (issue 25): its text.
    accepted: str = ""


class PathParameter(NamedTuple):
    """A parameter of a route template, which is no field of a model."""

    summary: str
    description: str
    pattern: re.Pattern[str]
    extra: Mapping[str, Any] = {}


PATH_PARAMETERS = {
    "claimId": PathParameter("Claim ID", "The claim's id, from Check and claim.", CLAIM_ID_PATTERN),
    "conflictId": PathParameter(
        "Conflict ID",
        "The conflict's id, from Check and claim or the list of open conflicts.",
        CONFLICT_ID_PATTERN,
        # A picker of the open conflicts, titled by what differs.
        {
            "x-ms-dynamic-values": {
                "operationId": "ListConflicts",
                "value-collection": "value",
                "value-path": "conflictId",
                "value-title": "reason",
            }
        },
    ),
}

ERRORS = {
    400: "The request is not valid (invalid_request), or the key (sensitive_key) or a field it would store "
    "(sensitive_data) seems to carry personal data: the error names the field, and nothing was stored.",
    404: "No claim or conflict has this id, or no claim exists for this key.",
    409: "The request does not fit the claim's or the conflict's current state.",
    413: "The request body or one of its fields is over its size limit.",
    503: "The store cannot be reached or is busy (store_unavailable): nothing was changed, so retry after the given "
    "seconds. Or a setting of the app is wrong (not_configured), which its message names.",
}
WAITING = (
    "Wait was on and another run holds the claim: the engine polls the Location address after Retry-After seconds "
    "until the holder is done. The body is the in_progress answer."
)
PERFORM_WAITING = (
    "Wait was on and another run is making the call: the engine polls the Location address after Retry-After seconds "
    "until that run is done. The body is the in_progress answer."
)
STALE = "The claim token is stale: another attempt now holds the claim, or this attempt already ended (stale_claim)."

# In the order of the definition, which groups the actions as makers look for them.
OPERATIONS: dict[str, Operation] = {
    "check_and_claim": Operation(
        "CheckAndClaim",
        summary="Check and claim",
        description=(
            "Asks whether this run may do the side effect for a business key, and claims the key when it may. The "
            "answer is always a decision to branch on: proceed, duplicate, in_progress, reconcile, conflict or blocked."
        ),
        visibility=IMPORTANT,
        response="ClaimResponse",
        success="The decision, and what the flow needs to act on it.",
        errors=(400, 413, 503),
        body=models.ClaimRequest,
        body_description="The business key, its data and the calling run.",
        accepted=WAITING,
    ),
    "wait_for_claim": Operation(
        "WaitForClaim",
        summary="Wait for the holder of a claim",
        description=(
            "The address the engine polls after Check and claim answered 202 because Wait was on and another run "
            "held the claim. It answers 202 again while the holder holds the lease, then the decision for this run."
        ),
        visibility=INTERNAL,
        response="ClaimResponse",
        success="The decision, once the holder finished, failed, released or ran out of its lease, or the wait ended.",
        errors=(400, 404, 503),
        query=models.WaitQuery,
        accepted=WAITING,
    ),
    "perform_once": Operation(
        "PerformOnce",
        summary="Perform once",
        description=(
            "OnceGate makes the HTTP call to a target an operator declared, at most once per business key, and "
            "records what came back: a flow run twice, or an action the engine retried, never reaches the target "
            "twice. It claims the key, sends the call with an Idempotency-Key header, and answers a decision to "
            "branch on: performed, duplicate (with the same response), in_progress, conflict, blocked, failed or "
            "reconcile. An unknown outcome is looked up at the target later, never sent blind."
        ),
        visibility=IMPORTANT,
        response="PerformResponse",
        success="The decision, and what is kept of the target's answer.",
        errors=(400, 413, 503),
        body=models.PerformRequest,
        body_description="The business key, its data, the calling run, and the call to make.",
        accepted=PERFORM_WAITING,
    ),
    "wait_for_perform": Operation(
        "WaitForPerform",
        summary="Wait for the run making a call",
        description=(
            "The address the engine polls after Perform once answered 202 because Wait was on and another run was "
            "making the call. It answers 202 while that run holds the claim, then what it got. It never makes the call."
        ),
        visibility=INTERNAL,
        response="PerformResponse",
        success="What the run making the call got, once it ended, or in_progress when the wait ended.",
        errors=(400, 404, 503),
        query=models.WaitQuery,
        accepted=PERFORM_WAITING,
    ),
    "record_result": Operation(
        "RecordResult",
        summary="Record result",
        description=(
            "Records how the side effect ended, with the id of the record that the target system really holds. "
            "Sending the same result again with the same claim token changes nothing, so the action is safe to retry."
        ),
        visibility=IMPORTANT,
        response="ClaimView",
        success="The claim, with the result now recorded.",
        errors=(400, 404, 409, 413, 503),
        body=models.RecordResultRequest,
        body_description="The outcome of the side effect and the record it made.",
        conflict_description=STALE,
    ),
    "check_and_claim_many": Operation(
        "CheckAndClaimMany",
        summary="Check and claim many",
        description=(
            "Check and claim for up to 100 records in one call, such as the rows of an import. Each item is a Check "
            "and claim body and gets the answer Check and claim would give it, in the items' order, or an error for "
            "that item alone. Items never wait. Filter the answers on decision: proceed carries the claim token and "
            "the item's reference, so the flow finds its row. When any item has the error store_unavailable, send "
            "the whole call again, unchanged, and use its answers instead: items the store kept get their claims back."
        ),
        visibility=IMPORTANT,
        response="ClaimManyAnswer",
        success="One answer per item, in order: the decision, or that item's error.",
        errors=(400, 413, 503),
        body=models.ClaimManyRequest,
        body_description="The records to check and claim: an array built with a Select action.",
    ),
    "record_results": Operation(
        "RecordResults",
        summary="Record results",
        description=(
            "Records the results of up to 100 side effects in one call, each with its claim ID and claim token, as "
            "Record result records one. Each item is answered in its place: the claim, or an error for that item "
            "alone, such as stale_claim. Sending the same results again changes nothing: when any item has the error "
            "store_unavailable, send the whole call again, unchanged."
        ),
        visibility=IMPORTANT,
        response="RecordResultsAnswer",
        success="One answer per item, in order: the claim with its result, or that item's error.",
        errors=(400, 413, 503),
        body=models.RecordResultsRequest,
        body_description="The results to record: an array built with a Select action after the side effects.",
    ),
    "release_claim": Operation(
        "ReleaseClaim",
        summary="Release claim",
        description=(
            "Gives the claim up before any side effect, so that the next run may proceed. Use it when the flow "
            "decides not to go on."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, released so that the next run may proceed.",
        errors=(400, 404, 409, 413, 503),
        body=models.ReleaseRequest,
        body_description="The claim token and why the run gives the claim up.",
        conflict_description=STALE,
    ),
    "renew_claim": Operation(
        # The operation id stays RenewClaim (saved flows name their actions by it); the summary says heartbeat.
        "RenewClaim",
        summary="Heartbeat to extend the claim lease",
        description=(
            "Extends the lease of a long side effect, so that no other run is told to reconcile while this run is "
            "still working."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its lease extended.",
        errors=(400, 404, 409, 413, 503),
        body=models.HeartbeatRequest,
        body_description="The claim token and the new lease.",
        conflict_description=STALE,
    ),
    "review_claim": Operation(
        "ReviewClaim",
        summary="Review claim",
        description=(
            "Records that a reviewer looked at a failure that is not retryable: the key stays blocked. With an "
            "outcome and the attempt looked at, settles instead an attempt in doubt (in progress past its lease, or "
            "unknown) with what the target system holds, without the run's claim token. Either way the claim "
            "leaves the list of claims needing attention, and retention may delete it once its time is up."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its reviewer.",
        errors=(400, 404, 409, 413, 503),
        body=models.ReviewClaimRequest,
        body_description="Who reviewed the claim and a note; to settle an attempt in doubt, its outcome and attempt.",
        conflict_description=(
            "Acknowledged: the claim's attempt did not fail for good (claim_not_blocked). Settled: a run holds the "
            "lease (claim_busy), or the attempt ended or is not the one looked at (stale_claim)."
        ),
    ),
    "list_claims_needing_attention": Operation(
        "ListClaimsNeedingAttention",
        summary="List claims needing attention",
        description=(
            "Lists the claims that need a person, oldest first: leases that ran out without a result, outcomes "
            "unknown for too long, and failures that are not retryable and nobody has reviewed."
        ),
        visibility=ADVANCED,
        response="ClaimAttentionList",
        success="One page of claims needing attention, with the link to the next page.",
        errors=(400, 503),
        query=models.ListClaimsQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "list_claims": Operation(
        "ListClaims",
        summary="List claims",
        description=(
            "Lists the claims of a source system, with a reference, in a status or first received since a time "
            "(one of them at least), oldest first received first on Table Storage. The key is never stored, so "
            "this finds a claim without it."
        ),
        visibility=ADVANCED,
        response="ClaimList",
        success="One page of claims, without their history, with the link to the next page.",
        errors=(400, 503),
        query=models.FindClaimsQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "get_claim": Operation(
        "GetClaim",
        summary="Get claim",
        description=(
            "Gets the processing record of a claim by its id, with the history of every attempt, result, duplicate "
            "and resolution."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its history's first 50 entries and the link to the rest.",
        errors=(404, 503),
    ),
    "lookup_claim": Operation(
        "LookupClaim",
        summary="Look up claim by key",
        description=(
            "Gets the processing record of a claim by its scope and business key, with its history. The key travels "
            "in the request body, never in the address."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its history's first 50 entries and the link to the rest.",
        errors=(400, 404, 413, 503),
        body=models.LookupRequest,
        body_description="The scope and business key of the claim.",
    ),
    "list_claim_history": Operation(
        "ListClaimHistory",
        summary="List claim history",
        description=(
            "Lists a claim's history page by page, oldest first: every attempt, result, resolution and answer. "
            "Answers alike from one flow are one entry with their count. Get claim returns the first page."
        ),
        visibility=ADVANCED,
        response="ClaimHistory",
        success="One page of the claim's history, with the link to the next page.",
        errors=(400, 404, 503),
        query=models.ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "report_conflict": Operation(
        "ReportConflict",
        summary="Report conflict",
        description=(
            "Opens a conflict that the flow found itself, such as a target record that holds different data. "
            "Reporting the same data for the same key again returns the same open conflict."
        ),
        visibility=ADVANCED,
        response="ConflictView",
        success="The conflict, open until its owner resolves it.",
        errors=(400, 404, 413, 503),
        body=models.ReportConflictRequest,
        body_description="The business key, the data the flow has and what differs.",
    ),
    "list_conflicts": Operation(
        "ListConflicts",
        summary="List conflicts",
        description="Lists conflicts, the open ones unless another status is chosen, optionally for one scope only.",
        visibility=ADVANCED,
        response="ConflictList",
        success="One page of conflicts, with the link to the next page.",
        errors=(400, 503),
        query=models.ListConflictsQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "on_conflict_reported": Operation(
        "OnConflictReported",
        summary="When a conflict is reported",
        description=(
            "Starts the flow for each new conflict, whether Check and claim found it or a flow reported it. Each "
            "conflict is delivered once; conflicts opened before the flow was turned on are not delivered."
        ),
        visibility=IMPORTANT,
        response="ConflictBatch",
        success="The new conflicts, oldest first.",
        errors=(400, 503),
        query=models.PollConflictsQuery,
        extra={
            "x-ms-trigger": "batch",
            "x-ms-trigger-hint": "To see it work now, claim a key again with changed data.",
        },
    ),
    "get_conflict": Operation(
        "GetConflict",
        summary="Get conflict",
        description="Gets one conflict, with the owner's resolution once it has one.",
        visibility=ADVANCED,
        response="ConflictView",
        success="The conflict, with its resolution once it has one.",
        errors=(404, 503),
    ),
    "resolve_conflict": Operation(
        "ResolveConflict",
        summary="Resolve conflict",
        description=(
            "Records the owner's decision on an open conflict and applies it to the claim: accept the new data so "
            "that its next claim may proceed, keep the original so that the new data counts as a duplicate, or "
            "dismiss the conflict."
        ),
        visibility=IMPORTANT,
        response="ConflictView",
        success="The conflict, resolved with the owner's decision.",
        errors=(400, 404, 409, 413, 503),
        body=models.ResolveConflictRequest,
        body_description="The owner's decision and who made it.",
        conflict_description=(
            "The conflict was already resolved another way (conflict_resolved), or the claim's attempt is still "
            "in progress or unknown, so new data cannot be accepted yet (claim_busy)."
        ),
    ),
    "list_flows": Operation(
        "ListFlows",
        summary="List flows",
        description=(
            "Lists every flow that claimed or was registered, with its owner, whether it may claim, and how often it "
            "claimed and was answered duplicate."
        ),
        visibility=ADVANCED,
        response="FlowList",
        success="One page of flows, with the link to the next page.",
        errors=(400, 503),
        query=models.ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "register_flow": Operation(
        "RegisterFlow",
        summary="Register flow",
        description=(
            "Registers a flow in the inventory, or changes its registration: its owner, its notes and whether it may "
            "claim; only the fields given change, the others stay as set. Check and claim answers blocked to a "
            "disabled flow."
        ),
        visibility=ADVANCED,
        response="FlowView",
        success="The flow with its registration.",
        errors=(400, 413, 503),
        body=models.RegisterFlowRequest,
        body_description="The flow and its registration.",
    ),
    "list_flow_overlaps": Operation(
        "ListFlowOverlaps",
        summary="List flow overlaps",
        description=(
            "Lists the pairs of flows that met each other's claims, such as copies of one flow left running in two "
            "environments."
        ),
        visibility=ADVANCED,
        response="OverlapList",
        success="One page of overlapping pairs of flows, with the link to the next page.",
        errors=(400, 503),
        query=models.ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "list_scopes": Operation(
        "ListScopes",
        summary="List scopes",
        description=(
            "Lists every scope that was claimed or set up, with its owner, default lease, retention, claims by status "
            "and open conflicts."
        ),
        visibility=ADVANCED,
        response="ScopeList",
        success="One page of scopes, with the link to the next page.",
        errors=(400, 503),
        query=models.ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    "set_scope": Operation(
        "SetScope",
        summary="Set scope",
        description=(
            "Sets the owner, default lease, retention, horizon, description, key pattern or fingerprint rules of a "
            "scope: only the fields given change, the others stay as set. Claims of the scope that ask for no lease "
            "get its default lease."
        ),
        visibility=ADVANCED,
        response="ScopeView",
        success="The scope with its settings.",
        errors=(400, 413, 503),
        body=models.SetScopeRequest,
        body_description="The scope and its settings.",
    ),
    "health": Operation(
        "GetHealth",
        summary="Get service health",
        description="Tells whether the service and its store answer. It is meant for monitoring, not for flows.",
        visibility=INTERNAL,
        response="Health",
        success="The service and its store answer.",
        errors=(503,),
        signed_in=False,
    ),
}
