"""Client CPU per Table Storage write: a bare ``create_entity`` next to a claim-shaped transaction.

A claim is one entity-group transaction of two inserts (the claim row and its first event), sent
either by the SDK's ``TableClient.submit_transaction`` or by OnceGate's own
:func:`oncegate.stores.tables.batch.submit_transaction`. The three run interleaved, call by call, on
one table client against the same emulator, so that the machine's load falls on all three alike;
``time.process_time`` counts every thread of this process (the SDK's batch starts thread pools)
and nothing of the emulator's. Target (issue 12): a claim at most 1.5 times a bare insert.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from azure.data.tables import TableClient, TableServiceClient, TransactionOperation

from oncegate.stores.tables import batch

CALLS = 300
WARM_UP = 20
# About the size of a claim row and of its first event, with the types a claim row holds.
CLAIM_BODY = "x" * 600
EVENT_BODY = "x" * 200


def measure(connection_string: str, *, calls: int = CALLS) -> dict[str, float]:
    """Seconds of client CPU, and of wall time (``wall_`` keys), per call of each way to write.

    ``create_entity``: one claim-sized row; ``submit_transaction``: a claim through the SDK's batch;
    ``claim``: the same claim through OnceGate's batch, as the store sends it.
    """
    service = TableServiceClient.from_connection_string(connection_string)
    name = "ClientCpu" + uuid.uuid4().hex[:10]
    table = service.create_table(name)
    try:
        writes = _writes(table)
        for _ in range(WARM_UP):
            for write in writes.values():
                write()
        cpu = dict.fromkeys(writes, 0.0)
        wall = dict.fromkeys(writes, 0.0)
        for _ in range(calls):
            for kind, write in writes.items():
                started_cpu, started = time.process_time(), time.perf_counter()
                write()
                cpu[kind] += time.process_time() - started_cpu
                wall[kind] += time.perf_counter() - started
    finally:
        service.delete_table(name)
        service.close()
    return {**{kind: spent / calls for kind, spent in cpu.items()}, **{f"wall_{k}": s / calls for k, s in wall.items()}}


def _writes(table: TableClient) -> dict[str, Callable[[], object]]:
    return {
        "create_entity": lambda: table.create_entity(_claim_row(uuid.uuid4().hex)),
        "submit_transaction": lambda: table.submit_transaction(_claim_operations(uuid.uuid4().hex)),
        "claim": lambda: batch.submit_transaction(table, _claim_operations(uuid.uuid4().hex)),
    }


def _claim_row(partition: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {"PartitionKey": partition, "RowKey": "claim", "Body": CLAIM_BODY, "UpdatedAt": now, "Attempt": 1}


def _claim_operations(partition: str) -> list[tuple[Any, ...]]:
    event = {"PartitionKey": partition, "RowKey": "history-1", "Body": EVENT_BODY, "At": datetime.now(UTC)}
    return [(TransactionOperation.CREATE, _claim_row(partition)), (TransactionOperation.CREATE, event)]
