"""A claim row stays the same size however many of its conflicts are resolved (issue 9).

Earlier releases appended every resolution to the claim row; on Table Storage the row passed the
property limit after 43 resolutions with long fingerprints, and from then on every changed payload
and every resolution of that key was a 500. Resolutions now go to one row per fingerprint.
"""

from __future__ import annotations

import pytest

from oncegate.domain.statuses import ConflictStatus, Decision
from oncegate.stores import row_writing
from tests.gate import Gate
from tests.service.calls import claim, resolve, succeeded

ROUNDS = 50
# The longest fingerprint a caller may supply.
LONG = "f" * 120


def _claim_row_size(service: Gate, claim_id: str) -> int:
    return len(repr(row_writing.claim_to_row(service.store.get_claim(claim_id))))


@pytest.mark.slow
@pytest.mark.parametrize("same_fingerprint", [True, False], ids=["one fingerprint", "a new one each round"])
def test_many_resolutions_leave_the_claim_row_bounded_and_the_key_working(
    service: Gate, same_fingerprint: bool
) -> None:
    first = succeeded(service, fingerprint=LONG + "-v1")
    sizes = []
    for round_ in range(ROUNDS):
        fingerprint = LONG + ("-v2" if same_fingerprint else f"-{round_:03d}")
        changed = claim(service, run=f"run-{round_}", fingerprint=fingerprint)
        assert changed.decision is Decision.CONFLICT, round_
        assert changed.conflict_id is not None
        decision = "keep_original" if round_ == ROUNDS - 1 else "dismiss"
        assert resolve(service, changed.conflict_id, decision).status is ConflictStatus.RESOLVED
        sizes.append(_claim_row_size(service, first.claim_id))

    assert max(sizes) - min(sizes) <= len("Reviewer") + 8, sizes
    kept = claim(service, run="run-last", fingerprint=fingerprint)
    assert kept.decision is Decision.DUPLICATE
    # Dismissed fingerprints open a new conflict each time, with a new id.
    if not same_fingerprint:
        again = claim(service, run="run-again", fingerprint=LONG + "-000")
        assert again.decision is Decision.CONFLICT
