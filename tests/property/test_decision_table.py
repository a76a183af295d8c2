"""The pure decision function against the property model, its independent oracle, on generated claims.

``oncegate.domain.decisions.decide`` is what the service applies; ``tests/property/model.py``
writes the contract's table down again with none of its machinery. Any claim state, any caller and
any time must give both the same decision.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from oncegate.domain.decisions import Change, Intent, answer, check_and_claim, decide
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim, EarlierAttempt, FingerprintRecord, Flow
from oncegate.domain.statuses import ClaimStatus, Decision, Outcome
from tests.conftest import KEY_SECRET
from tests.property.model import RUNS, ExpectedClaim, Result

HASHER = KeyHasher(KEY_SECRET)
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
VERSIONS = ("v1", "v2", "v3")
STATUSES = st.sampled_from([*ClaimStatus, None])


def _fingerprint(version: str) -> str:
    made = HASHER.fingerprint(supplied=version, payload=None)
    assert made is not None
    return made.keyed


@st.composite
def states(draw: st.DrawFn) -> ExpectedClaim:
    """A claim as the model holds it, in any status the contract allows."""
    status = draw(STATUSES)
    expected = ExpectedClaim(claim_id="c")
    if status is None:
        return expected
    expected.status, expected.attempt = status, draw(st.integers(1, 4))
    expected.fingerprint = draw(st.sampled_from(VERSIONS))
    expected.aliases = set(draw(st.lists(st.sampled_from(VERSIONS), max_size=2)))
    expected.run_id = draw(st.sampled_from(sorted(RUNS)))
    # Only an attempt after the first can have been granted to reconcile another.
    grants = [Decision.PROCEED, Decision.RECONCILE] if expected.attempt > 1 else [Decision.PROCEED]
    expected.granted = draw(st.sampled_from(grants))
    expected.lease_expires_at = NOW + timedelta(seconds=draw(st.integers(-120, 600)))
    if status is ClaimStatus.FAILED:
        retryable = draw(st.booleans())
        expected.result = Result(Outcome.FAILED, error="ERP said no", retryable=retryable)
    return expected


def _claim(expected: ExpectedClaim) -> tuple[Claim, list[FingerprintRecord]]:
    """The same claim as the service stores it, and the fingerprint records of its aliases."""
    assert expected.status is not None
    assert expected.run_id is not None
    assert expected.fingerprint is not None
    run = RUNS[expected.run_id]
    claim = Claim(
        claim_id="c",
        scope="erp",
        status=expected.status,
        attempt=expected.attempt,
        fingerprint=_fingerprint(expected.fingerprint),
        grant_id="g",
        run_id=expected.run_id,
        flow=Flow(run.flow.name, run.flow.environment),
        first_received_at=NOW,
        last_attempt_at=NOW,
        updated_at=NOW,
        lease_expires_at=expected.lease_expires_at if expected.status is ClaimStatus.IN_PROGRESS else None,
        retryable=expected.result.retryable if expected.result else None,
        error=expected.result.error if expected.result else None,
    )
    if expected.granted is Decision.RECONCILE:
        earlier = EarlierAttempt(expected.attempt - 1, "run-earlier", None, ClaimStatus.IN_PROGRESS, NOW)
        claim = replace(claim, earlier_attempt=earlier)
    records = [FingerprintRecord("c", _fingerprint(alias), 1, alias_generation=0) for alias in expected.aliases]
    return claim, records


@given(expected=states(), run_id=st.sampled_from(sorted(RUNS)), version=st.sampled_from(VERSIONS))
def test_the_decision_function_agrees_with_the_model(expected: ExpectedClaim, run_id: str, version: str) -> None:
    modelled = expected.decide(run_id, version, NOW)
    if expected.status is None:
        assert modelled is Decision.PROCEED  # a new key: the service inserts, there is nothing to decide on
        return
    claim, records = _claim(expected)
    run = RUNS[run_id]
    intent = Intent(
        run_id=run_id,
        flow=Flow(run.flow.name, run.flow.environment),
        fingerprint=HASHER.fingerprint(supplied=version, payload=None),
        now=NOW,
    )

    verdict = decide(claim, intent, records)

    assert verdict.decision is modelled, (claim, intent, records)


# -- the whole of Check and claim: new keys, refusals and the exact record to write (issue 23) -----------

SIGNED_IN = st.sampled_from([None, HASHER.signed_in_digest("ana@contoso.com")])


@st.composite
def intents(draw: st.DrawFn) -> Intent:
    """Any request: with or without a flow or business data, signed in or not, any lease, source and reference."""
    run_id = draw(st.sampled_from(sorted(RUNS)))
    run = RUNS[run_id]
    version = draw(st.sampled_from([None, *VERSIONS]))
    return Intent(
        run_id=run_id,
        flow=draw(st.sampled_from([Flow(run.flow.name, run.flow.environment), None])),
        fingerprint=HASHER.fingerprint(supplied=version, payload=None) if version else None,
        now=NOW,
        granted_to=draw(SIGNED_IN),
        claim_id="c",
        scope="erp",
        key_id="k1",
        lease=timedelta(seconds=draw(st.integers(15, 86400))),
        grant_id=draw(st.sampled_from(["g-new", "g-other"])),
        source=draw(st.sampled_from([None, "shop-eu"])),
        reference=draw(st.sampled_from([None, "SO-1"])),
        decided_at=NOW + timedelta(microseconds=draw(st.integers(0, 5))),
    )


@given(intent=intents())
def test_a_new_key_proceeds_with_its_first_claim_made_from_the_request(intent: Intent) -> None:
    verdict = check_and_claim(None, intent)

    assert (verdict.decision, verdict.change) == (Decision.PROCEED, Change.NEW_CLAIM)
    record = verdict.record
    assert record is not None
    assert (record.claim_id, record.scope, record.status, record.attempt) == ("c", "erp", ClaimStatus.IN_PROGRESS, 1)
    assert record.fingerprint == (intent.fingerprint.keyed if intent.fingerprint else None)
    assert (record.grant_id, record.granted_to, record.key_id) == (intent.grant_id, intent.granted_to, "k1")
    assert (record.run_id, record.flow, record.source, record.reference) == (
        intent.run_id,
        intent.flow,
        intent.source,
        intent.reference,
    )
    assert record.first_received_at == record.updated_at == NOW
    assert record.lease_expires_at == NOW + intent.lease


@given(expected=states(), intent=intents(), refusal=st.sampled_from([None, "Flow 'x' is disabled."]))
def test_every_verdict_says_exactly_what_to_write(expected: ExpectedClaim, intent: Intent, refusal: str | None) -> None:
    claim, records = _claim(expected) if expected.status is not None else (None, [])
    claim = replace(claim, source="shop-us", target_record_id="ERP-9", data={"n": 1}) if claim else None

    verdict = check_and_claim(claim, intent, records, refusal=refusal)

    if refusal is not None:
        # The inventory refuses before any claim is made or taken over.
        assert (verdict.decision, verdict.change, verdict.record) == (Decision.BLOCKED, Change.NONE, None)
        return
    if claim is None:
        assert verdict.change is Change.NEW_CLAIM
        return
    assert verdict == replace(decide(claim, intent, records), record=verdict.record)
    if verdict.change is not Change.NEW_ATTEMPT:
        assert verdict.record is None
        return
    record = verdict.record
    assert record is not None
    assert (record.status, record.attempt, record.grant_id) == (
        ClaimStatus.IN_PROGRESS,
        claim.attempt + 1,
        intent.grant_id,
    )
    assert (record.run_id, record.flow, record.granted_to) == (intent.run_id, intent.flow, intent.granted_to)
    # What the earlier attempt left is cleared; the first source named is kept, the first reference too.
    assert (record.target_record_id, record.data, record.error, record.retryable) == (None, None, None, None)
    assert (record.source, record.reference) == ("shop-us", claim.reference or intent.reference)
    assert record.lease_expires_at == NOW + intent.lease
    assert record.updated_at == intent.written_at
    assert record.earlier_attempt == verdict.earlier_attempt
    assert (verdict.decision is Decision.RECONCILE) == (verdict.earlier_attempt is not None)
    expected_fingerprint = intent.fingerprint.keyed if intent.fingerprint else claim.fingerprint
    assert record.fingerprint == expected_fingerprint
    assert (record.claim_id, record.first_received_at, record.key_id) == (
        claim.claim_id,
        claim.first_received_at,
        claim.key_id,
    )


@given(expected=states(), intent=intents(), warnings=st.lists(st.sampled_from(["no_flow", "sensitive_key"])))
def test_each_answer_carries_what_its_decision_promises(
    expected: ExpectedClaim, intent: Intent, warnings: list[str]
) -> None:
    """What each answer carries is decided beside the table (decisions.answer): a token only with a grant,
    the holder (never its run id) only with in_progress, the original result only with duplicate."""
    if expected.status is None:
        return
    claim, records = _claim(expected)
    claim = replace(claim, flow=Flow("Other flow", "Default"), source="shop-us")
    verdict = check_and_claim(claim, intent, records)
    written = verdict.record or claim

    told = answer(verdict, written, replace(intent, warnings=tuple(warnings)), "token" if verdict.grants else None)

    assert (told.decision, told.claim_id, told.attempt, told.reason) == (
        verdict.decision,
        written.claim_id,
        written.attempt,
        verdict.reason,
    )
    assert told.status.value == written.status.value
    assert (told.claim_token is not None) == verdict.grants
    assert (told.lease_expires_at is not None) == verdict.grants
    assert told.earlier_attempt == (verdict.earlier_attempt if verdict.grants else None)
    assert (told.holder is not None) == (verdict.decision is Decision.IN_PROGRESS)
    if told.holder is not None:
        assert (told.holder.flow, told.holder.lease_expires_at) == (claim.flow, claim.lease_expires_at)
        assert told.retry_after_seconds == verdict.retry_after_seconds
    assert (told.result is not None) == (verdict.decision is Decision.DUPLICATE)
    # The request's own warnings first, then what meeting this claim adds.
    met_other_flow = verdict.decision in (Decision.DUPLICATE, Decision.IN_PROGRESS) and intent.flow is not None
    differs = intent.source is not None and intent.source != "shop-us"
    assert told.warnings == [
        *warnings,
        *(["another_flow_copy"] if met_other_flow else []),
        *(["source_differs"] if differs else []),
    ]
