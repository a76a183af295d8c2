"""The behaviour every claim store must show, whatever the backend.

A backend's test module mixes :class:`StoreContract` into a ``Test...`` class and provides the
fixtures it cannot write for every backend:

    make_store               each call returns another store instance on the same backing data (so
                             multi-instance races are real); the fixture closes them all at teardown
    write_legacy_conflicts   writes conflicts as release 0.1.0 did, before any store opened the data
    seed_conflicts           writes many conflicts fast, as ``create_conflict`` would (a cost test's setup)
    metered_store            a store and a :data:`Meter` of the backend's own work: requests, statements' steps
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from typing import Any, TypeVar

import pytest

from oncegate.domain.keys import MAX_MEMBERS, MIN_SECRET_LENGTH, KeyHasher
from oncegate.domain.limits import DATA_LIMIT_BYTES, ERROR_MAX_LENGTH, TARGET_RECORD_ID_MAX_LENGTH, json_size
from oncegate.domain.records import (
    Claim,
    ClaimFilter,
    Conflict,
    FingerprintRecord,
    FlowRecord,
    HistoryEvent,
    Overlap,
    Page,
    ScopeRecord,
)
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, EventKind, Resolution
from oncegate.errors import AlreadyExists, ConcurrentUpdate, InvalidRequest, NotFound, StoreRace, TooLarge
from oncegate.stores.paging import every_item
from oncegate.stores.port import ClaimStore
from tests.support import records
from tests.support.records import T0

RACERS = 16
T = TypeVar("T")
# Runs an action and answers what it cost the backend, in the backend's own unit.
Meter = Callable[[Callable[[], object]], int]


def race(attempt: Callable[[int], T]) -> list[T | StoreRace]:
    """Run ``attempt(i)`` in RACERS threads released together; each result or lost race, in order."""
    barrier = threading.Barrier(RACERS)

    def run(index: int) -> T | StoreRace:
        barrier.wait(timeout=30)
        try:
            return attempt(index)
        except StoreRace as exc:
            return exc

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(run, range(RACERS)))


Record = TypeVar("Record", Claim, Conflict, FlowRecord, ScopeRecord, Overlap)
INVENTORY = ("flow", "scope", "overlap")
BUILDERS: dict[str, Callable[[], FlowRecord | ScopeRecord | Overlap]] = {
    "flow": records.flow_record,
    "scope": records.scope_record,
    "overlap": records.overlap,
}


def unversioned(record: Record) -> Record:
    return replace(record, version=None)


def kind_of(record: FlowRecord | ScopeRecord | Overlap) -> str:
    return {FlowRecord: "flow", ScopeRecord: "scope", Overlap: "overlap"}[type(record)]


def saved_as(store: ClaimStore, record: Record) -> Record:
    """``record`` through the store's save primitive of its kind."""
    saved: Record = getattr(store, f"save_{kind_of(record)}")(record)
    return saved


def listed(store: ClaimStore, kind: str) -> list[Any]:
    return list(getattr(store, f"list_{kind}s")())


def counted(record: FlowRecord | ScopeRecord | Overlap, count: int) -> Any:
    """The record with a count changed, whatever its kind."""
    if isinstance(record, FlowRecord):
        return replace(record, claims=count)
    if isinstance(record, ScopeRecord):
        return replace(record, claims_by_status={ClaimStatus.SUCCEEDED: count})
    return replace(record, count=count)


def claim_pages(store: ClaimStore, *, limit: int = 50, cursor: str | None = None, **filters: Any) -> list[list[Claim]]:
    """Every page of ``store.list_claims`` from ``cursor`` on."""
    pages: list[list[Claim]] = []
    while True:
        page = store.list_claims(ClaimFilter(**filters), limit=limit, cursor=cursor)
        pages.append(page.items)
        cursor = page.cursor
        if cursor is None:
            return pages


def every_claim(store: ClaimStore, **filters: Any) -> list[Claim]:
    return [claim for page in claim_pages(store, **filters) for claim in page]


def conflict_pages(
    store: ClaimStore, *, status: ConflictStatus | None, scope: str | None = None, limit: int, cursor: str | None = None
) -> list[list[Conflict]]:
    """Every page of ``store.list_conflicts`` from ``cursor`` on."""
    pages: list[list[Conflict]] = []
    while True:
        page = store.list_conflicts(status=status, scope=scope, limit=limit, cursor=cursor)
        pages.append(page.items)
        cursor = page.cursor
        if cursor is None:
            return pages


def place(conflict: Conflict) -> tuple[Any, str]:
    """A conflict's place in every list: oldest first, then by id."""
    return conflict.created_at, conflict.conflict_id


def varied_conflicts(count: int) -> list[Conflict]:
    """Conflicts a second apart, a third of them resolved, in two scopes, ids in no relation to time.

    The moduli are prime to 100 (and to 20), so every 100th (or 20th) conflict is as varied as the whole.
    """
    return [
        (records.resolved_conflict if n % 3 == 0 else records.conflict)(
            scope="erp.a" if n % 7 < 3 else "erp.b", created_at=T0 + timedelta(seconds=n)
        )
        for n in range(count)
    ]


# The cost test: a page read among 100 conflicts and among 10,000 (the 100 are every 100th of them); a
# store's test may read among fewer (StoreContract.conflicts_at_scale), the 100 every so many of them.
AT_SCALE = 10_000
SAMPLE_EVERY = 100
COST_PAGE = 20


