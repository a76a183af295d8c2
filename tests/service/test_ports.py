"""No service is handed the whole store: each declares the groups of the port it uses (issue 23)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oncegate.stores import port

SERVICES = sorted((Path(__file__).resolve().parents[2] / "oncegate" / "service").glob("*.py"))


@pytest.mark.parametrize("path", SERVICES, ids=[path.name for path in SERVICES])
def test_a_service_never_names_the_whole_store(path: Path) -> None:
    assert not re.search(r"\bClaimStore\b", path.read_text(encoding="utf-8"))


def test_the_whole_store_is_the_groups_together_and_nothing_else() -> None:
    # An adapter implements ClaimStore: every method belongs to a group a service can be handed alone.
    groups = (
        port.ClaimReads,
        port.ClaimWrites,
        port.HistoryRecords,
        port.ClaimListing,
        port.ClaimIndex,
        port.WritesTogether,
        port.ConflictRecords,
        port.InventoryRecords,
        port.StoreMarkRecords,
        port.BackupRecords,
        port.RestoreReads,
        port.Reachable,
    )
    in_groups = {name for group in groups for name in vars(group) if not name.startswith("_")}
    whole = {name for name in dir(port.ClaimStore) if not name.startswith("_")}

    assert whole - {"close"} <= in_groups | {"kind"}
    assert len(SERVICES) > 5
