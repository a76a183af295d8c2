"""A history as releases 0.3.0 to 0.4.0 kept it reads in time order, whole and by page, and counts on (issue 36).

Those releases kept a line counting answers alike under its series id (``history-series-<digest>``), a key
that sorts after every time; since issue 36 every history row is keyed by its time, and a page is one range
read. ``tests/fixtures/legacy/tables-series-0.4.0.json`` is a claim's partition as that code wrote it
(``make_series_0.4.0.py``, run from a checkout of it): its lines must keep their places and their counts,
and an answer alike counted after the upgrade must count in the line it belongs to, not start another.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import HistoryEvent
from oncegate.domain.statuses import Decision
from oncegate.models import ClaimRequest, FlowRef, ListPageQuery
from oncegate.stores import row_writing
from oncegate.stores.paging import every_item
from oncegate.stores.tables.store import TableStore
from tests.gate import Gate
from tests.stores.test_legacy_rows import _entity
from tests.support import records
from tests.support.azurite import TableStoreFactory

pytestmark = pytest.mark.azurite

DUMP: dict[str, Any] = json.loads(
    (Path(__file__).parent.parent / "fixtures" / "legacy" / "tables-series-0.4.0.json").read_text()
)
MANIFEST: dict[str, Any] = DUMP["manifest"]
FLOW = FlowRef(name="Create order in ERP", environment="Production")


@pytest.fixture
def store(table_store_factory: TableStoreFactory) -> TableStore:
    """Today's store over the claim's partition as 0.4.0 left it."""
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as client:
        table = client.create_table_if_not_exists(table_store_factory.prefix + "Claims")
        for row in DUMP["entities"]["Claims"]:
            table.create_entity(_entity(row))
    return table_store_factory()


def lines(events: list[HistoryEvent]) -> list[list[Any]]:
    return [[event.outcome, event.count or 1] for event in events]


def with_duplicates(count: int) -> list[list[Any]]:
    """The manifest's history, its line of duplicates from the same flow counting ``count``."""
    return [line if line != ["duplicate", 2] else ["duplicate", count] for line in MANIFEST["history"]]


def test_the_rows_are_as_that_release_kept_them() -> None:
    # Guards the fixture: series lines under their ids, which sort after every row keyed by time.
    keys = sorted(row["RowKey"][1] for row in DUMP["entities"]["Claims"])
    assert [key for key in keys if key.startswith("history-series-")] == keys[-3:]
    assert len(MANIFEST["history"]) == 5


def test_the_history_lists_in_time_order_whole_and_by_page(store: TableStore) -> None:
    claim_id = MANIFEST["claimId"]

    whole = store.list_events(claim_id)
    paged = list(every_item(lambda cursor: store.list_history(claim_id, limit=2, cursor=cursor)))

    assert lines(whole) == MANIFEST["history"]
    assert paged == whole
    assert [event.at for event in whole] == sorted(event.at for event in whole)


def test_an_answer_alike_after_the_upgrade_counts_in_the_line_it_belongs_to(store: TableStore) -> None:
    written = datetime.fromisoformat(MANIFEST["written_at"])
    service = Gate(store, KeyHasher(MANIFEST["secret"]), clock=lambda: written + timedelta(minutes=5))
    request = ClaimRequest(
        scope="erp.create-order", key=MANIFEST["key"], run_id="run-g", flow=FLOW, payload=MANIFEST["payload"]
    )

    answers = [service.check_and_claim(request) for _ in range(2)]

    assert {answer.decision for answer in answers} == {Decision.DUPLICATE}
    history, _ = service.history(MANIFEST["claimId"], ListPageQuery(top=2))
    whole = store.list_events(MANIFEST["claimId"])
    assert lines(whole) == with_duplicates(4)
    assert [entry.outcome for entry in history] == ["proceed", "in_progress"]
    assert list(every_item(lambda cursor: store.list_history(MANIFEST["claimId"], limit=2, cursor=cursor))) == whole


def test_an_export_keeps_one_line_per_series_and_an_import_counts_on_in_it(store: TableStore) -> None:
    written = datetime.fromisoformat(MANIFEST["written_at"])
    service = Gate(store, KeyHasher(MANIFEST["secret"]), clock=lambda: written + timedelta(minutes=5))
    request = ClaimRequest(
        scope="erp.create-order", key=MANIFEST["key"], run_id="run-g", flow=FLOW, payload=MANIFEST["payload"]
    )
    service.check_and_claim(request)

    (backup,) = list(store.export_claims())
    store.delete_claim(backup.claim)
    store.restore_claim(backup)
    service.check_and_claim(request)

    assert lines(list(backup.events)) == with_duplicates(3)
    assert lines(store.list_events(MANIFEST["claimId"])) == with_duplicates(4)
    keys = {
        row["RowKey"]
        for row in store._claims.query_entities("PartitionKey eq @pk", parameters={"pk": MANIFEST["claimId"]})
    }
    assert not any(key.startswith("history-series-") for key in keys)


