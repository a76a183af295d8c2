"""The Table Storage store against Azurite: the contract, the stored shape, and outages."""

from __future__ import annotations

import pytest
from azure.data.tables import TableClient

from oncegate.errors import StoreUnavailable
from oncegate.stores.tables import table_names
from tests.stores.contract import StoreContract
from tests.support import records
from tests.support.azurite import Azurite, ExternalTables, TableStoreFactory

pytestmark = pytest.mark.azurite


class TestTableStore(StoreContract):
    @pytest.fixture
    def make_store(self, table_store_factory: TableStoreFactory) -> TableStoreFactory:
        return table_store_factory


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
    _, _, flows_table, scopes_table, _ = table_names(table_store_factory.prefix)

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