# Table Storage's documented limits. Every store keeps them, so a record one store holds, any other holds too.
PROPERTY_UNITS = 32 * 1024  # a string property: 64 KiB of UTF-16
ENTITY_BYTES = 1024 * 1024  # a whole row, property names included
# The characters that grow most when stored: 6 characters once JSON-escaped, and 2 UTF-16 code units.
CONTROL, EMOJI = "\u0001", "\U0001f600"
# One value over the entity limit by itself, whatever column it lands in.
OVER_ENTITY = "x" * (ENTITY_BYTES // 2)


def api_max_length(field: str) -> int:
    """The longest text ``field`` of a result may hold, as the contract bounds it."""
    return {"error": ERROR_MAX_LENGTH, "target_record_id": TARGET_RECORD_ID_MAX_LENGTH}[field]


def api_max_data() -> dict[str, str]:
    """Result data exactly at the API's size limit, made of escaped characters and emoji as well as plain text."""
    data = {"escaped": CONTROL * 2000, "emoji": EMOJI * 500, "text": ""}
    data["text"] = "x" * (DATA_LIMIT_BYTES - json_size(data))
    assert json_size(data) == DATA_LIMIT_BYTES
    return data


API_MAX_ERRORS = {
    "control characters": CONTROL * api_max_length("error"),
    "emoji": EMOJI * api_max_length("error"),
}


def api_max_event(claim_id: str, error: str) -> HistoryEvent:
    """The largest result event the API can cause: its details hold data, error and target record at their limits."""
    details = {
        "target_record_id": CONTROL * api_max_length("target_record_id"),
        "data": api_max_data(),
        "error": error,
        "retryable": False,
    }
    return records.event(
        claim_id, at=T0 + timedelta(minutes=1), kind=EventKind.RESULT, outcome="failed", details=details
    )


def largest_members() -> dict[str, str]:
    """The most member digests a claim keeps: names of escaped characters and emoji, one more member past the bound."""

    def digests(count: int) -> dict[str, str] | None:
        payload = {f"{CONTROL * 8}{EMOJI * 8}{index}": index for index in range(count)}
        return KeyHasher("k" * MIN_SECRET_LENGTH).members(payload)

    low, high = 1, MAX_MEMBERS + 1  # digests(low) is kept, digests(high) is not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if digests(middle) is not None else (low, middle)
    kept = digests(low)
    assert kept is not None
    return kept


def api_max_result(claim: Claim, error: str) -> Claim:
    """``claim`` failed for good with a result at the API's limits, and the most member digests it keeps."""
    return replace(
        claim,
        members=largest_members(),
        status=ClaimStatus.FAILED,
        target_record_id=CONTROL * api_max_length("target_record_id"),
        data=api_max_data(),
        error=error,
        retryable=False,
        lease_expires_at=None,
    )


class StoreContract:
    """Tests every ClaimStore adapter must pass."""

    # How many conflicts the cost test reads a page among, against 100 of them.
    conflicts_at_scale = AT_SCALE

    @pytest.fixture
    def store(self, make_store: Callable[[], ClaimStore]) -> ClaimStore:
        return make_store()

    # Claims

    @pytest.mark.parametrize("build", [records.claim, records.full_claim], ids=["minimal", "full"])
    def test_create_then_get_round_trips_every_field(self, store: ClaimStore, build: Callable[[], Claim]) -> None:
        claim = build()

        created = store.create_claim(claim, records.event(claim.claim_id))

        assert created.version
        assert unversioned(created) == claim
        assert store.get_claim(claim.claim_id) == created

    def test_retryable_false_and_none_stay_apart(self, store: ClaimStore) -> None:
        for retryable in (False, None, True):
            claim = records.claim(retryable=retryable)
            store.create_claim(claim, records.event(claim.claim_id))
            assert store.get_claim(claim.claim_id).retryable is retryable

    def test_second_create_raises_already_exists_with_the_stored_claim(self, store: ClaimStore) -> None:
        first = records.claim(run_id="run-1")
        first_event = records.event(first.claim_id, run_id="run-1")
        stored = store.create_claim(first, first_event)
        second = records.claim(first.claim_id, run_id="run-2")

        with pytest.raises(AlreadyExists) as raised:
            store.create_claim(second, records.event(first.claim_id, at=T0 + timedelta(seconds=1), run_id="run-2"))

        assert raised.value.existing == stored
        assert store.list_events(first.claim_id) == [first_event]

    @pytest.mark.parametrize("instances", ["one store", "a store per thread"])
    def test_concurrent_creates_have_exactly_one_winner(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore], instances: str
    ) -> None:
        stores = [store] * RACERS if instances == "one store" else [make_store() for _ in range(RACERS)]
        claim_id = records.new_id()
        events = [records.event(claim_id, run_id=f"run-{i}") for i in range(RACERS)]

        outcomes = race(lambda i: stores[i].create_claim(records.claim(claim_id, run_id=f"run-{i}"), events[i]))

        winners = [outcome for outcome in outcomes if isinstance(outcome, Claim)]
        losers = [outcome for outcome in outcomes if isinstance(outcome, AlreadyExists)]
        assert len(winners) == 1
        assert len(losers) == RACERS - 1
        assert all(loser.existing == winners[0] for loser in losers)
        assert store.list_events(claim_id) == [e for e in events if e.run_id == winners[0].run_id]

    # Writing together: a bulk call's writes (issue 24)

    def test_writes_made_together_each_stand_alone_and_are_all_kept(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        first, second = records.claim(), records.claim()
        taken = records.claim()
        taken_event = records.event(taken.claim_id)
        store.create_claim(taken, taken_event)

        with store.writing_together():
            created = store.create_claim(first, records.event(first.claim_id))
            with pytest.raises(AlreadyExists):
                store.create_claim(replace(taken, run_id="run-2"), records.event(taken.claim_id, run_id="run-2"))
            # This thread reads what it wrote in the block, and writes on from it.
            updated = store.update_claim(replace(store.get_claim(first.claim_id), run_id="run-4"), None)
            with pytest.raises(ConcurrentUpdate):
                store.update_claim(replace(created, run_id="run-3"), None)
            store.create_claim(second, records.event(second.claim_id))

        other = make_store()
        assert other.get_claim(first.claim_id) == updated
        assert other.get_claim(second.claim_id).run_id == second.run_id
        assert other.get_claim(taken.claim_id).run_id == taken.run_id
        assert other.list_events(taken.claim_id) == [taken_event]

    # Claims made together: a bulk call's new keys (issue 36)

    def test_claims_made_together_are_written_where_their_ids_are_free_and_skipped_where_taken(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        taken = records.claim(run_id="run-1")
        taken_event = records.event(taken.claim_id, run_id="run-1")
        store.create_claim(taken, taken_event)
        free = [records.full_claim(), records.claim(), records.claim()]
        twice = free[1]
        new = [(claim, records.event(claim.claim_id)) for claim in free]
        pairs = [
            new[0],
            (replace(taken, run_id="run-2"), records.event(taken.claim_id, run_id="run-2")),
            new[1],
            (replace(twice, run_id="run-3"), records.event(twice.claim_id, run_id="run-3")),  # its id, again
            new[2],
        ]

        made = store.create_claims(pairs)

        assert [claim is None for claim in made] == [False, True, False, True, False]
        other = make_store()
        for (claim, event), stored in zip(new, [made[0], made[2], made[4]], strict=True):
            assert stored is not None
            assert stored.version
            assert unversioned(stored) == claim
            assert other.get_claim(claim.claim_id) == stored
            assert other.list_events(claim.claim_id) == [event]
            # Written at the version it answered: the next write from it is accepted.
            other.update_claim(replace(stored, run_id="run-4"), None)
        assert other.get_claim(taken.claim_id).run_id == "run-1"
        assert other.list_events(taken.claim_id) == [taken_event]
        assert store.create_claims([]) == []

    def test_a_claim_made_together_whose_row_the_store_cannot_hold_is_left_out_alone(self, store: ClaimStore) -> None:
        fits, over, over_line, after = (records.claim() for _ in range(4))
        pairs = [
            (fits, records.event(fits.claim_id)),
            (replace(over, data=OVER_ENTITY), records.event(over.claim_id)),
            (over_line, records.event(over_line.claim_id, details={"text": OVER_ENTITY})),
            (after, records.event(after.claim_id)),
        ]

        made = store.create_claims(pairs)

        assert [claim is None for claim in made] == [False, True, True, False]
        for claim in (over, over_line):
            with pytest.raises(NotFound):
                store.get_claim(claim.claim_id)
            assert store.list_events(claim.claim_id) == []
        assert [store.get_claim(claim.claim_id) for claim in (fits, after)] == [made[0], made[3]]
        with pytest.raises(TooLarge):  # alone, the store says why
            store.create_claim(*pairs[1])

    def test_claims_made_together_inside_writing_together_are_kept_with_the_block(self, store: ClaimStore) -> None:
        claims = [records.claim() for _ in range(3)]

        with store.writing_together():
            made = store.create_claims([(claim, records.event(claim.claim_id)) for claim in claims])
            assert [store.get_claim(claim.claim_id) for claim in claims] == made

        assert [store.get_claim(claim.claim_id) for claim in claims] == made

    @pytest.mark.parametrize("instances", ["one store", "a store per thread"])
    def test_claims_made_together_race_single_creates_with_exactly_one_winner_per_id(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore], instances: str
    ) -> None:
        """Racers on the same 20 ids, half writing them all together, half one create each: one winner per id, and
        each id's history is its winner's line alone."""
        stores = [store] * RACERS if instances == "one store" else [make_store() for _ in range(RACERS)]
        ids = [records.new_id() for _ in range(20)]

        def attempt(index: int) -> list[tuple[str, str]]:
            pairs = [
                (records.claim(claim_id, run_id=f"run-{index}"), records.event(claim_id, run_id=f"run-{index}"))
                for claim_id in ids[index % 3 :] + ids[: index % 3]  # each racer in an order of its own
            ]
            if index % 2 == 0:
                made = stores[index].create_claims(pairs)
                return [(claim.claim_id, claim.run_id) for claim in made if claim is not None]
            won = []
            for claim, event in pairs:
                try:
                    won.append((claim.claim_id, stores[index].create_claim(claim, event).run_id))
                except AlreadyExists:
                    continue
            return won

        outcomes = race(attempt)

        won = [pair for outcome in outcomes if isinstance(outcome, list) for pair in outcome]
        assert sorted(claim_id for claim_id, _ in won) == sorted(ids)
        for claim_id, run_id in won:
            assert store.get_claim(claim_id).run_id == run_id
            assert [event.run_id for event in store.list_events(claim_id)] == [run_id]

    def test_a_store_says_whether_its_writes_gain_from_going_at_once(self, store: ClaimStore) -> None:
        # Bulk calls run their items at once only where each write is a request of its own (oncegate.service.bulk).
        assert store.parallel_writes is (store.kind == "tables")

    def test_update_with_current_version_replaces_the_claim(self, store: ClaimStore) -> None:
        claim = records.full_claim(status=ClaimStatus.IN_PROGRESS, completed_at=None, data=None)
        first_event = records.event(claim.claim_id)
        created = store.create_claim(claim, first_event)
        # Cleared fields must disappear: a store that merges instead of replacing keeps them.
        done = replace(
            created,
            status=ClaimStatus.SUCCEEDED,
            completed_at=T0 + timedelta(minutes=1),
            data={"orderId": "SO-1"},
            lease_expires_at=None,
            error=None,
            retryable=None,
            flow=None,
            legacy_resolutions=(),
        )
        result_event = records.event(claim.claim_id, at=T0 + timedelta(minutes=1), kind=EventKind.RESULT)

        updated = store.update_claim(done, result_event)

        assert updated.version
        assert updated.version != created.version
        assert unversioned(updated) == unversioned(done)
        assert store.get_claim(claim.claim_id) == updated
        assert store.list_events(claim.claim_id) == [first_event, result_event]

    @pytest.mark.parametrize("with_event", [True, False], ids=["with event", "without event"])
    def test_update_with_stale_version_changes_nothing(self, store: ClaimStore, with_event: bool) -> None:
        claim = records.claim()
        first_event = records.event(claim.claim_id)
        created = store.create_claim(claim, first_event)
        current = store.update_claim(replace(created, attempt=2), None)
        late_event = records.event(claim.claim_id, at=T0 + timedelta(seconds=5), run_id="run-late")

        with pytest.raises(ConcurrentUpdate):
            store.update_claim(replace(created, run_id="run-late"), late_event if with_event else None)

        assert store.get_claim(claim.claim_id) == current
        assert store.list_events(claim.claim_id) == [first_event]

    def test_a_copy_of_a_deleted_claim_never_matches_the_claim_made_again(self, store: ClaimStore) -> None:
        """Instances keep the claims they wrote to write from; after a purge the id may be claimed anew."""
        claim = records.claim()
        old = store.create_claim(claim, records.event(claim.claim_id))
        store.delete_claim(old)
        again = store.create_claim(replace(claim, run_id="run-2"), records.event(claim.claim_id, run_id="run-2"))

        assert again.version != old.version
        with pytest.raises(ConcurrentUpdate):
            store.update_claim(replace(old, status=ClaimStatus.SUCCEEDED), None)
        assert store.get_claim(claim.claim_id) == again

    def test_concurrent_updates_from_one_version_have_exactly_one_winner(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        claim = records.claim()
        first_event = records.event(claim.claim_id)
        created = store.create_claim(claim, first_event)
        stores = [make_store() for _ in range(RACERS)]
        events = [records.event(claim.claim_id, at=T0 + timedelta(seconds=1), run_id=f"run-{i}") for i in range(RACERS)]

        outcomes = race(lambda i: stores[i].update_claim(replace(created, run_id=f"run-{i}", attempt=2), events[i]))

        winners = [outcome for outcome in outcomes if isinstance(outcome, Claim)]
        assert len(winners) == 1
        assert sum(isinstance(outcome, ConcurrentUpdate) for outcome in outcomes) == RACERS - 1
        assert store.get_claim(claim.claim_id) == winners[0]
        assert store.list_events(claim.claim_id) == [first_event, *(e for e in events if e.run_id == winners[0].run_id)]

    def test_get_unknown_claim_raises_not_found(self, store: ClaimStore) -> None:
        with pytest.raises(NotFound) as raised:
            store.get_claim(records.new_id())
        assert raised.value.record == "claim"

    def test_another_instance_reads_what_one_wrote(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        claim = records.full_claim()
        created = store.create_claim(claim, records.event(claim.claim_id))

        assert make_store().get_claim(claim.claim_id) == created

    # History

    def test_events_list_oldest_first_and_per_claim(self, store: ClaimStore) -> None:
        claim, other = records.claim(), records.claim()
        first = records.event(claim.claim_id, details={})
        store.create_claim(claim, first)
        store.create_claim(other, records.event(other.claim_id))
        later = [records.event(claim.claim_id, at=T0 + timedelta(seconds=s), kind=EventKind.RESULT) for s in (3, 1, 2)]

        for added in later:
            store.add_event(added)

        assert store.list_events(claim.claim_id) == [first, *sorted(later, key=lambda e: e.event_id)]
        assert [e.claim_id for e in store.list_events(other.claim_id)] == [other.claim_id]

    def test_an_event_added_twice_is_stored_once_without_an_error(self, store: ClaimStore) -> None:
        # A retried request (an SDK retry whose first answer was lost) sends the very same event again.
        claim = records.claim()
        first = records.event(claim.claim_id)
        store.create_claim(claim, first)
        added = records.event(claim.claim_id, at=T0 + timedelta(seconds=1))

        store.add_event(added)
        store.add_event(added)

        assert store.list_events(claim.claim_id) == [first, added]

    def test_events_of_an_unknown_claim_are_empty(self, store: ClaimStore) -> None:
        assert store.list_events(records.new_id()) == []
        assert store.list_history(records.new_id(), limit=10) == Page([], None)

    def test_events_list_by_time_whatever_their_ids(self, store: ClaimStore) -> None:
        # A line counting answers has a series id, which is no time: the history still lists by time.
        claim = records.claim()
        first = records.event(claim.claim_id)
        store.create_claim(claim, first)
        series = records.event(
            claim.claim_id,
            event_id="series-0",
            at=T0 + timedelta(seconds=2),
            count=1,
            last_at=T0 + timedelta(seconds=2),
        )
        store.count_event(series)
        between = records.event(claim.claim_id, at=T0 + timedelta(seconds=1), kind=EventKind.RESULT)
        store.add_event(between)

        assert store.list_events(claim.claim_id) == [first, between, series]

    def test_a_line_counting_an_earlier_answer_late_moves_to_that_answers_time(self, store: ClaimStore) -> None:
        # Another instance's answer, stamped earlier, may be counted last: the line lists at its first answer.
        claim = records.claim()
        first = records.event(claim.claim_id)
        store.create_claim(claim, first)
        results = [records.event(claim.claim_id, at=T0 + timedelta(seconds=s), kind=EventKind.RESULT) for s in (2, 4)]
        for result in results:
            store.add_event(result)

        for seconds in (5, 3, 1):
            at = T0 + timedelta(seconds=seconds)
            store.count_event(records.event(claim.claim_id, event_id="series-3", at=at, count=1, last_at=at))

        listed = store.list_events(claim.claim_id)
        assert [event.event_id for event in listed] == [first.event_id, "series-3", *(e.event_id for e in results)]
        assert (listed[1].count, listed[1].at, listed[1].last_at) == (
            3,
            T0 + timedelta(seconds=1),
            T0 + timedelta(seconds=5),
        )
        assert list(every_item(lambda cursor: store.list_history(claim.claim_id, limit=1, cursor=cursor))) == listed

    def test_answers_of_one_series_count_in_one_line(self, store: ClaimStore) -> None:
        claim = records.claim()
        store.create_claim(claim, records.event(claim.claim_id))
        times = [T0 + timedelta(seconds=seconds) for seconds in (5, 3, 9, 7)]

        for at in times:
            store.count_event(
                records.event(claim.claim_id, event_id="series-1", at=at, outcome="duplicate", count=1, last_at=at)
            )

        counted = store.list_events(claim.claim_id)[1]
        assert (counted.count, counted.at, counted.last_at) == (4, min(times), max(times))
        assert (counted.outcome, counted.run_id, counted.details) == ("duplicate", "run-1", records.event("").details)

    def test_answers_counted_at_once_by_many_instances_are_all_counted(
        self, make_store: Callable[[], ClaimStore]
    ) -> None:
        stores = [make_store() for _ in range(4)]
        claim = records.claim()
        stores[0].create_claim(claim, records.event(claim.claim_id))

        def answer(index: int) -> None:
            at = T0 + timedelta(seconds=1, microseconds=index)
            stores[index % len(stores)].count_event(
                records.event(claim.claim_id, event_id="series-2", at=at, outcome="in_progress", count=1, last_at=at)
            )

        race(answer)

        counted = [event for event in stores[0].list_events(claim.claim_id) if event.outcome == "in_progress"]
        assert sum(event.count or 0 for event in counted) == RACERS

    @pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 23])
    def test_history_pages_lose_and_repeat_nothing_in_time_order(self, store: ClaimStore, count: int) -> None:
        claim = records.claim()
        events = [records.event(claim.claim_id, at=T0 + timedelta(seconds=index)) for index in range(count + 1)]
        store.create_claim(claim, events[0])
        for event in events[1:]:
            store.add_event(event)

        pages, cursor = [], None
        while True:
            page = store.list_history(claim.claim_id, limit=8, cursor=cursor)
            pages.append(page.items)
            cursor = page.cursor
            if cursor is None:
                break

        assert [event for page in pages for event in page] == events
        assert all(len(page) <= 8 for page in pages)

    def test_history_rejects_a_cursor_it_did_not_hand_out(self, store: ClaimStore) -> None:
        claim = records.claim()
        store.create_claim(claim, records.event(claim.claim_id))

        with pytest.raises(InvalidRequest):
            store.list_history(claim.claim_id, limit=5, cursor="not-a-cursor")

    # Listing and deleting claims (retention, claims needing attention)

    def test_list_claims_filters_by_status_scope_and_last_change(self, store: ClaimStore) -> None:
        specs = {
            "old-done": ("a", ClaimStatus.SUCCEEDED, 0),
            "old-failed": ("a", ClaimStatus.FAILED, 1),
            "old-held": ("a", ClaimStatus.IN_PROGRESS, 2),
            "other-scope": ("b", ClaimStatus.SUCCEEDED, 3),
            "new-done": ("a", ClaimStatus.SUCCEEDED, 10),
        }
        ids = {}
        for name, (scope, status, days) in specs.items():
            claim = records.claim(scope=scope, status=status, updated_at=T0 + timedelta(days=days))
            store.create_claim(claim, records.event(claim.claim_id))
            ids[claim.claim_id] = name

        def names(statuses: tuple[ClaimStatus, ...], **filters: Any) -> set[str]:
            return {ids[claim.claim_id] for claim in every_claim(store, statuses=statuses, **filters)}

        finished = (ClaimStatus.SUCCEEDED, ClaimStatus.FAILED)
        assert names(finished) == {"old-done", "old-failed", "other-scope", "new-done"}
        assert names((ClaimStatus.IN_PROGRESS,)) == {"old-held"}
        assert names(finished, scope="a") == {"old-done", "old-failed", "new-done"}
        assert names(finished, changed_before=T0 + timedelta(days=3)) == {"old-done", "old-failed"}
        # Strictly before: a claim changed at that very instant is not listed.
        assert names(finished, changed_before=T0 + timedelta(days=1)) == {"old-done"}
        assert names((ClaimStatus.UNKNOWN, ClaimStatus.RELEASED)) == set()

    def test_list_claims_finds_by_source_reference_and_first_received(self, store: ClaimStore) -> None:
        # Issue 16: "what happened to order SO-1001 from the EU shop?", "everything from the expense list this week".
        specs = {
            "eu-1001": ("shop-eu", "SO-1001", ClaimStatus.SUCCEEDED, 0),
            "eu-1002": ("shop-eu", "SO-1002", ClaimStatus.FAILED, 5),
            "us-1001": ("shop-us", "SO-1001", ClaimStatus.SUCCEEDED, 6),
            "expense": ("sharepoint:expenses", None, ClaimStatus.IN_PROGRESS, 7),
            "no-source": (None, None, ClaimStatus.SUCCEEDED, 8),
        }
        ids = {}
        for name, (source, reference, status, days) in specs.items():
            at = T0 + timedelta(days=days)
            claim = records.claim(
                source=source, reference=reference, status=status, first_received_at=at, updated_at=at
            )
            store.create_claim(claim, records.event(claim.claim_id))
            ids[claim.claim_id] = name

        def names(**filters: Any) -> set[str]:
            return {ids[claim.claim_id] for claim in every_claim(store, statuses=tuple(ClaimStatus), **filters)}

        assert names(source="shop-eu") == {"eu-1001", "eu-1002"}
        assert names(source="shop-eu", reference="SO-1001") == {"eu-1001"}
        assert names(reference="SO-1001") == {"eu-1001", "us-1001"}
        assert names(received_since=T0 + timedelta(days=5)) == {"eu-1002", "us-1001", "expense", "no-source"}
        assert names(source="shop-eu", received_since=T0 + timedelta(days=1)) == {"eu-1002"}
        assert names(source="sharepoint:expenses") == {"expense"}
        assert names(source="shop-nowhere") == set()
        found = every_claim(store, statuses=(ClaimStatus.FAILED,), source="shop-eu")
        assert [(claim.source, claim.reference) for claim in found] == [("shop-eu", "SO-1002")]

    @pytest.mark.slow
    def test_list_claims_by_source_pages_past_a_thousand_claims(self, store: ClaimStore) -> None:
        # Table Storage answers at most 1,000 rows a request: a source's claims must page on past that.
        def made(index: int) -> Claim:
            claim = records.claim(
                source="shop-eu" if index % 10 else "shop-us", updated_at=T0 + timedelta(seconds=index)
            )
            return store.create_claim(claim, records.event(claim.claim_id))

        with ThreadPoolExecutor(8) as pool:
            created = list(pool.map(made, range(1_150)))
        wanted = {claim.claim_id for claim in created if claim.source == "shop-eu"}

        pages = claim_pages(store, statuses=tuple(ClaimStatus), source="shop-eu", limit=200)
        listed = [claim.claim_id for page in pages for claim in page]

        assert len(wanted) == 1_035
        assert all(len(page) <= 200 for page in pages)
        assert sorted(listed) == sorted(wanted)
        assert every_claim(store, statuses=tuple(ClaimStatus), source="shop-none", limit=200) == []

    def test_listed_claims_round_trip_with_their_version(self, store: ClaimStore) -> None:
        claim = records.full_claim()
        created = store.create_claim(claim, records.event(claim.claim_id))

        assert every_claim(store, statuses=(claim.status,)) == [created]

    @pytest.mark.parametrize("count", [5, 6])
    def test_list_claims_pages_lose_and_repeat_nothing(self, store: ClaimStore, count: int) -> None:
        # Pairs share a timestamp, so a page boundary falls between two claims changed at the same instant.
        created = [
            store.create_claim(claim, records.event(claim.claim_id))
            for claim in (records.claim(updated_at=T0 + timedelta(seconds=s // 2)) for s in range(count))
        ]

        pages = claim_pages(store, statuses=(ClaimStatus.IN_PROGRESS,), limit=2)

        assert all(len(page) <= 2 for page in pages)
        listed = [claim.claim_id for page in pages for claim in page]
        assert sorted(listed) == sorted(claim.claim_id for claim in created)

    def test_list_claims_goes_on_from_a_cursor_while_claims_are_deleted(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        created: list[Claim] = []
        for seconds in range(6):
            claim = records.claim(updated_at=T0 + timedelta(seconds=seconds))
            created.append(store.create_claim(claim, records.event(claim.claim_id)))
        seen: list[Claim] = []
        page = store.list_claims(ClaimFilter((ClaimStatus.IN_PROGRESS,)), limit=3)
        while not page.items and page.cursor:
            page = store.list_claims(ClaimFilter((ClaimStatus.IN_PROGRESS,)), limit=3, cursor=page.cursor)
        assert page.cursor is not None
        for claim in page.items:
            store.delete_claim(claim)
        seen += page.items

        # Another instance (a purge resumed in another process) goes on from the cursor.
        rest = claim_pages(make_store(), statuses=(ClaimStatus.IN_PROGRESS,), limit=3, cursor=page.cursor)

        seen += [claim for items in rest for claim in items]
        assert sorted(claim.claim_id for claim in seen) == sorted(claim.claim_id for claim in created)

    @pytest.mark.parametrize("cursor", ["not a cursor", base64.urlsafe_b64encode(b"42").decode()])
    def test_list_claims_rejects_a_cursor_it_did_not_hand_out(self, store: ClaimStore, cursor: str) -> None:
        with pytest.raises(InvalidRequest) as raised:
            store.list_claims(ClaimFilter((ClaimStatus.SUCCEEDED,)), limit=2, cursor=cursor)
        assert raised.value.target == "cursor"

    @pytest.mark.parametrize("events", [1, 3, 250], ids=["one event", "a few", "more than a transaction holds"])
    def test_delete_claim_removes_the_claim_and_its_whole_history(self, store: ClaimStore, events: int) -> None:
        claim, kept = records.claim(status=ClaimStatus.SUCCEEDED), records.claim(status=ClaimStatus.SUCCEEDED)
        store.create_claim(claim, records.event(claim.claim_id))
        for seconds in range(1, events):
            store.add_event(records.event(claim.claim_id, at=T0 + timedelta(seconds=seconds)))
        stored = store.create_claim(kept, records.event(kept.claim_id))

        store.delete_claim(store.get_claim(claim.claim_id))

        with pytest.raises(NotFound):
            store.get_claim(claim.claim_id)
        assert store.list_events(claim.claim_id) == []
        assert store.get_claim(kept.claim_id) == stored
        assert len(store.list_events(kept.claim_id)) == 1
        assert every_claim(store, statuses=(ClaimStatus.SUCCEEDED,)) == [stored]

    @pytest.mark.parametrize("events", [1, 250], ids=["one event", "more than a transaction holds"])
    def test_a_claim_purged_to_its_tombstone_keeps_only_the_tombstone(self, store: ClaimStore, events: int) -> None:
        claim = replace(records.claim(status=ClaimStatus.SUCCEEDED), target_record_id="ERP-1", data={"lines": 3})
        store.create_claim(claim, records.event(claim.claim_id))
        for seconds in range(1, events):
            store.add_event(records.event(claim.claim_id, at=T0 + timedelta(seconds=seconds)))
        listed = store.get_claim(claim.claim_id)
        tombstone = replace(listed, data=None, reference=None, source=None, purged_at=T0 + timedelta(days=90))

        store.delete_claim(listed, tombstone=tombstone)

        kept = store.get_claim(claim.claim_id)
        assert replace(kept, version=None) == replace(tombstone, version=None)
        assert kept.version != listed.version
        assert store.list_events(claim.claim_id) == []
        # A list of claims never meets a tombstone; a list of tombstones meets only them.
        assert every_claim(store, statuses=(ClaimStatus.SUCCEEDED,)) == []
        found = store.list_claims(ClaimFilter((ClaimStatus.SUCCEEDED,), tombstones=True), limit=10)
        assert found.items == [kept]
        # A new claim of the key meets the tombstone, which the conditional insert carries back.
        with pytest.raises(AlreadyExists) as met:
            store.create_claim(claim, records.event(claim.claim_id))
        assert met.value.existing == kept
        # And the tombstone goes in its turn, whole.
        store.delete_claim(kept)
        with pytest.raises(NotFound):
            store.get_claim(claim.claim_id)

    @pytest.mark.parametrize("events", [1, 250], ids=["one event", "more than a transaction holds"])
    def test_a_tombstone_keeps_what_reviewers_decided_about_its_fingerprints_without_who_or_why(
        self, store: ClaimStore, events: int
    ) -> None:
        """Issue 31: the purge deleted the fingerprint records with the history, so a fingerprint a reviewer had
        kept as the claim's business result was a conflict on the tombstone; deleting the tombstone deletes them."""
        claim = replace(records.claim(status=ClaimStatus.SUCCEEDED), fingerprint="fp-original")
        listed = store.create_claim(claim, records.event(claim.claim_id))
        for seconds in range(1, events):
            store.add_event(records.event(claim.claim_id, at=T0 + timedelta(seconds=seconds)))
        decided = {
            "fp-kept": FingerprintRecord(claim.claim_id, "fp-kept", 1, 0, "conflict-1", Resolution.KEEP_ORIGINAL),
            "fp-dismissed": FingerprintRecord(
                claim.claim_id, "fp-dismissed", 2, None, "conflict-3", Resolution.DISMISS
            ),
        }
        for record in decided.values():
            listed = store.update_claim(
                listed, None, fingerprint=replace(record, reviewer="ana@contoso.com", note="same order", resolved_at=T0)
            )

        store.delete_claim(listed, tombstone=replace(listed, data=None, purged_at=T0 + timedelta(days=90)))
        kept = store.get_fingerprints(claim.claim_id, list(decided))
        tombstone = store.get_claim(claim.claim_id)
        store.delete_claim(tombstone)

        assert store.list_events(claim.claim_id) == []
        assert {record.fingerprint: replace(record, version=None) for record in kept} == {
            name: replace(record, resolved_at=T0) for name, record in decided.items()
        }
        assert tombstone.accepts(["fp-kept"], kept)
        assert not tombstone.accepts(["fp-dismissed"], kept)
        # A tombstone deleted at its horizon leaves nothing behind.
        assert store.get_fingerprints(claim.claim_id, list(decided)) == []

    def test_a_claim_deleted_whole_takes_its_fingerprint_records(self, store: ClaimStore) -> None:
        claim = records.claim(status=ClaimStatus.RELEASED)
        listed = store.create_claim(claim, records.event(claim.claim_id))
        record = FingerprintRecord(claim.claim_id, "fp-kept", 1, 0, "conflict-1", Resolution.KEEP_ORIGINAL)
        listed = store.update_claim(listed, None, fingerprint=record)

        store.delete_claim(listed)

        assert store.get_fingerprints(claim.claim_id, ["fp-kept"]) == []

    def test_a_tombstone_is_not_written_over_a_claim_that_changed(self, store: ClaimStore) -> None:
        claim = records.claim(status=ClaimStatus.SUCCEEDED)
        listed = store.create_claim(claim, records.event(claim.claim_id))
        changed = store.update_claim(replace(listed, status=ClaimStatus.IN_PROGRESS, attempt=2), None)

        with pytest.raises(ConcurrentUpdate):
            store.delete_claim(listed, tombstone=replace(listed, purged_at=T0))

        assert store.get_claim(claim.claim_id) == changed

    def test_delete_claim_with_a_stale_version_changes_nothing(self, store: ClaimStore) -> None:
        claim = records.claim(status=ClaimStatus.SUCCEEDED)
        first_event = records.event(claim.claim_id)
        listed = store.create_claim(claim, first_event)
        changed = store.update_claim(replace(listed, status=ClaimStatus.IN_PROGRESS, attempt=2), None)

        with pytest.raises(ConcurrentUpdate):
            store.delete_claim(listed)

        assert store.get_claim(claim.claim_id) == changed
        assert store.list_events(claim.claim_id) == [first_event]

    def test_delete_claim_already_gone_raises_concurrent_update(self, store: ClaimStore) -> None:
        claim = records.claim()
        listed = store.create_claim(claim, records.event(claim.claim_id))
        store.delete_claim(listed)

        with pytest.raises(ConcurrentUpdate):
            store.delete_claim(listed)

    def test_concurrent_delete_and_update_have_exactly_one_winner(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        claim = records.claim(status=ClaimStatus.SUCCEEDED)
        listed = store.create_claim(claim, records.event(claim.claim_id))
        stores = [make_store() for _ in range(RACERS)]
        late = records.event(claim.claim_id, at=T0 + timedelta(seconds=1), run_id="run-late")

        def attempt(index: int) -> Claim | None:
            if index % 2:
                return stores[index].update_claim(replace(listed, run_id=f"run-{index}"), late)
            stores[index].delete_claim(listed)
            return None

        outcomes = race(attempt)

        winners = [outcome for outcome in outcomes if not isinstance(outcome, StoreRace)]
        assert len(winners) == 1
        if winners[0] is None:
            with pytest.raises(NotFound):
                store.get_claim(claim.claim_id)
            assert store.list_events(claim.claim_id) == []
        else:
            assert store.get_claim(claim.claim_id) == winners[0]
            assert len(store.list_events(claim.claim_id)) == 2

    # Conflicts

    @pytest.mark.parametrize("build", [records.conflict, records.resolved_conflict], ids=["open", "resolved"])
    def test_create_then_get_conflict_round_trips_every_field(
        self, store: ClaimStore, build: Callable[[], Conflict]
    ) -> None:
        conflict = build()

        created = store.create_conflict(conflict)

        assert created.version
        assert unversioned(created) == conflict
        assert store.get_conflict(conflict.conflict_id) == created

    def test_second_create_conflict_raises_already_exists_with_the_stored_one(self, store: ClaimStore) -> None:
        stored = store.create_conflict(records.conflict(run_id="run-1"))

        with pytest.raises(AlreadyExists) as raised:
            store.create_conflict(records.conflict(stored.conflict_id, run_id="run-2"))

        assert raised.value.existing == stored

    def test_update_conflict_needs_the_current_version(self, store: ClaimStore) -> None:
        created = store.create_conflict(records.conflict())
        resolved = replace(
            created, status=ConflictStatus.RESOLVED, decision=Resolution.DISMISS, reviewer="kim", resolved_at=T0
        )

        updated = store.update_conflict(resolved)
        with pytest.raises(ConcurrentUpdate):
            store.update_conflict(replace(created, note="too late"))

        assert updated.version
        assert updated.version != created.version
        assert unversioned(updated) == unversioned(resolved)
        assert store.get_conflict(created.conflict_id) == updated

    def test_get_unknown_conflict_raises_not_found(self, store: ClaimStore) -> None:
        with pytest.raises(NotFound) as raised:
            store.get_conflict(records.new_id())
        assert raised.value.record == "conflict"

    def test_list_conflicts_filters_by_status_and_scope_oldest_first(self, store: ClaimStore) -> None:
        # Ids run against time, and two share a timestamp: the order must come from (CreatedAt, ConflictId).
        specs = [
            ("e", 0, "a", ConflictStatus.OPEN),
            ("d", 1, "b", ConflictStatus.OPEN),
            ("c", 2, "a", None),
            ("a", 3, "a", ConflictStatus.OPEN),
            ("b", 3, "a", ConflictStatus.OPEN),
        ]
        for letter, minutes, scope, status in specs:
            store.create_conflict(
                records.resolved_conflict(letter * 8, scope=scope, created_at=T0 + timedelta(minutes=minutes))
                if status is None
                else records.conflict(letter * 8, scope=scope, created_at=T0 + timedelta(minutes=minutes))
            )

        def ids(status: ConflictStatus | None, scope: str | None) -> str:
            page = store.list_conflicts(status=status, scope=scope, limit=50, cursor=None)
            assert page.cursor is None
            return "".join(conflict.conflict_id[0] for conflict in page.items)

        assert ids(None, None) == "edcab"
        assert ids(ConflictStatus.OPEN, None) == "edab"
        assert ids(ConflictStatus.RESOLVED, None) == "c"
        assert ids(None, "a") == "ecab"
        assert ids(ConflictStatus.OPEN, "a") == "eab"
        assert ids(ConflictStatus.OPEN, "nope") == ""

    @pytest.mark.parametrize(("count", "sizes"), [(4, [2, 2]), (5, [2, 2, 1])])
    def test_list_conflicts_pages_lose_and_repeat_nothing(
        self, store: ClaimStore, count: int, sizes: list[int]
    ) -> None:
        # Pairs share a timestamp and page boundaries fall inside the pairs.
        created = [
            store.create_conflict(records.conflict(created_at=T0 + timedelta(seconds=(s + 1) // 2)))
            for s in range(count)
        ]
        pages: list[list[Conflict]] = []
        cursor = None
        while len(pages) <= count:
            page = store.list_conflicts(status=ConflictStatus.OPEN, scope=None, limit=2, cursor=cursor)
            pages.append(page.items)
            cursor = page.cursor
            if cursor is None:
                break

        assert [len(items) for items in pages] == sizes
        listed = [conflict for items in pages for conflict in items]
        assert listed == sorted(created, key=lambda c: (c.created_at, c.conflict_id))

    @pytest.mark.parametrize(
        "cursor",
        [
            "not a cursor",
            "bm90IGpzb24",
            base64.urlsafe_b64encode(b"42").decode(),
            base64.urlsafe_b64encode(b"[1]").decode(),
        ],
    )
    def test_list_conflicts_rejects_a_cursor_it_did_not_hand_out(self, store: ClaimStore, cursor: str) -> None:
        with pytest.raises(InvalidRequest) as raised:
            store.list_conflicts(status=None, scope=None, limit=2, cursor=cursor)
        assert raised.value.target == "cursor"

    def test_every_filter_pages_through_its_conflicts_oldest_first(self, store: ClaimStore) -> None:
        # Created out of time order, three to an instant, so pages start and end inside a tie.
        made = [
            replace(conflict, created_at=T0 + timedelta(seconds=(n * 7) % 30 // 3))
            for n, conflict in enumerate(varied_conflicts(30))
        ]
        created = [store.create_conflict(conflict) for conflict in made]

        for status in (ConflictStatus.OPEN, ConflictStatus.RESOLVED, None):
            for scope in ("erp.a", "erp.b", None):
                pages = conflict_pages(store, status=status, scope=scope, limit=4)
                expected = sorted(
                    (c for c in created if status in (None, c.status) and scope in (None, c.scope)), key=place
                )
                assert all(len(page) == 4 for page in pages[:-1]), (status, scope)
                assert [c for page in pages for c in page] == expected, (status, scope)

    def test_a_resolved_conflict_moves_from_the_open_list_to_the_resolved_one(self, store: ClaimStore) -> None:
        first, middle, last = (
            store.create_conflict(records.conflict(created_at=T0 + timedelta(minutes=minutes))) for minutes in range(3)
        )
        listed_first = store.list_conflicts(status=None, scope=None, limit=3, cursor=None).items
        assert listed_first == [first, middle, last]  # each with the version its point read has

        resolved = store.update_conflict(
            replace(listed_first[1], status=ConflictStatus.RESOLVED, decision=Resolution.DISMISS, reviewer="kim")
        )
        noted = store.update_conflict(replace(resolved, note="the customer called"))

        def listed(status: ConflictStatus | None) -> list[Conflict]:
            return [c for page in conflict_pages(store, status=status, limit=2) for c in page]

        assert listed(ConflictStatus.OPEN) == [first, last]
        assert listed(ConflictStatus.RESOLVED) == [noted]
        assert listed(None) == [first, noted, last]
        assert store.get_conflict(middle.conflict_id) == noted

    def test_polling_from_a_cursor_delivers_each_new_conflict_once(self, store: ClaimStore) -> None:
        def at(seconds: int, **changes: Any) -> Conflict:
            return store.create_conflict(records.conflict(created_at=T0 + timedelta(seconds=seconds), **changes))

        at(0)
        same_instant, later, other_scope = at(10), at(20), at(30, scope="erp.other")

        def poll(cursor: str, scope: str | None = None) -> tuple[list[Conflict], str]:
            page = store.list_conflicts(status=None, scope=scope, limit=50, cursor=cursor)
            assert page.cursor is None
            if not page.items:
                return [], cursor
            return page.items, store.conflicts_after(page.items[-1].created_at, page.items[-1].conflict_id)

        # From a time on, as a trigger starts: what was created at that instant counts as after it.
        first, state = poll(store.conflicts_after(T0 + timedelta(seconds=10)))
        assert first == [same_instant, later, other_scope]
        assert poll(state) == ([], state)
        resolved = store.update_conflict(replace(later, status=ConflictStatus.RESOLVED, decision=Resolution.DISMISS))
        newest = at(40)
        assert poll(state) == ([newest], store.conflicts_after(newest.created_at, newest.conflict_id))
        assert poll(store.conflicts_after(T0 + timedelta(seconds=10)), "erp.create-order")[0] == [
            same_instant,
            resolved,
            newest,
        ]

    def test_conflicts_written_before_the_list_was_kept_in_order_are_listed_and_move(
        self, make_store: Callable[[], ClaimStore], write_legacy_conflicts: Callable[[list[Conflict]], None]
    ) -> None:
        # Release 0.1.0 kept no listing rows or list indexes: opening the store adds them, once (issue 12).
        old = varied_conflicts(9)
        write_legacy_conflicts(list(reversed(old)))
        store = make_store()
        again = make_store()  # a second instance opening the same data repairs nothing twice

        for status in (ConflictStatus.OPEN, ConflictStatus.RESOLVED, None):
            wanted = [c.conflict_id for c in old if status in (None, c.status)]
            for reader in (store, again):
                assert [
                    c.conflict_id for page in conflict_pages(reader, status=status, limit=2) for c in page
                ] == wanted
        opened = store.get_conflict(old[1].conflict_id)
        resolved = store.update_conflict(replace(opened, status=ConflictStatus.RESOLVED, decision=Resolution.DISMISS))

        assert resolved in store.list_conflicts(status=ConflictStatus.RESOLVED, scope=None, limit=50, cursor=None).items
        assert old[1].conflict_id not in {
            c.conflict_id
            for c in store.list_conflicts(status=ConflictStatus.OPEN, scope=None, limit=50, cursor=None).items
        }

    # Nothing here is timed (a page's cost is counted), but its setup may be heavy: on Table Storage, twice as
    # many rows as conflicts written to one partition of the emulator, whose every insert looks through the
    # partition (see TestTableStore.conflicts_at_scale): this test's bound is for its own work.
    @pytest.mark.slow
    @pytest.mark.timeout(300)
    def test_a_page_of_conflicts_costs_as_much_among_thousands_as_among_100(
        self, metered_store: tuple[ClaimStore, Meter], seed_conflicts: Callable[[ClaimStore, list[Conflict]], None]
    ) -> None:
        # Counted in the backend's own unit (requests, SQLite's VM steps), not time: a page reads one range.
        store, meter = metered_store
        scale, sample_every = self.conflicts_at_scale, self.conflicts_at_scale // 100
        every = varied_conflicts(scale)
        middle, end = (store.conflicts_after(T0 + timedelta(seconds=s)) for s in (scale // 2, scale))

        def page(
            status: ConflictStatus | None, scope: str | None = None, cursor: str | None = None
        ) -> Callable[[], Page[Conflict]]:
            return lambda: store.list_conflicts(status=status, scope=scope, limit=COST_PAGE, cursor=cursor)

        reads = {
            "open": page(ConflictStatus.OPEN),
            "resolved": page(ConflictStatus.RESOLVED),
            "all": page(None),
            "open in a scope": page(ConflictStatus.OPEN, "erp.a"),
            "all from the middle": page(None, cursor=middle),
            "a poll with nothing new": page(None, cursor=end),
        }

        seed_conflicts(store, every[::sample_every])
        among_100 = {name: meter(read) for name, read in reads.items()}
        seed_conflicts(store, [conflict for n, conflict in enumerate(every) if n % sample_every])
        among_all = {name: meter(read) for name, read in reads.items()}

        assert [c.conflict_id for c in reads["all from the middle"]().items] == [
            c.conflict_id for c in every[scale // 2 : scale // 2 + COST_PAGE]
        ]
        assert all(among_all[name] <= among_100[name] * 1.1 for name in reads), (among_100, among_all)

    # The inventory: flows, scopes and overlaps

    @pytest.mark.parametrize("kind", INVENTORY)
    def test_inventory_lists_are_empty_at_first(self, store: ClaimStore, kind: str) -> None:
        assert listed(store, kind) == []

    @pytest.mark.parametrize(
        "build",
        [records.flow_record, records.registered_flow, records.scope_record, records.configured_scope, records.overlap],
        ids=["seen flow", "registered flow", "seen scope", "configured scope", "overlap"],
    )
    def test_save_then_list_round_trips_every_field(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore], build: Callable[[], Record]
    ) -> None:
        record = build()
        kind = kind_of(record)

        saved = saved_as(store, record)

        assert saved.version
        assert unversioned(saved) == record
        assert listed(store, kind) == [saved]
        assert listed(make_store(), kind) == [saved]

    @pytest.mark.parametrize("kind", INVENTORY)
    def test_a_record_is_saved_once_then_replaced_at_its_current_version(self, store: ClaimStore, kind: str) -> None:
        first = saved_as(store, BUILDERS[kind]())
        second = saved_as(store, counted(first, 5))

        with pytest.raises(ConcurrentUpdate):
            saved_as(store, counted(first, 7))
        with pytest.raises(ConcurrentUpdate):
            saved_as(store, replace(counted(first, 9), version=None))

        assert second.version not in (None, first.version)
        assert listed(store, kind) == [second]

    @pytest.mark.parametrize("kind", INVENTORY)
    def test_records_list_apart(self, store: ClaimStore, kind: str) -> None:
        saved = [saved_as(store, BUILDERS[kind]()) for _ in range(3)]

        assert sorted(listed(store, kind), key=repr) == sorted(saved, key=repr)

    def test_concurrent_saves_from_one_version_have_exactly_one_winner(
        self, store: ClaimStore, make_store: Callable[[], ClaimStore]
    ) -> None:
        first = store.save_flow(records.flow_record())
        stores = [make_store() for _ in range(RACERS)]

        outcomes = race(lambda i: stores[i].save_flow(replace(first, claims=i + 1)))

        winners = [outcome for outcome in outcomes if isinstance(outcome, FlowRecord)]
        assert len(winners) == 1
        assert sum(isinstance(outcome, ConcurrentUpdate) for outcome in outcomes) == RACERS - 1
        assert store.list_flows() == winners

    # Sizes: whatever the API takes, every store holds; past Table Storage's limits, every store refuses

    @pytest.mark.parametrize("error", API_MAX_ERRORS.values(), ids=API_MAX_ERRORS.keys())
    def test_an_event_at_the_api_limits_round_trips(self, store: ClaimStore, error: str) -> None:
        claim = records.claim()
        first = records.event(claim.claim_id)
        store.create_claim(claim, first)
        largest = api_max_event(claim.claim_id, error)

        store.add_event(largest)

        assert store.list_events(claim.claim_id) == [first, largest]

    @pytest.mark.parametrize("error", API_MAX_ERRORS.values(), ids=API_MAX_ERRORS.keys())
    def test_a_claim_at_the_api_limits_round_trips_with_its_event(self, store: ClaimStore, error: str) -> None:
        claim = api_max_result(records.full_claim(), error)
        event = api_max_event(claim.claim_id, error)

        created = store.create_claim(claim, event)

        assert unversioned(created) == claim
        assert store.get_claim(claim.claim_id) == created
        assert store.list_events(claim.claim_id) == [event]

    @pytest.mark.parametrize("error", API_MAX_ERRORS.values(), ids=API_MAX_ERRORS.keys())
    def test_an_update_at_the_api_limits_round_trips_with_its_event(self, store: ClaimStore, error: str) -> None:
        claim = records.claim()
        first = records.event(claim.claim_id)
        failed = api_max_result(store.create_claim(claim, first), error)
        event = api_max_event(claim.claim_id, error)

        updated = store.update_claim(failed, event)

        assert unversioned(updated) == unversioned(failed)
        assert store.get_claim(claim.claim_id) == updated
        assert every_claim(store, statuses=(ClaimStatus.FAILED,)) == [updated]
        assert store.list_events(claim.claim_id) == [first, event]

    def test_values_longer_than_a_property_holds_round_trip_whole(self, store: ClaimStore) -> None:
        # As JSON the text starts with a quote, so an emoji straddles the first 32K boundary: a cut there
        # would leave half a character at the end of one piece and the other half at the start of the next.
        text = "x" * (PROPERTY_UNITS - 2) + EMOJI * 3 + "y" * PROPERTY_UNITS
        claim = records.full_claim(data=text, error=text)
        event = records.event(claim.claim_id, details={"text": text})
        conflict = records.resolved_conflict(details=text, note=text)

        created = store.create_claim(claim, event)
        stored = store.create_conflict(conflict)

        assert store.get_claim(claim.claim_id) == created
        assert unversioned(created) == claim
        assert store.list_events(claim.claim_id) == [event]
        assert store.get_conflict(conflict.conflict_id) == stored
        assert unversioned(stored) == conflict
        assert store.list_conflicts(status=None, scope=None, limit=50, cursor=None).items == [stored]

    def test_a_claim_just_under_the_entity_limit_round_trips(self, store: ClaimStore) -> None:
        claim = records.claim(data="x" * (ENTITY_BYTES // 2 - 8 * 1024))

        created = store.create_claim(claim, records.event(claim.claim_id))

        assert store.get_claim(claim.claim_id) == created
        assert unversioned(created) == claim

    @pytest.mark.parametrize(
        "write",
        [
            "create claim",
            "create claim with event",
            "update claim",
            "update claim with event",
            "add event",
            "create conflict",
            "update conflict",
        ],
    )
    def test_a_record_over_the_entity_limit_is_refused_and_nothing_is_written(
        self, store: ClaimStore, write: str
    ) -> None:
        claim, other = records.claim(), records.claim()
        first = records.event(claim.claim_id)
        created = store.create_claim(claim, first)
        conflict = store.create_conflict(records.conflict(claim_id=claim.claim_id))
        later = T0 + timedelta(seconds=1)
        writes: dict[str, Callable[[], object]] = {
            "create claim": lambda: store.create_claim(replace(other, data=OVER_ENTITY), records.event(other.claim_id)),
            "create claim with event": lambda: store.create_claim(
                other, records.event(other.claim_id, details={"text": OVER_ENTITY})
            ),
            "update claim": lambda: store.update_claim(
                replace(created, error=OVER_ENTITY), records.event(claim.claim_id, at=later)
            ),
            "update claim with event": lambda: store.update_claim(
                replace(created, attempt=2), records.event(claim.claim_id, at=later, details={"text": OVER_ENTITY})
            ),
            "add event": lambda: store.add_event(
                records.event(claim.claim_id, at=later, details={"text": OVER_ENTITY})
            ),
            "create conflict": lambda: store.create_conflict(records.conflict(details=OVER_ENTITY)),
            "update conflict": lambda: store.update_conflict(replace(conflict, note=OVER_ENTITY)),
        }

        with pytest.raises(TooLarge) as raised:
            writes[write]()

        assert "1 MiB" in raised.value.message
        assert store.get_claim(claim.claim_id) == created
        assert store.list_events(claim.claim_id) == [first]
        with pytest.raises(NotFound):
            store.get_claim(other.claim_id)
        assert store.list_events(other.claim_id) == []
        assert store.list_conflicts(status=None, scope=None, limit=50, cursor=None).items == [conflict]

    # Health

    def test_ping_on_a_healthy_store_passes(self, store: ClaimStore) -> None:
        store.ping()
