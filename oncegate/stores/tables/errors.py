"""The Azure store's error translation: what Table Storage answers, as the store's port names it.

Outages, throttling and a refused identity become ``StoreUnavailable``, a missing table ``NotConfigured``
(``_translated``); a status the caller expects becomes the error it names (``_on_status``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

from oncegate.domain.store_id import STORE_ID, TABLE_BEING_DELETED, missing_table
from oncegate.errors import NotConfigured, StoreUnavailable

logger = logging.getLogger(__name__)

BAD_REQUEST = (400,)
EXISTS = (409,)
MISSING = (404,)
# 404: the row the caller read is gone, which for a conditional update is the same lost race.
STALE = (404, 412)


def _unavailable(exc: Exception) -> StoreUnavailable:
    logger.warning("Table Storage unavailable: %s", exc)
    return StoreUnavailable(f"Table Storage is unavailable: {type(exc).__name__}")


@contextmanager
def _translated() -> Iterator[None]:
    """Outages and throttling become ``StoreUnavailable``; every other error passes through."""
    try:
        yield
    except (ServiceRequestError, ServiceResponseError) as exc:
        raise _unavailable(exc) from exc
    except HttpResponseError as exc:
        if exc.status_code is not None and (exc.status_code >= 500 or exc.status_code == 429):
            raise _unavailable(exc) from exc
        if exc.status_code == 403:
            # The identity has no data role on the tables, or was just given one: a role takes minutes to apply.
            logger.error("Table Storage refused access: %s", exc)
            raise StoreUnavailable(
                f"Table Storage refused access ({getattr(exc, 'error_code', None) or 403}): this identity has no data "
                "role on the tables yet (a role assignment takes a few minutes to apply)."
            ) from exc
        if exc.status_code == 409 and getattr(exc, "error_code", None) == "TableBeingDeleted":
            raise StoreUnavailable(TABLE_BEING_DELETED) from exc
        if exc.status_code == 404 and _table_missing(exc):
            # Never read as "no such claim": that would be answered proceed for every key (issue 22). Not an
            # outage either: no retry brings it back (issue 31).
            logger.error("A OnceGate table is missing: %s", exc)
            raise NotConfigured(missing_table(_table_of(exc)), target=STORE_ID) from exc
        raise


def _table_of(exc: HttpResponseError) -> str:
    """The table a failed request addressed, read from its URL (``…/OnceGateClaims(PartitionKey=…)``)."""
    request = getattr(exc.response, "request", None)
    path = urlsplit(str(getattr(request, "url", ""))).path
    name = path.rstrip("/").rsplit("/", 1)[-1].split("(", 1)[0]
    return name or "(unknown)"


def _table_missing(exc: HttpResponseError) -> bool:
    code = getattr(exc, "error_code", None) or ""
    return code == "TableNotFound" or "TableNotFound" in str(exc)


@contextmanager
def _on_status(statuses: tuple[int, ...], error: Callable[[], Exception]) -> Iterator[None]:
    """Like ``_translated``, and a response with one of ``statuses`` raises ``error()``.

    A failed transaction is a ``TableTransactionError`` carrying the failed operation's status;
    a failed single call is ``ResourceExistsError`` (409), ``ResourceModifiedError`` (412) or
    ``ResourceNotFoundError`` (404). The status code reads the same in both.
    """
    try:
        with _translated():
            yield
    except HttpResponseError as exc:
        if exc.status_code in statuses:
            raise error() from exc
        raise
