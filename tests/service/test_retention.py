"""Retention on both stores: which finished claims a purge deletes, with their history, and how it pages and resumes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, Decision, EventKind
from oncegate.errors import ClockSkewed, NotFound
from oncegate.models import ClaimCounts, ReviewClaimRequest
from oncegate.service.retention import Kept, PurgeReport, Retention
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, record, release, resolve, scopes, set_scope, succeeded

SHORT = "mail.send-reminder"
DAY = 24 * 3600


@pytest.fixture
def faults(open_store: Callable[[], ClaimStore]) -> FaultyStore:
    """This test's store, failing (or letting another instance act) at the call the test arms."""
    return FaultyStore(open_store(), Fault.BEFORE)


@pytest.fixture
def faulty_service(faults: FaultyStore, clock: FakeClock) -> Gate:
    """The service over ``faults``: unarmed, it works as over the store itself."""
    return Gate(faults, KeyHasher(KEY_SECRET), clock=clock)


def review(service: Gate, claim_id: str, reviewer: str = "ana@contoso.com") -> None:
    service.review(claim_id, ReviewClaimRequest(reviewer=reviewer, note="checked in the ERP"))


def failed(service: Gate, key: str, *, retryable: bool, scope: str = SCOPE) -> str:
    answer = claim(service, run=f"run-{key}", key=key, scope=scope)
    record(service, answer, "failed", error="ERP said no", retryable=retryable)
    return answer.claim_id


def gone(service: Gate, claim_id: str) -> bool:
    """The claim and every history row of it are deleted: nothing is left but, of a succeeded claim, its tombstone."""
    try:
        claim = service.store.get_claim(claim_id)
    except NotFound:
        return service.store.list_events(claim_id) == []
    return claim.purged_at is not None and service.store.list_events(claim_id) == []


def every_case(service: Gate) -> dict[str, str]:
    """One claim of each kind, made now, by name."""
    set_scope(service, SHORT, retention_days=1)
    disputed = succeeded(service, key="disputed", run="run-d")
    opened = claim(service, run="run-d2", key="disputed", fingerprint="v2")
    settled = succeeded(service, key="settled", run="run-s")
    resolve(service, claim(service, run="run-s2", key="settled", fingerprint="v2").conflict_id, "dismiss")
    reviewed = failed(service, "reviewed", retryable=False)
    review(service, reviewed)
    ids = {
        "succeeded": succeeded(service, key="succeeded").claim_id,
        "released": release(service, claim(service, run="run-r", key="released")).claim_id,
        "reviewed": reviewed,
        "settled": settled.claim_id,
        "retryable": failed(service, "retryable", retryable=True),
        "unreviewed": failed(service, "unreviewed", retryable=False),
        "disputed": disputed.claim_id,
        "in_progress": claim(service, run="run-h", key="in-progress").claim_id,
        "unknown": record(service, claim(service, run="run-u", key="unknown"), "unknown").claim_id,
        "short": succeeded(service, key="short", scope=SHORT).claim_id,
    }
    assert opened.decision is Decision.CONFLICT
    return ids


def test_purge_deletes_exactly_the_finished_claims_past_their_scope_retention(service: Gate, clock: FakeClock) -> None:
    ids = every_case(service)

    clock.advance(2 * DAY)
    early = service.retention.purge()
    clock.advance(89 * DAY)
    late = service.retention.purge()

    assert {name for name, claim_id in ids.items() if gone(service, claim_id)} == {
        "short",
        "succeeded",
        "released",
        "reviewed",
        "settled",
    }
    assert early.deleted == Counter({(SHORT, ClaimStatus.SUCCEEDED): 1})
    assert late.deleted == Counter(
        {(SCOPE, ClaimStatus.SUCCEEDED): 2, (SCOPE, ClaimStatus.RELEASED): 1, (SCOPE, ClaimStatus.FAILED): 1}
    )
    assert late.kept == Counter({Kept.RETRYABLE: 1, Kept.UNREVIEWED: 1, Kept.OPEN_CONFLICT: 1})
    assert (late.finished, late.cursor, late.error, late.examined) == (True, None, None, 7)
    # The catalogue's counts drop with the claims; a released key is claimed afresh, a succeeded one is still
    # recognised by its tombstone (issue 26).
    assert scopes(service)[SCOPE].claims == ClaimCounts(in_progress=1, unknown=1, failed=2, succeeded=1)
    assert claim(service, run="run-again", key="released").attempt == 1
    assert claim(service, run="run-again", key="succeeded").decision is Decision.DUPLICATE


