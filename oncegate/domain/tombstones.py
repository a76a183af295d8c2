"""What a succeeded claim's tombstone keeps of what reviewers decided about its fingerprints (issue 31).

A reviewer who resolves a conflict as ``keep_original`` says that the changed data is the same business result:
the claim's fingerprint record for it makes a late replay of that data a ``duplicate``. Retention turns the claim
into a tombstone and deletes its history; these records stay with it, so that the replay is answered the same
after the purge as before it, and the counts of conflicts resolved keep the next conflict's id new. They are
digests and counters: who resolved and why (the reviewer, the note) go with the history.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime

from oncegate.domain.records import Claim, FingerprintRecord

# How many fingerprint records a tombstone keeps at most: each a few hundred bytes, none of them data.
MAX_TOMBSTONE_FINGERPRINTS = 32


def buried_fingerprints(tombstone: Claim, records: Collection[FingerprintRecord]) -> list[FingerprintRecord]:
    """The fingerprint records ``tombstone`` keeps, without who resolved and why: those that count as its business
    result (kept as the original in its generation) first, then the latest resolved; at most
    ``MAX_TOMBSTONE_FINGERPRINTS``."""

    def rank(record: FingerprintRecord) -> tuple[bool, datetime]:
        counts = record.alias_generation == tombstone.generation
        return counts, record.resolved_at or datetime.min.replace(tzinfo=UTC)

    ranked = sorted(records, key=rank, reverse=True)[:MAX_TOMBSTONE_FINGERPRINTS]
    return [replace(record, reviewer=None, note=None) for record in ranked]
