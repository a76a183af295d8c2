"""The Power Platform connector's definition, generated from the pydantic models of the contract.

``python -m oncegate.entrypoints.openapi`` writes ``connector/apiDefinition.swagger.json`` (function
key connection) and ``connector/entra/apiDefinition.swagger.json`` (Microsoft Entra ID connection);
``--check`` writes nothing and exits 1 when a committed file differs, so the definition cannot drift
from the code. The tests run the same check.

Swagger 2.0 has no ``anyOf``, no null type and no ``$defs``, and the designer ignores anything beside
a ``$ref``. So the JSON schemas of the models are translated: ``Optional[X]`` becomes ``X`` (the
service omits absent fields rather than sending null), enums get display names, and nested models
are inlined so that every property carries its own ``x-ms-summary``, ``description`` and
``x-ms-visibility`` from the annotation tables below. A field without an annotation stops the
generator, naming it.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

from oncegate import __version__
from oncegate.domain.statuses import (
    AttentionReason,
    ClaimStatus,
    ConflictSource,
    ConflictStatus,
    Decision,
    EventKind,
    Outcome,
    Resolution,
)
from oncegate.entrypoints.http import CLAIM_ID_PATTERN, CONFLICT_ID_PATTERN
from oncegate.models import (
    ClaimAttentionList,
    ClaimRequest,
    ClaimResponse,
    ClaimView,
    ConflictList,
    ConflictView,
    FlowList,
    FlowView,
    Health,
    HeartbeatRequest,
    ListClaimsQuery,
    ListConflictsQuery,
    ListPageQuery,
    LookupRequest,
    OverlapList,
    PollConflictsQuery,
    RecordResultRequest,
    RegisterFlowRequest,
    ReleaseRequest,
    ReportConflictRequest,
    ResolveConflictRequest,
    ReviewClaimRequest,
    ScopeList,
    ScopeView,
    SetScopeRequest,
)

Schema = dict[str, Any]
Auth = Literal["key", "entra"]

COMMAND = "python -m oncegate.entrypoints.openapi"
DEFINITION_FILE = "apiDefinition.swagger.json"
# Where each connection type's definition lives, relative to the connector folder.
VARIANTS: dict[Auth, Path] = {"key": Path(DEFINITION_FILE), "entra": Path("entra") / DEFINITION_FILE}

IMPORTANT, ADVANCED, INTERNAL = "important", "advanced", "internal"

# The host is replaced at run time by the `dynamichosturl` policy (the connection's Function App
# host). A reserved example name keeps a connector imported without that policy from calling a
# stranger's host with the maker's key. Paths keep their /api prefix and the base path stays "/",
# so the URL is right whether or not the policy's URL replaces the base path too.
PLACEHOLDER_HOST = "oncegate.example.com"
ROUTE_PREFIX = "/api/"

# Publisher facts for the certification metadata: replace with the publisher's own pages before
# submitting the connector (see connector/README.md).
TITLE = "OnceGate"
DESCRIPTION = (
    "Check and claim for Power Automate and Logic Apps: however often a flow is triggered, the business "
    "result happens once. Ask before every side effect, branch on the decision, record the real result, "
    "and route changed business data to its owner instead of silently repeating or skipping it."
)
CONTACT = {
    "name": "OnceGate support",
    "url": "https://oncegate.example.com/support",
    "email": "support@oncegate.example.com",
}
WEBSITE = "https://oncegate.example.com"
PRIVACY_POLICY = "https://oncegate.example.com/privacy"
CATEGORIES = ("IT Operations", "Productivity")

SECURITY_DEFINITIONS: dict[Auth, Schema] = {
    # The gateway sends the connection's key in the header Azure Functions reads.
    "key": {"api_key": {"type": "apiKey", "in": "header", "name": "x-functions-key"}},
    "entra": {
        "oauth2_auth": {
            "type": "oauth2",
            "flow": "accessCode",
            "authorizationUrl": "https://login.microsoftonline.com/common/oauth2/authorize",
            "tokenUrl": "https://login.microsoftonline.com/common/oauth2/token",
            "scopes": {},
        }
    },
}


class Label(NamedTuple):
    """What the designer shows for one field: title, help text and where it sits."""

    summary: str
    description: str
    visibility: str | None = None


# Annotations by wire name: "Model.field" for a field of one model, "field" for every model that
# has it. Sentences end with a full stop; summaries are title case.
FIELDS: dict[str, Label] = {
    # -- the business key and the calling run ----------------------------------------------------
    "scope": Label(
        "Scope",
        "The side effect being protected, such as erp.create-order: 1 to 64 letters, digits, dots, underscores "
        "or hyphens, compared case-insensitively. The same key in two scopes is two independent claims.",
        IMPORTANT,
    ),
    "key": Label(
        "Business Key",
        "The business key from the source system, such as an order number or source system plus record id. "
        "It is compared after trimming and Unicode normalisation, and never stored in clear.",
        IMPORTANT,
    ),
    "payload": Label(
        "Payload",
        "The business data as any JSON value, such as the order being created. The service compares its "
        "fingerprint with the claim's to detect changed data and never stores it; give this or Fingerprint.",
        IMPORTANT,
    ),
    "fingerprint": Label(
        "Fingerprint",
        "A version of the business data that you compute yourself, such as a document version, at most 128 "
        "characters. Give this or Payload, not both.",
        ADVANCED,
    ),
    "runId": Label(
        "Run ID",
        "The run of this flow, which identifies one execution and never the business object. Use the "
        "expression workflow()?['run']?['name'].",
        ADVANCED,
    ),
    "flow": Label(
        "Flow",
        "The calling flow by name and environment, so that copies of a flow in other environments are told apart.",
        ADVANCED,
    ),
    "FlowRef.name": Label(
        "Flow Name",
        "The name of the flow, such as Create ERP order. Use the expression workflow()?['tags']?['flowDisplayName'].",
        ADVANCED,
    ),
    "FlowRef.environment": Label(
        "Flow Environment",
        "The environment the flow runs in. Use the expression workflow()?['tags']?['environmentName'].",
        ADVANCED,
    ),
    "leaseSeconds": Label(
        "Lease Seconds",
        "How long this run holds the claim, from 15 to 86400 seconds (the scope's default lease when left empty, "
        "else 300). A run that asks after the lease ended without a result is told to reconcile.",
        ADVANCED,
    ),
    # -- writes to a claim ---------------------------------------------------------------------------
    "claimToken": Label(
        "Claim Token",
        "The claim token that Check and claim gave this run. It proves that the run still holds the claim.",
        IMPORTANT,
    ),
    "outcome": Label(
        "Outcome",
        "How the side effect ended: succeeded, failed, or unknown when it was attempted and its outcome is not known.",
        IMPORTANT,
    ),
    "RecordResultRequest.targetRecordId": Label(
        "Target Record ID",
        "The id of the record that the target system really holds, read back after the write.",
        IMPORTANT,
    ),
    "RecordResultRequest.data": Label(
        "Result Data",
        "Small JSON, at most 16 KiB, that later duplicates get back instead of repeating the side effect.",
        ADVANCED,
    ),
    "RecordResultRequest.error": Label(
        "Error Message",
        "What went wrong, when the outcome is failed or unknown.",
        ADVANCED,
    ),
    "RecordResultRequest.retryable": Label(
        "Retryable",
        "Whether the next run may try a failed side effect again (yes when left empty). When it is no, the "
        "next Check and claim answers blocked until a person acts.",
        ADVANCED,
    ),
    "ReleaseRequest.reason": Label(
        "Reason",
        "Why this run gives the claim up before any side effect.",
        ADVANCED,
    ),
    "ReportConflictRequest.reason": Label(
        "Reason",
        "What differs, in one sentence that the owner can act on.",
        IMPORTANT,
    ),
    "ReportConflictRequest.details": Label(
        "Details",
        "Any JSON that helps the owner decide, such as the values found in the target system, at most 8 KiB.",
        ADVANCED,
    ),
    "ResolveConflictRequest.decision": Label(
        "Resolution",
        "The owner's decision: accept_new makes the new data the claim's version, keep_original treats it as "
        "the same business intent, and dismiss closes the conflict without changing the claim.",
        IMPORTANT,
    ),
    "ResolveConflictRequest.reviewer": Label(
        "Reviewer",
        "Who decided, such as the approver's email address. Required with a function key connection; with "
        "Microsoft Entra ID the signed-in reviewer is recorded instead.",
        IMPORTANT,
    ),
    "ResolveConflictRequest.note": Label(
        "Note",
        "Why the reviewer decided this way, kept in the claim's history.",
        ADVANCED,
    ),
    # -- the answer to Check and claim ---------------------------------------------------------------
    "ClaimResponse.decision": Label(
        "Decision",
        "What the flow should do next; build a Switch on it. proceed: do the side effect, read the record back "
        "and record the result. duplicate: skip the side effect and reuse Result. in_progress: another run holds "
        "the claim, so wait Retry After Seconds and ask again, or stop. reconcile: an earlier attempt may have "
        "done it, so look the record up in the target system first. conflict: do nothing and route Conflict ID "
        "to the owner. blocked: stop, because a person must act.",
        IMPORTANT,
    ),
    "claimId": Label(
        "Claim ID",
        "The claim's id, the same for the same scope and key. The other claim actions take it.",
        IMPORTANT,
    ),
    "ClaimResponse.claimToken": Label(
        "Claim Token",
        "The token that proves this run holds the claim, present with proceed and reconcile. Pass it to Record "
        "result, Release claim or Renew claim lease.",
        IMPORTANT,
    ),
    "status": Label(
        "Claim Status",
        "Where the claim's side effect stands: in_progress, succeeded, failed, unknown or released.",
    ),
    "attempt": Label("Attempt", "The number of the attempt, counted from 1."),
    "ClaimResponse.status": Label(
        "Claim Status",
        "Where the claim's side effect stands: in_progress, succeeded, failed, unknown or released. It is absent when "
        "the flow inventory blocked the flow before any claim existed.",
    ),
    "ClaimResponse.attempt": Label(
        "Attempt", "The number of the attempt, counted from 1; 0 when the flow was blocked before any claim existed."
    ),
    "ClaimResponse.reason": Label("Reason", "Why the service decided this way, in one sentence."),
    "warnings": Label(
        "Warnings",
        "Codes worth a look: no_fingerprint (changed data cannot be detected), no_flow (the flow was not named), "
        "another_flow_copy (the claim was made by another flow or environment), and sensitive_key or sensitive_data "
        "(the key, or a field stored as sent, seems to carry personal data and was accepted because the service only "
        "warns).",
    ),
    "leaseExpiresAt": Label("Lease Expires At", "When the lease ends unless it is renewed, in UTC."),
    "result": Label("Result", "What the first successful run recorded, present with duplicate."),
    "ClaimResult.targetRecordId": Label(
        "Result Record ID", "The id of the record in the target system that the successful run recorded."
    ),
    "ClaimResult.data": Label("Result Data", "The data that the successful run recorded."),
    "ClaimResult.runId": Label("Result Run ID", "The run that did the side effect."),
    "ClaimResult.flow": Label("Result Flow", "The flow that did the side effect."),
    "completedAt": Label("Completed At", "When the side effect succeeded, in UTC."),
    "retryAfterSeconds": Label(
        "Retry After Seconds", "How many seconds to wait before asking again, present with in_progress."
    ),
    "holder": Label("Holder", "The run that holds the claim now, present with in_progress."),
    "Holder.flow": Label("Holder Flow", "The flow of the run that holds the lease."),
    "Holder.leaseExpiresAt": Label("Holder Lease Expires At", "When the holder's lease ends, in UTC."),
    "lastAttempt": Label("Last Attempt", "The earlier attempt whose outcome is in doubt, present with reconcile."),
    "LastAttempt.attempt": Label("Last Attempt Number", "The number of the attempt whose outcome is in doubt."),
    "LastAttempt.runId": Label("Last Attempt Run ID", "The run that made the attempt."),
    "LastAttempt.flow": Label("Last Attempt Flow", "The flow that made the attempt."),
    "LastAttempt.status": Label(
        "Last Attempt Status",
        "How the attempt stood: unknown, or in_progress when its lease ended without a result.",
    ),
    "LastAttempt.startedAt": Label("Last Attempt Started At", "When the attempt started, in UTC."),
    "LastAttempt.leaseExpiresAt": Label("Last Attempt Lease Expired At", "When the attempt's lease ended, in UTC."),
    "LastAttempt.error": Label("Last Attempt Error", "The error that the attempt recorded, if any."),
    "ClaimResponse.conflictId": Label(
        "Conflict ID",
        "The conflict waiting for its owner, present with conflict. The same changed data for the same key "
        "gives the same conflict while it is open.",
        IMPORTANT,
    ),
    # -- the processing record -------------------------------------------------------------------
    "ClaimView.scope": Label("Scope", "The scope of the claim, in lowercase."),
    "ClaimView.fingerprint": Label("Fingerprint", "The fingerprint of the business data that the claim holds."),
    "firstReceivedAt": Label("First Received At", "When the key was first claimed, in UTC."),
    "lastAttemptAt": Label("Last Attempt At", "When the current or last attempt started, in UTC."),
    "ClaimView.runId": Label("Run ID", "The run of the current or last attempt."),
    "ClaimView.flow": Label("Flow", "The flow of the current or last attempt."),
    "ClaimView.targetRecordId": Label(
        "Target Record ID", "The id of the record in the target system, once a result is recorded."
    ),
    "ClaimView.data": Label("Result Data", "The data recorded with the result."),
    "ClaimView.error": Label("Error Message", "The error recorded with a failed or unknown outcome."),
    "ClaimView.retryable": Label("Retryable", "Whether the next run may try the failed side effect again."),
    "ClaimView.reviewer": Label(
        "Reviewer",
        "Who last reviewed the claim: acknowledged its failure or resolved a conflict on it. A failure that is "
        "not retryable clears it until someone reviews that failure.",
    ),
    "history": Label(
        "History",
        "Every attempt, result, duplicate and resolution, oldest first. Get claim and Look up claim return it.",
    ),
    "HistoryEntry.at": Label("Event Time", "When the event happened, in UTC."),
    "HistoryEntry.event": Label("Event", "What the entry records: a claim, result, release, conflict or resolution."),
    "HistoryEntry.outcome": Label(
        "Event Outcome", "The decision or outcome of the event, such as proceed, duplicate or succeeded."
    ),
    "HistoryEntry.attempt": Label("Event Attempt", "The attempt that the event belongs to."),
    "HistoryEntry.runId": Label("Event Run ID", "The run that caused the event."),
    "HistoryEntry.flow": Label("Event Flow", "The flow that caused the event."),
    "HistoryEntry.fingerprint": Label("Event Fingerprint", "The fingerprint that the run presented."),
    "HistoryEntry.recognisedBy": Label("Recognised By", "How the service recognised the request, in one sentence."),
    "HistoryEntry.details": Label(
        "Event Details", "More about the event, such as the conflict id or the result it replaced."
    ),
    # -- claims needing attention and reviews ---------------------------------------------------
    "ClaimAttentionList.value": Label("Claims Needing Attention", "The claims that need a person, oldest first."),
    "ClaimNeedingAttention.why": Label(
        "Why",
        "Why the claim needs a person. lease_expired: the run's lease ran out without a result. unknown: the "
        "outcome has been unknown for too long. failed_unreviewed: the attempt failed for good and nobody has "
        "reviewed it, so the key stays blocked.",
        IMPORTANT,
    ),
    "ClaimNeedingAttention.since": Label(
        "Needs Attention Since",
        "Since when, in UTC: when the lease ran out, or when the unknown or failed outcome was recorded.",
        IMPORTANT,
    ),
    "ClaimNeedingAttention.claim": Label("Claim", "The claim, without its history; Get claim shows that."),
    "ReviewClaimRequest.reviewer": Label(
        "Reviewer",
        "Who reviewed the failure, such as the reviewer's email address. Required with a function key "
        "connection; with Microsoft Entra ID the signed-in reviewer is recorded instead.",
        IMPORTANT,
    ),
    "ReviewClaimRequest.note": Label("Note", "What the reviewer found or did, kept in the claim's history.", ADVANCED),
    # -- conflicts -------------------------------------------------------------------------------
    "ConflictView.conflictId": Label(
        "Conflict ID", "The conflict's id. Resolve conflict and Get conflict take it.", IMPORTANT
    ),
    "ConflictView.claimId": Label("Claim ID", "The claim that the conflict is about."),
    "ConflictView.scope": Label("Scope", "The scope of the claim, in lowercase."),
    "ConflictView.status": Label("Conflict Status", "Whether the conflict is open or resolved."),
    "source": Label(
        "Source", "Who noticed the conflict: claim when Check and claim found it, reported when a flow reported it."
    ),
    "ConflictView.fingerprint": Label("New Fingerprint", "The fingerprint of the changed business data."),
    "claimFingerprint": Label("Claim Fingerprint", "The fingerprint that the claim held when the conflict opened."),
    "ConflictView.reason": Label("Reason", "What differs, in one sentence.", IMPORTANT),
    "ConflictView.details": Label("Details", "What the reporting flow added for the owner."),
    "ConflictView.runId": Label("Run ID", "The run that met the changed data."),
    "ConflictView.flow": Label("Flow", "The flow of the run that met the changed data."),
    "createdAt": Label("Created At", "When the conflict opened, in UTC."),
    "resolution": Label("Resolution", "How the owner closed the conflict, present once it is resolved."),
    "ConflictResolution.decision": Label(
        "Resolution Decision", "The owner's decision: accept_new, keep_original or dismiss."
    ),
    "ConflictResolution.reviewer": Label("Reviewer", "Who resolved the conflict."),
    "ConflictResolution.note": Label("Note", "Why the reviewer decided this way."),
    "resolvedAt": Label("Resolved At", "When the conflict was resolved, in UTC."),
    "ConflictList.value": Label("Conflicts", "The conflicts, oldest first."),
    "nextLink": Label("Next Link", "The address of the next page, absent on the last page.", INTERNAL),
    # -- the flow inventory ---------------------------------------------------------------------
    "RegisterFlowRequest.name": Label(
        "Flow Name", "The name of the flow, as the flow sends it in the Flow Name field of Check and claim.", IMPORTANT
    ),
    "RegisterFlowRequest.environment": Label(
        "Flow Environment", "The environment the flow runs in, as the flow sends it with Check and claim.", IMPORTANT
    ),
    "RegisterFlowRequest.owner": Label("Owner", "Who answers for the flow, such as an email address.", IMPORTANT),
    "RegisterFlowRequest.enabled": Label(
        "Enabled",
        "Whether the flow may claim (yes when left empty). When it is no, the flow's Check and claim answers blocked "
        "until a person enables it again.",
        IMPORTANT,
    ),
    "RegisterFlowRequest.notes": Label(
        "Notes", "Why the flow is registered or disabled; a blocked answer quotes it.", ADVANCED
    ),
    "FlowList.value": Label("Flows", "The flows, by name and environment."),
    "FlowView.name": Label("Flow Name", "The name of the flow."),
    "FlowView.environment": Label("Flow Environment", "The environment the flow runs in."),
    "registered": Label("Registered", "Whether a person registered the flow; if not, it was only seen claiming."),
    "FlowView.enabled": Label("Enabled", "Whether the flow may claim; a disabled flow is answered blocked."),
    "FlowView.owner": Label("Owner", "Who answers for the flow."),
    "FlowView.notes": Label("Notes", "What the person who registered the flow noted."),
    "registeredAt": Label("Registered At", "When a person first registered it, in UTC."),
    "firstSeenAt": Label("First Seen At", "When the service first saw it, in UTC."),
    "lastSeenAt": Label("Last Seen At", "When the service last saw it, in UTC. Counts may lag by a minute."),
    "FlowView.claims": Label("Claims", "How many times the flow asked Check and claim."),
    "duplicates": Label("Duplicates", "How many of the flow's Check and claim requests were answered duplicate."),
    "OverlapList.value": Label("Overlaps", "The pairs of flows that met each other's claims."),
    "OverlapView.flow": Label("Flow", "One flow of the pair."),
    "otherFlow": Label("Other Flow", "The other flow of the pair."),
    "OverlapView.count": Label(
        "Overlap Count",
        "How many times one flow of the pair met a claim of the other, answered duplicate or in_progress.",
    ),
    "exampleClaimId": Label("Example Claim ID", "One claim that both flows met; Get claim shows its history."),
    # -- the side-effect catalogue ---------------------------------------------------------------
    "SetScopeRequest.owner": Label(
        "Owner", "Who answers for the side effect and its conflicts, such as a team's email address.", IMPORTANT
    ),
    "SetScopeRequest.leaseSeconds": Label(
        "Default Lease Seconds",
        "The lease of the scope's claims that do not ask for one, from 15 to 86400 seconds (300 when left empty).",
        ADVANCED,
    ),
    "SetScopeRequest.retentionDays": Label(
        "Retention Days", "How many days the scope's claims are kept, from 1 to 3650 (90 when left empty).", ADVANCED
    ),
    "SetScopeRequest.description": Label("Description", "What the side effect does, in one sentence.", ADVANCED),
    "ScopeList.value": Label("Scopes", "The scopes, by name."),
    "ScopeView.scope": Label("Scope", "The scope, in lowercase."),
    "ScopeView.owner": Label("Owner", "Who answers for the side effect and its conflicts."),
    "ScopeView.leaseSeconds": Label(
        "Default Lease Seconds", "The lease of the scope's claims that do not ask for one."
    ),
    "ScopeView.retentionDays": Label("Retention Days", "How many days the scope's claims are kept."),
    "ScopeView.description": Label("Description", "What the side effect does."),
    "ScopeView.claims": Label("Claims", "The scope's claims by status. Counts may lag by a minute."),
    "inProgress": Label("In Progress Claims", "Claims held under a lease now."),
    "ClaimCounts.succeeded": Label("Succeeded Claims", "Claims whose side effect succeeded."),
    "ClaimCounts.failed": Label("Failed Claims", "Claims whose last attempt failed."),
    "ClaimCounts.unknown": Label("Unknown Claims", "Claims whose last attempt has an unknown outcome."),
    "ClaimCounts.released": Label("Released Claims", "Claims given up before any side effect."),
    "openConflicts": Label("Open Conflicts", "How many conflicts of the scope wait for their owner."),
    # -- health ---------------------------------------------------------------------------------
    "Health.status": Label("Service Status", "The word ok when the service and its store answer."),
    "store": Label("Store Kind", "The store the service runs on: sqlite or tables."),
    "version": Label("Version", "The version of the service."),
    # -- query parameters -----------------------------------------------------------------------
    "ListConflictsQuery.status": Label(
        "Status", "Which conflicts to list: open (when left empty), resolved or all.", IMPORTANT
    ),
    "ListConflictsQuery.scope": Label("Scope", "Only list the conflicts of this scope.", ADVANCED),
    "ListClaimsQuery.attention": Label(
        "Needing Attention", "Lists only the claims that need a person, which is always the case.", INTERNAL
    ),
    "ListClaimsQuery.scope": Label("Scope", "Only list the claims of this scope.", ADVANCED),
    "ListClaimsQuery.top": Label(
        "Page Size", "How many claims one page holds, from 1 to 200 (50 when left empty).", ADVANCED
    ),
    "top": Label("Page Size", "How many conflicts one page holds, from 1 to 200 (50 when left empty).", ADVANCED),
    "ListPageQuery.top": Label(
        "Page Size", "How many items one page holds, from 1 to 200 (50 when left empty).", ADVANCED
    ),
    "cursor": Label("Cursor", "Where the page starts; the next link carries it.", INTERNAL),
    "PollConflictsQuery.scope": Label(
        "Scope", "Only start the flow for conflicts of this scope; leave it empty for every scope.", IMPORTANT
    ),
    "state": Label(
        "Trigger State",
        "Where the last poll stopped; the service hands it back in the Location header.",
        INTERNAL,
    ),
}

# Path parameters, which are not fields of a model.
PATH_PARAMETERS: dict[str, tuple[Label, str]] = {
    "claimId": (
        Label("Claim ID", "The claim's id, from Check and claim.", IMPORTANT),
        CLAIM_ID_PATTERN.pattern,
    ),
    "conflictId": (
        Label("Conflict ID", "The conflict's id, from Check and claim or the list of open conflicts.", IMPORTANT),
        CONFLICT_ID_PATTERN.pattern,
    ),
}

ENUM_NAMES: dict[type[StrEnum], dict[str, str]] = {
    Decision: {
        "proceed": "Proceed",
        "duplicate": "Duplicate",
        "in_progress": "In progress",
        "reconcile": "Reconcile",
        "conflict": "Conflict",
        "blocked": "Blocked",
    },
    ClaimStatus: {
        "in_progress": "In progress",
        "succeeded": "Succeeded",
        "failed": "Failed",
        "unknown": "Unknown",
        "released": "Released",
    },
    Outcome: {"succeeded": "Succeeded", "failed": "Failed", "unknown": "Unknown"},
    ConflictStatus: {"open": "Open", "resolved": "Resolved"},
    Resolution: {"accept_new": "Accept the new data", "keep_original": "Keep the original", "dismiss": "Dismiss"},
    EventKind: {
        "claim": "Claim",
        "result": "Result",
        "release": "Release",
        "conflict": "Conflict",
        "resolution": "Resolution",
        "review": "Review",
    },
    AttentionReason: {
        "lease_expired": "Lease expired without a result",
        "unknown": "Outcome unknown for too long",
        "failed_unreviewed": "Failed for good, not reviewed",
    },
    ConflictSource: {"claim": "Found by Check and claim", "reported": "Reported by a flow"},
}

# http.list_conflicts spells "no status filter" as status=all.
NULL_ENUM_VALUE = {"ListConflictsQuery.status": ("all", "All")}


@dataclass(frozen=True)
class Operation:
    """One action or trigger of the connector and the route that serves it."""

    operation_id: str
    method: Literal["get", "post", "put"]
    route: str
    summary: str
    description: str
    visibility: str
    response: str
    success: str
    errors: Sequence[int]
    body: type[BaseModel] | None = None
    body_description: str = ""
    query: type[BaseModel] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    conflict_description: str = ""


STALE = "The claim token is stale: another attempt now holds the claim, or this attempt already ended (stale_claim)."

OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "CheckAndClaim",
        "post",
        "claims",
        summary="Check and claim",
        description=(
            "Asks whether this run may do the side effect for a business key, and claims the key when it may. The "
            "answer is always a decision to branch on: proceed, duplicate, in_progress, reconcile, conflict or blocked."
        ),
        visibility=IMPORTANT,
        response="ClaimResponse",
        success="The decision, and what the flow needs to act on it.",
        errors=(400, 413, 503),
        body=ClaimRequest,
        body_description="The business key, its data and the calling run.",
    ),
    Operation(
        "RecordResult",
        "post",
        "claims/{claimId}/result",
        summary="Record result",
        description=(
            "Records how the side effect ended, with the id of the record that the target system really holds. "
            "Sending the same result again with the same claim token changes nothing, so the action is safe to retry."
        ),
        visibility=IMPORTANT,
        response="ClaimView",
        success="The claim, with the result now recorded.",
        errors=(400, 404, 409, 413, 503),
        body=RecordResultRequest,
        body_description="The outcome of the side effect and the record it made.",
        conflict_description=STALE,
    ),
    Operation(
        "ReleaseClaim",
        "post",
        "claims/{claimId}/release",
        summary="Release claim",
        description=(
            "Gives the claim up before any side effect, so that the next run may proceed. Use it when the flow "
            "decides not to go on."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, released so that the next run may proceed.",
        errors=(400, 404, 409, 413, 503),
        body=ReleaseRequest,
        body_description="The claim token and why the run gives the claim up.",
        conflict_description=STALE,
    ),
    Operation(
        "RenewClaim",
        "post",
        "claims/{claimId}/heartbeat",
        summary="Renew claim lease",
        description=(
            "Extends the lease of a long side effect, so that no other run is told to reconcile while this run is "
            "still working."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its lease extended.",
        errors=(400, 404, 409, 413, 503),
        body=HeartbeatRequest,
        body_description="The claim token and the new lease.",
        conflict_description=STALE,
    ),
    Operation(
        "ReviewClaim",
        "post",
        "claims/{claimId}/review",
        summary="Review failed claim",
        description=(
            "Records that a reviewer looked at a failure that is not retryable. The key stays blocked; the claim "
            "leaves the list of claims needing attention, and retention may delete it once its time is up."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its reviewer.",
        errors=(400, 404, 409, 413, 503),
        body=ReviewClaimRequest,
        body_description="Who reviewed the failure, and a note.",
        conflict_description=(
            "The claim's attempt did not fail for good: only a failure that is not retryable is reviewed "
            "(claim_not_blocked)."
        ),
    ),
    Operation(
        "ListClaimsNeedingAttention",
        "get",
        "claims",
        summary="List claims needing attention",
        description=(
            "Lists the claims that need a person, oldest first: leases that ran out without a result, outcomes "
            "unknown for too long, and failures that are not retryable and nobody has reviewed."
        ),
        visibility=ADVANCED,
        response="ClaimAttentionList",
        success="One page of claims needing attention, with the link to the next page.",
        errors=(400, 503),
        query=ListClaimsQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    Operation(
        "GetClaim",
        "get",
        "claims/{claimId}",
        summary="Get claim",
        description=(
            "Gets the processing record of a claim by its id, with the history of every attempt, result, duplicate "
            "and resolution."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its whole history.",
        errors=(404, 503),
    ),
    Operation(
        "LookupClaim",
        "post",
        "claims/lookup",
        summary="Look up claim by key",
        description=(
            "Gets the processing record of a claim by its scope and business key, with its history. The key travels "
            "in the request body, never in the address."
        ),
        visibility=ADVANCED,
        response="ClaimView",
        success="The claim, with its whole history.",
        errors=(400, 404, 413, 503),
        body=LookupRequest,
        body_description="The scope and business key of the claim.",
    ),
    Operation(
        "ReportConflict",
        "post",
        "conflicts",
        summary="Report conflict",
        description=(
            "Opens a conflict that the flow found itself, such as a target record that holds different data. "
            "Reporting the same data for the same key again returns the same open conflict."
        ),
        visibility=ADVANCED,
        response="ConflictView",
        success="The conflict, open until its owner resolves it.",
        errors=(400, 404, 413, 503),
        body=ReportConflictRequest,
        body_description="The business key, the data the flow has and what differs.",
    ),
    Operation(
        "ListConflicts",
        "get",
        "conflicts",
        summary="List conflicts",
        description="Lists conflicts, the open ones unless another status is chosen, optionally for one scope only.",
        visibility=ADVANCED,
        response="ConflictList",
        success="One page of conflicts, with the link to the next page.",
        errors=(400, 503),
        query=ListConflictsQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    Operation(
        "OnConflictReported",
        "get",
        "conflict-events",
        summary="When a conflict is reported",
        description=(
            "Starts the flow for each new conflict, whether Check and claim found it or a flow reported it. Each "
            "conflict is delivered once; conflicts opened before the flow was turned on are not delivered."
        ),
        visibility=IMPORTANT,
        response="ConflictBatch",
        success="The new conflicts, oldest first.",
        errors=(400, 503),
        query=PollConflictsQuery,
        extra={
            "x-ms-trigger": "batch",
            "x-ms-trigger-hint": "To see it work now, claim a key again with changed data.",
        },
    ),
    Operation(
        "GetConflict",
        "get",
        "conflicts/{conflictId}",
        summary="Get conflict",
        description="Gets one conflict, with the owner's resolution once it has one.",
        visibility=ADVANCED,
        response="ConflictView",
        success="The conflict, with its resolution once it has one.",
        errors=(404, 503),
    ),
    Operation(
        "ResolveConflict",
        "post",
        "conflicts/{conflictId}/resolve",
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
        body=ResolveConflictRequest,
        body_description="The owner's decision and who made it.",
        conflict_description=(
            "The conflict was already resolved another way (conflict_resolved), or the claim's attempt is still "
            "in progress or unknown, so new data cannot be accepted yet (claim_busy)."
        ),
    ),
    Operation(
        "ListFlows",
        "get",
        "flows",
        summary="List flows",
        description=(
            "Lists every flow that claimed or was registered, with its owner, whether it may claim, and how often it "
            "claimed and was answered duplicate."
        ),
        visibility=ADVANCED,
        response="FlowList",
        success="One page of flows, with the link to the next page.",
        errors=(400, 503),
        query=ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    Operation(
        "RegisterFlow",
        "put",
        "flows",
        summary="Register flow",
        description=(
            "Registers a flow in the inventory, or changes its registration: its owner, its notes and whether it may "
            "claim. Check and claim answers blocked to a disabled flow."
        ),
        visibility=ADVANCED,
        response="FlowView",
        success="The flow with its registration.",
        errors=(400, 413, 503),
        body=RegisterFlowRequest,
        body_description="The flow and its registration.",
    ),
    Operation(
        "ListFlowOverlaps",
        "get",
        "flows/overlaps",
        summary="List flow overlaps",
        description=(
            "Lists the pairs of flows that met each other's claims, such as copies of one flow left running in two "
            "environments."
        ),
        visibility=ADVANCED,
        response="OverlapList",
        success="One page of overlapping pairs of flows, with the link to the next page.",
        errors=(400, 503),
        query=ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    Operation(
        "ListScopes",
        "get",
        "scopes",
        summary="List scopes",
        description=(
            "Lists every scope that was claimed or set up, with its owner, default lease, retention, claims by status "
            "and open conflicts."
        ),
        visibility=ADVANCED,
        response="ScopeList",
        success="One page of scopes, with the link to the next page.",
        errors=(400, 503),
        query=ListPageQuery,
        extra={"x-ms-pageable": {"nextLinkName": "nextLink"}},
    ),
    Operation(
        "SetScope",
        "put",
        "scopes",
        summary="Set scope",
        description=(
            "Sets the owner, default lease, retention and description of a scope. Claims of the scope that ask for "
            "no lease get its default lease."
        ),
        visibility=ADVANCED,
        response="ScopeView",
        success="The scope with its settings.",
        errors=(400, 413, 503),
        body=SetScopeRequest,
        body_description="The scope and its settings.",
    ),
    Operation(
        "GetHealth",
        "get",
        "health",
        summary="Get service health",
        description="Tells whether the service and its store answer. It is meant for monitoring, not for flows.",
        visibility=INTERNAL,
        response="Health",
        success="The service and its store answer.",
        errors=(503,),
    ),
)

RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    "ClaimAttentionList": ClaimAttentionList,
    "ClaimResponse": ClaimResponse,
    "ClaimView": ClaimView,
    "ConflictView": ConflictView,
    "ConflictList": ConflictList,
    "FlowList": FlowList,
    "FlowView": FlowView,
    "OverlapList": OverlapList,
    "ScopeList": ScopeList,
    "ScopeView": ScopeView,
    "Health": Health,
}
# The trigger answers a ConflictList that never has a next page: ConflictList without nextLink.
BATCH_DEFINITION, BATCH_SOURCE = "ConflictBatch", "ConflictList"

ERRORS = {
    400: "The request is not valid (invalid_request), or the key (sensitive_key) or a field it would store "
    "(sensitive_data) seems to carry personal data: the error names the field, and nothing was stored.",
    404: "No claim or conflict has this id, or no claim exists for this key.",
    409: "The request does not fit the claim's or the conflict's current state.",
    413: "The request body or one of its fields is over its size limit.",
    503: "The store cannot be reached or is busy: nothing was changed, so retry after the given seconds.",
}
RETRY_AFTER_HEADER = {
    "Retry-After": {
        "type": "integer",
        "x-ms-summary": "Retry After",
        "description": "How many seconds to wait before calling again.",
    }
}
LOCATION_HEADER = {
    "Location": {
        "type": "string",
        "x-ms-summary": "Location",
        "description": "The address to poll next, carrying the trigger state.",
    }
}
NO_NEW_CONFLICT = "No new conflict yet: poll the Location address again after the given seconds."


# -- JSON schema translation ------------------------------------------------------------------------


class _Translator:
    """Turns one model's JSON schema into Swagger 2.0 with the designer's annotations."""

    KEPT = ("type", "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "enum")

    def __init__(self, defs: Mapping[str, Schema]) -> None:
        self.defs = defs

    def model(self, name: str, schema: Schema) -> Schema:
        properties = {
            prop: self.annotated(name, prop, self.node(node)) for prop, node in schema.get("properties", {}).items()
        }
        result: Schema = {"type": "object", "properties": properties}
        if schema.get("required"):
            result["required"] = list(schema["required"])
        if schema.get("additionalProperties") is False:
            result["additionalProperties"] = False
        return result

    def node(self, node: Schema) -> Schema:
        if "anyOf" in node:
            # Optional[X]: the service leaves out an absent field instead of sending null.
            options = [option for option in node["anyOf"] if option != {"type": "null"}]
            if len(options) != 1:
                raise ValueError(f"cannot express {node['anyOf']} in Swagger 2.0")
            return self.node(options[0])
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            target = self.defs[name]
            if "enum" in target:
                return enum_schema(name, target["enum"])
            if "properties" in target:
                return self.model(name, target)
            return {}  # JsonValue: any JSON, which Swagger 2.0 writes as a schema without a type
        result = {key: node[key] for key in self.KEPT if key in node}
        if node.get("type") == "array":
            result["items"] = self.node(node["items"])
        values = self.node(node["additionalProperties"]) if isinstance(node.get("additionalProperties"), dict) else {}
        if values:
            result["additionalProperties"] = values
        return result

    @staticmethod
    def annotated(owner: str, prop: str, schema: Schema) -> Schema:
        return labelled(schema, label_of(owner, prop))


def labelled(schema: Schema, label: Label) -> Schema:
    """``schema`` with the designer's title, help text and, when it has one, visibility."""
    annotations: Schema = {"x-ms-summary": label.summary, "description": label.description}
    if label.visibility:
        annotations["x-ms-visibility"] = label.visibility
    return {**schema, **annotations}


