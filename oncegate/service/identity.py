"""Who is asking, under which key secret: a request's key reduced to its claim id, and the claim tokens.

A business key is never kept: a request's :class:`~oncegate.domain.intent.Intent` holds it as the claim
id (and fingerprint) every secret of the key ring makes of it. A claim token is made again from the grant
each time it is needed and compared in constant time; the store never holds one this release made.
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
