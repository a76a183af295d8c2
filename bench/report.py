"""The benchmark's figures as Markdown for docs/performance.md, and the latency plot.

Only the part of docs/performance.md between the two markers is written here; the prose
around it is the document's own.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sqlite3
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench import bulk, makers, threads
from bench.latency import CONCURRENCY, Measured
from bench.load import LoadResult
from bench.rig import STORE_NAMES
from bench.roundtrips import RoundTrips
from bench.targets import Target
from tests.load.workload import Workload

BEGIN = "<!-- bench:begin (written by `make bench`; edit the prose outside these markers) -->"
END = "<!-- bench:end -->"
ROOT = Path(__file__).resolve().parents[1]
# Azure Table Storage's published scalability targets (learn.microsoft.com, "Scalability and
# performance targets for Table storage"), for 1 KiB entities.
ACCOUNT_REQUESTS_PER_SECOND = 20_000
PARTITION_ENTITIES_PER_SECOND = 2_000
# The targets the issue set, in Table Storage requests.
TARGETS = {"new claim (proceed)": 1, "record result": 1, "duplicate of a finished claim": 3}


@dataclass(frozen=True)
class Machine:
    """Where and when the figures were taken."""

    cpus: int
    cpu_model: str
    python: str
    system: str
    sqlite: str
    tables_sdk: str
    azurite: str
    node: str
    load_before: tuple[float, float, float]

    @classmethod
    def now(cls) -> Machine:
        return cls(
            cpus=len(os.sched_getaffinity(0)),
            cpu_model=_cpu_model(),
            python=f"{platform.python_implementation()} {platform.python_version()}",
            system=platform.platform(),
            sqlite=sqlite3.sqlite_version,
            tables_sdk=importlib.metadata.version("azure-data-tables"),
            azurite=json.loads((ROOT / "node_modules" / "azurite" / "package.json").read_text())["version"],
            node=subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip(),
            load_before=os.getloadavg(),
        )


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


@dataclass
class Results:
    """Everything one benchmark run measured, and with what sizes."""

    machine: Machine
    started: datetime
    sizes: dict[str, str]
    round_trips: dict[str, dict[str, RoundTrips]] = field(default_factory=dict)
    latency: Measured | None = None
    makers: makers.Results = field(default_factory=dict)
    load: dict[str, LoadResult] = field(default_factory=dict)
    load_workload: Workload | None = None
    seconds: float = 0.0
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    targets: list[Target] = field(default_factory=list)
    bulk: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per store and handler threads (0: a thread per connection), claims/s and server CPU seconds a claim.
    threads: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _ms(seconds: float) -> str:
    milliseconds = seconds * 1000
    return (
        f"{milliseconds:.2f}"
        if milliseconds < 10
        else f"{milliseconds:.1f}"
        if milliseconds < 100
        else f"{milliseconds:.0f}"
    )


def _count(trips: RoundTrips) -> str:
    return f"{trips.median:g}" if trips.steady else f"{trips.median:g} (varied)"


def markdown(results: Results) -> str:
    """The generated section of docs/performance.md."""
    parts = [_machine(results)]
    if results.targets:
        parts.append(_targets(results.targets))
    parts.append(_round_trips(results))
    if results.latency:
        parts += [_latency(results.latency), _over_http(results.latency)]
    if results.makers:
        parts.append(_makers(results))
    if results.load:
        parts.append(_load(results))
    if results.bulk:
        parts.append(bulk.section(results.bulk))
    if results.threads:
        parts.append(
            "### 7. The local server's handler threads, before and now\n\n" + threads.markdown(results.threads)
        )
    if results.round_trips:
        parts.append(_scale(results))
    return "\n\n".join(parts)


def _targets(targets: list[Target]) -> str:
    rows = [(target.name, target.figure, target.target, target.verdict) for target in targets]
    return "### Targets\n\n" + _table(("what", "measured in this run", "target", ""), rows)


def _machine(results: Results) -> str:
    machine = results.machine
    rows = [
        ("date (UTC)", results.started.strftime("%Y-%m-%d %H:%M")),
        ("CPUs (nproc)", machine.cpus),
        ("CPU model", machine.cpu_model),
        ("Python", machine.python),
        ("system", machine.system),
        ("SQLite", machine.sqlite),
        ("azure-data-tables", machine.tables_sdk),
        ("Azurite (Table Storage emulator, in memory)", f"{machine.azurite} on Node.js {machine.node}"),
        (
            "load average before / after (1, 5, 15 min)",
            f"{_load_text(machine.load_before)} / {_load_text(results.load_after)}",
        ),
        ("benchmark wall time", f"{results.seconds / 60:.1f} min"),
        ("sizes", "; ".join(f"{name}: {size}" for name, size in results.sizes.items())),
    ]
    return "### The run\n\n" + _table(("", ""), rows)


def _load_text(load: tuple[float, float, float]) -> str:
    return ", ".join(f"{value:.2f}" for value in load)


def _round_trips(results: Results) -> str:
    rows = []
    for action, by_store in results.round_trips.items():
        target = TARGETS.get(action)
        verdict = (
            "" if target is None else f"<= {target}: " + ("met" if by_store["tables"].median <= target else "missed")
        )
        rows.append((action, _count(by_store["tables"]), _count(by_store["sqlite"]), verdict))
    return (
        "### 1. Storage round trips per action\n\n"
        "Counted at the store boundary: HTTP requests to Table Storage (an entity-group transaction is one "
        "request), statements run by SQLite (`BEGIN` and `COMMIT` included; in-process, not network). "
        "The last row is paid once per interval per service instance, not per claim.\n\n"
        + _table(("action", "Table Storage requests", "SQLite statements", "target (requests)"), rows)
    )


def _pair(first: float, second: float, *, ratio: bool = False) -> str:
    return f"{first:.1f} / {second:.1f}" if ratio else f"{_ms(first)} / {_ms(second)}"


def _spread(latency: Measured, kind: str, path: str, concurrency: int) -> str:
    where = (kind, path, concurrency)
    return _pair(latency.median(where), latency.median(where, tail=True))


def _ratios(latency: Measured, kind: str, path: str, concurrency: int, under: str = "bare") -> str:
    return _pair(
        latency.ratio(kind, path, concurrency, under=under),
        latency.ratio(kind, path, concurrency, under=under, tail=True),
        ratio=True,
    )


def _latency(latency: Measured) -> str:
    sections = ["### 2. Claim latency next to the bare operation (in process, milliseconds)"]
    headers = (
        "callers at once",
        "bare insert median / p99",
        "bare 2-row transaction median / p99",
        "claim median / p99",
        "claim / bare insert, median / p99",
        "claim / bare transaction, median / p99",
    )
    for kind, name in STORE_NAMES.items():
        rows = [
            (
                concurrency,
                _spread(latency, kind, "bare", concurrency),
                _spread(latency, kind, "bare-txn", concurrency),
                _spread(latency, kind, "service", concurrency),
                _ratios(latency, kind, "service", concurrency),
                _ratios(latency, kind, "service", concurrency, under="bare-txn"),
            )
            for concurrency in CONCURRENCY
        ]
        sections.append(f"**{name}**\n\n" + _table(headers, rows))
    return "\n\n".join(sections)


def _over_http(latency: Measured) -> str:
    rows = [
        (
            name,
            concurrency,
            _spread(latency, kind, "http", concurrency),
            _ratios(latency, kind, "http", concurrency),
            _ratios(latency, kind, "http", concurrency, under="service"),
        )
        for kind, name in STORE_NAMES.items()
        for concurrency in CONCURRENCY
    ]
    headers = (
        "store",
        "callers at once",
        "claim over HTTP median / p99",
        "/ bare insert, median / p99",
        "/ claim in process, median / p99",
    )
    return "### 3. The same claim over HTTP, through the local server (milliseconds)\n\n" + _table(headers, rows)


def _makers(results: Results) -> str:
    rows = []
    for (kind, label), outcomes in results.makers.items():
        duplicates = sorted(outcome.duplicates for outcome in outcomes)
        keys = outcomes[0].keys
        triggers = len(outcomes[0].decision_seconds)
        rows.append(
            (
                STORE_NAMES[kind],
                label,
                f"{keys} keys x {triggers // keys}",
                f"{duplicates[len(duplicates) // 2]} ({duplicates[0]}-{duplicates[-1]})",
                _ms(makers.median_seconds(outcomes)),
                f"{sorted(outcome.wall_seconds for outcome in outcomes)[len(outcomes) // 2]:.2f} s",
            )
        )
    return (
        "### 4. Today's pattern against OnceGate, the same duplicate triggers on the same store\n\n"
        "Duplicate side effects: side effects done beyond the first per key (median over rounds, min-max). "
        "Time per trigger: the storage work of one trigger (lookup and add; or claim, plus Record result for "
        "the one that proceeds), median over rounds of each round's median, in milliseconds; the modelled pause "
        "is left out.\n\n"
        + _table(("store", "pattern", "triggers", "duplicate side effects", "time per trigger", "wall time"), rows)
    )


def _load(results: Results) -> str:
    workload = results.load_workload
    assert workload is not None
    rows = []
    for kind, result in results.load.items():
        report = result.report
        rows.append(
            (
                STORE_NAMES[kind],
                len(report.triggers),
                f"{report.seconds:.1f} s",
                f"{len(report.triggers) / report.seconds:.0f}",
                f"{_ms(result.claim_median)} / {_ms(result.claim_p99)}",
                ", ".join(f"{decision} {count}" for decision, count in sorted(result.decisions.items())),
                result.server_errors,
                len(result.problems),
            )
        )
    problems = [
        f"- {STORE_NAMES[kind]}: {problem}" for kind, result in results.load.items() for problem in result.problems[:5]
    ]
    return (
        f"### 5. Load: {workload.clients} clients x {workload.keys} keys x {workload.duplicates} triggers over HTTP\n\n"
        f"Every {workload.changed_every}th key has one trigger with a changed payload; the trigger told `proceed` "
        "records `succeeded`. The audit reads every claim back and checks its history against the clients' log "
        "(one success per key with the winner's record id, one claim event per call with the same decisions, "
        "every conflict answer open in the conflict list).\n\n"
        + _table(
            (
                "store",
                "Check and claim calls",
                "wall time",
                "calls/s",
                "claim median / p99 (ms)",
                "decisions",
                "5xx",
                "audit problems",
            ),
            rows,
        )
        + ("\n\n" + "\n".join(problems) if problems else "")
    )


def _scale(results: Results) -> str:
    trips = {action: by_store["tables"].median for action, by_store in results.round_trips.items()}
    new, result, duplicate = (
        trips["new claim (proceed)"],
        trips["record result"],
        trips["duplicate of a finished claim"],
    )
    cases = [
        ("claimed once, its result recorded", new + result, 1.0),
        ("the same, then triggered 3 more times (duplicates)", new + result + 3 * duplicate, 4.0),
    ]
    if "tables" in results.load:
        # Each call at the cost of its decision; conflicts at the cost of the first one.
        cost = {
            "proceed": new + result,
            "duplicate": duplicate,
            "in_progress": trips["in-progress answer"],
            "conflict": trips["conflict (opens it)"],
            "reconcile": trips["reconcile (lease ran out)"],
        }
        load = results.load["tables"]
        keys = load.report.workload.keys
        requests = sum(cost[decision] * count for decision, count in load.decisions.items()) / keys
        cases.append(("the load of table 5, as measured (per key)", requests, load.report.workload.duplicates))
    rows = [
        (
            case,
            f"{round(requests, 1):g}",
            f"{ACCOUNT_REQUESTS_PER_SECOND / requests:,.0f}",
            f"{calls * ACCOUNT_REQUESTS_PER_SECOND / requests:,.0f}",
        )
        for case, requests, calls in cases
    ]
    return (
        "### Scale on paper, from the round trips above\n\n"
        f"One storage account's published target is {ACCOUNT_REQUESTS_PER_SECOND:,} requests/s "
        f"({PARTITION_ENTITIES_PER_SECOND:,} entities/s per partition). Per business key:\n\n"
        + _table(("business key", "requests", "keys/s per account", "Check and claim calls/s per account"), rows)
    )


def write_docs(results: Results, document: Path) -> None:
    """Put the generated section between the markers of ``document`` (created with just the markers if missing)."""
    text = document.read_text() if document.exists() else f"# Performance\n\n{BEGIN}\n{END}\n"
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    document.write_text(f"{before}{BEGIN}\n\n{markdown(results)}\n\n{END}{after}")


def plot(latency: Measured, path: Path) -> None:
    """Median (solid) and p99 (dashed) latency against callers at once, one panel per store."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    labels = {
        "bare": "bare insert",
        "bare-txn": "bare 2-row transaction",
        "service": "claim (service)",
        "http": "claim over HTTP",
    }
    for axis, (kind, name) in zip(axes, STORE_NAMES.items(), strict=True):
        for path_name, label in labels.items():
            medians = [latency.median((kind, path_name, c)) * 1000 for c in CONCURRENCY]
            tails = [latency.median((kind, path_name, c), tail=True) * 1000 for c in CONCURRENCY]
            (line,) = axis.plot(CONCURRENCY, medians, marker="o", label=f"{label} (median)")
            axis.plot(CONCURRENCY, tails, linestyle="--", color=line.get_color(), alpha=0.6)
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(CONCURRENCY, [str(c) for c in CONCURRENCY])
        axis.set_title(name)
        axis.set_xlabel("callers at once")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("latency (ms); dashed: p99")
    axes[1].legend(fontsize="small", loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
