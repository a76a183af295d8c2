"""The benchmark's count of storage calls per item of a bulk call runs against the answers the app gives.

``make bench`` is not part of ``make test``; its bulk figure reads Check and claim many's entries as the entry
serves them (the members the wire shows, not a model), and broke unseen once they stopped being models. This
runs that measure on SQLite, as the bench does, so a change to the entries' form fails here first.
"""

from __future__ import annotations

from pathlib import Path

from bench import bulk
from bench.rig import Rig


def test_the_bulk_benchmark_records_a_result_for_each_claim_it_made(tmp_path: Path) -> None:
    per_item = bulk.requests_per_item(Rig(tmp_path), "sqlite")

    # Every new key of the call was claimed, and each claim's result recorded: both cost statements per item.
    assert per_item["new claim"] > 0
    assert per_item["result"] > 0
