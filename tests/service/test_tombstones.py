"""The promise's horizon (issue 26): a succeeded claim purged by retention leaves a tombstone, so a late replay of
its key is answered ``duplicate`` until the scope's horizon is over; then the tombstone goes too. Both stores."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from oncegate.domain.limits import DEFAULT_HORIZON_DAYS, json_size
from oncegate.domain.records import FingerprintRecord
from oncegate.domain.statuses import ClaimStatus, Decision, EventKind, Resolution
from oncegate.domain.tombstones import MAX_TOMBSTONE_FINGERPRINTS, buried_fingerprints
from oncegate.entrypoints import error_map
from oncegate.errors import NotFound, StateConflict
from oncegate.models import ClaimResponse, ResolveConflictRequest, SetScopeRequest
from oncegate.service.retention import buried
from oncegate.stores import row_writing
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, keyed, record, release, resolve, scopes, set_scope
from tests.support import records

DAY = 24 * 3600
# A claim as flows make them: a result with some data, a source system and a label.
DATA = {"order": "SO-1001", "lines": [{"sku": f"SKU-{n}", "quantity": n, "price": 12.5} for n in range(12)]}


def done(service: Gate, key: str = "SO-1001", **fields: Any) -> str:
    return granted_and_done(service, key, **fields).claim_id


def granted_and_done(service: Gate, key: str = "SO-1001", **fields: Any) -> ClaimResponse:
    """The answer that granted the claim, whose result was recorded: its token is the run's."""
    answer = claim(service, key=key, run="run-1", source="shop-eu", reference=f"order {key}", **fields)
    assert answer.decision is Decision.PROCEED
    record(service, answer, target_record_id="ERP-77", data=DATA)
    return answer


def test_a_late_replay_of_a_purged_key_is_answered_duplicate_with_what_is_known(
    service: Gate, clock: FakeClock
) -> None:
    claim_id = done(service)
    clock.advance(91 * DAY)
    report = service.retention.purge()

    replay = claim(service, key="SO-1001", run="run-resubmitted")

    assert report.deleted_total == 1
    assert replay.decision is Decision.DUPLICATE
    assert (replay.claim_id, replay.status.value, replay.attempt) == (claim_id, "succeeded", 1)
    assert replay.result is not None
    assert (replay.result.target_record_id, replay.result.run_id, replay.result.data) == ("ERP-77", "run-1", None)
    assert replay.result.completed_at is not None
    assert "tombstone" in service.get_claim(claim_id).history[-1].recognised_by  # type: ignore[index]
    # What Get claim shows: the tombstone, when it was purged, and no data, labels or history of before.
    shown = service.get_claim(claim_id)
    assert (shown.status, shown.target_record_id, shown.data, shown.source, shown.reference) == (
        ClaimStatus.SUCCEEDED,
        "ERP-77",
        None,
        None,
        None,
    )
    assert shown.purged_at == clock()
    assert [(entry.kind, entry.outcome) for entry in shown.history or []] == [(EventKind.CLAIM, "duplicate")]


def test_changed_data_against_a_tombstone_is_still_a_conflict(service: Gate, clock: FakeClock) -> None:
    done(service)
    clock.advance(91 * DAY)
    service.retention.purge()

    changed = claim(service, key="SO-1001", run="run-edited", fingerprint="v2")

    assert changed.decision is Decision.CONFLICT
    assert changed.conflict_id is not None


def test_the_same_result_sent_again_to_a_tombstone_is_a_no_op_and_another_is_refused(
    service: Gate, clock: FakeClock
) -> None:
    """Issue 31: the run's Record result arriving again after the purge (a retry, a replayed call) was 409 where the
    contract promises a no-op 200. The tombstone keeps the outcome and the target record, not the data: those two
    say whether the result is the same."""
    answer = granted_and_done(service)
    clock.advance(91 * DAY)
    service.retention.purge()
    tombstone = service.get_claim(answer.claim_id)

    again = record(service, answer, target_record_id="ERP-77", data=DATA)
    refused = []
    for outcome, target in (("succeeded", "ERP-78"), ("succeeded", None), ("failed", None), ("unknown", "ERP-77")):
        with pytest.raises(StateConflict) as stale:
            record(service, answer, outcome, target_record_id=target)
        refused.append((error_map.code(stale.value), stale.value.target))

    assert (again.status, again.target_record_id, again.purged_at) == (ClaimStatus.SUCCEEDED, "ERP-77", clock())
    assert service.get_claim(answer.claim_id) == tombstone
    assert refused == [("stale_claim", "targetRecordId")] * 2 + [("stale_claim", "outcome")] * 2


