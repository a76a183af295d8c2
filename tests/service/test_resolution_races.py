"""A conflict resolution racing a new attempt: a refused resolution must change nothing (issue 9).

The claim failed (retryable) with version v1, and a conflict is open for v2. A reviewer accepts
v2 while a run claims v1 again and is told ``proceed``. Whichever wins, the business effect of
each version happens at most once: a resolution answered ``409 claim_busy`` leaves the conflict
open and the claim on v1, so once v1 succeeds a v2 claim is a conflict again, never ``proceed``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision
from oncegate.entrypoints import error_map
from oncegate.errors import StateConflict
from oncegate.models import ClaimResponse, ConflictView, ListConflictsQuery
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import claim, keyed, record, resolve

ROUNDS = 12


class InterleavedStore:
    """The store port around a real store, running ``between`` once, right after the ``after``-th ``get_claim``.

    That is the moment a resolution has read the claim and not yet written: the other run's whole
    request happens there, as it does when two requests interleave on two instances.
    """

    def __init__(self, inner: ClaimStore, after: int, between: Callable[[], object]) -> None:
        self.inner, self.kind = inner, inner.kind
        self._after, self._between, self._reads = after, between, 0

    def get_claim(self, claim_id: str) -> Any:
        found = self.inner.get_claim(claim_id)
        self._reads += 1
        if self._reads == self._after:
            self._between()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _failed_with_open_conflict(service: Gate) -> tuple[ClaimResponse, ConflictView]:
    first = claim(service, run="run-1", fingerprint="v1")
    record(service, first, "failed", error="ERP busy", retryable=True)
    changed = claim(service, run="run-2", fingerprint="v2")
    assert changed.conflict_id is not None
    return first, service.get_conflict(changed.conflict_id)


def _resolve_or_refusal(service: Gate, conflict_id: str) -> str:
    try:
        resolve(service, conflict_id, "accept_new")
    except StateConflict as refused:
        return error_map.code(refused)
    return "resolved"


def _check_one_effect_per_version(service: Gate, outcome: str, v1: ClaimResponse, conflict_id: str) -> None:
    """Whatever the race decided, the state agrees with the answer the reviewer got."""
    conflict = service.get_conflict(conflict_id)
    if outcome == "claim_busy":
        assert conflict.status is ConflictStatus.OPEN, "refused with 409, yet the conflict was resolved"
        assert conflict_id in {c.conflict_id for c in service.list_conflicts(ListConflictsQuery())[0]}
        assert v1.decision is Decision.PROCEED
        record(service, v1, target_record_id="SO-1")
        assert claim(service, run="run-4", fingerprint="v2").decision is Decision.CONFLICT
        # The reviewer can still decide, either way.
        assert resolve(service, conflict_id, "keep_original").status is ConflictStatus.RESOLVED
    else:
        assert outcome == "resolved"
        assert conflict.status is ConflictStatus.RESOLVED
        if v1.decision is Decision.PROCEED:
            record(service, v1, target_record_id="SO-1")
        # Accepted: v2 may proceed once, and v1 never again.
        again = claim(service, run="run-4", fingerprint="v1")
        assert again.decision in (Decision.CONFLICT, Decision.DUPLICATE), again


def test_a_resolution_refused_because_a_run_took_the_claim_meanwhile_changes_nothing(
    new_service: Callable[[], Gate], open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    setup = new_service()
    _, conflict = _failed_with_open_conflict(setup)
    answers: list[ClaimResponse] = []
    # The resolution's first claim read, then a v1 run takes the claim, then the resolution writes.
    store = InterleavedStore(
        open_store(), 1, lambda: answers.append(claim(new_service(), run="run-3", fingerprint="v1"))
    )
    reviewer = Gate(store, KeyHasher(KEY_SECRET), clock=clock)

    outcome = _resolve_or_refusal(reviewer, conflict.conflict_id)

    assert outcome == "claim_busy"
    stored = setup.get_claim(conflict.claim_id)
    assert (stored.status, stored.fingerprint) == (ClaimStatus.IN_PROGRESS, keyed("v1"))
    _check_one_effect_per_version(setup, outcome, answers[0], conflict.conflict_id)


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_resolution_and_a_new_attempt_at_the_same_moment_never_disagree(
    new_service: Callable[[], Gate], round_: int
) -> None:
    setup = new_service()
    _, conflict = _failed_with_open_conflict(setup)
    reviewer, runner = new_service(), new_service()
    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def resolving() -> None:
        barrier.wait(timeout=30)
        results["resolve"] = _resolve_or_refusal(reviewer, conflict.conflict_id)

    def claiming() -> None:
        barrier.wait(timeout=30)
        results["claim"] = claim(runner, run="run-3", fingerprint="v1")

    threads = [threading.Thread(target=resolving), threading.Thread(target=claiming)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    _check_one_effect_per_version(setup, results["resolve"], results["claim"], conflict.conflict_id)
