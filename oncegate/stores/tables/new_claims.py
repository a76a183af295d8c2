"""The Table Storage store's claims made together (issue 36): each in a transaction of its own.

A claim is a partition of its own, and a transaction holds one partition: many claims cannot be written in
one request. ``create_claims`` is ``create_claim`` for each pair, a claim already there (or a row the store
cannot hold) answered None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from oncegate.domain.records import Claim, HistoryEvent
from oncegate.errors import AlreadyExists, TooLarge


class TableNewClaims:
    """``create_claims`` over the claims table's ``create_claim``."""

    create_claim: Callable[[Claim, HistoryEvent], Claim]

    def create_claims(self, new: Sequence[tuple[Claim, HistoryEvent]]) -> list[Claim | None]:
        """Each claim with its first event, where no claim has its id: the claim as written, or None (see the port)."""
        made: list[Claim | None] = []
        for claim, event in new:
            try:
                made.append(self.create_claim(claim, event))
            except (AlreadyExists, TooLarge):
                made.append(None)
        return made
