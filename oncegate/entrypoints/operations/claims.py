"""The operations on claims: Check and claim (single, waiting, many), results, leases, reviews and look-ups."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from oncegate import telemetry
from oncegate.domain.decisions import ClaimAnswer
from oncegate.domain.keys import normalise_scope, normalise_source
from oncegate.domain.records import Claim, ClaimFilter, EarlierAttempt
from oncegate.domain.statuses import ClaimStatus, Outcome, SettledOutcome
from oncegate.domain.transitions import Result
from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, Waiting
from oncegate.domain.warnings import ANOTHER_FLOW_COPY
from oncegate.entrypoints import render, waits
from oncegate.entrypoints.operations.table import Call, Designer, Dimensions, Operation, Reply
from oncegate.entrypoints.parse import paging, run_of
from oncegate.entrypoints.principal import Role
from oncegate.errors import InvalidRequest
from oncegate.models import (
    ADVANCED,
    IMPORTANT,
    INTERNAL,
    ClaimAttentionList,
    ClaimHistory,
    ClaimItem,
    ClaimList,
    ClaimRequest,
    ClaimResponse,
    ClaimResult,
    ClaimView,
    EarlierAttemptView,
    FindClaimsQuery,
    FlowRef,
    HeartbeatRequest,
    Holder,
    ListClaimsQuery,
    ListPageQuery,
    LookupRequest,
    RecordResultRequest,
    ReleaseRequest,
    ReviewClaimRequest,
    WaitQuery,
)
from oncegate.service.commands import (
    Acknowledge,
    CheckAndClaim,
    Heartbeat,
    KeyOf,
    ListAttention,
    Paging,
    RecordResult,
    Release,
    Settle,
)

if TYPE_CHECKING:
    from oncegate.bootstrap import Services

WAITING = (
    "Wait was on and another run holds the claim: the engine polls the Location address after Retry-After seconds "
    "until the holder is done. The body is the in_progress answer."
)
STALE = "The claim token is stale: another attempt now holds the claim, or this attempt already ended (stale_claim)."
# Any of these without ``attention`` makes GET /api/claims find claims by where they came from (issue 16).
FIND_FILTERS = frozenset({"source", "reference", "status", "since"})
PAGEABLE = {"x-ms-pageable": {"nextLinkName": "nextLink"}}


def flow_dimensions(scope: str, flow: FlowRef | None) -> Dimensions:
    """The scope (lowercase, as stored) and the flow of an answer, for its telemetry event."""
    return {
        telemetry.SCOPE: scope.lower(),
        telemetry.FLOW_NAME: flow.name if flow else None,
        telemetry.FLOW_ENVIRONMENT: flow.environment if flow else None,
    }


def decision_dimensions(answer: ClaimResponse) -> Dimensions:
    """The decision and warnings of a Check and claim answer, and the other flow a copy of a flow met."""
    holder = answer.holder.flow if answer.holder else answer.result.flow if answer.result else None
    copy = holder if ANOTHER_FLOW_COPY in answer.warnings else None
    return {
        telemetry.DECISION: answer.decision.value,
        telemetry.WARNINGS: ",".join(answer.warnings) or None,
        telemetry.CHANGED_PARTS: json.dumps(answer.changed_parts) if answer.changed_parts else None,
        telemetry.HOLDER_FLOW_NAME: copy.name if copy else None,
        telemetry.HOLDER_FLOW_ENVIRONMENT: copy.environment if copy else None,
    }


def _claim_dimensions(view: ClaimView) -> Dimensions:
    return flow_dimensions(view.scope, view.flow)


# -- Check and claim, and its wait --------------------------------------------------------------------------


def earlier_attempt_view(earlier: EarlierAttempt | None) -> EarlierAttemptView | None:
    """The attempt a reconcile answer asks the run to look up, as the API shows it."""
    if earlier is None:
        return None
    return EarlierAttemptView(
        attempt=earlier.attempt,
        run_id=earlier.run_id,
        flow=render.flow_ref(earlier.flow),
        status=earlier.status,
        started_at=earlier.started_at,
        lease_expires_at=earlier.lease_expires_at,
        error=earlier.error,
    )


def claim_result(claim: Claim) -> ClaimResult:
    return ClaimResult(
        target_record_id=claim.target_record_id,
        data=claim.data,
        completed_at=claim.completed_at,
        run_id=claim.run_id,
        flow=render.flow_ref(claim.flow),
    )


def claim_response(answer: ClaimAnswer) -> ClaimResponse:
    holder = answer.holder
    return ClaimResponse(
        decision=answer.decision,
        claim_id=answer.claim_id,
        status=answer.status,
        attempt=answer.attempt,
        reason=answer.reason,
        warnings=list(answer.warnings),
        claim_token=answer.claim_token,
        idempotency_key=answer.idempotency_key,
        lease_expires_at=answer.lease_expires_at,
        retry_after_seconds=answer.retry_after_seconds,
        holder=Holder(flow=render.flow_ref(holder.flow), lease_expires_at=holder.lease_expires_at) if holder else None,
        result=claim_result(answer.result) if answer.result else None,
        earlier_attempt=earlier_attempt_view(answer.earlier_attempt),
        conflict_id=answer.conflict_id,
        changed_parts=list(answer.changed) or None,
        more_changed_parts=answer.more_changed or None,
    )


def _check(call: Call[ClaimItem, None]) -> CheckAndClaim:
    body = call.body
    if telemetry.describing():
        telemetry.describe(flow_dimensions(body.scope, body.flow))
    return CheckAndClaim(**run_of(body), lease_seconds=body.lease_seconds, reference=body.reference)


def _claim(services: Services, call: Call[ClaimItem, None], command: CheckAndClaim) -> tuple[ClaimAnswer, Any]:
    """The answer, and with ``wait`` the run still waiting for the holder (None: the answer is final)."""
    body = call.body
    if isinstance(body, ClaimRequest) and body.wait:  # an item of Check and claim many never waits
        max_wait = timedelta(seconds=body.max_wait_seconds or DEFAULT_MAX_WAIT_SECONDS)
        return services.waits.check_and_wait(command, signed_in=call.caller, max_wait=max_wait)
    return services.claims.check_and_claim(command, signed_in=call.caller), None


def _waited(call: Call[Any, Any], result: tuple[ClaimAnswer, Waiting | None]) -> ClaimResponse | Reply:
    """The answer, or 202 while the run still waits (the Logic Apps asynchronous pattern; its poll address is
    HTTP's, ``oncegate.entrypoints.http``)."""
    answer, waiting = result
    response = claim_response(answer)
    if waiting is None:
        return response
    return Reply(202, response, waiting=waiting, at=WAIT_FOR_CLAIM.path(claimId=response.claim_id))


def _ticket(call: Call[None, WaitQuery]) -> Waiting:
    waiting = waits.open_ticket(call.query.ticket, WAIT_FOR_CLAIM.path(claimId=call.claim_id), call.sealing)
    telemetry.describe({telemetry.SCOPE: waiting.scope})
    return waiting


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

CHECK_AND_CLAIM = Operation(
    name="check_and_claim",
    route="claims",
    method="POST",
    body=ClaimRequest,
    response=ClaimResponse,
    event=telemetry.CHECK,
    parse=_check,
    stores=lambda call, command: f"a claim of run {call.body.run_id}",
    serve=_claim,
    render=_waited,
    describe=decision_dimensions,
    designer=Designer(
        operation_id="CheckAndClaim",
        summary="Check and claim",
        description=(
            "Asks whether this run may do the side effect for a business key, and claims the key when it may. The "
            "answer is always a decision to branch on: proceed, duplicate, in_progress, reconcile, conflict or blocked."
        ),
        visibility=IMPORTANT,
        success="The decision, and what the flow needs to act on it.",
        errors=(400, 413, 503),
        body_description="The business key, its data and the calling run.",
        accepted=WAITING,
    ),
)

WAIT_FOR_CLAIM = Operation(
    name="wait_for_claim",
    route="claims/{claimId}/wait",
    method="GET",
    query=WaitQuery,
    response=ClaimResponse,
    event=telemetry.CHECK,
    parse=_ticket,
    serve=lambda services, call, waiting: services.waits.poll(waiting, signed_in=call.caller),
    render=_waited,
    describe=decision_dimensions,
    designer=Designer(
        operation_id="WaitForClaim",
        summary="Wait for the holder of a claim",
        description=(
            "The address the engine polls after Check and claim answered 202 because Wait was on and another run "
            "held the claim. It answers 202 again while the holder holds the lease, then the decision for this run."
        ),
        visibility=INTERNAL,
        success="The decision, once the holder finished, failed, released or ran out of its lease, or the wait ended.",
        errors=(400, 404, 503),
        accepted=WAITING,
    ),
)

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

# In the order of the connector's definition, which groups the actions as makers look for them.
# The connector lists Check and claim many and Record results (``operations.bulk``) after these.
SINGLE = (CHECK_AND_CLAIM, WAIT_FOR_CLAIM, RECORD_RESULT)
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
