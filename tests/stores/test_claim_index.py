"""The claim index of Table Storage: claims found by source system or reference without reading the table through.

A new claim stays one request: its index rows (partitions ``source-<source>`` and ``reference-<digest>`` of
the claims table, keyed by first received) wait in memory for the inventory's flush, or for the next
``list_claims`` by source or reference on the same instance. Another instance finds them once they are
written; the daily repair writes those of an instance that stopped before its flush (issue 16).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import unquote

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.core.pipeline import PipelineRequest
from azure.core.rest import HttpRequest
from azure.data.tables import TableClient

from oncegate.domain.records import Claim, ClaimFilter
from oncegate.domain.statuses import ClaimStatus
from oncegate.errors import StoreUnavailable
from oncegate.stores.tables.store import TableStore, table_names
from tests.support import records
from tests.support.azurite import Azurite, ExternalTables, TableStoreFactory
from tests.support.records import T0

pytestmark = pytest.mark.azurite
EVERY = tuple(ClaimStatus)


def made(store: TableStore, count: int, **fields: Any) -> list[Claim]:
    claims = [records.claim(first_received_at=T0 + timedelta(seconds=n), **fields) for n in range(count)]
    return [store.create_claim(claim, records.event(claim.claim_id)) for claim in claims]


def found(store: TableStore, **filters: Any) -> list[str]:
    ids, cursor = [], None
    while True:
        page = store.list_claims(ClaimFilter(EVERY, **filters), limit=7, cursor=cursor)
        ids += [claim.claim_id for claim in page.items]
        cursor = page.cursor
        if cursor is None:
            return ids


def test_a_new_claim_naming_its_source_and_reference_is_still_one_request(
    table_store_factory: TableStoreFactory,
) -> None:
    sent: list[object] = []
    store = table_store_factory(raw_request_hook=sent.append)
    claim = records.claim(source="shop-eu", reference="SO-1001")
    opened = len(sent)

    store.create_claim(claim, records.event(claim.claim_id))
    made_with = len(sent) - opened
    store.flush_index()

    assert made_with == 1
    assert len(sent) - opened - made_with == 2  # the source's and the reference's partition: a transaction each
    assert found(store, source="shop-eu") == found(store, reference="SO-1001") == [claim.claim_id]


def test_another_instance_finds_claims_once_their_maker_flushed_and_the_repair_finds_the_rest(
    table_store_factory: TableStoreFactory,
) -> None:
    maker, reader = table_store_factory(), table_store_factory()
    flushed = made(maker, 3, source="shop-eu")
    maker.flush_index()
    lost = made(maker, 2, source="shop-eu")  # the maker stops before its next flush: its rows are lost
    maker._unindexed.clear()

    before = found(reader, source="shop-eu")
    repaired = reader.repair_index(received_since=T0)
    again = reader.repair_index(received_since=T0)

    assert before == [claim.claim_id for claim in flushed]
    assert repaired == again == 5
    assert sorted(found(reader, source="shop-eu")) == sorted(claim.claim_id for claim in [*flushed, *lost])


def test_a_repair_writes_each_page_before_reading_the_next_so_a_cut_keeps_what_it_wrote(
    table_store_factory: TableStoreFactory,
) -> None:
    maker = table_store_factory()
    lost = made(maker, 5, source="shop-eu")
    maker._unindexed.clear()  # the maker stopped before its flush
    reads: list[str] = []

    def outage_at_the_third_page(request: PipelineRequest[HttpRequest]) -> None:
        if request.http_request.method == "GET" and "FirstReceivedAt" in unquote(request.http_request.url):
            reads.append(request.http_request.url)
            if len(reads) == 3:
                raise ServiceRequestError("connection reset")

    cut = table_store_factory(raw_request_hook=outage_at_the_third_page, retry_total=0)
    with pytest.raises(StoreUnavailable):
        cut.repair_index(received_since=T0, page_rows=2)
    kept = found(table_store_factory(), source="shop-eu")
    finished = table_store_factory().repair_index(received_since=T0, page_rows=2)

    # The repair reads in claim id order: the two pages before the cut, four claims, are indexed.
    assert len(kept) == 4
    assert set(kept) < {claim.claim_id for claim in lost}
    assert finished == 5
    assert found(table_store_factory(), source="shop-eu") == [claim.claim_id for claim in lost]


def test_the_index_is_kept_in_first_received_order_and_since_reads_one_range(
    table_store_factory: TableStoreFactory,
) -> None:
    store = table_store_factory()
    claims = made(store, 10, source="sharepoint:expenses")

    since = found(store, source="sharepoint:expenses", received_since=T0 + timedelta(seconds=6))

    assert since == [claim.claim_id for claim in claims[6:]]


def test_a_purged_claim_takes_its_index_rows_along_and_a_row_left_behind_is_passed_over(
    table_store_factory: TableStoreFactory, azurite: Azurite | ExternalTables
) -> None:
    store = table_store_factory()
    kept, purged, stale = made(store, 3, source="shop-eu", reference="SO-1")
    store.flush_index()
    store.delete_claim(purged)
    claims_table = table_names(table_store_factory.prefix)[0]
    with TableClient.from_connection_string(azurite.connection_string, claims_table) as table:
        table.delete_entity(stale.claim_id, "claim")  # the claim row alone: its index rows stay behind
        index_rows = list(table.query_entities("PartitionKey eq @pk", parameters={"pk": "source-shop-eu"}))

    assert sorted(row["ClaimId"] for row in index_rows) == sorted([kept.claim_id, stale.claim_id])
    assert found(store, source="shop-eu") == found(store, reference="SO-1") == [kept.claim_id]


def test_a_cursor_of_another_source_is_refused(table_store_factory: TableStoreFactory) -> None:
    store = table_store_factory()
    made(store, 3, source="shop-eu")
    page = store.list_claims(ClaimFilter(EVERY, source="shop-eu"), limit=1)
    assert page.cursor is not None

    with pytest.raises(Exception, match="cursor") as refused:
        store.list_claims(ClaimFilter(EVERY, source="shop-us"), limit=1, cursor=page.cursor)

    assert getattr(refused.value, "target", None) == "cursor"
