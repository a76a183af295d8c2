"""The issue's load figure over HTTP on each store: 64 clients, 500 keys, 4 triggers each, then the audit.

The same workload and audit as ``tests/load`` (which runs a smaller cut in ``make test``), here
against the local server in a process of its own.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from bench.latency import p99
from bench.rig import STORES, Rig
from tests.load.workload import LoadReport, Workload, audit, run

LOAD = Workload(clients=64, keys=500, duplicates=4)


@dataclass(frozen=True)
class LoadResult:
    """What the load did on one store and what its audit found."""

    report: LoadReport
    problems: list[str]

    @property
    def decisions(self) -> Counter[str]:
        return Counter(trigger.decision for trigger in self.report.triggers)

    @property
    def server_errors(self) -> int:
        return sum(count for status, count in self.report.statuses.items() if status >= 500)

    @property
    def claim_median(self) -> float:
        return statistics.median(trigger.seconds for trigger in self.report.triggers)

    @property
    def claim_p99(self) -> float:
        return p99([trigger.seconds for trigger in self.report.triggers])


def measure(rig: Rig, workload: Workload = LOAD) -> dict[str, LoadResult]:
    results = {}
    for kind in STORES:
        with rig.server(kind, "load") as address:
            report = run(address, workload)
            results[kind] = LoadResult(report, audit(address, report))
    return results
