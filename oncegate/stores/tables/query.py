"""A query of a table read page by page through the table client's own pipeline, its rows decoded from their JSON.

``TableClient.query_entities`` spends most of a history page's client CPU decoding, not asking: its generated
client walks every value of the answer's JSON through a generic model deserializer, then ``_convert_to_entity``
parses each row's times with ``strptime``, ``Timestamp`` included, which no reader here uses (issue 36: a page of
50 lines cost about 3 ms more than a page of one, most of it there). :func:`pages` sends the request the SDK's
own builder makes (``build_table_query_entities_request``: ``$filter``, ``$top``, the continuation keys, its
headers) through the client's pipeline (its authentication, retries and logging), reads the answer with
``json.loads``, and converts a value as the SDK does by its odata type, but for a time (``Edm.DateTime``),
which stays the ISO 8601 text Table Storage sent: the stored columns read a time from that text as from a
``datetime`` (``row_reading._when``), to the microsecond as the SDK truncates it. A failed request raises the error
the SDK raises. An answer ends a page; its continuation keys, when given, ask for the next::

    GET https://<account>.table.core.windows.net/<table>()?$format=…&$top=51&$filter=…
    200 {"value": [{"PartitionKey": …, "RowKey": …, "At@odata.type": "Edm.DateTime", "At": "…Z", …}, …]}
        x-ms-continuation-NextPartitionKey / x-ms-continuation-NextRowKey    when more rows may follow
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import azure.data.tables._deserialize as sdk_deserialize
from azure.data.tables import EdmType, TableClient
from azure.data.tables._generated.operations._operations import build_table_query_entities_request
from azure.data.tables._serialize import _parameter_filter_substitution

from oncegate.stores.tables.batch import JSON_ACCEPT, _decode_error, _raise

# The SDK's conversions by odata type (Edm.Int64 to an EntityProperty, Edm.Binary to bytes, Edm.Guid to a UUID,
# Edm.Double to a float), but for a time, left as its text. A value of another type, or of none, is kept as JSON
# has it, as the SDK keeps it.
_CONVERSIONS = cast(
    Mapping[str, Callable[[Any], Any]],
    {
        edm.value: convert
        for edm, convert in sdk_deserialize._ENTITY_TO_PYTHON_CONVERSIONS.items()
        if edm not in (EdmType.DATETIME, EdmType.STRING, EdmType.INT32)
    },
)
ODATA_TYPE = "odata.type"
NEXT_KEYS = ("x-ms-continuation-NextPartitionKey", "x-ms-continuation-NextRowKey")


def pages(
    table: TableClient, query_filter: str, parameters: Mapping[str, str], *, top: int | None
) -> Iterator[tuple[list[dict[str, Any]], bool]]:
    """The rows matching ``query_filter`` (with ``parameters`` substituted as the SDK does), each answer's rows
    with whether another answer follows; at most ``top`` rows an answer (Table Storage's 1,000 when None)."""
    query = _parameter_filter_substitution(dict(parameters), query_filter)
    next_keys: tuple[str | None, str | None] = (None, None)
    while True:
        rows, next_keys = _page(table, query, top, next_keys)
        more = next_keys[0] is not None or next_keys[1] is not None
        yield rows, more
        if not more:
            return


def _page(
    table: TableClient, query: str, top: int | None, next_keys: tuple[str | None, str | None]
) -> tuple[list[dict[str, Any]], tuple[str | None, str | None]]:
    client = table._client
    request = build_table_query_entities_request(
        table=table.table_name,
        format=JSON_ACCEPT,
        top=top,
        filter=query,
        next_partition_key=next_keys[0],
        next_row_key=next_keys[1],
        version=client._config.version,
    )
    request.url = client._client.format_url(request.url, url=client._config.url)
    response = client._client._pipeline.run(request).http_response
    if response.status_code != 200:
        _raise(_decode_error(response), table.table_name)
    rows = [_row(entity) for entity in json.loads(response.body())["value"]]
    return rows, (response.headers.get(NEXT_KEYS[0]), response.headers.get(NEXT_KEYS[1]))


def _row(entity: Mapping[str, Any]) -> dict[str, Any]:
    """An entity's properties, converted by their odata types; the odata annotations and ``Timestamp`` left out."""
    row = dict(entity)
    row.pop("Timestamp", None)
    # A property's name is an identifier: only the answer's annotations (odata.etag, At@odata.type) hold a dot.
    for name in [name for name in row if "." in name]:
        annotation = row.pop(name)
        column, _, kind = name.partition("@")
        convert = _CONVERSIONS.get(annotation) if kind == ODATA_TYPE else None
        if convert is not None and column in row:
            row[column] = convert(row[column])
    return row
