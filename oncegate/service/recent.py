"""The claims this instance wrote last, each at the version it was written with.

The run that was granted a claim usually sends its result to the instance that granted it. Starting
from the claim as written, that instance writes the result in one request, with no read first: the
write is conditioned on the remembered version (the ETag on Table Storage), so a claim changed by
anyone since fails it, and the change is then decided again on a fresh read. A remembered claim is
only ever the starting point of such a conditional write, never the ground for a refusal or a no-op.
"""

from __future__ import annotations

from oncegate.bounded import Bounded
from oncegate.domain.records import Claim

# About 1 KB a claim: a few MB at most, and more than the claims one instance holds leases on.
REMEMBERED = 4096


class RecentClaims:
    """A bounded, thread-safe memory of the last claims written, least recently written forgotten first."""

    def __init__(self, size: int = REMEMBERED) -> None:
        self._claims: Bounded[str, Claim] = Bounded(size)

    def remember(self, claim: Claim) -> None:
        """Keep ``claim`` as stored; its version is what a later write is conditioned on."""
        self._claims.put(claim.claim_id, claim)

    def recall(self, claim_id: str) -> Claim | None:
        """The claim as this instance last wrote it, or None."""
        return self._claims.get(claim_id)

    def forget(self, claim_id: str) -> None:
        self._claims.pop(claim_id)
