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

from oncegate.domain.decisions import Intent, decide
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
