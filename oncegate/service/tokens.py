"""Claim tokens: made again from the grant each time one is needed, compared in constant time.

The store never holds a token this release made, only the grant's random id: a token is a MAC over it
under the secret the claim's id was made with (:meth:`~oncegate.domain.keys.KeyHasher.claim_token`).
Who is asking, under which secret, is the request's :class:`~oncegate.domain.intent.Intent`.
"""

from __future__ import annotations

import hmac
import secrets

from oncegate.domain.keys import Fingerprint, KeyHasher, KeyRing
from oncegate.domain.records import Claim


def keyed(fingerprint: Fingerprint | None) -> str | None:
    return fingerprint.keyed if fingerprint else None


def stale_token_message(claim: Claim) -> str:
    """Why ``token`` is refused, the same for any token that does not verify: none of it is echoed or trusted.

    Not the attempt the token's text names: a made-up token names one too (issue 13). Never the holder's
    run id: with it, another caller could pass for the holder (issue 9).
    """
    return (
        f"This claim token does not match this claim: attempt {claim.attempt} now holds it, with status "
        f"{claim.status.value}. Send the token Check and claim gave this run; one of an earlier attempt no longer "
        "counts."
    )


def new_grant_id() -> str:
    # Random per grant: the claim token is a MAC over it, so a claim deleted and made again gets new tokens.
    return secrets.token_urlsafe(12)


def token(claim: Claim, hasher: KeyHasher) -> str:
    """The current grant's claim token: made again from the grant, never read from the store."""
    if claim.grant_id is None:
        assert claim.legacy_token is not None, "a claim has a grant id or a token of an earlier release"
        return claim.legacy_token
    return hasher.claim_token(claim.claim_id, claim.attempt, claim.grant_id)


def holds(keys: KeyRing, claim: Claim, token: str) -> bool:
    """Whether ``token`` is the current grant's, made with any secret known (a rotation may be under way)."""
    grant_id = claim.grant_id
    if grant_id is None:
        return claim.legacy_token is not None and hmac.compare_digest(token.encode(), claim.legacy_token.encode())
    return any(hasher.token_matches(token, claim.claim_id, claim.attempt, grant_id) for hasher in keys.lookup_order)
