"""The operations on a claim once made: its result, lease and review, and the look-ups of claims.

Apart from Check and claim's (``operations.claims``): a process whose first request is a claim imports neither
these entries nor their models (issue 36's cold start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from oncegate import telemetry
from oncegate.domain.keys import normalise_scope, normalise_source
from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus, Outcome, SettledOutcome
from oncegate.domain.transitions import Result
from oncegate.entrypoints import render
from oncegate.entrypoints.operations.claims import flow_dimensions
from oncegate.entrypoints.operations.table import Call, Designer, Dimensions, Operation
from oncegate.entrypoints.parse import paging
from oncegate.entrypoints.principal import Role
from oncegate.errors import InvalidRequest
from oncegate.models import (
    ADVANCED,
    IMPORTANT,
    ClaimAttentionList,
    ClaimHistory,
    ClaimList,
    ClaimView,
    FindClaimsQuery,
    HeartbeatRequest,
    ListClaimsQuery,
    ListPageQuery,
    LookupRequest,
    RecordResultRequest,
    ReleaseRequest,
    ReviewClaimRequest,
)
from oncegate.service.commands import KeyOf, ListAttention, Paging
from oncegate.service.commands.results import Acknowledge, Heartbeat, RecordResult, Release, Settle

if TYPE_CHECKING:
    pass

STALE = "The claim token is stale: another attempt now holds the claim, or this attempt already ended (stale_claim)."
# Any of these without ``attention`` makes GET /api/claims find claims by where they came from (issue 16).
FIND_FILTERS = frozenset({"source", "reference", "status", "since"})
PAGEABLE = {"x-ms-pageable": {"nextLinkName": "nextLink"}}


def _claim_dimensions(view: ClaimView) -> Dimensions:
    return flow_dimensions(view.scope, view.flow)


# -- results and leases ------------------------------------------------------------------------------------


def _result(call: Call[RecordResultRequest, None]) -> RecordResult:
    body = call.body
    telemetry.describe({telemetry.OUTCOME: body.outcome.value, telemetry.RETRYABLE: body.retryable})
    result = Result(
        outcome=Outcome(body.outcome.value),
        target_record_id=body.target_record_id,
        data=body.data,
        error=body.error,
        retryable=body.retryable,
    )
    return RecordResult(claim_token=body.claim_token, result=result)


def _review(call: Call[ReviewClaimRequest, None]) -> Acknowledge | Settle:
    """An acknowledgement, or with an outcome a settlement; the fields of a settlement go together."""
    body = call.body
    reviewer = call.caller or body.reviewer  # who signed in (Entra ID), whatever the body says
    if reviewer is None:
        raise InvalidRequest("reviewer is required: who reviewed the claim.", target="reviewer")
    if body.outcome is None:
        given = [name for name in ("attempt", "target_record_id", "data") if getattr(body, name) is not None]
        if given:
            field = ReviewClaimRequest.model_fields[given[0]].alias or given[0]
            raise InvalidRequest(f"{field} settles an attempt in doubt: send it with outcome.", target=field)
        return Acknowledge(reviewer=reviewer, note=body.note)
    if body.attempt is None:
        raise InvalidRequest(
            "attempt is required with outcome: the claim's attempt you looked up in the target system.",
            target="attempt",
        )
    if body.outcome is SettledOutcome.FAILED and (body.target_record_id or body.data is not None):
        target = "targetRecordId" if body.target_record_id else "data"
        raise InvalidRequest(f"{target} comes with outcome succeeded: a failed attempt made no record.", target=target)
    return Settle(
        reviewer=reviewer,
        note=body.note,
        outcome=body.outcome,
        attempt=body.attempt,
        target_record_id=body.target_record_id,
        data=body.data,
    )


def _claim_named(call: Call[Any, Any], command: Any) -> str:
    return f"claim {call.claim_id}"


# -- reading claims ---------------------------------------------------------------------------------------------


def _with_history(call: Call[Any, Any], found: tuple[Any, list[Any], str | None]) -> ClaimView:
    """The claim with the first page of its history, and the address of the next page: List claim history's."""
    claim, history, cursor = found
    view = render.claim_view(claim, history)
    if cursor is None:
        return view
    if not call.root:  # called without HTTP: the link is the cursor itself
        return view.model_copy(update={"history_next_link": call.link(cursor)})
    # Sealed for that claim's history, as List claim history seals its own pages (its list is its route's path).
    history_path = LIST_CLAIM_HISTORY.path(claimId=view.claim_id)
    sealed = call.sealing.seal(cursor, history_path)
    link = f"{call.root}{history_path}?{urlencode([('cursor', sealed)])}"
    return view.model_copy(update={"history_next_link": link})


def _attention(call: Call[None, ListClaimsQuery]) -> ListAttention:
    query = call.query
    if not query.attention:
        raise InvalidRequest(
            "Add attention=true for the claims that need a person, or filter by source, reference, status or since "
            "(a list of every claim is not offered). Get claim and Look up claim show any one claim.",
            target="attention",
        )
    return ListAttention(scope=query.scope, limit=query.top, cursor=query.cursor)


