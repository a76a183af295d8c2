"""Entity-group transactions as one hand-built request, sent through the table client's own pipeline.

``TableClient.submit_transaction`` spends most of a claim's client CPU packaging the request, not
talking to Table Storage: azure-core encodes the multipart body with the ``email`` package, runs a
small pipeline per operation, and starts a thread pool to build the parts and another to parse the
answer (issue 12). :func:`submit_transaction` writes the same body as text and reads the answer as
text; everything else stays the SDK's: the entity encoder (odata types), the client's pipeline
(its authentication, retry and logging policies) and its error decoding. The body, as the Table
service documents it ("Performing entity group transactions")::

    POST https://<account>.table.core.windows.net/$batch        signed by the pipeline, once
    --batch_<id>
    Content-Type: multipart/mixed; boundary=changeset_<id>

    --changeset_<id>
    Content-Type: application/http                              one part per operation, in order;
    Content-Transfer-Encoding: binary                           a part is a plain HTTP request with
                                                                no Authorization of its own
    POST https://<account>.table.core.windows.net/<table> HTTP/1.1
    ...headers, blank line, entity JSON
    --changeset_<id>--
    --batch_<id>--

The answer is ``202`` with the same nesting: one ``HTTP/1.1 <status>`` part per operation, or, when
the changeset fails, only the failed operation's part (its message starts ``<index>:``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NoReturn, cast
from urllib.parse import quote

import azure.data.tables._error as sdk_errors
import azure.data.tables._serialize as sdk_serialize
from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.core.rest import HttpRequest, HttpResponse
from azure.core.utils import CaseInsensitiveDict
from azure.data.tables import RequestTooLargeError, TableClient, TableTransactionError, TransactionOperation, UpdateMode

# The SDK's own helpers: untyped there, typed here once, as they behave.
_decode_error = cast(Callable[..., HttpResponseError], sdk_errors._decode_error)
_validate_table_name = cast(Callable[[HttpResponseError, str], None], sdk_errors._validate_tablename_error)
_match_condition = cast(Callable[..., MatchConditions], sdk_serialize._get_match_condition)

CRLF = "\r\n"
JSON_ACCEPT = "application/json;odata=minimalmetadata"
TOO_LARGE = 413
# The verb of an update or upsert, by mode.
WRITE_VERBS = {UpdateMode.REPLACE: "PUT", UpdateMode.MERGE: "MERGE"}


class PartResponse:
    """One operation's answer in the batch response: what the SDK's error decoding reads of an HTTP response."""

    def __init__(self, status_code: int, reason: str, headers: Mapping[str, str], content: str) -> None:
        self.status_code = status_code
        self.reason = reason
        self.headers = headers
        self._content = content

    @property
    def content_type(self) -> str | None:
        return self.headers.get("Content-Type")

    def text(self, encoding: str | None = None) -> str:
        return self._content

    def body(self) -> bytes:
        return self._content.encode()


def submit_transaction(table: TableClient, operations: Iterable[tuple[Any, ...]]) -> list[dict[str, str]]:
    """Commit ``operations`` as one transaction, as ``table.submit_transaction`` does, answering the same.

    ``operations`` are ``(TransactionOperation, entity)`` or ``(TransactionOperation, entity, options)``
    with options ``mode``, ``etag`` and ``match_condition``. Returns each operation's metadata (its
    ``etag``, deletes none). A failed operation raises ``TableTransactionError`` with its status
    (``RequestTooLargeError`` for 413), and nothing of the transaction is written.
    """
    table_url = f"{table.scheme}://{table._primary_hostname}/{quote(table.table_name, safe='')}"
    parts = [_part(table_url, index, *operation) for index, operation in enumerate(operations)]
    if not parts:
        return []
    boundary = uuid.uuid4()
    changeset = "".join(f"--changeset_{boundary}{CRLF}{part}" for part in parts)
    body = (
        f"--batch_{boundary}{CRLF}Content-Type: multipart/mixed; boundary=changeset_{boundary}{CRLF}{CRLF}"
        f"{changeset}--changeset_{boundary}--{CRLF}--batch_{boundary}--{CRLF}"
    )
    request = HttpRequest(
        "POST",
        f"{table.scheme}://{table._primary_hostname}/$batch",
        headers={
            "x-ms-version": table.api_version,
            "DataServiceVersion": "3.0",
            "MaxDataServiceVersion": "3.0;NetFx",
            "Content-Type": f"multipart/mixed; boundary=batch_{boundary}",
            "Accept": "application/json",
        },
        content=body.encode(),
    )
    # Streamed, as the SDK's own batch: the pipeline's content decoding refuses a multipart answer.
    # The generated client's send_request would deep-copy the request first; the pipeline client sends it as is.
    response = table._client._client.send_request(request, stream=True)
    return [_metadata(answer) for answer in _checked(response, table.table_name)]


def _part(
    table_url: str,
    index: int,
    kind: str,
    entity: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
) -> str:
    """One operation as a changeset part: the MIME headers, then the HTTP request it carries."""
    method, url, headers, content = _request(table_url, TransactionOperation(kind.lower()), entity, **(options or {}))
    if content:
        headers += f"Content-Type: application/json{CRLF}Content-Length: {len(content.encode())}{CRLF}"
    return (
        f"Content-Type: application/http{CRLF}Content-Transfer-Encoding: binary{CRLF}Content-ID: {index}{CRLF}{CRLF}"
        f"{method} {url} HTTP/1.1{CRLF}{headers}Accept: {JSON_ACCEPT}{CRLF}DataServiceVersion: 3.0{CRLF}{CRLF}"
        f"{content}{CRLF}"
    )


def _request(
    table_url: str,
    kind: TransactionOperation,
    entity: Mapping[str, Any],
    *,
    mode: UpdateMode | str = UpdateMode.MERGE,
    etag: str | None = None,
    match_condition: MatchConditions | None = None,
) -> tuple[str, str, str, str]:
    """The method, URL, conditional headers and JSON body of one operation, as the SDK's batch builds them."""
    if kind is TransactionOperation.CREATE:
        # The ETag comes back either way; the entity echoed back would only be read past.
        return "POST", table_url, f"Prefer: return-no-content{CRLF}", _json(entity)
    url = f"{table_url}(PartitionKey='{_key(entity['PartitionKey'])}',RowKey='{_key(entity['RowKey'])}')"
    if kind is TransactionOperation.UPSERT:
        return WRITE_VERBS[UpdateMode(mode)], url, "", _json(entity)
    condition = f"If-Match: {_if_match(etag, match_condition)}{CRLF}"
    if kind is TransactionOperation.DELETE:
        return "DELETE", url, condition, ""
    return WRITE_VERBS[UpdateMode(mode)], url, condition, _json(entity)