def label_of(owner: str, prop: str) -> Label:
    """The annotation of one field: the model's own first, then the one every model shares."""
    label = FIELDS.get(f"{owner}.{prop}") or FIELDS.get(prop)
    if label is None:
        raise KeyError(f"{owner}.{prop} has no annotation: add it to FIELDS in {__name__}")
    return label


def enum_schema(name: str, values: Sequence[str]) -> Schema:
    names = next((names for enum, names in ENUM_NAMES.items() if enum.__name__ == name), None)
    if names is None or set(names) != set(values):
        raise KeyError(f"enum {name} needs a display name for each of {list(values)} in ENUM_NAMES")
    return {
        "type": "string",
        "enum": list(values),
        "x-ms-enum-values": [{"value": value, "displayName": names[value]} for value in values],
    }


def model_definition(name: str, model: type[BaseModel], mode: Literal["validation", "serialization"]) -> Schema:
    schema = model.model_json_schema(by_alias=True, mode=mode)
    return _Translator(schema.get("$defs", {})).model(name, schema)


def definitions() -> dict[str, Schema]:
    """Every request and response body: requests as the service parses them, responses as it writes them."""
    result = {
        operation.body.__name__: model_definition(operation.body.__name__, operation.body, "validation")
        for operation in OPERATIONS
        if operation.body is not None
    }
    for name, model in RESPONSE_MODELS.items():
        result[name] = model_definition(name, model, "serialization")
    batch = copy.deepcopy(result[BATCH_SOURCE])
    del batch["properties"]["nextLink"]
    result[BATCH_DEFINITION] = batch
    return dict(sorted(result.items()))


