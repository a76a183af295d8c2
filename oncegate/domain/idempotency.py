"""The idempotency key a run hands the target system, and which attempt's key it is (issue 25).

Many target systems deduplicate on a key of their own (an ``Idempotency-Key`` header, a client
request id, an external id field). Every ``proceed`` and ``reconcile`` answer carries one, made by
:meth:`~oncegate.domain.keys.KeyHasher.idempotency_key` from the claim, never from the business key:

- an attempt that reconciles an earlier one in doubt (its lease ran out, or its outcome was
  recorded ``unknown``) carries the earlier attempt's key, so the target recognises a request that
  already reached it; a chain of such attempts keeps the key of the first;
- an attempt after a recorded failure (or a release) gets a key of its own, so the target does not
  answer the retry with the failure it cached.

The claim keeps the attempt whose key it hands out (``Claim.idempotency_attempt``); None is its own.
"""

from __future__ import annotations

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim, EarlierAttempt


def key_attempt(claim: Claim, earlier: EarlierAttempt | None) -> int | None:
    """The attempt whose key a new attempt taking ``claim`` over carries: when it reconciles an ``earlier``
    attempt in doubt, that attempt's (or the one whose key it carried in turn); else None, its own."""
    if earlier is None:
        return None
    return claim.idempotency_attempt or claim.attempt


def idempotency_key(hasher: KeyHasher, claim: Claim) -> str:
    """The current attempt's idempotency key, made with the secret of the claim's id (``hasher``)."""
    return hasher.idempotency_key(claim.claim_id, claim.first_received_at, claim.idempotency_attempt or claim.attempt)
