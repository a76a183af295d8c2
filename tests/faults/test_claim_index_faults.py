"""The claim index's flush under faults, on Table Storage: a failure at any request loses no index row and
repeats none (issue 16). The rows wait in memory for the next flush; a row written twice is the same row.
"""

from __future__ import annotations

import contextlib

import pytest

from oncegate.errors import StoreUnavailable
from oncegate.stores.tables import batch
from tests.faults.lossy_proxy import LossyProxy
from tests.stores.test_claim_index import found, made
from tests.support.azurite import Azurite, ExternalTables, TableStoreFactory

pytestmark = pytest.mark.azurite


@pytest.mark.parametrize("at", range(1, 4))  # three partitions: a transaction each
def test_a_flush_failing_at_any_request_loses_no_row_and_repeats_none(
    table_store_factory: TableStoreFactory, monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    # The transaction never reaches the store (a refused connection): its rows wait for the next flush.
    store = table_store_factory()
    claims = [*made(store, 3, source="shop-eu"), *made(store, 2, source="shop-us", reference="R-1")]
    submit, calls = batch.submit_transaction, []

    def failing(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == at:
            raise StoreUnavailable("injected: the transaction never left")
        return submit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(batch, "submit_transaction", failing)
    with pytest.raises(StoreUnavailable):
        store.flush_index()
    monkeypatch.setattr(batch, "submit_transaction", submit)

    assert sorted(found(store, source="shop-eu") + found(store, source="shop-us")) == sorted(
        claim.claim_id for claim in claims
    )
    assert found(store, reference="R-1") == [claim.claim_id for claim in claims[3:]]


@pytest.mark.parametrize("at", range(1, 4))
def test_a_flush_whose_answer_is_lost_at_any_request_loses_no_row_and_repeats_none(
    azurite: Azurite | ExternalTables, test_tables: list[str], at: int
) -> None:
    # The transaction landed and its answer was lost (500 OperationTimedOut): the SDK's retry, an upsert, is the same.
    if isinstance(azurite, ExternalTables):
        pytest.skip("the lossy proxy speaks plain HTTP to the emulator this suite starts")
    proxy = LossyProxy(azurite.connection_string)
    factory = TableStoreFactory(proxy.connection_string, test_tables)
    try:
        store = factory()
        claims = [*made(store, 2, source="shop-eu"), *made(store, 2, source="shop-us", reference="R-2")]
        proxy.arm(at)
        with contextlib.suppress(StoreUnavailable):
            store.flush_index()
        assert proxy.fired is not None
        proxy.disarm()

        eu, us, by_reference = (
            found(store, source="shop-eu"),
            found(store, source="shop-us"),
            found(store, reference="R-2"),
        )
    finally:
        factory.close()
        proxy.close()

    assert eu == [claim.claim_id for claim in claims[:2]]
    assert us == by_reference == [claim.claim_id for claim in claims[2:]]