# -- operations -----------------------------------------------------------------------------------


def path_parameter(name: str) -> Schema:
    label, pattern = PATH_PARAMETERS[name]
    parameter = labelled(
        {
            "name": name,
            "in": "path",
            "required": True,
            "type": "string",
            "pattern": f"^{pattern}$",
            "x-ms-url-encoding": "single",
        },
        label,
    )
    if name == "conflictId":
        # A picker of the open conflicts, titled by what differs.
        parameter["x-ms-dynamic-values"] = {
            "operationId": "ListConflicts",
            "value-collection": "value",
            "value-path": "conflictId",
            "value-title": "reason",
        }
    return parameter


def query_parameters(model: type[BaseModel]) -> list[Schema]:
    schema = model.model_json_schema(by_alias=True, mode="validation")
    translator = _Translator(schema.get("$defs", {}))
    required = set(schema.get("required", []))
    parameters = []
    for prop, node in schema["properties"].items():
        translated = translator.node(node)
        spelled_null = NULL_ENUM_VALUE.get(f"{model.__name__}.{prop}")
        if spelled_null:
            value, display_name = spelled_null
            translated["enum"] = [*translated["enum"], value]
            translated["x-ms-enum-values"] = [
                *translated["x-ms-enum-values"],
                {"value": value, "displayName": display_name},
            ]
        parameter: Schema = {"name": prop, "in": "query", "required": prop in required, **translated}
        if node.get("default") is not None:
            parameter["default"] = node["default"]
        parameters.append(_Translator.annotated(model.__name__, prop, parameter))
    return parameters


