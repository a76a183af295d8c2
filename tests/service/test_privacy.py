"""The business key and the payload are never stored in clear: only the claim id and the fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient

from oncegate.domain.statuses import Decision
from oncegate.models import LookupRequest
from oncegate.stores.tables.store import table_names
from tests.conftest import SQLITE_FILE, FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, record, report, resolve

RAW_KEY = "ORDER-RAWKEY-Zq7"
PAYLOAD_SECRET = "CUSTOMER-IBAN-Xv4Lp9"


def stored_text(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Everything the store holds, as text: the SQLite files' bytes, or every entity of the test's six tables."""
    if store_kind == "sqlite":
        files = sorted(tmp_path.glob(SQLITE_FILE + "*"))
        assert files, "the SQLite store wrote no file"
        return b"".join(path.read_bytes() for path in files).decode("utf-8", errors="replace")
    factory = request.getfixturevalue("table_store_factory")
    with TableServiceClient.from_connection_string(factory.connection_string) as tables:
        names = table_names(factory.prefix)
        entities = [dict(entity) for name in names for entity in tables.get_table_client(name).list_entities()]
    assert entities, "the tables hold nothing"
    return json.dumps(entities, default=str, ensure_ascii=False)


def test_no_trace_of_the_key_or_the_payload_is_stored(
    service: Gate, clock: FakeClock, store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    payload = {"iban": PAYLOAD_SECRET, "amount": 10}
    first = claim(service, key=f"  {RAW_KEY} ", payload=payload)
    claim(service, run="run-2", key=RAW_KEY, payload=payload)
    record(service, first, target_record_id="SO-1", data={"orderNumber": "SO-1"})
    changed = claim(service, run="run-3", key=RAW_KEY, payload={**payload, "amount": 11})
    resolve(service, changed.conflict_id, "dismiss")
    report(service, key=RAW_KEY, payload={"iban": PAYLOAD_SECRET, "amount": 12})
    clock.advance(1)
    assert claim(service, run="run-4", key=RAW_KEY, payload=payload).decision is Decision.DUPLICATE
    assert service.lookup(LookupRequest(scope=SCOPE, key=RAW_KEY)).claim_id == first.claim_id

    text = stored_text(store_kind, request, tmp_path)

    assert first.claim_id in text  # the dump really holds this claim
    assert "SO-1" in text
    assert RAW_KEY not in text
    assert RAW_KEY.lower() not in text.lower()
    assert PAYLOAD_SECRET not in text