def _requests_counted(factory: TableStoreFactory) -> tuple[TableStore, list[int]]:
    """Another store on the same tables, and the rows each of its reads brings back, one number a request."""
    reads: list[int] = []

    def rows_read(response: Any) -> None:
        if response.http_request.method == "GET":
            reads.append(len(json.loads(response.http_response.text()).get("value", [None])))

    return factory(raw_response_hook=rows_read), reads


def _long_history(store: TableStore, begun: datetime, *, lines: int = 7) -> tuple[str, list[HistoryEvent]]:
    """A claim whose history begins at ``begun``, ``lines`` lines long, written as this release writes them."""
    claim = records.claim(first_received_at=begun)
    events = [records.event(claim.claim_id, at=begun + timedelta(seconds=second)) for second in range(lines)]
    store.create_claim(claim, events[0])
    for event in events[1:]:
        store.add_event(event)
    return claim.claim_id, events


def _pages(store: TableStore, claim_id: str, reads: list[int]) -> tuple[list[HistoryEvent], list[list[int]]]:
    """The history by pages of 2, and the rows each page's requests brought back."""
    listed: list[HistoryEvent] = []
    per_page: list[list[int]] = []
    cursor = None
    while True:
        reads.clear()
        page = store.list_history(claim_id, limit=2, cursor=cursor)
        listed, per_page = [*listed, *page.items], [*per_page, list(reads)]
        if (cursor := page.cursor) is None:
            return listed, per_page


def test_a_claim_of_the_upgraded_store_begun_before_the_grace_ends_reads_its_earlier_rows_on_each_page(
    store: TableStore, table_store_factory: TableStoreFactory
) -> None:
    # The store held claims when this release first opened it: a history begun within a day after may hold lines
    # an instance of the earlier release still answering kept under their series ids (issue 36).
    marker = store._conflicts.get_entity("upgrade", "history-keyed-by-time")
    claim_id, events = _long_history(store, marker["Since"] + timedelta(hours=1))
    legacy = records.event(claim_id, event_id="series-" + "0" * 32, at=events[2].at + timedelta(milliseconds=1))
    store._claims.create_entity(_entity_of(claim_id, "history-series-" + "0" * 32, legacy))
    counted, reads = _requests_counted(table_store_factory)

    listed, per_page = _pages(counted, claim_id, reads)

    assert marker["HeldClaims"] is True
    assert listed == [*events[:3], legacy, *events[3:]]
    # A full page: its rows and the one after, then the rows kept under series ids (one here), and its tally.
    assert per_page[:3] == [[3, 1, 1], [3, 1, 1], [3, 1, 1]]
    fixture, fixture_pages = _pages(counted, MANIFEST["claimId"], reads)
    assert lines(fixture) == MANIFEST["history"]
    assert fixture_pages[0] == [3, 3, 1, 1, 1]  # the three lines under series ids, and their tallies


def test_a_claim_of_the_upgraded_store_begun_after_the_grace_reads_each_page_once(
    store: TableStore, table_store_factory: TableStoreFactory
) -> None:
    marker = store._conflicts.get_entity("upgrade", "history-keyed-by-time")
    claim_id, events = _long_history(store, marker["Since"] + timedelta(days=1, seconds=1))
    counted, reads = _requests_counted(table_store_factory)

    listed, per_page = _pages(counted, claim_id, reads)

    assert listed == events
    assert per_page == [[3], [3], [3], [1]]
    # A later start finds the marker as the first left it.
    assert counted._conflicts.get_entity("upgrade", "history-keyed-by-time") == marker


def _entity_of(claim_id: str, row_key: str, event: HistoryEvent) -> dict[str, Any]:
    return {"PartitionKey": claim_id, "RowKey": row_key, **row_writing.event_to_row(event)}


def test_a_store_opened_only_to_read_before_this_release_wrote_to_it_reads_the_earlier_rows_and_writes_nothing(
    table_store_factory: TableStoreFactory,
) -> None:
    # An export of a store 0.4.0 wrote, before any instance of this release opened it: no marker says which
    # histories this release began, so every full page looks for the earlier rows.
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as client:
        claims = client.create_table_if_not_exists(table_store_factory.prefix + "Claims")
        for row in DUMP["entities"]["Claims"]:
            claims.create_entity(_entity(row))
        conflicts = client.create_table_if_not_exists(table_store_factory.prefix + "Conflicts")
        reading = TableStore(client, prefix=table_store_factory.prefix, read_only=True)

        paged = list(every_item(lambda cursor: reading.list_history(MANIFEST["claimId"], limit=2, cursor=cursor)))

        assert lines(paged) == MANIFEST["history"]
        assert list(conflicts.list_entities()) == []
