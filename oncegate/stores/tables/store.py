"""The Azure store: claims and conflicts in Azure Table Storage, in seven tables.

``TableStore`` opens the tables and holds what an instance remembers; each port is a module of its own:
``claims`` (a partition per claim, and the timeline of its writes), ``index`` (the claim index),
``history``, ``conflicts`` (with the 0.1.0 upgrade), ``inventory``, ``keys`` (key secrets and the store's
id), ``backups`` and ``targets`` (the declared targets, in a seventh table), over ``entities`` (keys and rows),
``errors`` (the error translation) and ``batch`` (the entity-group transaction's wire format); ``transport`` reads
the proxy settings once, for its client.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from azure.core.credentials import TokenCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient

from oncegate import telemetry
from oncegate.bounded import Bounded
from oncegate.domain.records import HistoryEvent
from oncegate.stores.tables.backups import TableBackups
from oncegate.stores.tables.claims import TableClaims
from oncegate.stores.tables.conflicts import TableConflicts
from oncegate.stores.tables.entities import _translated
from oncegate.stores.tables.history import KEYED_BY_TIME, SERIES_REMEMBERED, TableHistory
from oncegate.stores.tables.index import TableClaimIndex
from oncegate.stores.tables.inventory import TableInventory
from oncegate.stores.tables.keys import TableKeys
from oncegate.stores.tables.new_claims import TableNewClaims
from oncegate.stores.tables.targets import TARGETS_SUFFIX, TableTargets
from oncegate.stores.tables.transport import client_options, endpoint_of

logger = logging.getLogger(__name__)

SUFFIXES = ("Claims", "Conflicts", "Flows", "Scopes", "Overlaps", "Keys", TARGETS_SUFFIX)


def table_names(prefix: str) -> tuple[str, ...]:
    """The seven tables for a prefix: claims, conflicts, flows, scopes, overlaps, keys (key secrets, store id) and
    targets (the declared targets of Perform once), as infra/main.bicep declares them."""
    return tuple(prefix + suffix for suffix in SUFFIXES)


def _named(names: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """A Query Tables filter for these tables by name, and its parameters."""
    parameters = {f"t{number}": name for number, name in enumerate(names)}
    return " or ".join(f"TableName eq @{parameter}" for parameter in parameters), parameters


class TableStore(
    TableClaims,
    TableNewClaims,
    TableClaimIndex,
    TableHistory,
    TableConflicts,
    TableInventory,
    TableKeys,
    TableBackups,
    TableTargets,
):
    """Claims, their history and conflicts, the flow inventory, the key secrets, the store id and the declared
    targets in seven Azure tables."""

    kind = "tables"
    # Each claim is a partition and each write a request of its own: a bulk call sends its items' writes at once.
    parallel_writes = True

    def __init__(self, service: TableServiceClient, *, prefix: str = "OnceGate", read_only: bool = False) -> None:
        self._service = service
        names = table_names(prefix)
        self._claims, self._conflicts, self._flows, self._scopes, self._overlaps, self._keys, self._targets = (
            service.get_table_client(name) for name in names
        )
        # Claims and keys tables are made only for a store with no id (issue 31); an export (read only) writes nothing.
        # The upgrades' marker rows, read at once: a new store's conflicts table, not there yet, holds none.
        markers = self._upgrade_markers() if read_only or self._make_missing_tables(names) else {}
        if not read_only:
            self._add_missing_listing_rows(markers)
        # Which claims' histories may hold rows of an earlier release (issue 36): the first open marks it.
        self._read_history_marker(markers.get(KEYED_BY_TIME), write=not read_only)
        # Index rows of the claims this instance made, written off the claim path by flush_index (issue 16).
        self._unindexed: dict[tuple[str, str], dict[str, Any]] = {}
        self._index_lock = threading.Lock()
        # The series lines this instance wrote last, at their ETags: the next count merges without a read.
        self._series: Bounded[tuple[str, str], tuple[str, HistoryEvent]] = Bounded(SERIES_REMEMBERED)
        logger.info("Table Storage store ready: %s", ", ".join(names))

    def _make_missing_tables(self, names: tuple[str, ...]) -> bool:
        """Make the tables that are not there: one listing of the store's tables, then a create for each one missing;
        whether the conflicts table may have been there already.

        A store on existing tables costs one request here, not a create per table answered "exists". The claims and
        keys tables are made only while the store has no id, as its id read says (a keys table not listed is not
        taken for none: Table Storage's names are case-insensitive, the listing's filter is not, and a prefix set in
        another case lists nothing): a claims table lost behind an intact id is refused (the store checks), never
        made again empty. A table deleted moments ago is not listed, and its create is refused with
        TableBeingDeleted, translated as every create's. A credential that may not list tables (a shared access
        signature without list) makes each table as before: a create answered "exists" is no error."""
        with _translated():
            listed = self._tables_there(names)
            guarded = (self._claims, self._keys) if self._identity() is None else ()
            for table in (*guarded, self._conflicts, self._flows, self._scopes, self._overlaps, self._targets):
                if listed is None or table.table_name.lower() not in listed:
                    self._service.create_table_if_not_exists(table.table_name)
        return listed is None or self._conflicts.table_name.lower() in listed

    def _tables_there(self, names: tuple[str, ...]) -> set[str] | None:
        """Which of ``names`` are tables (lower-cased, as Table Storage compares them), in one Query Tables request;
        None if this credential may not list them."""
        query, parameters = _named(names)
        try:
            return {table.name.lower() for table in self._service.query_tables(query, parameters=parameters)}
        except HttpResponseError as exc:
            if exc.status_code != 403:
                raise
            logger.info(
                "Table Storage refused listing the tables (%s): each is made if missing",
                getattr(exc, "error_code", None),
            )
            return None

    @classmethod
    def from_connection_string(cls, conn_str: str, **options: Any) -> TableStore:
        """A store on a storage account's connection string (Azurite in development); ``prefix``, ``read_only``."""
        settings = client_options(endpoint_of(conn_str))
        service = TableServiceClient.from_connection_string(conn_str, raw_request_hook=telemetry.round_trip, **settings)
        return cls(service, **options)

    @classmethod
    def from_endpoint(cls, endpoint: str, credential: TokenCredential, **options: Any) -> TableStore:
        """A store on an account endpoint with an Entra ID credential (a managed identity in Azure)."""
        # Each request the SDK sends, retries included, counts for the answer's telemetry.
        settings = client_options(endpoint)
        service = TableServiceClient(
            endpoint=endpoint, credential=credential, raw_request_hook=telemetry.round_trip, **settings
        )
        return cls(service, **options)

    def ping(self) -> None:
        """One small query on the claims table; raises ``StoreUnavailable`` if it cannot be reached."""
        with _translated():
            next(self._claims.list_entities(results_per_page=1, select="PartitionKey").by_page())

    def close(self) -> None:
        """Close the HTTP connections."""
        self._service.close()
