"""The Table Storage store against Azurite: the contract, the stored shape, and outages."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.core.pipeline import PipelineRequest
from azure.core.rest import HttpRequest
from azure.data.tables import (
    AccountSasPermissions,
    ResourceTypes,
    TableClient,
    TableEntity,
    TableServiceClient,
    TransactionOperation,
    generate_account_sas,
)

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim, Conflict, HistoryEvent
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision, EventKind, Resolution
from oncegate.errors import ConcurrentUpdate, NotFound, StoreUnavailable
from oncegate.models import ClaimResponse
from oncegate.stores import row_writing
from oncegate.stores.paging import decode_cursor, encode_cursor, utc_text
from oncegate.stores.tables import batch
from oncegate.stores.tables.claims import HISTORY_BATCH
from oncegate.stores.tables.conflicts import FIRST_VERSION, _conflict_entities
from oncegate.stores.tables.store import TableStore, table_names
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, history, record, set_scope
from tests.stores.contract import Meter, StoreContract
from tests.stores.target_contract import TargetContract
from tests.support import records
from tests.support.azurite import Azurite, ExternalTables, TableStoreFactory
from tests.support.records import T0

pytestmark = pytest.mark.azurite
DAY = 24 * 3600


class TestTableStore(StoreContract, TargetContract):
    # The emulator looks for each new row's key through its whole partition: the 20,000 rows of 10,000 conflicts
    # took it 10 s of a quiet machine (113 s with the load at 13 on two cores), 4,000 rows about 1 s. A page read
    # with no bound on Table Storage costs a request per 1,000 rows, 4 among 2,000 conflicts against 1 among 100,
    # so 2,000 tell a bounded page from another as 10,000 do; bench/targets.py reads one among 10,000.
    conflicts_at_scale = 2_000

    @pytest.fixture
    def make_store(self, table_store_factory: TableStoreFactory) -> TableStoreFactory:
        return table_store_factory

    @pytest.fixture
    def write_legacy_conflicts(self, table_store_factory: TableStoreFactory) -> Callable[[list[Conflict]], None]:
        return partial(_write_legacy_conflicts, table_store_factory)

    @pytest.fixture
    def seed_conflicts(self) -> Callable[[TableStore, list[Conflict]], None]:
        return _seed_conflicts

    @pytest.fixture
    def metered_store(self, table_store_factory: TableStoreFactory) -> tuple[TableStore, Meter]:
        """A store, and the requests an action sends (an entity-group transaction is one)."""
        sent: list[object] = []
        store = table_store_factory(raw_request_hook=sent.append)

        def meter(action: Callable[[], object]) -> int:
            before = len(sent)
            action()
            return len(sent) - before

        return store, meter


def _write_legacy_conflicts(factory: TableStoreFactory, conflicts: list[Conflict]) -> None:
    """Conflicts as 0.1.0 wrote them, before any store opened the tables: the conflict row alone, no Version."""
    with TableServiceClient.from_connection_string(factory.connection_string) as service:
        table = service.create_table_if_not_exists(table_names(factory.prefix)[1])
        for conflict in conflicts:
            row = {name: value for name, value in row_writing.conflict_to_row(conflict).items() if value is not None}
            table.create_entity({"PartitionKey": "conflict", "RowKey": conflict.conflict_id, **row})


def _seed_conflicts(store: TableStore, conflicts: list[Conflict]) -> None:
    """Conflicts as ``create_conflict`` writes them, but 50 to a transaction, two transactions at a time.

    Azurite looks for each new row's key through the whole partition, so its inserts slow down as the
    partition grows: 10,000 conflicts (20,000 rows) take it 15 to 20 seconds on two cores even so (bench/targets.py).
    """
    rows = [row for conflict in conflicts for row in _conflict_entities(conflict, FIRST_VERSION)]
    batches = [
        [(TransactionOperation.CREATE, row) for row in rows[start : start + 100]] for start in range(0, len(rows), 100)
    ]
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(partial(batch.submit_transaction, store._conflicts), batches))


def _conflict_rows(factory: TableStoreFactory) -> dict[str, TableEntity]:
    """The conflicts partition as the Storage browser shows it, by RowKey."""
    with TableServiceClient.from_connection_string(factory.connection_string) as service:
        table = service.get_table_client(table_names(factory.prefix)[1])
        return {row["RowKey"]: row for row in table.query_entities("PartitionKey eq 'conflict'")}


def test_a_conflict_and_its_listing_row_hold_the_same_columns_and_move_together(
    table_store_factory: TableStoreFactory,
) -> None:
    store = table_store_factory()
    opened = store.create_conflict(records.conflict(created_at=T0 + timedelta(microseconds=5)))
    listed_at = f"0-open-2024-05-01T08:30:15.123461+00:00-{opened.conflict_id}"
    assert set(_conflict_rows(table_store_factory)) == {listed_at, opened.conflict_id}

    store.update_conflict(replace(opened, status=ConflictStatus.RESOLVED, decision=Resolution.DISMISS, reviewer="kim"))

    rows = _conflict_rows(table_store_factory)
    resolved_at = listed_at.replace("0-open-", "0-resolved-")
    assert set(rows) == {resolved_at, opened.conflict_id}
    conflict_row, listing_row = (dict(rows[key]) for key in (opened.conflict_id, resolved_at))
    assert {**conflict_row, "RowKey": None, "Timestamp": None} == {**listing_row, "RowKey": None, "Timestamp": None}
    assert (listing_row["Status"], listing_row["Reviewer"], listing_row["Version"]) == ("resolved", "kim", 2)


def test_a_repair_cut_short_leaves_each_conflict_whole_and_the_next_start_finishes_it(
    table_store_factory: TableStoreFactory,
) -> None:
    old = [records.conflict(created_at=T0 + timedelta(seconds=seconds)) for seconds in range(3)]
    _write_legacy_conflicts(table_store_factory, old)
    batches: list[str] = []

    def outage_at_the_second_transaction(request: PipelineRequest[HttpRequest]) -> None:
        if request.http_request.url.endswith("$batch"):
            batches.append(request.http_request.url)
            if len(batches) == 2:
                raise ServiceRequestError("connection reset")

    with pytest.raises(StoreUnavailable):
        table_store_factory(raw_request_hook=outage_at_the_second_transaction, retry_total=0)

    # One conflict got its Version and listing row, the others neither: never one without the other.
    rows = _conflict_rows(table_store_factory)
    assert len(rows) == 4
    assert sum("Version" in rows[conflict.conflict_id] for conflict in old) == 1
    sent: list[str] = []
    store = table_store_factory(raw_request_hook=lambda request: sent.append(request.http_request.url))
    listed = store.list_conflicts(status=ConflictStatus.OPEN, scope=None, limit=10, cursor=None).items
    assert [conflict.conflict_id for conflict in listed] == [conflict.conflict_id for conflict in old]
    assert [conflict.version for conflict in listed] == ["1", "1", "1"]

    sent.clear()
    table_store_factory(raw_request_hook=lambda request: sent.append(request.http_request.url))

    # Done once: a later start reads the marker rows (this one, and the history's), in one request, and nothing else
    # of the table.
    conflicts_table = table_names(table_store_factory.prefix)[1]
    assert [url for url in sent if f"/{conflicts_table}" in url] == [
        url for url in sent if f"/{conflicts_table}()?$filter=PartitionKey%20eq%20%27upgrade%27" in url
    ]
    assert len([url for url in sent if f"/{conflicts_table}" in url]) == 1


def test_claims_are_plain_pascalcase_properties_in_their_own_partition(
    table_store_factory: TableStoreFactory, azurite: Azurite | ExternalTables
) -> None:
    claim = records.full_claim()
    event = records.event(claim.claim_id)
    table_store_factory().create_claim(claim, event)
    claims_table = table_names(table_store_factory.prefix)[0]

    with TableClient.from_connection_string(azurite.connection_string, claims_table) as table:
        rows = {
            entity["RowKey"]: entity
            for entity in table.query_entities("PartitionKey eq @pk", parameters={"pk": claim.claim_id})
        }

    assert set(rows) == {"claim", "history-" + event.event_id}
    row = rows["claim"]
    assert row["PartitionKey"] == row["ClaimId"] == claim.claim_id
    assert (row["Scope"], row["Status"], row["Attempt"]) == (claim.scope, claim.status.value, claim.attempt)
    assert row["FirstReceivedAt"] == claim.first_received_at
    assert row["Retryable"] is False
    assert rows["history-" + event.event_id]["Kind"] == event.kind.value


def test_inventory_rows_are_pascalcase_properties_and_a_flow_is_keyed_by_a_digest(
    table_store_factory: TableStoreFactory, azurite: Azurite | ExternalTables
) -> None:
    store = table_store_factory()
    flow = store.save_flow(records.registered_flow())
    scope = store.save_scope(records.configured_scope())
    _, _, flows_table, scopes_table, _, _, _ = table_names(table_store_factory.prefix)

    with TableClient.from_connection_string(azurite.connection_string, flows_table) as table:
        (flow_row,) = table.list_entities()
    with TableClient.from_connection_string(azurite.connection_string, scopes_table) as table:
        (scope_row,) = table.list_entities()

    # The flow's name holds / \ # ?, which a RowKey may not: the key is a digest, the name a column.
    assert (flow_row["PartitionKey"], flow_row["RowKey"]) == ("flow", flow_row["FlowId"])
    assert len(flow_row["RowKey"]) == 32
    assert (flow_row["FlowName"], flow_row["Enabled"], flow_row["Claims"]) == (flow.flow.name, False, 12)
    assert (scope_row["PartitionKey"], scope_row["RowKey"], scope_row["Scope"]) == ("scope", scope.scope, scope.scope)
    assert (scope_row["RetentionDays"], scope_row["LeaseSeconds"], scope_row["SucceededClaims"]) == (30, 900, 7)


def test_an_unreachable_store_raises_store_unavailable_and_recovers(
    table_store_factory: TableStoreFactory, azurite: Azurite | ExternalTables
) -> None:
    # No retries: the SDK's backoff would only make the test slower.
    store = table_store_factory(retry_total=0)
    claim = records.claim()
    azurite.stop()
    try:
        with pytest.raises(StoreUnavailable):
            store.ping()
        with pytest.raises(StoreUnavailable):
            store.create_claim(claim, records.event(claim.claim_id))
    finally:
        azurite.start()
    # In-memory Azurite lost the tables; a new store creates them again.
    table_store_factory().create_claim(claim, records.event(claim.claim_id))


def _with_history(store: TableStore, events: int) -> Claim:
    claim = records.claim(status=ClaimStatus.SUCCEEDED)
    store.create_claim(claim, records.event(claim.claim_id))
    for seconds in range(1, events):
        store.add_event(records.event(claim.claim_id, at=T0 + timedelta(seconds=seconds)))
    return store.get_claim(claim.claim_id)


def _after_first_transaction(monkeypatch: pytest.MonkeyPatch, store: TableStore, then: Any) -> None:
    """Run ``then()`` once the first transaction of the store's claims table has gone through."""
    submit = batch.submit_transaction
    calls: list[object] = []

    def submitting(table: TableClient, *args: Any, **kwargs: Any) -> Any:
        if table is store._claims:
            if calls:
                then()
            calls.append(args)
        return submit(table, *args, **kwargs)

    monkeypatch.setattr(batch, "submit_transaction", submitting)


