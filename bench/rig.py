"""What every benchmark runs on: Azurite, the two stores, the bare operation under each, and the local server.

The bare operation is what the store itself costs, without OnceGate: one ``create_entity`` on a
table in the same Azurite account, one autocommitted ``INSERT`` into a table of the same SQLite
file (with the store's own pragmas). Measured in the same run, side by side, the ratio of a
claim to it says what OnceGate adds, whatever the machine.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from azure.data.tables import TableClient, TableServiceClient

from oncegate.domain.keys import KeyHasher
from oncegate.models import ClaimRequest, ClaimResponse, RecordResultRequest
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import BUSY_TIMEOUT_MS, WAL_AUTOCHECKPOINT_PAGES, SqliteStore
from oncegate.stores.tables.store import TableStore
from oncegate.stores.tables.transport import client_options, endpoint_of
from tests.gate import Gate
from tests.load.served import served
from tests.support.azurite import Azurite

SECRET = "bench-secret-" + "x" * 32
STORES = ("sqlite", "tables")
STORE_NAMES = {"sqlite": "SQLite", "tables": "Table Storage (Azurite)"}
SCOPE = "bench.create-order"
FLOW = {"name": "Create ERP order", "environment": "Default-contoso"}
# Longer than any pause between the benchmark's phases; Azure keeps idle connections for minutes too.
KEEP_ALIVE_SECONDS = 600
# About the size of a claim row: what the bare insert writes instead.
ROW_BODY = "x" * 600


def claim_request(key: str, run: str, *, amount: float = 10.0) -> dict[str, Any]:
    """The Check and claim body every benchmark sends: a payload, a run id and the calling flow."""
    return {"scope": SCOPE, "key": key, "payload": {"order": key, "amount": amount}, "runId": run, "flow": FLOW}


def claim(service: Gate, key: str, run: str, *, amount: float = 10.0) -> ClaimResponse:
    """Check and claim through the service."""
    return service.check_and_claim(ClaimRequest.model_validate(claim_request(key, run, amount=amount)))


def record_succeeded(service: Gate, answer: ClaimResponse) -> None:
    """Record result ``succeeded`` for the attempt ``answer`` granted."""
    request = {"claimToken": answer.claim_token, "outcome": "succeeded", "targetRecordId": f"ERP-{answer.claim_id[:8]}"}
    service.record_result(answer.claim_id, RecordResultRequest.model_validate(request))


# Letters only: a long run of random digits can look like a card number, which the service refuses as a key.
_DIGITS_TO_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def new_key() -> str:
    return f"SO-{uuid.uuid4().hex.translate(_DIGITS_TO_LETTERS)}"


class Calls:
    """A thread-safe count of storage round trips: a ``raw_request_hook`` and a SQLite trace callback alike."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, *_: Any) -> None:
        with self._lock:
            self.count += 1


class CountedSqliteStore(SqliteStore):
    """The SQLite store with every statement its connections run reported to ``calls``."""

    def __init__(self, path: Path, calls: Calls) -> None:
        self._calls = calls
        super().__init__(path)

    def _connection(self) -> sqlite3.Connection:
        connection = super()._connection()
        connection.set_trace_callback(self._calls)
        return connection