def test_a_fingerprint_a_reviewer_kept_as_the_same_is_still_a_duplicate_on_the_tombstone(
    service: Gate, clock: FakeClock
) -> None:
    """Issue 31: the purge deleted the claim's fingerprint records with its history, so a late replay of changed
    data a reviewer had kept as the same business result (keep_original) was a conflict on the tombstone, where
    before the purge it was a duplicate. (A first conflict kept as the original was found again by its id and
    applied anew; one kept in a later round was not: the tombstone answered the first round's conflict.)"""
    claim_id = done(service)
    resolve(service, claim(service, key="SO-1001", run="run-edited-1", fingerprint="v2").conflict_id, "dismiss")
    changed = claim(service, key="SO-1001", run="run-edited-2", fingerprint="v2")
    resolve(service, changed.conflict_id, "keep_original")
    before = claim(service, key="SO-1001", run="run-late-1", fingerprint="v2")
    clock.advance(91 * DAY)
    service.retention.purge()
    tombstone = service.store.get_claim(claim_id)

    after = claim(service, key="SO-1001", run="run-late-2", fingerprint="v2")
    answered = service.store.get_claim(claim_id)
    other = claim(service, key="SO-1001", run="run-late-3", fingerprint="v3")

    assert tombstone.purged_at is not None
    assert (before.decision, after.decision) == (Decision.DUPLICATE, Decision.DUPLICATE)
    assert answered.updated_at == tombstone.updated_at  # a duplicate leaves its horizon where it was
    assert other.decision is Decision.CONFLICT
    # A conflict is a change: its horizon starts again, so the purge never deletes it under the open conflict.
    assert service.store.get_claim(claim_id).updated_at >= clock()


def test_a_tombstone_deleted_at_its_horizon_takes_the_fingerprints_it_kept(service: Gate, clock: FakeClock) -> None:
    set_scope(service, retention_days=30, horizon_days=60)
    claim_id = done(service)
    resolve(service, claim(service, key="SO-1001", run="run-edited", fingerprint="v2").conflict_id, "keep_original")
    clock.advance(31 * DAY)
    service.retention.purge()
    kept = service.store.get_fingerprints(claim_id, [keyed("v2")])
    clock.advance(30 * DAY)
    service.retention.purge()

    assert [record.alias_generation for record in kept] == [0]
    with pytest.raises(NotFound):
        service.store.get_claim(claim_id)
    assert service.store.get_fingerprints(claim_id, [keyed("v2")]) == []
    assert claim(service, key="SO-1001", run="run-late", fingerprint="v2").decision is Decision.PROCEED


def test_past_the_horizon_the_tombstone_goes_and_the_key_is_new(service: Gate, clock: FakeClock) -> None:
    set_scope(service, retention_days=30, horizon_days=60)
    claim_id = done(service)
    clock.advance(31 * DAY)
    first = service.retention.purge()
    clock.advance(29 * DAY)  # 60 days after the result: not yet past the horizon
    second = service.retention.purge()
    assert claim(service, key="SO-1001", run="run-2").decision is Decision.DUPLICATE
    clock.advance(2 * DAY)
    third = service.retention.purge()

    assert (first.deleted_total, sum(first.tombstones_deleted.values())) == (1, 0)
    assert sum(second.tombstones_deleted.values()) == 0
    assert third.tombstones_deleted == {SCOPE: 1}
    with pytest.raises(NotFound):
        service.store.get_claim(claim_id)
    assert service.store.list_events(claim_id) == []
    assert claim(service, key="SO-1001", run="run-3").decision is Decision.PROCEED


