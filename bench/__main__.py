"""``python -m bench`` (``make bench``): every figure of docs/performance.md, measured on this machine.

Storage round trips per action, claim latency next to the bare store operation (in process and
over HTTP, 1, 8 and 32 callers at once), today's "look up, then add a row" pattern against
OnceGate under the same duplicate triggers, the issue's load (64 clients x 500 keys x 4
triggers) with its audit, bulk calls against the single calls they replace, the cost of a claim
against its floor (issue 36: ``bench.costs``), Perform once against a bare POST to the same loopback
server (issue 34: ``bench.perform``), and the local server's handler threads against a
thread per connection, on SQLite and on Table Storage (Azurite) side by side. Writes the figures
into docs/performance.md and the plot docs/latency.png. ``--quick`` checks the benchmark itself
with small sizes and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from bench import bulk, client_cpu, costs, latency, load, makers, perform, report, roundtrips, targets, threads
from bench.rig import Rig
from tests.load.workload import Workload

DOCS = Path(__file__).resolve().parents[1] / "docs"
T = TypeVar("T")


@dataclass(frozen=True)
class Sizes:
    """How much each part measures."""

    latency_rounds: int
    latency_calls: int
    target_rounds: int
    tail_calls: int
    server_seconds: float
    pattern_rounds: int
    pattern_keys: int
    pattern_parallel: int
    load: Workload
    costs: costs.Sizes
    triggers_per_key: int = 4

    def described(self) -> dict[str, str]:
        load = self.load
        return {
            "latency": f"{self.latency_rounds} rounds x {self.latency_calls} calls per path and concurrency",
            "targets": f"{self.target_rounds} rounds: {self.tail_calls} claims from 64 callers per store, "
            f"{self.server_seconds:g} s of 8 callers over HTTP",
            "patterns": f"{self.pattern_rounds} rounds x {self.pattern_keys} keys x {self.triggers_per_key} "
            f"triggers, {self.pattern_parallel} keys at a time",
            "load": f"{load.clients} clients x {load.keys} keys x {load.duplicates} triggers, once",
            "costs": f"{self.costs.rounds} rounds x {self.costs.calls} claims, {self.costs.history:,} history rows, "
            f"{self.costs.polls} polls, {self.costs.starts} new processes",
        }


FULL = Sizes(5, 300, 5, 1280, 5.0, 5, 100, 8, Workload(clients=64, keys=500, duplicates=4), costs.FULL)
QUICK = Sizes(2, 40, 2, 128, 1.0, 2, 10, 4, Workload(clients=8, keys=20, duplicates=4), costs.QUICK)


def step(name: str, measure: Callable[[], T]) -> T:
    print(f"bench: {name}...", file=sys.stderr, flush=True)
    began = time.monotonic()
    value = measure()
    print(f"bench: {name} took {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    return value


def measure_targets(rig: Rig, sizes: Sizes, results: report.Results) -> list[targets.Target]:
    """The performance targets, judged on figures measured side by side in this run."""
    tail = targets.sqlite_tail(rig, rounds=sizes.target_rounds, calls=sizes.tail_calls)
    server = targets.server_rates(rig, rounds=sizes.target_rounds, seconds=sizes.server_seconds)
    cpu = client_cpu.measure(rig.azurite.connection_string, calls=sizes.latency_calls)
    recorded = results.round_trips.get("record result", {}).get("tables")
    return targets.judged(
        tail,
        server,
        record_result_trips=recorded.median if recorded else None,
        client_cpu=cpu,
        conflict_pages=targets.conflict_pages(rig),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the benchmark; writes nothing")
    quick = parser.parse_args().quick
    sizes = QUICK if quick else FULL
    results = report.Results(
        machine=report.Machine.now(), started=datetime.now(UTC), sizes=sizes.described(), load_workload=sizes.load
    )
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as workdir, Rig(Path(workdir)) as rig:
        results.round_trips = step("round trips", lambda: roundtrips.measure(rig))
        results.latency = step(
            "latency", lambda: latency.measure(rig, rounds=sizes.latency_rounds, calls=sizes.latency_calls)
        )
        results.makers = step(
            "today's pattern against OnceGate",
            lambda: makers.measure(
                rig,
                rounds=sizes.pattern_rounds,
                keys=sizes.pattern_keys,
                duplicates=sizes.triggers_per_key,
                parallel=sizes.pattern_parallel,
            ),
        )
        results.load = step("load", lambda: load.measure(rig, sizes.load))
        results.targets = step("targets", lambda: measure_targets(rig, sizes, results))
        results.bulk = step("bulk calls", lambda: bulk.measure(rig, rounds=sizes.target_rounds))
        results.targets += bulk.judged(results.bulk)
        figures = step("the cost of a claim", lambda: costs.measure(rig, sizes.costs))
        results.targets += costs.judged(
            figures, history=sizes.costs.history, over_http=results.bulk["sqlite"]["claim many / claims"]
        )
        overhead = step(
            "Perform once against a bare POST",
            lambda: perform.measure(rig, rounds=sizes.costs.rounds, calls=sizes.costs.calls // sizes.costs.rounds or 1),
        )
        results.targets.append(perform.judged(overhead))
        results.threads = step(
            "handler threads",
            lambda: threads.measure(rig, rounds=sizes.target_rounds, seconds=sizes.server_seconds),
        )
    results.seconds = time.monotonic() - began
    results.load_after = report.Machine.now().load_before
    print(report.markdown(results))
    if not quick:
        report.write_docs(results, DOCS / "performance.md")
        report.plot(results.latency, DOCS / "latency.png")
        print(f"bench: wrote {DOCS / 'performance.md'} and {DOCS / 'latency.png'}", file=sys.stderr)


if __name__ == "__main__":
    main()
