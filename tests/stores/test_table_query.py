"""OnceGate's range read of a table against Azurite, next to the SDK's ``query_entities``.

The history reads its pages through ``query.pages`` (issue 36); what it answers must be what the SDK answers,
value for value, but for a time, which stays the text Table Storage sent and reads as the SDK's ``datetime``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.data.tables import EdmType, EntityProperty, TableClient, TableServiceClient

from oncegate.stores import row_reading
from oncegate.stores.tables import query
from tests.support.azurite import Azurite, ExternalTables

pytestmark = pytest.mark.azurite

# A quote (doubled in the filter), a space and a non-ASCII letter.
PARTITION = "claim 'é' "
RANGE = "PartitionKey eq @pk and RowKey gt @after and RowKey lt @end"
EVERY_ROW = {"pk": PARTITION, "after": "", "end": "~"}


@pytest.fixture
def table(azurite: Azurite | ExternalTables) -> Iterator[TableClient]:
    name = "Query" + uuid.uuid4().hex[:10]
    with TableServiceClient.from_connection_string(azurite.connection_string) as service:
        yield service.create_table(name)
        service.delete_table(name)


def sdk_rows(table: TableClient, parameters: Mapping[str, str], **options: Any) -> list[dict[str, Any]]:
    return [dict(entity) for entity in table.query_entities(RANGE, parameters=dict(parameters), **options)]


def our_rows(table: TableClient, parameters: Mapping[str, str], *, top: int | None = None) -> list[dict[str, Any]]:
    return [row for rows, _ in query.pages(table, RANGE, parameters, top=top) for row in rows]


def times_read(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` as the stored columns read it: a time, text or ``datetime``, as the instant it names."""
    return {name: row_reading._when(value) if name.endswith("At") else value for name, value in row.items()}


def test_a_row_of_every_type_reads_as_the_sdk_reads_it(table: TableClient) -> None:
    written = {
        "PartitionKey": PARTITION,
        "RowKey": "history-20261102T090000123456Z-1f2e3d4c",
        "Kind": "claim",
        "Attempt": 3,
        "Count": 2,
        "Ratio": 0.25,
        "Open": True,
        "Blob": b"\x00\xffpieces",
        "Id": uuid.UUID("1f2e3d4c-0000-4000-8000-000000000001"),
        "Wide": EntityProperty(7, EdmType.INT64),
        "At": datetime(2026, 11, 2, 9, 0, 0, 123456, tzinfo=UTC),
        "LastAt": datetime(2026, 11, 2, 9, 5, tzinfo=UTC),
        "Details": "é" * 1_000,
    }
    table.create_entity(written)

    (ours,) = our_rows(table, EVERY_ROW)
    (theirs,) = sdk_rows(table, EVERY_ROW)

    assert isinstance(ours["At"], str)
    assert times_read(ours) == times_read(theirs)
    assert times_read(ours)["At"] == written["At"]


def test_pages_follow_the_continuation_in_key_order(table: TableClient) -> None:
    keys = [f"history-{n:05d}" for n in range(1_203)]
    for start in range(0, len(keys), 100):
        table.submit_transaction(
            [("create", {"PartitionKey": PARTITION, "RowKey": key, "N": n}) for n, key in enumerate(keys)][
                start : start + 100
            ]
        )
    middle = {**EVERY_ROW, "after": keys[600]}

    answers = list(query.pages(table, RANGE, middle, top=250))

    assert [len(rows) for rows, _ in answers] == [250, 250, 102]
    assert [more for _, more in answers] == [True, True, False]
    assert [row["RowKey"] for rows, _ in answers for row in rows] == keys[601:]
    assert our_rows(table, EVERY_ROW) == sdk_rows(table, EVERY_ROW)  # Table Storage's 1,000 an answer, then the rest
    assert our_rows(table, {**EVERY_ROW, "end": keys[3]}, top=2) == sdk_rows(table, {**EVERY_ROW, "end": keys[3]})


def test_a_first_answer_holding_every_row_says_none_follows(table: TableClient) -> None:
    table.create_entity({"PartitionKey": PARTITION, "RowKey": "history-1"})

    assert [(len(rows), more) for rows, more in query.pages(table, RANGE, EVERY_ROW, top=51)] == [(1, False)]
    assert [(rows, more) for rows, more in query.pages(table, RANGE, {**EVERY_ROW, "pk": "other"}, top=51)] == [
        ([], False)
    ]


def test_a_failed_read_raises_what_the_sdk_raises(azurite: Azurite | ExternalTables) -> None:
    with TableServiceClient.from_connection_string(azurite.connection_string) as service:
        missing = service.get_table_client("Missing" + uuid.uuid4().hex[:10])
        with pytest.raises(ResourceNotFoundError) as sdk:
            sdk_rows(missing, EVERY_ROW)
        with pytest.raises(ResourceNotFoundError) as ours:
            our_rows(missing, EVERY_ROW)
        assert ours.value.status_code == sdk.value.status_code == 404
        assert getattr(ours.value, "error_code", None) == getattr(sdk.value, "error_code", None)


def test_a_refused_filter_raises_what_the_sdk_raises(table: TableClient) -> None:
    with pytest.raises(HttpResponseError) as sdk:
        list(table.query_entities("PartitionKey eq"))
    with pytest.raises(HttpResponseError) as ours:
        list(query.pages(table, "PartitionKey eq", {}, top=1))
    assert (type(ours.value), ours.value.status_code) == (type(sdk.value), sdk.value.status_code)