def test_a_delete_cut_short_leaves_the_claim_with_part_of_its_history_and_the_next_finishes_it(
    table_store_factory: TableStoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = table_store_factory()
    claim = _with_history(store, HISTORY_BATCH + 11)

    def outage() -> None:
        raise ServiceResponseError("connection reset")

    _after_first_transaction(monkeypatch, store, outage)
    with pytest.raises(StoreUnavailable):
        store.delete_claim(claim)

    # Nothing resurrects and nothing is orphaned: the claim is still there, still finished, with the rest.
    reader = table_store_factory()
    left = reader.get_claim(claim.claim_id)
    assert (left.status, left.attempt, left.updated_at) == (claim.status, claim.attempt, claim.updated_at)
    assert len(reader.list_events(claim.claim_id)) == 11
    reader.delete_claim(left)
    with pytest.raises(NotFound):
        reader.get_claim(claim.claim_id)
    assert reader.list_events(claim.claim_id) == []


def test_a_claim_changed_between_two_transactions_keeps_itself_and_the_rest_of_its_history(
    table_store_factory: TableStoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, writer = table_store_factory(), table_store_factory()
    claim = _with_history(store, HISTORY_BATCH + 11)

    def another_attempt() -> None:
        current = writer.get_claim(claim.claim_id)
        writer.update_claim(replace(current, status=ClaimStatus.IN_PROGRESS, attempt=2), None)

    _after_first_transaction(monkeypatch, store, another_attempt)
    with pytest.raises(ConcurrentUpdate):
        store.delete_claim(claim)

    assert writer.get_claim(claim.claim_id).attempt == 2
    assert len(writer.list_events(claim.claim_id)) == 11


def test_a_value_longer_than_a_property_is_stored_in_numbered_pieces(
    table_store_factory: TableStoreFactory, azurite: Azurite | ExternalTables
) -> None:
    # Issue 9's result: 40,598 characters once JSON-escaped, where a property holds 32,768 UTF-16 code units.
    # Store-owned names (row_writing.DETAIL_NAMES): the text stored is the details as the row keeps them.
    details = {"Data": "x" * 16000, "Error": "\u0001" * 4096}
    claim = records.claim()
    event = records.event(claim.claim_id, kind=EventKind.RESULT, outcome="failed", details=details)
    table_store_factory().create_claim(claim, event)
    claims_table = table_names(table_store_factory.prefix)[0]

    with TableClient.from_connection_string(azurite.connection_string, claims_table) as table:
        row = table.get_entity(claim.claim_id, "history-" + event.event_id)

    assert len(row["Details"]) == 32 * 1024
    assert row["Details"] + row["Details__2"] == json.dumps(details, separators=(",", ":"), ensure_ascii=False)
    assert "Details__3" not in row


def _series_answer(claim_id: str, seconds: int) -> HistoryEvent:
    at = T0 + timedelta(seconds=seconds)
    return records.event(claim_id, event_id="series-1", at=at, outcome="duplicate", count=1, last_at=at)


@pytest.mark.azurite
def test_an_answer_repeated_on_one_instance_costs_one_request_and_another_instances_three(
    table_store_factory: TableStoreFactory,
) -> None:
    sent: list[object] = []
    store, other = table_store_factory(raw_request_hook=sent.append), table_store_factory()
    claim = records.claim()
    store.create_claim(claim, records.event(claim.claim_id))

    def requests(action: Callable[[], object]) -> int:
        before = len(sent)
        action()
        return len(sent) - before

    costs = [requests(partial(store.count_event, _series_answer(claim.claim_id, seconds))) for seconds in (1, 2, 3)]
    other.count_event(_series_answer(claim.claim_id, 4))
    after_another = requests(partial(store.count_event, _series_answer(claim.claim_id, 5)))

    # The first inserts; the next merge on the ETag remembered; one changed by another instance is read first.
    assert costs == [1, 1, 1]
    assert after_another == 3
    (counted,) = [event for event in store.list_events(claim.claim_id) if event.outcome == "duplicate"]
    assert (counted.count, counted.at, counted.last_at) == (5, T0 + timedelta(seconds=1), T0 + timedelta(seconds=5))


def _rows_read_into(counts: list[int]) -> Callable[[Any], None]:
    """A response hook noting how many rows each read (GET) brought back: a point read counts as one."""

    def rows_read(response: Any) -> None:
        if response.http_request.method == "GET":
            counts.append(len(json.loads(response.http_response.text()).get("value", [None])))

    return rows_read


def test_a_history_page_reads_its_own_rows_whatever_the_history_length(table_store_factory: TableStoreFactory) -> None:
    # Every history row was read and sorted for each page (issue 36: 579 ms for 5,000 rows); keys sort by time now.
    read: list[int] = []
    store = table_store_factory(raw_response_hook=_rows_read_into(read))
    claim = records.claim()
    events = [records.event(claim.claim_id, at=T0 + timedelta(seconds=index)) for index in range(240)]
    store.create_claim(claim, events[0])
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(store.add_event, events[1:]))
    for series, seconds in (("a", 30.5), ("b", 99.5), ("a", 30.6), ("c", 200.5)):
        at = T0 + timedelta(seconds=seconds)
        store.count_event(records.event(claim.claim_id, event_id=f"series-{series}", at=at, count=1, last_at=at))

    read.clear()
    first = store.list_history(claim.claim_id, limit=5)
    first_read, read[:] = sum(read), []
    middle = store.list_history(
        claim.claim_id, limit=5, cursor=encode_cursor(utc_text(events[119].at), events[119].event_id)
    )
    middle_read = sum(read)

    assert first.items == events[:5]
    assert middle.items == events[120:125]
    # A page reads its rows and the one after, which says more follow.
    assert (first_read, middle_read) == (6, 6)
    whole = store.list_events(claim.claim_id)
    assert [event.at for event in whole] == sorted(event.at for event in whole)
    assert [event.count for event in whole if event.count] == [2, 1, 1]


def test_each_page_of_a_history_this_release_wrote_is_one_read_of_its_own_rows(
    table_store_factory: TableStoreFactory,
) -> None:
    # Issue 36: a full first page read the rows earlier releases kept under their series ids in a second query,
    # on every claim; a store that held no claim when this release opened it has none to read.
    reads: list[int] = []
    store = table_store_factory(raw_response_hook=_rows_read_into(reads))
    claim = records.claim()
    events = [records.event(claim.claim_id, at=T0 + timedelta(seconds=index)) for index in range(120)]
    store.create_claim(claim, events[0])
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(store.add_event, events[1:]))

    pages: list[list[int]] = []
    cursors: list[str | None] = [None]
    for _ in range(3):
        reads.clear()
        page = store.list_history(claim.claim_id, limit=50, cursor=cursors[-1])
        pages.append(list(reads))
        cursors.append(page.cursor)
    reads.clear()
    store.get_claim(claim.claim_id)

    # Each page is one request of its rows and the one after, which says more follow; the claim, one row.
    assert pages == [[51], [51], [20]]
    assert cursors[-1] is None
    assert reads == [1]
    # The cursor says so by its time's form; an earlier release reads the same place from it.
    at, event_id = decode_cursor(str(cursors[1]))
    assert (datetime.fromisoformat(at), event_id) == (events[49].at, events[49].event_id)