def test_a_retryable_failure_is_deleted_once_its_scope_horizon_is_over(service: Gate, clock: FakeClock) -> None:
    # Kept for ever before, however long its key stayed away. A retryable failure says the side effect did not
    # happen: its key, back after the horizon, proceeds as its retry would, even with changed data.
    set_scope(service, SHORT, retention_days=10, horizon_days=30)
    near = failed(service, "near", retryable=True, scope=SHORT)
    far = failed(service, "far", retryable=True, scope=SHORT)
    disputed = failed(service, "disputed", retryable=True, scope=SHORT)
    opened = claim(service, run="run-d2", key="disputed", scope=SHORT, fingerprint="v2")
    clock.advance(15 * DAY)
    record(service, claim(service, run="run-near-2", key="near", scope=SHORT), "failed", error="down again")
    clock.advance(14 * DAY)

    within = service.retention.purge()
    clock.advance(2 * DAY)
    over = service.retention.purge()

    assert opened.decision is Decision.CONFLICT
    assert within.deleted_total == 0
    assert within.kept == Counter({Kept.RETRYABLE: 3})
    assert over.deleted == Counter({(SHORT, ClaimStatus.FAILED): 1})
    assert over.kept == Counter({Kept.RETRYABLE: 1, Kept.OPEN_CONFLICT: 1})
    assert [gone(service, claim_id) for claim_id in (near, far, disputed)] == [False, True, False]
    assert scopes(service)[SHORT].claims == ClaimCounts(failed=2)
    again = claim(service, run="run-far-2", key="far", scope=SHORT, fingerprint="v2")
    assert (again.decision, again.attempt) == (Decision.PROCEED, 1)


def test_within_its_scope_retention_nothing_is_deleted(service: Gate, clock: FakeClock) -> None:
    ids = every_case(service)

    clock.advance(DAY - 1)
    report = service.retention.purge()

    assert [name for name, claim_id in ids.items() if gone(service, claim_id)] == []
    assert report.deleted_total == 0
    assert report.examined == 0  # nothing changed before the shortest retention began


def test_retention_counts_from_the_last_change_such_as_the_review(service: Gate, clock: FakeClock) -> None:
    claim_id = failed(service, "late-review", retryable=False)
    clock.advance(60 * DAY)
    review(service, claim_id)

    clock.advance(31 * DAY)
    kept = service.retention.purge()
    clock.advance(60 * DAY)
    deleted = service.retention.purge()

    # 91 days after the failure but 31 after the review: not even listed.
    assert (kept.examined, kept.deleted_total) == (0, 0)
    assert deleted.deleted == Counter({(SCOPE, ClaimStatus.FAILED): 1})
    assert gone(service, claim_id)


def test_a_dry_run_deletes_nothing_and_counts_the_same(service: Gate, clock: FakeClock) -> None:
    ids = every_case(service)
    clock.advance(91 * DAY)

    dry = service.retention.purge(dry_run=True)
    still_there = [name for name, claim_id in ids.items() if not gone(service, claim_id)]
    real = service.retention.purge()

    assert sorted(still_there) == sorted(ids)
    assert (dry.dry_run, real.dry_run) == (True, False)
    assert (dry.deleted, dry.kept, dry.examined, dry.pages) == (real.deleted, real.kept, real.examined, real.pages)
    assert dry.deleted_total == 5


