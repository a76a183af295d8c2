"""Perform once: OnceGate claims the key, makes the HTTP side effect itself and records its outcome (issue 34).

A flow's own HTTP action is delivered at least once; this one reaches the target once. Over the claim
machinery (:class:`~oncegate.service.claims.Claims`), for one request::

    claim the key             Check and claim, lease = the target's time + 30 s
      proceed                 record the call (a durable write before a byte leaves), call the target with
                              Idempotency-Key = the claim's idempotencyKey, record what came back
      reconcile               an earlier call's outcome is unknown: once its deadline passed, look it up
                              (found: succeeded, answered duplicate; not found: send again under the same
                              key only to a target that honours it); else reconcile, as Check and claim says
      duplicate, in_progress, conflict, blocked
                              answered as Check and claim answers them, with the response kept

The call is recorded before it is sent, in the write that grants the claim (``Intent.data``): from the claim's first
moment no request is the holder asking again, so two requests of one run asking at once (an engine retrying a call
that took long), or a Check and claim with the run's id, flow and data, never get its token; they are told
``in_progress``. So is the grant that takes a call in doubt over to look it up (``Intent.look_up_data``), until the
look-up settles it or the claim is handed to the flow. A call sent after a look-up found nothing is recorded by a
write of its own, conditioned on the claim's version, under a new grant: a token handed out for the attempt before
stops counting. A run asking again on a grant it holds by its token (Check and claim's, or a reconcile handed to it)
is told ``in_progress``, and nothing is sent: the grant is the run's to act on. What came back is recorded as Record
result would (the outcome table is :mod:`oncegate.domain.performing`); if the store fails then, the flow is still
told what the target answered, the claim stays in doubt, and the next Perform once after the call's deadline looks
it up.

A poll of a Perform once that waits (:meth:`Perform.poll`) only reads: it never makes the call.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from oncegate.domain.copies import replaced
from oncegate.domain.decisions import Change, ClaimAnswer, Intent, idempotency_key, lease_left
from oncegate.domain.keys import Fingerprint
from oncegate.domain.performing import (
    RESPONSE,
    KeptResponse,
    PerformDecision,
    call_mark,
    called_target,
    fingerprint_payload,
    json_body,
    kept_response,
    lease_of,
    look_up_mark,
    lookup_path,
    record_id,
    settled_by,
    succeeded,
)
from oncegate.domain.records import (
    CALL,
    LOOK_UP,
    Claim,
    ClaimFilter,
    HistoryEvent,
    call_deadline,
    call_over_at,
    call_under_way,
    looked_up_call,
    marked_call,
)
from oncegate.domain.sensitive import SensitivePolicy
from oncegate.domain.statuses import ClaimStatus, Decision, EventKind, Outcome
from oncegate.domain.target_requests import RequestRefused, refused
from oncegate.domain.targets import TOO_LATE, Target, TargetCall, TargetCalls, TargetReply
from oncegate.domain.transitions import Result, in_doubt, recorded, released
from oncegate.domain.waiting import Waiting
from oncegate.domain.warnings import RESPONSE_NOT_KEPT, RESULT_NOT_RECORDED, SENSITIVE_DATA
from oncegate.errors import InvalidRequest, NotFound, StoreRace, StoreUnavailable
from oncegate.service.claims import Claims
from oncegate.service.commands.perform import PerformOnce
from oncegate.service.core import ClaimsCore, new_grant_id, settled
from oncegate.service.perform_answers import (
    ASK_AGAIN_SECONDS,
    PerformAnswer,
    answered,
    held,
    making_the_call,
    own_call,
    polled,
    reason_for,
    seconds_until,
    under_way_in_doubt,
)
from oncegate.service.waits import TICKET, Waits
from oncegate.stores.paging import every_item
from oncegate.stores.port import ClaimListing, ClaimReads, ClaimWrites, HistoryRecords

logger = logging.getLogger(__name__)

# A look-up answered so found nothing; any other answer but a success tells nothing.
NOT_FOUND_STATUSES = (404, 410)
# The claims whose call may be in doubt: unknown, or in progress past a lease (a run stopped between call and record).
IN_DOUBT = (ClaimStatus.UNKNOWN, ClaimStatus.IN_PROGRESS)
READ_PAGE = 1000
# The look-ups one run of the attention watch makes at most: each is a call to a target, within the watch's time.
LOOK_UPS_PER_WATCH = 50
# Said to a run asking Perform once on a grant it already holds by a claim token, and how long it is asked to wait.
TOKEN_HOLDS = (
    "This run already holds the claim by a claim token (Check and claim's grant, or a reconcile handed to it): "
    "Perform once makes no call on it. Act on that grant and record the result, or release the claim"
)


class TargetReads(Protocol):
    """Where the declared targets are read: by name, ``NotFound`` for one not declared."""

    def get_target(self, name: str) -> Target: ...


class PerformRecords(ClaimReads, ClaimWrites, HistoryRecords, ClaimListing, Protocol):
    """What Perform once uses of the store besides Check and claim: the claim, read and written."""


# Which parts of a response may be kept: the sensitive-data check, run on the service's side.
DataCheck = Callable[[Any, str], list[str]]


class Perform:
    """Perform once, and the polls of a Perform once that waits for the run holding its claim."""

    def __init__(
        self,
        core: ClaimsCore,
        claims: Claims,
        waits: Waits,
        store: PerformRecords,
        *,
        targets: TargetReads,
        calls: TargetCalls,
        data_check: DataCheck,
        data_policy: SensitivePolicy,
    ) -> None:
        self._core = core
        self._claims = claims
        self._waits = waits
        self._store = store
        self._targets = targets
        self._calls = calls
        self._data_check = data_check
        self._data_policy = data_policy

    # -- Perform once ----------------------------------------------------------------------------

    def perform(
        self, request: PerformOnce, *, signed_in: str | None = None, max_wait: timedelta | None = None
    ) -> tuple[PerformAnswer, Waiting | None]:
        """Perform the call once for the key; the run still waiting when it asked to wait and another run holds it."""
        target = self.target(request.target)
        _sendable(request, target)
        intent = self._core.identified(self._check(request, target), signed_in=signed_in)
        # The call (or the look-up of one in doubt) is recorded with the grant that makes it: no request is the holder
        # asking again in between.
        before = self._core.find(intent.identities)
        earlier = before[0] if before else None
        called = self._called(earlier, target) if earlier is not None else None
        looks_up = called is not None and called.lookup_path is not None
        mark = call_mark(target, request.method, intent.now)
        intent = replaced(intent, data=mark, look_up_data=look_up_mark(intent.now) if looks_up else None)
        early = self._before_deadline(earlier, intent)
        own = False
        if early is None:
            decided = self._claims.decide_for(intent)
            own = decided.own_call
            if _holds_token(decided):
                # The same run asking again on a grant it holds by a claim token (Check and claim's, or a reconcile
                # handed to it): the flow acts on that grant, and a call made on it could be released under the
                # call. There is no other run to wait for.
                lease = decided.lease_expires_at
                return held(decided, TOKEN_HOLDS, lease_left(lease, intent.now) if lease else ASK_AGAIN_SECONDS), None
            answer = self._acted(decided, intent, request, target, earlier)
        else:
            answer = early
        if answer.decision is not PerformDecision.IN_PROGRESS or max_wait is None or max_wait <= timedelta(0):
            return answer, None
        waiting = self._waits.waiting(intent, intent.now + max_wait)
        if waiting is None:
            return answer, None
        held_until = intent.now + timedelta(seconds=answer.retry_after_seconds or 1)
        paced = waiting.poll_after(intent.now, held_until)
        # A call in doubt is paced as Check and claim's wait on it (waits._paced), never past its deadline.
        deadline = call_under_way(earlier, intent.now) if early and earlier is not None else None
        told = (
            making_the_call(answer, paced, own=own) if deadline is None else under_way_in_doubt(answer, deadline, paced)
        )
        return told, waiting

    def target(self, name: str) -> Target:
        """The declared target; 400 naming ``target`` when none has that name (a flow never names a URL)."""
        try:
            return self._targets.get_target(name)
        except NotFound as exc:
            raise InvalidRequest(
                f"No target named {name!r} is declared: an operator declares it with `oncegate targets set`.",
                target="target",
            ) from exc

    @staticmethod
    def _check(request: PerformOnce, target: Target) -> Intent:
        payload = request.payload
        if payload is None and request.fingerprint is None:
            payload = fingerprint_payload(target.name, request.method, request.path, request.body)
        return Intent(
            scope=request.scope,
            key=request.key,
            payload=payload,
            supplied_fingerprint=request.fingerprint,
            source=request.source,
            run_id=request.run_id,
            flow=request.flow,
            lease_seconds=int(lease_of(target).total_seconds()),
            reference=request.reference,
        )

    def _before_deadline(self, claim: Claim | None, intent: Intent) -> PerformAnswer | None:
        """``in_progress`` while an earlier call's outcome is in doubt and its deadline has not passed: no look-up
        could tell yet, and no second call is made while one could later. Nothing is written."""
        if claim is None or not in_doubt(claim, intent.now) or not _same_data(claim, intent.fingerprint):
            return None
        deadline = call_under_way(claim, intent.now)
        if deadline is None:
            return None
        answer = PerformAnswer(
            decision=PerformDecision.IN_PROGRESS,
            claim_id=claim.claim_id,
            status=claim.status.value,
            attempt=claim.attempt,
            reason="",
            warnings=list(intent.warnings),
        )
        return under_way_in_doubt(answer, deadline, seconds_until(deadline, intent.now))

    def _acted(
        self, answer: ClaimAnswer, intent: Intent, request: PerformOnce, target: Target, before: Claim | None
    ) -> PerformAnswer:
        if answer.decision is Decision.PROCEED:
            return self._send(answer, request, target, self._written(answer, intent.data))
        if answer.decision is Decision.RECONCILE:
            return self._reconcile(answer, request, target, before, intent.now)
        return answered(answer)

    # -- the call -----------------------------------------------------------------------------------

    def _send(self, answer: ClaimAnswer, request: PerformOnce, target: Target, marked: Claim | None) -> PerformAnswer:
        """Send the call ``marked`` records under the claim's idempotency key, record what came back; None: another
        request makes it, or the claim moved on."""
        if marked is None:
            return held(answer, "This run's call is already being sent by another request of the same run")
        call = TargetCall(
            method=request.method.upper(),
            path=request.path,
            headers=dict(request.headers),
            body=_encoded(request.body),
            idempotency_key=answer.idempotency_key,
        )
        if request.body is not None and not any(name.lower() == "content-type" for name in call.headers):
            call = replace(call, headers={**call.headers, "Content-Type": "application/json"})
        # The call ends by the deadline its claim records, whatever the writes before it took: a later look-up
        # (another run's, the watch's) comes after it, never while it may still reach the target.
        reply = self._call_by(target, call, call_deadline(marked))
        return self._recorded(marked, answer, target, reply, looked_up=False)

    def _call_by(self, target: Target, call: TargetCall, deadline: datetime | None) -> TargetReply:
        """``call`` sent to ``target``, ending by ``deadline`` on the service's clock (None: the target's whole time);
        not sent once the deadline passed (TOO_LATE)."""
        if deadline is None:
            return self._calls.call(target, call)
        left = (deadline - self._core.clock()).total_seconds()
        return self._calls.call(target, replace(call, seconds_left=left)) if left > 0 else TOO_LATE

    def _written(self, answer: ClaimAnswer, mark: dict[str, Any]) -> Claim | None:
        """The claim this request's ``proceed`` wrote with its call (``mark``), the history told the call is being
        sent; None when the claim moved on since (read again: the claim remembered may be another write's)."""
        claim = self._core.recent.recall(answer.claim_id)
        if claim is None or claim.attempt != answer.attempt or marked_call(claim.data) != mark[CALL]:
            claim = self._store.get_claim(answer.claim_id)
        if not _still_granted(claim, answer) or marked_call(claim.data) != mark[CALL]:
            return None
        at = self._core.decided_at(claim, self._core.clock())
        self._store.add_event(self._event(claim, "sending", f"Sending the call to target {mark[CALL]['target']}.", at))
        return claim

    def _marked(self, answer: ClaimAnswer, target: Target, method: str) -> Claim | None:
        """The claim granted to reconcile with its call recorded, written before anything is sent, under a grant of
        its own: a claim token handed out before (the same run asking again during the look-up) stops counting
        once the call is recorded. None when the call is recorded already (another request of the same run) or the
        claim moved on: that request, not this one, sends."""
        claim = self._core.recent.recall(answer.claim_id) or self._store.get_claim(answer.claim_id)
        for _ in range(2):
            if not _still_granted(claim, answer) or marked_call(claim.data) is not None:
                return None
            at = self._core.decided_at(claim, self._core.clock())
            # Leased anew for the call's whole time, as a grant that sends at once is: the lease taken to look up
            # began before the look-up, and may run out while the call is under way (Check and claim reconciles then).
            lease = at + lease_of(target)
            record = replace(
                claim,
                data=call_mark(target, method, at),
                updated_at=at,
                lease_expires_at=lease,
                grant_id=new_grant_id(),
            )
            event = self._event(record, "sending", f"Sending the call to target {target.name}.", at)
            try:
                return self._core.counted(claim, self._store.update_claim(record, event))
            except StoreRace:
                claim = self._store.get_claim(answer.claim_id)  # read again: who changed it decides
        return None

    def _recorded(
        self, claim: Claim, answer: ClaimAnswer, target: Target, reply: TargetReply, *, looked_up: bool
    ) -> PerformAnswer:
        """The reply recorded as the attempt's outcome; the flow told what the target answered either way."""
        outcome = settled_by(target, reply)
        body = json_body(reply)
        kept, dropped = kept_response(target, reply, body)
        record = record_id(target, body) if outcome.outcome is Outcome.SUCCEEDED else None
        kept, record, warnings = self._checked(kept, record, dropped)
        call = looked_up_call(claim)
        data = {CALL: call, RESPONSE: kept.as_data()} if call else {RESPONSE: kept.as_data()}
        result = Result(outcome.outcome, record, data, outcome.error, outcome.retryable)
        decision = PerformDecision.DUPLICATE if looked_up else outcome.decision
        told = PerformAnswer(
            decision=decision,
            claim_id=claim.claim_id,
            status=outcome.outcome.value,
            attempt=claim.attempt,
            reason=reason_for(decision, target, reply, outcome.error),
            warnings=[*answer.warnings, *warnings],
            # A call that got no answer (a timeout, a broken connection) has none to give: no status, no parts.
            response=kept if reply.status is not None else None,
            target_record_id=record,
            idempotency_key=answer.idempotency_key,
            retryable=outcome.retryable,
            looked_up=looked_up,
            target_status=reply.status,
            target_failure=reply.failure.value if reply.failure else None,
        )
        over = call_over_at(claim)
        if decision is PerformDecision.RECONCILE and over is not None:
            # The next Perform once after the deadline (and its margin) looks the record up: said as when to ask again.
            told = replace(told, retry_after_seconds=seconds_until(over, self._core.clock()))
        try:
            self._record(claim, result)
        except StoreUnavailable:
            logger.warning(
                "Claim %s: the target answered, and recording it failed; a look-up settles it", claim.claim_id
            )
            return replace(told, status=ClaimStatus.IN_PROGRESS.value, warnings=[*told.warnings, RESULT_NOT_RECORDED])
        return told

    def _record(self, marked: Claim, result: Result) -> None:
        """``result`` recorded on the attempt that made the call (fenced by its grant), the claim read again after a
        lost race; an attempt taken over since keeps what its own run records."""
        claims = iter([marked])

        def attempt() -> None:
            claim = next(claims, None) or self._store.get_claim(marked.claim_id)
            if claim.attempt != marked.attempt or claim.grant_id != marked.grant_id:
                logger.warning("Claim %s was taken over while its call was under way", claim.claim_id)
                return
            now = self._core.decided_at(claim, self._core.clock())
            change = recorded(claim, result, now)
            if not change.changes(claim):
                return
            event = self._event(change.record, change.outcome, change.recognised_by, now, kind=EventKind.RESULT)
            self._core.counted(claim, self._store.update_claim(change.record, replace(event, details=result.details)))

        settled(attempt)

    def _checked(
        self, kept: KeptResponse, record: str | None, dropped: list[str]
    ) -> tuple[KeptResponse, str | None, list[str]]:
        """What of the response passes the sensitive-data check: under ``reject`` the rest is dropped, never refused
        (the target has acted); under ``warn`` it is kept with the warning."""
        warnings = [RESPONSE_NOT_KEPT] if dropped else []
        if self._data_policy is SensitivePolicy.OFF:
            return kept, record, warnings
        found = {
            "response.body": bool(self._data_check(kept.body, "response.body")) if kept.body is not None else False,
            "targetRecordId": bool(self._data_check(record, "targetRecordId")) if record else False,
        }
        headers = {name: value for name, value in kept.headers.items() if not self._data_check(value, name)}
        found["response.headers"] = len(headers) != len(kept.headers)
        if not any(found.values()):
            return kept, record, warnings
        if self._data_policy is SensitivePolicy.WARN:
            return kept, record, [*warnings, SENSITIVE_DATA]
        logger.warning(
            "Personal data in a target's answer was not kept: %s", ", ".join(k for k, v in found.items() if v)
        )
        kept = KeptResponse(status=kept.status, headers=headers, body=None if found["response.body"] else kept.body)
        return kept, None if found["targetRecordId"] else record, [RESPONSE_NOT_KEPT]

    # -- an earlier call in doubt ------------------------------------------------------------------

    def _reconcile(
        self, answer: ClaimAnswer, request: PerformOnce, target: Target, before: Claim | None, now: datetime
    ) -> PerformAnswer:
        """This run holds the claim to settle an earlier attempt in doubt: look it up, send again only to a target
        that honours the key, or hand the claim to the flow as Check and claim's reconcile does."""
        earlier = answer.earlier_attempt
        recorded_before = before if before is not None and earlier and before.attempt == earlier.attempt else None
        called = self._called(recorded_before, target)
        deadline = call_over_at(recorded_before) if recorded_before else None
        if deadline is None and earlier is not None:
            deadline = earlier.started_at + lease_of(called or target)
        if deadline is not None and deadline > now:
            # The claim moved between the read and the decision: give it back in doubt, ask again after the deadline.
            self._give_back(answer)
            return held(answer, "The earlier call may still be under way at the target", seconds_until(deadline, now))
        if called is None:
            # Only the target the call went to can tell what it did; another one, even honouring the key, never saw it.
            gone = called_target(recorded_before)
            return self._handed_over(answer, f"target {gone}, which the call went to, is no longer declared", None)
        claim = self._core.recent.recall(answer.claim_id) or self._store.get_claim(answer.claim_id)
        found = self._looked_up(called, claim, answer)
        if found is not None and _found(called, found):
            return self._recorded(claim, answer, called, found, looked_up=True)
        not_found = found is not None and (found.status in NOT_FOUND_STATUSES or succeeded(called, found.status or 0))
        if not_found and called.honours_idempotency_key and called.name == target.name:
            return self._send(answer, request, target, self._marked(answer, target, request.method))
        why = (
            "the look-up found nothing and the target does not honour the idempotency key"
            if not_found
            else "the look-up could not tell"
            if found is not None
            else "no look-up is declared for the target"
            if called.lookup_path is None
            else "the claim has no reference for the target's look-up to find the record by (give Reference)"
        )
        return self._handed_over(answer, why, called, looked_up=found is not None and found is not TOO_LATE)

    def _handed_over(
        self, answer: ClaimAnswer, why: str, called: Target | None, *, looked_up: bool = False
    ) -> PerformAnswer:
        """The claim handed to this run to reconcile, as Check and claim's reconcile: ``why`` no look-up settled it.
        A grant whose lease ran out meanwhile (a slow store, a look-up that took what the lease left) is handed to no
        run: any other may take the claim over now and act beside it. It is given back in doubt, for the next Perform
        once to look up."""
        if answer.lease_expires_at is not None and answer.lease_expires_at <= self._core.clock():
            self._give_back(answer, f"{why}, and the grant ran out")
            told = held(
                answer,
                f"The earlier call's outcome is unknown, {why}, and this run's grant ran out meanwhile; run Perform "
                "once again, which looks it up",
            )
            return replace(
                told, decision=PerformDecision.RECONCILE, status=ClaimStatus.UNKNOWN.value, looked_up=looked_up
            )
        self._handed(answer)
        where = f"target {called.name}" if called else "the target the call went to"
        return replace(
            answered(answer),
            reason=(
                f"The earlier call's outcome is unknown and {why}: look the record up in {where}; record succeeded "
                "with its id if it is there, else record failed (retryable) and run Perform once again."
            ),
            looked_up=looked_up,
        )

    def _called(self, claim: Claim | None, target: Target) -> Target | None:
        """The target the earlier call went to (its claim records it), else the one this request names; None when
        the call went to a target no longer declared."""
        name = called_target(claim)
        if name is None or name == target.name:
            return target
        try:
            return self._targets.get_target(name)
        except NotFound:
            return None

    def _looked_up(self, target: Target, claim: Claim, answer: ClaimAnswer) -> TargetReply | None:
        """The target's answer to the look-up of this claim's record; None when none is declared or possible."""
        if target.lookup_path is None:
            return None
        values = {"reference": claim.reference, "idempotencyKey": answer.idempotency_key}
        path = lookup_path(target.lookup_path, values)
        if path is None:
            return None
        # Within the grant that took the call over, as its lease records it: the look-up ends while this run holds the
        # claim, never under way still when another run may take it over and look up or send in turn.
        return self._call_by(target, TargetCall(method="GET", path=path, idempotency_key=None), claim.lease_expires_at)

    def _handed(self, answer: ClaimAnswer) -> None:
        """The look-up mark taken off the claim handed to the flow to reconcile: from now on the run holds it by its
        token, as Check and claim's reconcile (asking again, it is the holder). Should the write fail, the mark stays
        and the token still counts: the run asking again is told in_progress until the lease runs out."""
        try:
            claim = self._store.get_claim(answer.claim_id)
            if not _still_granted(claim, answer) or not isinstance(claim.data, dict) or LOOK_UP not in claim.data:
                return
            at = self._core.decided_at(claim, self._core.clock())
            carried = {name: value for name, value in claim.data.items() if name != LOOK_UP} or None
            self._core.counted(claim, self._store.update_claim(replace(claim, data=carried, updated_at=at), None))
        except (StoreRace, StoreUnavailable):
            pass

    def _give_back(self, answer: ClaimAnswer, why: str = "the earlier call's deadline has not passed") -> None:
        """Release the claim this run was granted to reconcile: it stays in doubt, for the next run to look up."""
        try:
            claim = self._store.get_claim(answer.claim_id)
            if not _still_granted(claim, answer):
                return
            now = self._core.decided_at(claim, self._core.clock())
            change = released(claim, why, now)
            event = self._event(change.record, change.outcome, change.recognised_by, now, kind=EventKind.RELEASE)
            self._core.counted(claim, self._store.update_claim(change.record, event))
        except (StoreRace, StoreUnavailable):
            pass  # the lease runs out by itself, and the next run reconciles

    def _event(
        self, claim: Claim, outcome: str, why: str, at: datetime, *, kind: EventKind = EventKind.CALL
    ) -> HistoryEvent:
        return self._core.event(claim, kind, outcome, why, at=at, run_id=claim.run_id, flow=claim.flow)

    # -- polls ------------------------------------------------------------------------------------

    def poll(self, waiting: Waiting, claim_id: str, *, signed_in: str | None) -> tuple[PerformAnswer, Waiting | None]:
        """A poll of a Perform once that waits: what the holder got once it ended; it never makes the call. Only the
        signed-in caller the address was handed to is answered (the target's response is in the answer)."""
        self._core.require_safe_store()
        now = self._core.clock()
        if waiting.expired(now):
            raise InvalidRequest("This poll address expired: run Perform once again.", target=TICKET)
        self._waits.require_own(waiting, signed_in)
        known = {identity.claim_id for identity in waiting.identities}
        if claim_id not in known:
            raise InvalidRequest("This poll address is not this claim's.", target=TICKET)
        claim = self._store.get_claim(claim_id)
        told = polled(claim, waiting, now)
        if told.decision is PerformDecision.IN_PROGRESS and not waiting.over(now):
            paced = waiting.poll_after(now, claim.lease_expires_at)
            return making_the_call(told, paced, own=own_call(claim, waiting)), waiting
        return told, None

    # -- the attention timer ------------------------------------------------------------------------

    def look_up_all_in_doubt(self, *, limit: int = LOOK_UPS_PER_WATCH) -> int:
        """Look up the calls in doubt whose deadline passed, never sending one: how many were found at their target
        and recorded succeeded. The attention watch calls it.

        At most ``limit`` are looked up, drawn at random from all that are due and can be looked up: a call the target
        never made stays in doubt and is due again on every run, so taking the first ones as listed let such calls
        keep the watch from the others for good; and a call at a target without a look-up (or no longer declared, or
        whose look-up needs a reference the claim lacks) would take a draw for nothing, every run. Drawn with the
        watch's time as the seed: a run can be told again, the next draws anew.
        """
        doubted = every_item(
            lambda cursor: self._store.list_claims(ClaimFilter(IN_DOUBT), limit=READ_PAGE, cursor=cursor)
        )
        now = self._core.clock()
        declared = functools.cache(self._declared)  # each target read once a run
        can = (claim for claim in doubted if _due(claim, now) and self._look_up_at(claim, declared) is not None)
        due = _drawn(can, limit, random.Random(now.timestamp()))
        return sum(self.look_up_in_doubt(claim) for claim in due)

    def look_up_in_doubt(self, claim: Claim) -> bool:
        """Settle a claim in doubt by looking its call up, never sending it: True when it was found and recorded."""
        looked_up = self._look_up_at(claim, self._declared) if _due(claim, self._core.clock()) else None
        if looked_up is None:
            return False
        target, path = looked_up
        reply = self._calls.call(target, TargetCall(method="GET", path=path))
        if not _found(target, reply):
            return False
        body = json_body(reply)
        kept, dropped = kept_response(target, reply, body)
        kept, record, _ = self._checked(kept, record_id(target, body), dropped)
        result = Result(Outcome.SUCCEEDED, record, {CALL: looked_up_call(claim), RESPONSE: kept.as_data()})
        try:
            self._record(claim, result)
        except (StoreRace, StoreUnavailable):
            return False
        return True

    def _look_up_at(self, claim: Claim, declared: Callable[[str], Target | None]) -> tuple[Target, str] | None:
        """The target the claim's call went to and the path that looks it up there; None when no look-up can."""
        name = called_target(claim)
        target = declared(name) if name is not None else None
        if target is None or target.lookup_path is None:
            return None
        values = {"reference": claim.reference, "idempotencyKey": self._idempotency_key(claim)}
        path = lookup_path(target.lookup_path, values)
        return None if path is None else (target, path)

    def _declared(self, name: str) -> Target | None:
        try:
            return self._targets.get_target(name)
        except NotFound:
            return None

    def _idempotency_key(self, claim: Claim) -> str:
        hasher = next((h for h in self._core.keys.lookup_order if h.key_id == claim.key_id), self._core.keys.current)
        return idempotency_key(hasher, claim)


def _sendable(request: PerformOnce, target: Target) -> None:
    """400 naming the path or the header the target would never be sent, before anything is claimed: a claim made
    for it would fail the same way however often the flow retried as told."""
    try:
        refused(target, request.path, request.headers)
    except RequestRefused as exc:
        raise InvalidRequest(f"Nothing was claimed or sent: {exc}.", target=exc.field) from exc


def _found(target: Target, reply: TargetReply) -> bool:
    """Whether a look-up found the record: a success status, with a record where the target's pointer points when it
    declares one (a search answering 200 with an empty list found nothing)."""
    if reply.status is None or not succeeded(target, reply.status):
        return False
    return target.record_pointer is None or record_id(target, json_body(reply)) is not None


def _drawn(claims: Iterable[Claim], limit: int, chance: random.Random) -> list[Claim]:
    """``limit`` of ``claims`` drawn with equal chances, in one pass holding no more than ``limit`` of them."""
    drawn: list[Claim] = []
    for seen, claim in enumerate(claims):
        if seen < limit:
            drawn.append(claim)
        elif (slot := chance.randrange(seen + 1)) < limit:
            drawn[slot] = claim
    return drawn


def _due(claim: Claim, now: datetime) -> bool:
    """Whether a look-up may tell what the claim's call did: it is in doubt and the call is over (call_over_at)."""
    over = call_over_at(claim)
    return over is not None and over <= now and in_doubt(claim, now)


def _same_data(claim: Claim, fingerprint: Fingerprint | None) -> bool:
    return fingerprint is None or claim.fingerprint is None or fingerprint.matches(claim.fingerprint)


def _encoded(body: Any) -> bytes | None:
    if body is None:
        return None
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def _still_granted(claim: Claim, answer: ClaimAnswer) -> bool:
    """Whether ``claim`` is still the attempt ``answer`` granted, in progress: else the claim moved on."""
    return claim.attempt == answer.attempt and claim.status is ClaimStatus.IN_PROGRESS


def _holds_token(answer: ClaimAnswer) -> bool:
    """Whether Check and claim gave the run back a grant it holds already (the same run asking again): its claim
    token is out, with the run, so the grant is not Perform once's to call on."""
    return answer.grants and answer.change is Change.NONE