def parameters_of(operation: Operation) -> list[Schema]:
    names = [segment[1:-1] for segment in operation.route.split("/") if segment.startswith("{")]
    parameters = [path_parameter(name) for name in names]
    if operation.query is not None:
        parameters += query_parameters(operation.query)
    if operation.body is not None:
        parameters.append(
            {
                "name": "body",
                "in": "body",
                "required": True,
                "schema": {"$ref": f"#/definitions/{operation.body.__name__}"},
                "x-ms-summary": "Request",
                "description": operation.body_description,
            }
        )
    return parameters


def responses_of(operation: Operation) -> Schema:
    success: Schema = {"description": operation.success, "schema": {"$ref": f"#/definitions/{operation.response}"}}
    responses: Schema = {"200": success}
    if operation.extra.get("x-ms-trigger"):
        # The Logic Apps polling contract: Location carries the state, Retry-After the interval.
        success["headers"] = {**LOCATION_HEADER, **RETRY_AFTER_HEADER}
        responses["202"] = {"description": NO_NEW_CONFLICT, "headers": {**LOCATION_HEADER, **RETRY_AFTER_HEADER}}
    for status in operation.errors:
        description = operation.conflict_description if status == 409 else ERRORS[status]
        responses[str(status)] = {"description": description}
        if status == 503:
            responses[str(status)]["headers"] = RETRY_AFTER_HEADER
    return responses


