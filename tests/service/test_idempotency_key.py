"""The idempotency key for the target system: the same while an attempt is in doubt, new after a
recorded failure (issue 25)."""

from __future__ import annotations

import uuid

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Decision, SettledOutcome
from oncegate.models import ClaimResponse, ReviewClaimRequest
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import KEY, SCOPE, claim, record, release


@pytest.fixture
def store_kind() -> str:
    """SQLite only: the idempotency key is derived from the claim by the service.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


LEASE = 60


def granted(answer: ClaimResponse, decision: Decision) -> str:
    assert answer.decision is decision
    assert answer.idempotency_key is not None
    return answer.idempotency_key


def test_every_grant_carries_a_uuid_shaped_key_made_from_the_claim_not_the_business_key(service: Gate) -> None:
    first = claim(service)
    other_scope = claim(service, scope="mail.send-invoice")
    key = granted(first, Decision.PROCEED)

    assert uuid.UUID(key).version == 8
    assert key != granted(other_scope, Decision.PROCEED)
    assert KEY not in key
    assert first.claim_id not in key
    # Another secret makes another key of the same claim: only the service can make it.
    other = KeyHasher("x" * 40).idempotency_key(first.claim_id, service.get_claim(first.claim_id).first_received_at, 1)
    assert other != key


def test_the_holder_asking_again_gets_the_same_key(service: Gate) -> None:
    first = claim(service)

    assert granted(claim(service), Decision.PROCEED) == granted(first, Decision.PROCEED)


def test_attempts_reconciling_an_attempt_in_doubt_hand_out_its_key(service: Gate, clock: FakeClock) -> None:
    first = granted(claim(service, lease_seconds=LEASE), Decision.PROCEED)
    clock.advance(LEASE + 1)
    expired = claim(service, run="run-2", lease_seconds=LEASE)
    clock.advance(LEASE + 1)
    expired_again = claim(service, run="run-3", lease_seconds=LEASE)
    record(service, expired_again, "unknown", error="the ERP timed out")
    unknown = claim(service, run="run-4")

    assert granted(expired, Decision.RECONCILE) == first
    assert granted(expired_again, Decision.RECONCILE) == first
    assert granted(unknown, Decision.RECONCILE) == first
    assert unknown.attempt == 4


def test_a_recorded_failure_gives_the_next_attempt_a_new_key(service: Gate) -> None:
    first = claim(service)
    record(service, first, "failed", error="ERP said no", retryable=True)
    retried = claim(service, run="run-2")

    assert granted(retried, Decision.PROCEED) != granted(first, Decision.PROCEED)


def test_a_release_gives_a_new_key_and_a_release_in_doubt_keeps_it(service: Gate, clock: FakeClock) -> None:
    first = claim(service, lease_seconds=LEASE)
    release(service, first)
    second = claim(service, run="run-2", lease_seconds=LEASE)
    clock.advance(LEASE + 1)
    reconciling = claim(service, run="run-3")
    release(service, reconciling, reason="could not look the ERP up")
    again = claim(service, run="run-4")

    assert granted(second, Decision.PROCEED) != granted(first, Decision.PROCEED)
    assert granted(reconciling, Decision.RECONCILE) == granted(second, Decision.PROCEED)
    assert granted(again, Decision.RECONCILE) == granted(second, Decision.PROCEED)


def test_an_attempt_a_reviewer_settled_as_failed_is_followed_by_a_new_key(service: Gate) -> None:
    first = claim(service)
    record(service, first, "unknown", error="the ERP timed out")
    review = ReviewClaimRequest(reviewer="ana@contoso.com", outcome=SettledOutcome.FAILED, attempt=1)
    service.review(first.claim_id, review)
    retried = claim(service, run="run-2")

    assert granted(retried, Decision.PROCEED) != granted(first, Decision.PROCEED)


def test_the_key_survives_another_instance(service: Gate, clock: FakeClock) -> None:
    first = granted(claim(service, lease_seconds=LEASE), Decision.PROCEED)
    clock.advance(LEASE + 1)
    other = Gate(service.store, KeyHasher(KEY_SECRET), clock=clock)

    assert granted(claim(other, run="run-2", scope=SCOPE), Decision.RECONCILE) == first
