"""Every stored record read back from the row written for it is the same record, every field of it set.

The stored format is written by ``stores/row_writing.py`` and read by ``stores/row_reading.py`` (which reads the
rows of earlier releases too): a column renamed, dropped or spelt differently on one side and not the other fails
here, for every kind of record and every field, before any store is opened. Each record below has every field
away from its default, so a field a writer forgets, or a reader leaves at its default, is seen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from oncegate.domain.backups import Restore
from oncegate.domain.records import EarlierAttempt, FingerprintRecord, KeySecretRecord
from oncegate.domain.statuses import ClaimStatus, EventKind, Resolution
from oncegate.stores import row_reading, row_writing
from tests.support import records
from tests.support.records import FLOW, T0

VERSION = "7"
LATER = T0 + timedelta(minutes=3, microseconds=11)


def claim(**changes: Any) -> Any:
    earlier = EarlierAttempt(2, "run-0", FLOW, ClaimStatus.UNKNOWN, T0, LATER, "the ERP did not answer")
    full = records.full_claim(
        granted_to="flow:orders",
        earlier_attempt=earlier,
        released_in_doubt=True,
        generation=2,
        key_id="k2",
        legacy_token="clear-token-of-0.1.0",
        version=VERSION,
    )
    return dataclasses.replace(full, **changes)


def tombstone() -> Any:
    # Status "purged" on the row: a list of claims by status never meets it; read back as the succeeded claim.
    return claim(status=ClaimStatus.SUCCEEDED, purged_at=LATER, legacy_token=None)


def event() -> Any:
    details = {"previous": {"status": "in_progress", "attempt": 1}, "reason": "a note", "data": {"a": 1}}
    return records.event(
        "c1", kind=EventKind.RESULT, details=details, outcome="succeeded", attempt=2, count=3, last_at=LATER
    )


def fingerprint() -> Any:
    return FingerprintRecord(
        "c1", "sha256:" + "ab" * 32, 2, 1, "x1", Resolution.KEEP_ORIGINAL, "alex@example.com", "kept", LATER, VERSION
    )


# Each kind of record: one with every field set, and how its row is read back.
KINDS: dict[str, tuple[Callable[[], Any], Callable[[Any], Any], Callable[[Any], Any]]] = {
    "claim": (claim, row_writing.claim_to_row, lambda row: row_reading.claim_from_row(row, VERSION)),
    "tombstone": (tombstone, row_writing.claim_to_row, lambda row: row_reading.claim_from_row(row, VERSION)),
    "history line": (event, row_writing.event_to_row, row_reading.event_from_row),
    "fingerprint": (
        fingerprint,
        row_writing.fingerprint_to_row,
        lambda row: row_reading.fingerprint_from_row(row, VERSION),
    ),
    "conflict": (
        lambda: records.resolved_conflict(version=VERSION),
        row_writing.conflict_to_row,
        lambda row: row_reading.conflict_from_row(row, VERSION),
    ),
    "flow": (
        lambda: records.registered_flow(version=VERSION),
        row_writing.flow_to_row,
        lambda row: row_reading.flow_from_row(row, VERSION),
    ),
    "scope": (
        lambda: records.configured_scope(key_pattern="^SO-[0-9]+$", horizon_days=90, version=VERSION),
        row_writing.scope_to_row,
        lambda row: row_reading.scope_from_row(row, VERSION),
    ),
    "overlap": (
        lambda: records.overlap(version=VERSION),
        row_writing.overlap_to_row,
        lambda row: row_reading.overlap_from_row(row, VERSION),
    ),
    "key secret": (
        lambda: KeySecretRecord("k2", T0, LATER, LATER + timedelta(days=1), VERSION),
        row_writing.secret_to_row,
        lambda row: row_reading.secret_from_row(row, VERSION),
    ),
    "restore": (
        lambda: Restore("store-a", "e1", T0, LATER, LATER + timedelta(days=30), 41, LATER + timedelta(seconds=1)),
        row_writing.restore_to_row,
        row_reading.restore_from_row,
    ),
}
# Fields a record of the kind keeps at their default: a claim with its lease over has no clear token, and only a
# tombstone has its purge's time.
AT_DEFAULT = {"claim": {"purged_at"}, "tombstone": {"legacy_token"}}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_record_reads_back_from_its_row_as_it_was_written(kind: str) -> None:
    made, to_row, from_row = KINDS[kind]
    record = made()
    defaults = {
        one.name
        for one in dataclasses.fields(record)
        if getattr(record, one.name)
        == (one.default_factory() if one.default_factory is not dataclasses.MISSING else one.default)
    }
    assert defaults == AT_DEFAULT.get(kind, set()), f"{kind}: every field is set, so that none is lost unseen"

    assert from_row(to_row(record)) == record


def test_a_long_value_spread_over_pieces_is_gathered_whole() -> None:
    record = records.full_claim(data={"text": "é" * (row_writing.PROPERTY_UNITS + 5)}, version=VERSION)
    row = row_writing.claim_to_row(record)

    spread = row_writing.spread(row)

    assert "ResultData__2" in spread
    assert row_reading.claim_from_row(row_reading.gather(spread), VERSION) == record