def _finding(params: Any) -> Operation | None:
    """List claims serves GET /api/claims with a filter and without ``attention`` (issue 16)."""
    return LIST_CLAIMS if "attention" not in params and FIND_FILTERS & set(params) else None


def _found(call: Call[None, FindClaimsQuery]) -> tuple[ClaimFilter, Paging]:
    query = call.query
    if not FIND_FILTERS & set(call.params):
        raise InvalidRequest(
            "Give source, reference, status or since: a list of every claim is not offered.", target="source"
        )
    matching = ClaimFilter(
        statuses=[query.status] if query.status else list(ClaimStatus),
        scope=normalise_scope(query.scope) if query.scope else None,
        source=normalise_source(query.source),
        reference=query.reference,
        received_since=query.since,
    )
    return matching, Paging(limit=query.top, cursor=query.cursor)


# -- the table's entries -------------------------------------------------------------------------------------

RECORD_RESULT = Operation(
    name="record_result",
    route="claims/{claimId}/result",
    method="POST",
    body=RecordResultRequest,
    response=ClaimView,
    event=telemetry.RESULT,
    parse=_result,
    # Refused for personal data, the result is not stored and the run keeps its lease: it may send it again.
    stores=_claim_named,
    serve=lambda services, call, command: services.results.record_result(call.claim_id, command),
    render=lambda call, claim: render.claim_view(claim),
    describe=_claim_dimensions,
    designer=Designer(
        operation_id="RecordResult",
        summary="Record result",
        description=(
            "Records how the side effect ended, with the id of the record that the target system really holds. "
            "Sending the same result again with the same claim token changes nothing, so the action is safe to retry."
        ),
        visibility=IMPORTANT,
        success="The claim, with the result now recorded.",
        errors=(400, 404, 409, 413, 503),
        body_description="The outcome of the side effect and the record it made.",
        conflict_description=STALE,
    ),
)

RELEASE_CLAIM = Operation(
    name="release_claim",
    route="claims/{claimId}/release",
    method="POST",
    body=ReleaseRequest,
    response=ClaimView,
    parse=lambda call: Release(claim_token=call.body.claim_token, reason=call.body.reason),
    stores=_claim_named,
    serve=lambda services, call, command: services.results.release(call.claim_id, command),
    render=lambda call, claim: render.claim_view(claim),
    designer=Designer(
        operation_id="ReleaseClaim",
        summary="Release claim",
        description=(
            "Gives the claim up before any side effect, so that the next run may proceed. Use it when the flow "
            "decides not to go on."
        ),
        visibility=ADVANCED,
        success="The claim, released so that the next run may proceed.",
        errors=(400, 404, 409, 413, 503),
        body_description="The claim token and why the run gives the claim up.",
        conflict_description=STALE,
    ),
)

# The contract's Heartbeat. The function keeps its first name: the connector's operation (RenewClaim)
# is named after it, and saved flows refer to their actions by operation.
RENEW_CLAIM = Operation(
    name="renew_claim",
    route="claims/{claimId}/heartbeat",
    method="POST",
    body=HeartbeatRequest,
    response=ClaimView,
    parse=lambda call: Heartbeat(claim_token=call.body.claim_token, lease_seconds=call.body.lease_seconds),
    serve=lambda services, call, command: services.results.heartbeat(call.claim_id, command),
    render=lambda call, claim: render.claim_view(claim),
    designer=Designer(
        # The operation id stays RenewClaim (saved flows name their actions by it); the summary says heartbeat.
        operation_id="RenewClaim",
        summary="Heartbeat to extend the claim lease",
        description=(
            "Extends the lease of a long side effect, so that no other run is told to reconcile while this run is "
            "still working."
        ),
        visibility=ADVANCED,
        success="The claim, with its lease extended.",
        errors=(400, 404, 409, 413, 503),
        body_description="The claim token and the new lease.",
        conflict_description=STALE,
    ),
)

REVIEW_CLAIM = Operation(
    name="review_claim",
    route="claims/{claimId}/review",
    method="POST",
    role=Role.REVIEWER,
    body=ReviewClaimRequest,
    response=ClaimView,
    event=telemetry.REVIEW,
    parse=_review,
    stores=_claim_named,
    serve=lambda services, call, command: services.results.review(call.claim_id, command),
    render=lambda call, claim: render.claim_view(claim),
    describe=lambda view: {telemetry.SCOPE: view.scope},
    designer=Designer(
        operation_id="ReviewClaim",
        summary="Review claim",
        description=(
            "Records that a reviewer looked at a failure that is not retryable: the key stays blocked. With an "
            "outcome and the attempt looked at, settles instead an attempt in doubt (in progress past its lease, or "
            "unknown) with what the target system holds, without the run's claim token. Either way the claim "
            "leaves the list of claims needing attention, and retention may delete it once its time is up."
        ),
        visibility=ADVANCED,
        success="The claim, with its reviewer.",
        errors=(400, 404, 409, 413, 503),
        body_description="Who reviewed the claim and a note; to settle an attempt in doubt, its outcome and attempt.",
        conflict_description=(
            "Acknowledged: the claim's attempt did not fail for good (claim_not_blocked). Settled: a run holds the "
            "lease (claim_busy), or the attempt ended or is not the one looked at (stale_claim)."
        ),
    ),
)