def test_a_new_store_opens_without_logging_an_error(
    table_store_factory: TableStoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # A new store has no keys table yet: `oncegate store init`, the first thing an operator runs on it,
    # printed "A OnceGate table is missing" with the SDK's whole 404 on stderr, as the app logged it at start.
    with caplog.at_level("WARNING", logger="oncegate"):
        store = table_store_factory()

    assert store.read_marks().store_id is None
    assert [record.getMessage() for record in caplog.records if record.levelname in ("WARNING", "ERROR")] == []


def _opened(factory: TableStoreFactory) -> list[tuple[str, str]]:
    """The requests an open of the factory's store sends: method, and the table or listing each addresses."""
    sent: list[tuple[str, str]] = []

    def hook(request: PipelineRequest[HttpRequest]) -> None:
        path = request.http_request.url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        sent.append((request.http_request.method, path.split("(", 1)[0].removeprefix(factory.prefix)))

    factory(raw_request_hook=hook)
    return sent


def test_an_open_on_existing_tables_lists_them_once_creates_none_and_reads_its_markers_at_once(
    table_store_factory: TableStoreFactory,
) -> None:
    # Every instance start and every CLI command opens the store: a create per table, each answered "exists",
    # was five of its ten requests, and its two upgrade markers two more.
    table_store_factory().mark_store("store-a", at=T0)

    sent = _opened(table_store_factory)

    assert sent == [
        ("GET", "Tables"),  # one listing of the store's tables
        ("GET", "Keys"),  # the store's id
        ("GET", "Conflicts"),  # the upgrades' marker rows: the conflicts' listing rows, the history's keys
    ]


def test_an_open_makes_only_the_tables_missing_and_never_a_claims_table_behind_a_store_id(
    table_store_factory: TableStoreFactory,
) -> None:
    table_store_factory().mark_store("store-a", at=T0)
    names = table_names(table_store_factory.prefix)
    claims, flows = names[0], names[2]
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as tables:
        for name in (claims, flows):
            tables.delete_table(name)

    sent = _opened(table_store_factory)

    # The flows table made again, alone; the claims table lost behind the store's id left for the store checks.
    assert [request for request in sent if request[0] == "POST"] == [("POST", "Tables")]
    assert _listed(table_store_factory) == set(names) - {claims}


def test_a_read_only_open_writes_nothing_even_on_a_new_store(table_store_factory: TableStoreFactory) -> None:
    sent: list[str] = []
    with TableServiceClient.from_connection_string(
        table_store_factory.connection_string, raw_request_hook=lambda request: sent.append(request.http_request.method)
    ) as service:
        TableStore(service, prefix=table_store_factory.prefix, read_only=True)

    assert set(sent) == {"GET"}
    assert _listed(table_store_factory) == set()


def test_an_open_with_a_signature_that_may_not_list_tables_makes_each_missing_table_as_before(
    table_store_factory: TableStoreFactory,
) -> None:
    # An account signature for rows and tables, without list: Query Tables is refused (403), each create is not.
    table_store_factory().mark_store("store-a", at=T0)
    flows = table_names(table_store_factory.prefix)[2]
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as tables:
        tables.delete_table(flows)
        credential, endpoint = tables.credential, tables.url.rstrip("/")
    assert isinstance(credential, AzureNamedKeyCredential)
    signature = generate_account_sas(
        credential,
        resource_types=ResourceTypes(container=True, object=True),
        permission=AccountSasPermissions(read=True, write=True, delete=True, add=True, update=True, create=True),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )

    store = TableStore.from_connection_string(
        f"TableEndpoint={endpoint};SharedAccessSignature={signature}", prefix=table_store_factory.prefix
    )

    assert store.read_marks().store_id == "store-a"
    assert _listed(table_store_factory) == set(table_names(table_store_factory.prefix))
    store.close()


def _listed(factory: TableStoreFactory) -> set[str]:
    with TableServiceClient.from_connection_string(factory.connection_string) as tables:
        return {table.name for table in tables.list_tables() if table.name.startswith(factory.prefix)}


def test_a_duplicate_counted_while_the_purge_deletes_its_tombstone_leaves_no_line_behind(
    table_store_factory: TableStoreFactory, clock: FakeClock
) -> None:
    purging, replaying = table_store_factory(), table_store_factory()
    purger = Gate(purging, KeyHasher(KEY_SECRET), clock=clock)
    set_scope(purger, SCOPE, retention_days=1, horizon_days=2)
    made = claim(purger, run="run-1")
    record(purger, made, target_record_id="SO-1")
    clock.advance(2 * DAY)
    assert purger.retention.purge().deleted_total == 1
    clock.advance(3 * DAY)
    listing = purging._claims.query_entities
    replayed: list[ClaimResponse] = []

    # A run resubmitted at the horizon is answered duplicate from the tombstone, its line a series' first written
    # after the purge listed the tombstone's rows and before it deleted them: no transaction reads the claim, so
    # before the purge looked again the line stayed without its claim, and the key's claim made anew showed it.
    def listed_then_replayed(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("select") != ["RowKey"] or replayed:
            return listing(*args, **kwargs)
        rows = list(listing(*args, **kwargs))
        replayed.append(claim(Gate(replaying, KeyHasher(KEY_SECRET), clock=clock), run="run-2"))
        return rows

    purging._claims.query_entities = listed_then_replayed  # type: ignore[method-assign]
    assert sum(purger.retention.purge().tombstones_deleted.values()) == 1
    purging._claims.query_entities = listing  # type: ignore[method-assign]

    assert [answer.decision for answer in replayed] == [Decision.DUPLICATE]
    anew = claim(purger, run="run-3")
    assert (anew.decision, anew.claim_id, anew.attempt) == (Decision.PROCEED, made.claim_id, 1)
    assert history(purger, made.claim_id) == [(EventKind.CLAIM, "proceed")]