class Rig:
    """One Azurite (in memory) and one directory for SQLite files, for the whole benchmark run."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.azurite = Azurite(workdir, keep_alive_seconds=KEEP_ALIVE_SECONDS)
        self._closers: list[Callable[[], None]] = []

    def __enter__(self) -> Rig:
        self.azurite.start()
        return self

    def __exit__(self, *_: object) -> None:
        for close in reversed(self._closers):
            close()
        self.azurite.stop()

    def location(self, kind: str, name: str) -> str:
        """Where a store named ``name`` keeps its data: a SQLite file, or a table prefix in Azurite."""
        return str(self.workdir / f"{name}.db") if kind == "sqlite" else "B" + name.replace("-", "")

    def store(self, kind: str, name: str, *, calls: Calls | None = None) -> ClaimStore:
        """A store on the data named ``name``; with ``calls``, counting its round trips."""
        store: ClaimStore
        if kind == "sqlite":
            path = Path(self.location(kind, name))
            store = CountedSqliteStore(path, calls) if calls else SqliteStore(path)
        else:
            # The product's transport options (the environment's proxy read once, issue 36), as its store opens them.
            options = client_options(endpoint_of(self.azurite.connection_string))
            options |= {"raw_request_hook": calls} if calls else {}
            client = TableServiceClient.from_connection_string(self.azurite.connection_string, **options)
            store = TableStore(client, prefix=self.location(kind, name))
        self._closers.append(store.close)
        return store

    def service(self, kind: str, name: str, **options: Any) -> Gate:
        return Gate(self.store(kind, name), KeyHasher(SECRET), **options)

    def bare_insert(self, kind: str, name: str) -> Callable[[str], object]:
        """The operation a claim stands on, without OnceGate: insert one row of claim size under ``key``."""
        if kind == "tables":
            table = self.table_client(name)
            return lambda key: table.create_entity({"PartitionKey": key, "RowKey": "claim", "Body": ROW_BODY})
        connect = self.sqlite_connections(name)
        connect().execute("CREATE TABLE IF NOT EXISTS raw (Id TEXT PRIMARY KEY, Body TEXT NOT NULL)")
        return lambda key: connect().execute("INSERT INTO raw (Id, Body) VALUES (?, ?)", (key, ROW_BODY))

    def bare_transaction(self, kind: str, name: str) -> Callable[[str], object]:
        """Two rows under ``key`` written in one transaction, as a claim and its first history row are."""
        claim_row, event_row = {"RowKey": "claim", "Body": ROW_BODY}, {"RowKey": "history-1", "Body": ROW_BODY[:200]}
        if kind == "tables":
            table = self.table_client(name)
            return lambda key: table.submit_transaction(
                [("create", {"PartitionKey": key, **claim_row}), ("create", {"PartitionKey": key, **event_row})]
            )
        connect = self.sqlite_connections(name)
        connect().execute("CREATE TABLE IF NOT EXISTS txn (Id TEXT, Row TEXT, Body TEXT, PRIMARY KEY (Id, Row))")

        def write(key: str) -> None:
            connection = connect()
            connection.execute("BEGIN IMMEDIATE")
            for row in (claim_row, event_row):
                connection.execute(
                    "INSERT INTO txn (Id, Row, Body) VALUES (?, ?, ?)", (key, row["RowKey"], row["Body"])
                )
            connection.execute("COMMIT")

        return write

    def sqlite_connections(self, name: str) -> Callable[[], sqlite3.Connection]:
        """A connection per thread on the file of ``name``, set up as the store sets up its own."""
        local = threading.local()
        opened: list[sqlite3.Connection] = []
        lock = threading.Lock()

        def connection() -> sqlite3.Connection:
            if not hasattr(local, "connection"):
                opening = sqlite3.connect(self.location("sqlite", name), isolation_level=None, check_same_thread=False)
                pragmas = (
                    f"busy_timeout = {BUSY_TIMEOUT_MS}",
                    "journal_mode = WAL",
                    "synchronous = NORMAL",
                    f"wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}",
                )
                for pragma in pragmas:
                    opening.execute(f"PRAGMA {pragma}")
                local.connection = opening
                with lock:
                    opened.append(opening)
            connection: sqlite3.Connection = local.connection
            return connection

        def close() -> None:
            for each in opened:
                each.close()

        self._closers.append(close)
        return connection

    def table_client(self, name: str) -> TableClient:
        """A client on a table of its own in the Azurite account, created if missing."""
        service = TableServiceClient.from_connection_string(self.azurite.connection_string)
        self._closers.append(service.close)
        return service.create_table_if_not_exists(self.location("tables", name))

    @contextmanager
    def server(self, kind: str, name: str) -> Iterator[tuple[str, int]]:
        """The local server in a process of its own (as a flow never shares one with it), over ``name``'s data."""
        context = multiprocessing.get_context("spawn")
        ports = context.Queue()
        stop = context.Event()
        target = self.location(kind, name) if kind == "sqlite" else self.azurite.connection_string
        process = context.Process(target=_serve, args=(kind, target, self.location(kind, name), ports, stop))
        process.start()
        try:
            yield "127.0.0.1", int(ports.get(timeout=60))
        finally:
            stop.set()
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join()


def _serve(kind: str, target: str, prefix: str, ports: Any, stop: Event) -> None:
    store: ClaimStore
    store = SqliteStore(target) if kind == "sqlite" else TableStore.from_connection_string(target, prefix=prefix)
    with served(Gate(store, KeyHasher(SECRET))) as (_, port):
        ports.put(port)
        stop.wait()
    store.close()
