"""OnceGate's entity-group transaction against Azurite, next to the SDK's ``submit_transaction``.

Most tests run twice, once through each (``submit``): whatever Table Storage answers, both must
return and raise the same, so that the store's translation of errors cannot tell them apart.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import pytest
import requests
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ServiceResponseError
from azure.core.pipeline.transport import HttpTransport, RequestsTransport
from azure.core.rest import HttpRequest, HttpResponse
from azure.core.rest._requests_basic import RestRequestsTransportResponse
from azure.data.tables import (
    EdmType,
    EntityProperty,
    RequestTooLargeError,
    TableClient,
    TableServiceClient,
    TableTransactionError,
    UpdateMode,
)
from azure.data.tables import TransactionOperation as Op

from oncegate.stores import row_reading, row_writing
from oncegate.stores.tables import batch
from tests.faults.lossy_proxy import TIMED_OUT
from tests.support.azurite import Azurite, ExternalTables

pytestmark = pytest.mark.azurite

Submit = Callable[[TableClient, list[tuple[Any, ...]]], Sequence[Mapping[str, Any]]]
# A quote (doubled in a key's URL), a space and a non-ASCII letter: keys the URLs of updates and deletes must carry.
PARTITION = "claim 'é' "


class Colour(StrEnum):
    RED = "red"


@pytest.fixture(params=["sdk", "oncegate"])
def submit(request: pytest.FixtureRequest) -> Submit:
    if request.param == "sdk":
        return lambda table, operations: table.submit_transaction(operations)
    return batch.submit_transaction


@pytest.fixture
def table(azurite: Azurite | ExternalTables) -> Iterator[TableClient]:
    name = "Batch" + uuid.uuid4().hex[:10]
    with TableServiceClient.from_connection_string(azurite.connection_string) as service:
        yield service.create_table(name)
        service.delete_table(name)


def row(row_key: str, **values: Any) -> dict[str, Any]:
    return {"PartitionKey": PARTITION, "RowKey": row_key, **values}


def stored(table: TableClient) -> dict[str, dict[str, Any]]:
    return {entity["RowKey"]: dict(entity) for entity in table.list_entities()}


def if_unchanged(etag: str, mode: UpdateMode = UpdateMode.REPLACE) -> dict[str, Any]:
    return {"mode": mode, "etag": etag, "match_condition": MatchConditions.IfNotModified}


def test_a_transaction_writes_every_operation_and_answers_etags_the_next_if_match_accepts(
    table: TableClient, submit: Submit
) -> None:
    created = submit(table, [(Op.CREATE, row("claim", Attempt=1)), (Op.CREATE, row("history-1"))])
    claim, event = table.get_entity(PARTITION, "claim"), table.get_entity(PARTITION, "history-1")
    assert [answer["etag"] for answer in created] == [claim.metadata["etag"], event.metadata["etag"]]

    changed = submit(
        table,
        [
            (Op.UPDATE, row("claim", Attempt=2), if_unchanged(created[0]["etag"])),
            (Op.UPDATE, row("history-1", Kind="released"), if_unchanged(created[1]["etag"], UpdateMode.MERGE)),
            (Op.CREATE, row("history-2")),
        ],
    )
    assert changed[0]["etag"] == table.get_entity(PARTITION, "claim").metadata["etag"]
    submit(
        table,
        [(Op.DELETE, row("history-2"), {"etag": changed[2]["etag"], "match_condition": MatchConditions.IfNotModified})],
    )

    rows = stored(table)
    assert set(rows) == {"claim", "history-1"}
    assert (rows["claim"]["Attempt"], rows["history-1"]["Kind"]) == (2, "released")


def test_an_insert_of_an_existing_row_fails_with_409_and_writes_nothing(table: TableClient, submit: Submit) -> None:
    table.create_entity(row("claim", Attempt=1))

    with pytest.raises(TableTransactionError) as failed:
        submit(table, [(Op.CREATE, row("history-1")), (Op.CREATE, row("claim", Attempt=2))])

    assert (failed.value.status_code, failed.value.error_code, failed.value.index) == (409, "EntityAlreadyExists", 1)
    assert list(stored(table)) == ["claim"]
    assert stored(table)["claim"]["Attempt"] == 1


def test_a_stale_etag_fails_with_412_and_writes_nothing(table: TableClient, submit: Submit) -> None:
    read = table.create_entity(row("claim", Attempt=1))
    table.update_entity(row("claim", Attempt=2), mode=UpdateMode.REPLACE)

    with pytest.raises(TableTransactionError) as failed:
        submit(table, [(Op.UPDATE, row("claim", Attempt=3), if_unchanged(read["etag"])), (Op.CREATE, row("history-1"))])

    assert (failed.value.status_code, failed.value.error_code) == (412, "UpdateConditionNotSatisfied")
    assert stored(table) == {"claim": row("claim", Attempt=2)}


def test_when_a_later_operation_fails_the_earlier_ones_are_not_applied(table: TableClient, submit: Submit) -> None:
    read = table.create_entity(row("claim", Attempt=1))

    with pytest.raises(TableTransactionError) as failed:
        submit(
            table,
            [(Op.UPDATE, row("claim", Attempt=2), if_unchanged(read["etag"])), (Op.DELETE, row("history-gone"))],
        )

    assert (failed.value.status_code, failed.value.index) == (404, 1)
    assert table.get_entity(PARTITION, "claim").metadata["etag"] == read["etag"]
    assert stored(table) == {"claim": row("claim", Attempt=1)}


def test_a_malformed_transaction_fails_with_400_and_writes_nothing(table: TableClient, submit: Submit) -> None:
    with pytest.raises(TableTransactionError) as failed:
        submit(table, [(Op.CREATE, row("claim")), (Op.CREATE, row("claim"))])

    assert (failed.value.status_code, failed.value.error_code) == (400, "InvalidDuplicateRow")
    assert stored(table) == {}


def test_a_transaction_over_4_mib_is_refused_as_too_large(table: TableClient, submit: Submit) -> None:
    operations = [(Op.CREATE, row(f"history-{n}", A="x" * 30_000, B="y" * 30_000)) for n in range(80)]

    with pytest.raises(RequestTooLargeError) as failed:
        submit(table, operations)

    assert failed.value.status_code == 413
    assert stored(table) == {}


def test_a_wrong_account_key_is_refused_for_the_whole_transaction(
    table: TableClient, submit: Submit, azurite: Azurite | ExternalTables
) -> None:
    # Only the batch request is signed (its parts carry no Authorization): the service checks that signature.
    wrong_key = azurite.connection_string.replace("AccountKey=", "AccountKey=A", 1)
    with (
        TableClient.from_connection_string(wrong_key, table.table_name) as intruder,
        pytest.raises(HttpResponseError) as failed,
    ):
        submit(intruder, [(Op.CREATE, row("claim"))])

    assert failed.value.status_code == 403
    assert stored(table) == {}


def test_every_type_reads_back_as_the_sdk_writes_it(table: TableClient) -> None:
    values = {
        "Text": "quote ' double \" slash / \\ emoji \U0001f600 control \u0001 é",
        # JSON keeps a line break inside its string: no line of the body can pass for a boundary.
        "BoundaryLookalike": "\r\n--changeset_x\r\n--batch_x--\r\n",
        "Small": 7,
        "Negative": -(2**31),
        "Large": EntityProperty(2**53 + 1, EdmType.INT64),
        "Flag": False,
        "Ratio": 0.1,
        "Infinite": float("inf"),
        "At": datetime(2024, 5, 1, 8, 30, 15, 123456, tzinfo=UTC),
        "Bytes": b"\x00\xff\r\n",
        "Id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "Colour": Colour.RED,
        "Missing": None,
    }
    table.create_entity(row("sdk", **values))
    batch.submit_transaction(table, [(Op.CREATE, row("oncegate", **values))])

    sdk, ours = table.get_entity(PARTITION, "sdk"), table.get_entity(PARTITION, "oncegate")
    assert {**ours, "RowKey": "sdk"} == dict(sdk)
    assert {name: type(value) for name, value in ours.items()} == {name: type(value) for name, value in sdk.items()}


def test_long_values_spread_over_pieces_are_written_and_replaced_whole(table: TableClient) -> None:
    first = row("history-1", Details="x" * 70_000, Note="\U0001f600" * 20_000)
    written = batch.submit_transaction(table, [(Op.CREATE, row_writing.spread(first))])
    entity = table.get_entity(PARTITION, "history-1")
    assert {"Details__2", "Details__3", "Note__2"} <= set(entity)
    assert row_reading.gather(entity) == first

    second = row("history-1", Details="y" * 40_000)
    batch.submit_transaction(table, [(Op.UPDATE, row_writing.spread(second), if_unchanged(written[0]["etag"]))])
    assert row_reading.gather(table.get_entity(PARTITION, "history-1")) == second


class TimesOutOnce(HttpTransport[HttpRequest, HttpResponse]):
    """Answers the first transaction with Table Storage's ``500 OperationTimedOut``, sent on or not.

    Table Storage gives that answer when it could not finish in time, whether or not the write
    landed. ``lost`` is an outage instead: the connection drops without an answer.
    """

    def __init__(self, *, sent: bool = False, lost: bool = False) -> None:
        self.batches = 0
        self._sent, self._lost = sent, lost
        self._inner = RequestsTransport()

    def send(self, request: HttpRequest, **kwargs: Any) -> HttpResponse:
        if not request.url.endswith("/$batch"):
            return self._inner.send(request, **kwargs)
        self.batches += 1
        if self.batches > 1:
            return self._inner.send(request, **kwargs)
        if self._sent:
            self._inner.send(request, **kwargs).read()
        if self._lost:
            raise ServiceResponseError("connection reset")
        return _timed_out(request)

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def __exit__(self, *args: object) -> None:
        self._inner.__exit__(*args)


def _timed_out(request: HttpRequest) -> HttpResponse:
    answer = requests.Response()
    answer.status_code, answer.reason, answer.url = 500, "Operation timed out", request.url
    answer.headers.update({"Content-Type": "application/json;odata=minimalmetadata"})
    answer.raw = io.BytesIO(TIMED_OUT)
    response = RestRequestsTransportResponse(request=request, internal_response=answer)
    response.read()
    return response


@pytest.fixture
def flaky(table: TableClient, azurite: Azurite | ExternalTables) -> Callable[..., tuple[TableClient, TimesOutOnce]]:
    def make(**fault: bool) -> tuple[TableClient, TimesOutOnce]:
        transport = TimesOutOnce(**fault)
        # No backoff: the retry policy's sleep would only make the test slower.
        client = TableClient.from_connection_string(
            azurite.connection_string, table.table_name, transport=transport, retry_backoff_factor=0
        )
        return client, transport

    return make


def test_a_timeout_before_the_write_is_retried_by_the_pipeline_and_succeeds(
    table: TableClient, submit: Submit, flaky: Callable[..., tuple[TableClient, TimesOutOnce]]
) -> None:
    client, transport = flaky()

    with client:
        answers = submit(client, [(Op.CREATE, row("claim")), (Op.CREATE, row("history-1"))])

    assert transport.batches == 2
    assert answers[0]["etag"] == table.get_entity(PARTITION, "claim").metadata["etag"]
    assert set(stored(table)) == {"claim", "history-1"}


def test_a_timeout_after_the_write_is_retried_and_meets_the_write_it_made(
    table: TableClient, submit: Submit, flaky: Callable[..., tuple[TableClient, TimesOutOnce]]
) -> None:
    # The store reads the claim after a 409 and finds its own: the service sorts that out, not the batch.
    client, transport = flaky(sent=True)

    with client, pytest.raises(TableTransactionError) as failed:
        submit(client, [(Op.CREATE, row("claim")), (Op.CREATE, row("history-1"))])

    assert (transport.batches, failed.value.status_code) == (2, 409)
    assert set(stored(table)) == {"claim", "history-1"}


def test_a_connection_lost_during_a_transaction_is_not_retried(
    table: TableClient, submit: Submit, flaky: Callable[..., tuple[TableClient, TimesOutOnce]]
) -> None:
    # azure-core resends a POST only on a 500, 503 or 504 answer: without one, it cannot know what happened.
    client, transport = flaky(sent=True, lost=True)

    with client, pytest.raises(ServiceResponseError):
        submit(client, [(Op.CREATE, row("claim"))])

    assert transport.batches == 1
    assert set(stored(table)) == {"claim"}