def _key(value: str) -> str:
    return quote(sdk_serialize._prepare_key(value), safe="")


def _json(entity: Mapping[str, Any]) -> str:
    # The SDK's encoder: odata types (Edm.DateTime, Edm.Int64, Edm.Binary...) exactly as its own calls send them.
    return json.dumps(sdk_serialize._add_entity_properties(entity))


def _if_match(etag: str | None, match_condition: MatchConditions | None) -> str:
    # The SDK's rule: an ETag only with IfNotModified; no condition means "the entity exists" (If-Match: *).
    condition = _match_condition(etag=etag, match_condition=match_condition or MatchConditions.Unconditionally)
    return str(etag) if condition == MatchConditions.IfNotModified else "*"


def _checked(response: HttpResponse, table_name: str) -> list[PartResponse]:
    """The operations' answers; raises the error the SDK raises when the batch or one of its operations failed."""
    if response.status_code == TOO_LARGE:
        raise _decode_error(response, "The transaction request was too large", RequestTooLargeError)
    if response.status_code != 202:
        _raise(_decode_error(response), table_name)
    text = response.read().decode().replace(CRLF, "\n")
    answers = list(_answers(text, _boundary(response.headers["Content-Type"])))
    failed = next((answer for answer in answers if not 200 <= answer.status_code < 300), None)
    if failed is not None:
        # The SDK decodes a 413 part from the batch's own 202 answer; the part's status is the one that failed.
        error_type = RequestTooLargeError if failed.status_code == TOO_LARGE else TableTransactionError
        _raise(_decode_error(failed, error_type=error_type), table_name)
    return answers


def _raise(error: HttpResponseError, table_name: str) -> NoReturn:
    # A malformed table name becomes the SDK's ValueError naming the rule, as after its own calls.
    _validate_table_name(error, table_name)
    raise error


def _answers(text: str, boundary: str) -> Iterator[PartResponse]:
    """The HTTP answers in a multipart body, a nested multipart (the changeset) read in place."""
    for part in _parts(text, boundary):
        head, _, content = part.partition("\n\n")
        content_type = _headers(head.split("\n")).get("Content-Type", "")
        if content_type.startswith("multipart/mixed"):
            yield from _answers(content, _boundary(content_type))
        else:
            yield _answer(content)


def _parts(text: str, boundary: str) -> list[str]:
    # RFC 2046: each part follows a line "--boundary", the last line is "--boundary--"; the text around is ignored.
    sections = ("\n" + text).split("\n--" + boundary)[1:]
    return [section.partition("\n")[2] for section in sections if not section.startswith("--")]


def _answer(message: str) -> PartResponse:
    head, _, content = message.partition("\n\n")
    status_line, *lines = head.split("\n")
    _, status, reason = [*status_line.split(" ", 2), ""][:3]
    return PartResponse(int(status), reason, _headers(lines), content)


def _headers(lines: Iterable[str]) -> Mapping[str, str]:
    fields = (line.partition(":") for line in lines if line)
    return CaseInsensitiveDict({name.strip(): value.strip() for name, _, value in fields})


def _boundary(content_type: str) -> str:
    return content_type.partition("boundary=")[2].partition(";")[0].strip().strip('"')


def _metadata(answer: PartResponse) -> dict[str, str]:
    etag = answer.headers.get("ETag")
    return {"etag": etag} if etag else {}