def test_a_purge_stopped_after_a_page_limit_resumes_without_examining_anything_again(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    service = new_service()
    set_scope(service, SHORT, retention_days=1)
    for index in range(5):
        succeeded(service, key=f"kept-{index}", run=f"run-k{index}")
        clock.advance(1)
    for index in range(4):
        succeeded(service, key=f"short-{index}", run=f"run-s{index}", scope=SHORT)
        clock.advance(1)
    clock.advance(2 * DAY)

    first = service.retention.purge(page_size=2, max_pages=2)
    # Resumed by another instance, as `oncegate purge --resume` would.
    second = new_service().retention.purge(page_size=2, resume_cursor=first.cursor)

    assert (first.pages, first.finished, second.finished) == (2, False, True)
    assert first.cursor is not None
    assert first.examined + second.examined == 9
    assert first.kept + second.kept == Counter({Kept.WITHIN_RETENTION: 5})
    assert first.deleted + second.deleted == Counter({(SHORT, ClaimStatus.SUCCEEDED): 4})


def test_a_time_budget_stops_the_purge_after_a_page(service: Gate, clock: FakeClock) -> None:
    for index in range(3):
        succeeded(service, key=f"ORDER-{index}", run=f"run-{index}")
    clock.advance(91 * DAY)
    pages: list[int] = []

    report = service.retention.purge(page_size=1, time_budget=timedelta(0), on_progress=lambda r: pages.append(r.pages))

    assert pages == [1]
    assert (report.pages, report.finished) == (1, False)
    assert report.cursor is not None


def test_a_claim_changed_between_listing_and_deleting_is_kept_with_its_history(
    faulty_service: Gate, faults: FaultyStore, new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    service = faulty_service
    answer = succeeded(service)
    clock.advance(91 * DAY)
    other = new_service()

    def change() -> None:
        # Another instance resolves a conflict on the claim: its version moves on.
        changed = claim(other, run="run-2", fingerprint="v2")
        resolve(other, changed.conflict_id, "keep_original")

    faults.interleave(1, "list_claims", change)
    report = service.retention.purge()

    # The claims' list, then (once the claims are done) the tombstones' list.
    assert faults.disarm() == ["list_claims", "list_claims"]
    assert report.kept == Counter({Kept.CHANGED: 1})
    assert report.deleted_total == 0
    history = [entry.kind for entry in service.get_claim(answer.claim_id).history or []]
    assert history.count(EventKind.RESOLUTION) == 1
    assert len(history) == 4


def test_a_store_failure_stops_the_purge_with_the_cursor_to_resume_from(
    faulty_service: Gate, faults: FaultyStore, clock: FakeClock
) -> None:
    service = faulty_service
    for index in range(3):
        succeeded(service, key=f"ORDER-{index}", run=f"run-{index}")
    clock.advance(91 * DAY)

    faults.arm(2, only="list_claims", message="the SQLite store is unavailable: disk I/O error")
    stopped: PurgeReport = service.retention.purge(page_size=2)
    faults.disarm()
    resumed = service.retention.purge(page_size=2, resume_cursor=stopped.cursor)

    assert stopped.error is not None
    assert "disk I/O error" in stopped.error
    assert (stopped.finished, stopped.pages) == (False, 1)
    assert stopped.deleted_total + resumed.deleted_total == 3
    assert resumed.finished


@pytest.mark.azurite
def test_a_purge_on_a_clock_ahead_of_the_stores_is_refused_and_deletes_nothing(
    table_store_factory: Any, clock: FakeClock
) -> None:
    # A purge run from a machine a year ahead (the operator's laptop, by hand) had deleted every succeeded claim
    # and its tombstone minutes after it was done, and each key was answered proceed again (issue 31). The store's
    # own time says the machine is wrong, as it tells an instance that would claim on such a clock.
    service = Gate(table_store_factory(), KeyHasher(KEY_SECRET), clock=clock)
    done = [succeeded(service, key=f"order-{n}", run=f"run-{n}").claim_id for n in range(3)]

    def a_year_ahead() -> datetime:
        return datetime.now(UTC) + timedelta(days=400)

    ahead = Retention(service.store, service.inventory, clock=a_year_ahead, wall_clock=a_year_ahead)

    with pytest.raises(ClockSkewed) as refused:
        ahead.purge()

    assert "ahead of the store's" in refused.value.message
    assert not any(gone(service, claim_id) for claim_id in done)
    assert claim(service, key="order-0", run="run-again").decision is Decision.DUPLICATE
    # On a clock the store agrees with, the purge runs (and finds nothing past its retention yet).
    assert service.retention.purge().deleted.total() == 0
