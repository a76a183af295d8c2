"""The claim's history: every answer, result and resolution, and how each request was recognised."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import EventKind
from oncegate.errors import NotFound
from oncegate.models import FlowRef, ListPageQuery
from oncegate.service.claims import HISTORY_PAGE
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW, FLOW_COPY, claim, record, resolve

# Under two workers, a third of the keys showed an in_progress before the proceed (issue 22).
RACED_KEYS = 60
REPEATS = 30


def test_the_history_tells_the_whole_story_in_order(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", fingerprint="v1")
    clock.advance(1)
    claim(service, run="run-2", fingerprint="v1", flow=FLOW_COPY)
    clock.advance(1)
    record(service, first, target_record_id="SO-1")
    clock.advance(1)
    claim(service, run="run-3", fingerprint="v1")
    clock.advance(1)
    conflict = claim(service, run="run-4", fingerprint="v1b")
    clock.advance(1)
    resolve(service, conflict.conflict_id, "keep_original")
    clock.advance(1)
    claim(service, run="run-5", fingerprint="v1b")
    clock.advance(1)
    claim(service, run="run-6", fingerprint=None)

    entries = service.get_claim(first.claim_id).history or []

    assert [(entry.kind.value, entry.outcome, entry.run_id) for entry in entries] == [
        ("claim", "proceed", "run-1"),
        ("claim", "in_progress", "run-2"),
        ("result", "succeeded", "run-1"),
        ("claim", "duplicate", "run-3"),
        ("claim", "conflict", "run-4"),
        ("resolution", "keep_original", "run-4"),
        ("claim", "duplicate", "run-5"),
        ("claim", "duplicate", "run-6"),
    ]
    assert [entry.at for entry in entries] == sorted(entry.at for entry in entries)
    assert len({entry.at for entry in entries}) == len(entries)
    assert entries[1].flow == FLOW_COPY
    assert entries[0].flow == entries[3].flow == FLOW
    assert all(entry.recognised_by.strip() for entry in entries)
    assert entries[2].details["targetRecordId"] == "SO-1"
    assert entries[5].details["conflictId"] == conflict.conflict_id


def test_each_duplicate_says_how_it_was_recognised(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", fingerprint="v1")
    record(service, first, target_record_id="SO-1")
    conflict = claim(service, run="run-2", fingerprint="v1b")
    resolve(service, conflict.conflict_id, "keep_original")
    for run, fingerprint in (("run-3", "v1"), ("run-4", "v1b"), ("run-5", None)):
        clock.advance(1)
        claim(service, run=run, fingerprint=fingerprint)

    entries = service.get_claim(first.claim_id).history or []
    same, accepted, key_only = [entry.recognised_by for entry in entries if entry.outcome == "duplicate"]

    assert "fingerprint" in same.lower()
    assert "reviewer" in accepted.lower()
    assert "no fingerprint" in key_only.lower()
    assert len({same, accepted, key_only}) == 3


def test_a_duplicate_from_another_flow_copy_names_both_flows_in_the_history(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1", flow=FLOW)
    record(service, first)
    clock.advance(1)
    claim(service, run="run-2", flow=FLOW_COPY)

    last = (service.get_claim(first.claim_id).history or [])[-1]

    assert (last.kind, last.outcome, last.flow) == (EventKind.CLAIM, "duplicate", FLOW_COPY)
    assert FLOW.environment in last.recognised_by
    assert FLOW_COPY.environment in last.recognised_by


def test_a_claim_that_was_never_answered_twice_has_one_entry(service: Gate) -> None:
    first = claim(service)

    entries = service.get_claim(first.claim_id).history or []

    assert [(entry.kind, entry.outcome, entry.attempt) for entry in entries] == [(EventKind.CLAIM, "proceed", 1)]


# Causality (issue 22): a history line stands after the change it was decided on, whichever instance wrote it.


def test_answers_from_an_instance_whose_clock_is_behind_stand_after_the_claim_they_read(
    open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    ahead = Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock)
    behind = Gate(open_store(), KeyHasher(KEY_SECRET), clock=lambda: clock.now - timedelta(milliseconds=5))
    first = claim(ahead, run="run-1")

    claim(behind, run="run-2")
    record(behind, first, target_record_id="SO-1")
    claim(behind, run="run-3")

    entries = ahead.get_claim(first.claim_id).history or []
    assert [(entry.kind.value, entry.outcome) for entry in entries] == [
        ("claim", "proceed"),
        ("claim", "in_progress"),
        ("result", "succeeded"),
        ("claim", "duplicate"),
    ]
    assert [entry.at for entry in entries] == sorted({entry.at for entry in entries})


def test_runs_racing_on_two_instances_never_see_their_answer_before_the_proceed(
    open_store: Callable[[], ClaimStore],
) -> None:
    # Real clocks and threads: the loser read its clock on arrival, then waited for the winner's write.
    instances = [Gate(open_store(), KeyHasher(KEY_SECRET)) for _ in range(2)]
    barrier = threading.Barrier(len(instances))
    keys = [f"ORDER-{index}" for index in range(RACED_KEYS)]

    def ask(index: int) -> list[str]:
        claim_ids = []
        for key in keys:
            barrier.wait(timeout=30)
            claim_ids.append(claim(instances[index], run=f"run-{index}-{key}", key=key).claim_id)
        return claim_ids

    with ThreadPoolExecutor(len(instances)) as pool:
        claim_ids = set(next(iter(pool.map(ask, range(len(instances))))))

    for claim_id in claim_ids:
        entries = instances[0].get_claim(claim_id).history or []
        assert [entry.outcome for entry in entries] == ["proceed", "in_progress"], claim_id
        assert entries[0].at < entries[1].at, claim_id


# A bounded history (issue 22): answers alike are one line with their count, and the history pages.


def test_answers_alike_from_one_flow_are_one_line_with_their_count(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    record(service, first, target_record_id="SO-1")
    first_duplicate_at = clock.advance(1)
    for index in range(REPEATS):
        claim(service, run=f"run-again-{index}")
        clock.advance(1)
    claim(service, run="run-copy", flow=FLOW_COPY)

    entries = service.get_claim(first.claim_id).history or []

    assert [(entry.outcome, entry.count) for entry in entries] == [
        ("proceed", None),
        ("succeeded", None),
        ("duplicate", REPEATS),
        ("duplicate", 1),
    ]
    repeated = entries[2]
    assert (repeated.at, repeated.first_at, repeated.last_at) == (
        first_duplicate_at,
        first_duplicate_at,
        first_duplicate_at + timedelta(seconds=REPEATS - 1),
    )
    assert (repeated.run_id, repeated.flow, entries[3].flow) == ("run-again-0", FLOW, FLOW_COPY)


def test_get_claim_gives_the_first_page_of_the_history_and_its_list_the_rest(service: Gate, clock: FakeClock) -> None:
    first = claim(service, run="run-1")
    record(service, first, target_record_id="SO-1")
    for index in range(HISTORY_PAGE + 10):
        clock.advance(1)
        claim(service, run=f"run-{index}", flow=FlowRef(name=f"Flow {index}", environment="Default-contoso"))

    view, cursor = service.get_claim_page(first.claim_id)
    lines = [*(view.history or [])]
    while cursor is not None:
        page, cursor = service.history(first.claim_id, ListPageQuery(top=7, cursor=cursor))
        lines.extend(page)

    assert len(view.history or []) == HISTORY_PAGE
    assert [entry.outcome for entry in lines] == ["proceed", "succeeded", *["duplicate"] * (HISTORY_PAGE + 10)]
    assert [entry.at for entry in lines] == sorted({entry.at for entry in lines})


def test_the_history_of_an_unknown_claim_is_not_found(service: Gate) -> None:
    with pytest.raises(NotFound):
        service.history("a" * 52)