LIST_CLAIMS_NEEDING_ATTENTION = Operation(
    name="list_claims_needing_attention",
    route="claims",
    method="GET",
    query=ListClaimsQuery,
    response=ClaimAttentionList,
    instead=_finding,
    adjust=lambda params: {"attention": "false", **params},
    parse=_attention,
    serve=lambda services, call, command: services.attention.page(command),
    render=lambda call, found: ClaimAttentionList(
        value=[render.attention_view(item) for item in found[0]], next_link=call.link(found[1])
    ),
    designer=Designer(
        operation_id="ListClaimsNeedingAttention",
        summary="List claims needing attention",
        description=(
            "Lists the claims that need a person, oldest first: leases that ran out without a result, outcomes "
            "unknown for too long, and failures that are not retryable and nobody has reviewed."
        ),
        visibility=ADVANCED,
        success="One page of claims needing attention, with the link to the next page.",
        errors=(400, 503),
        extra=PAGEABLE,
    ),
)

# Claims by where they came from, at GET /api/claims with a filter and at GET /api/claim-list: a connector has
# one action per path and method, and GET /api/claims is List claims needing attention's.
LIST_CLAIMS = Operation(
    name="list_claims",
    route="claim-list",
    method="GET",
    query=FindClaimsQuery,
    list_name="claims-found",
    response=ClaimList,
    parse=_found,
    serve=lambda services, call, command: services.claims.find(*command),
    render=lambda call, found: ClaimList(
        value=[render.claim_view(claim) for claim in found[0]], next_link=call.link(found[1])
    ),
    designer=Designer(
        operation_id="ListClaims",
        summary="List claims",
        description=(
            "Lists the claims of a source system, with a reference, in a status or first received since a time "
            "(one of them at least), oldest first received first on Table Storage. The key is never stored, so "
            "this finds a claim without it."
        ),
        visibility=ADVANCED,
        success="One page of claims, without their history, with the link to the next page.",
        errors=(400, 503),
        extra=PAGEABLE,
    ),
)

GET_CLAIM = Operation(
    name="get_claim",
    route="claims/{claimId}",
    method="GET",
    response=ClaimView,
    parse=lambda call: call.claim_id,
    serve=lambda services, call, claim_id: services.claims.get_claim(claim_id),
    render=_with_history,
    designer=Designer(
        operation_id="GetClaim",
        summary="Get claim",
        description=(
            "Gets the processing record of a claim by its id, with the history of every attempt, result, duplicate "
            "and resolution."
        ),
        visibility=ADVANCED,
        success="The claim, with its history's first 50 entries and the link to the rest.",
        errors=(404, 503),
    ),
)

LOOKUP_CLAIM = Operation(
    name="lookup_claim",
    route="claims/lookup",
    method="POST",
    body=LookupRequest,
    response=ClaimView,
    parse=lambda call: KeyOf(scope=call.body.scope, key=call.body.key),
    serve=lambda services, call, command: services.claims.lookup(command),
    render=_with_history,
    designer=Designer(
        operation_id="LookupClaim",
        summary="Look up claim by key",
        description=(
            "Gets the processing record of a claim by its scope and business key, with its history. The key travels "
            "in the request body, never in the address."
        ),
        visibility=ADVANCED,
        success="The claim, with its history's first 50 entries and the link to the rest.",
        errors=(400, 404, 413, 503),
        body_description="The scope and business key of the claim.",
    ),
)

LIST_CLAIM_HISTORY = Operation(
    name="list_claim_history",
    route="claims/{claimId}/history",
    method="GET",
    query=ListPageQuery,
    response=ClaimHistory,
    parse=lambda call: paging(call.query),
    serve=lambda services, call, command: services.claims.history(call.claim_id, command),
    render=lambda call, found: ClaimHistory(
        value=[render.history_entry(event) for event in found[0]], next_link=call.link(found[1])
    ),
    designer=Designer(
        operation_id="ListClaimHistory",
        summary="List claim history",
        description=(
            "Lists a claim's history page by page, oldest first: every attempt, result, resolution and answer. "
            "Answers alike from one flow are one entry with their count. Get claim returns the first page."
        ),
        visibility=ADVANCED,
        success="One page of the claim's history, with the link to the next page.",
        errors=(400, 404, 503),
        extra=PAGEABLE,
    ),
)

# In the order of the connector's definition, which groups the actions as makers look for them: Record result,
# then the bulk calls (``operations.bulk``), then the others.
SINGLE = (RECORD_RESULT,)
OPERATIONS = (
    RELEASE_CLAIM,
    RENEW_CLAIM,
    REVIEW_CLAIM,
    LIST_CLAIMS_NEEDING_ATTENTION,
    LIST_CLAIMS,
    GET_CLAIM,
    LOOKUP_CLAIM,
    LIST_CLAIM_HISTORY,
)