def test_a_dry_run_counts_the_tombstones_it_would_delete_and_deletes_nothing(service: Gate, clock: FakeClock) -> None:
    set_scope(service, retention_days=1, horizon_days=1)
    claim_id = done(service)
    clock.advance(2 * DAY)

    report = service.retention.purge(dry_run=True)

    assert (report.deleted_total, report.tombstones_deleted) == (1, {})  # the tombstone is not written in a dry run
    assert service.store.get_claim(claim_id).purged_at is None


def test_a_released_claim_leaves_no_tombstone(service: Gate, clock: FakeClock) -> None:
    released = release(service, claim(service, key="SO-2", run="run-r"))
    clock.advance(91 * DAY)
    service.retention.purge()

    with pytest.raises(NotFound):
        service.store.get_claim(released.claim_id)


def test_each_scope_publishes_its_horizon_never_shorter_than_its_retention(service: Gate) -> None:
    set_scope(service, "mail.default")
    set_scope(service, "erp.long", retention_days=400)
    set_scope(service, "erp.set", retention_days=30, horizon_days=730)

    listed = scopes(service)

    assert (listed["mail.default"].retention_days, listed["mail.default"].horizon_days) == (90, DEFAULT_HORIZON_DAYS)
    assert (listed["erp.long"].retention_days, listed["erp.long"].horizon_days) == (400, 400)
    assert listed["erp.set"].horizon_days == 730
    with pytest.raises(ValidationError) as refused:
        SetScopeRequest.model_validate({"scope": "erp.short", "retentionDays": 90, "horizonDays": 30})
    assert [error["loc"] for error in refused.value.errors()] == [("horizonDays",)]


def test_a_tombstone_costs_a_fraction_of_the_claim_it_replaces(service: Gate, clock: FakeClock) -> None:
    """The figure docs/operations.md gives: the stored bytes of a claim (row and history) against its tombstone's."""
    claim_id = done(service)
    for run in range(3):
        claim(service, key="SO-1001", run=f"run-again-{run}")
    stored = service.store.get_claim(claim_id)
    events = service.store.list_events(claim_id)
    claim_bytes = json_size(_row(row_writing.claim_to_row(stored))) + sum(
        json_size(_row(row_writing.event_to_row(event))) for event in events
    )
    tombstone_bytes = json_size(_row(row_writing.claim_to_row(buried(stored, clock()))))

    print(f"claim {claim_bytes} bytes ({len(events)} history rows), tombstone {tombstone_bytes} bytes")
    assert tombstone_bytes < 1024
    assert tombstone_bytes * 3 < claim_bytes


def test_a_fingerprint_a_tombstone_keeps_costs_a_fraction_of_the_tombstone(service: Gate, clock: FakeClock) -> None:
    """The figure docs/operations.md gives: the stored bytes of a fingerprint record a tombstone keeps, a digest
    and counters, against the record with the reviewer's address and a note as a resolution writes it."""
    claim_id = done(service)
    changed = claim(service, key="SO-1001", run="run-edited", fingerprint="v2")
    resolve(service, changed.conflict_id, "keep_original")
    stored = service.store.get_claim(claim_id)
    (record,) = service.store.get_fingerprints(claim_id, [keyed("v2")])
    (kept,) = buried_fingerprints(buried(stored, clock()), [record])

    record_bytes, kept_bytes = (json_size(_row(row_writing.fingerprint_to_row(row))) for row in (record, kept))

    print(f"fingerprint record {record_bytes} bytes, kept by the tombstone {kept_bytes} bytes")
    assert (kept.alias_generation, kept.reviewer, kept.note) == (stored.generation, None, None)
    assert kept_bytes < 512