def operation_object(operation: Operation) -> Schema:
    return {
        "operationId": operation.operation_id,
        "summary": operation.summary,
        "description": operation.description,
        "x-ms-visibility": operation.visibility,
        **operation.extra,
        "parameters": parameters_of(operation),
        "responses": responses_of(operation),
    }


def paths() -> dict[str, Schema]:
    result: dict[str, Schema] = {}
    for operation in OPERATIONS:
        result.setdefault(ROUTE_PREFIX + operation.route, {})[operation.method] = operation_object(operation)
    return result


def build(auth: Auth = "key") -> Schema:
    """The whole Swagger 2.0 document of the connector for one connection type."""
    security_definitions = SECURITY_DEFINITIONS[auth]
    return {
        "swagger": "2.0",
        "info": {"title": TITLE, "description": DESCRIPTION, "version": __version__, "contact": CONTACT},
        "host": PLACEHOLDER_HOST,
        "basePath": "/",
        "schemes": ["https"],
        "consumes": ["application/json"],
        "produces": ["application/json"],
        "paths": paths(),
        "definitions": definitions(),
        "securityDefinitions": security_definitions,
        "security": [{name: []} for name in security_definitions],
        "x-ms-connector-metadata": [
            {"propertyName": "Website", "propertyValue": WEBSITE},
            {"propertyName": "Privacy policy", "propertyValue": PRIVACY_POLICY},
            {"propertyName": "Categories", "propertyValue": ";".join(CATEGORIES)},
        ],
    }


def render(document: Schema) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def rendered(connector_dir: Path) -> dict[Path, str]:
    """Each definition file under ``connector_dir`` and the text it should have."""
    return {connector_dir / path: render(build(auth)) for auth, path in VARIANTS.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write or check the connector's definitions.")
    parser.add_argument("--connector-dir", type=Path, default=Path("connector"), help="default: ./connector")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered(args.connector_dir).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        verb = f"is out of date: run {COMMAND}" if args.check else "written"
        print(f"{path} {verb}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
