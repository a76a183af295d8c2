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