def test_a_tombstone_keeps_at_most_its_bound_of_fingerprints_those_that_count_first() -> None:
    tombstone = replace(records.claim(status=ClaimStatus.SUCCEEDED), generation=1, purged_at=records.T0)
    at = [records.T0 + timedelta(minutes=n) for n in range(MAX_TOMBSTONE_FINGERPRINTS + 8)]
    aliases = [FingerprintRecord(tombstone.claim_id, f"kept-{n}", 1, 1, resolved_at=at[n]) for n in range(4)]
    others = [
        FingerprintRecord(tombstone.claim_id, f"other-{n}", 1, 0 if n % 2 else None, resolved_at=at[n])
        for n in range(MAX_TOMBSTONE_FINGERPRINTS + 8)
    ]

    kept = buried_fingerprints(tombstone, [*others, *aliases])

    assert len(kept) == MAX_TOMBSTONE_FINGERPRINTS
    # Those that count as the tombstone's business result first, then the latest resolved.
    assert [record.fingerprint for record in kept[:4]] == ["kept-3", "kept-2", "kept-1", "kept-0"]
    assert {record.fingerprint for record in kept[4:]} == {
        f"other-{n}" for n in range(12, MAX_TOMBSTONE_FINGERPRINTS + 8)
    }


def _row(row: dict[str, object]) -> dict[str, object]:
    """A row's columns that hold something, times as text: what a store keeps of it."""
    return {name: str(value) for name, value in row.items() if value is not None}


def test_a_new_version_accepted_on_a_tombstone_proceeds_and_the_old_one_is_a_conflict(
    service: Gate, clock: FakeClock
) -> None:
    """The reviewer accepts the changed data a late replay brought: the tombstone is a claim again, as any claim
    whose new version was accepted (failed, retryable), so the next run with the new data proceeds."""
    claim_id = done(service)
    clock.advance(91 * DAY)
    service.retention.purge()
    changed = claim(service, key="SO-1001", run="run-edited", fingerprint="v2")
    assert changed.conflict_id is not None
    service.resolve_conflict(
        changed.conflict_id, ResolveConflictRequest(decision=Resolution.ACCEPT_NEW, reviewer="ana@contoso.com")
    )

    accepted = service.get_claim(claim_id)
    again = claim(service, key="SO-1001", run="run-edited-2", fingerprint="v2")
    old = claim(service, key="SO-1001", run="run-old", fingerprint="v1")

    assert (accepted.status, accepted.retryable, accepted.purged_at) == (ClaimStatus.FAILED, True, None)
    assert (again.decision, again.attempt) == (Decision.PROCEED, 2)
    assert old.decision is Decision.CONFLICT


def test_a_tombstone_with_a_conflict_open_past_its_horizon_stays_until_the_conflict_is_resolved(
    service: Gate, clock: FakeClock
) -> None:
    set_scope(service, retention_days=1, horizon_days=3)
    claim_id = done(service)
    clock.advance(2 * DAY)
    service.retention.purge()
    late = claim(service, key="SO-1001", run="run-late", fingerprint="v2")
    assert late.decision is Decision.CONFLICT
    assert late.conflict_id is not None
    clock.advance(4 * DAY)

    # Its horizon is over, counted from the conflict, which nobody resolved: the tombstone stays under it.
    kept = service.retention.purge()
    tombstone = service.store.get_claim(claim_id)
    conflict = service.get_conflict(late.conflict_id)
    # Resolved, the conflict is a change of the tombstone too: deleted once the horizon is over from there.
    resolve(service, late.conflict_id, "dismiss")
    clock.advance(4 * DAY)
    gone = service.retention.purge()

    assert sum(kept.tombstones_deleted.values()) == 0
    # The operator is told why it stays.
    assert (kept.tombstones_kept, kept.as_json()["tombstonesKept"]) == ({SCOPE: 1}, 1)
    assert "kept 1 past it with an open conflict" in kept.summary()
    assert (tombstone.purged_at is not None, conflict.claim_id) == (True, claim_id)
    assert sum(gone.tombstones_deleted.values()) == 1
    assert gone.tombstones_kept == {}
    with pytest.raises(NotFound):
        service.store.get_claim(claim_id)
