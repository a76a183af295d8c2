"""The local server's handler threads (issue 27): a thread per connection (before) against the bounded pool (now).

``oncegate serve --workers 2`` on each store, started as a user starts it, once with ``--threads 0``
(every connection a thread of its own, as the server was) and once with the default, answers new
claims from 8 callers (``targets``' load generator: two client processes of four kept-alive
connections) in alternating rounds. Each gives claims per second and the server's CPU per claim
(its processes' user and system time, from /proc). ``python -m bench.threads`` runs this part
alone; ``--threads 1,2,4`` measures other pool sizes beside the default, as the default was chosen.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path

from bench.rig import STORES, Rig
from bench.targets import SERVER_CALLERS, answered_in, serving
from oncegate.entrypoints.handler_pool import DEFAULT_THREADS, PER_CONNECTION

WORKERS = 2
ROUNDS = 5
SECONDS = 5.0


def label(threads: int) -> str:
    return "a thread per connection (before)" if threads == PER_CONNECTION else f"{threads} thread{'s' * (threads > 1)}"


def measure(
    rig: Rig, *, rounds: int = ROUNDS, seconds: float = SECONDS, pools: tuple[int, ...] = (DEFAULT_THREADS,)
) -> dict[str, dict[int, tuple[float, float]]]:
    """Per store and per pool size (0: before), the median claims/s and server CPU seconds per claim."""
    figures: dict[str, dict[int, tuple[float, float]]] = {}
    for kind in STORES:
        choices = (PER_CONNECTION, *pools)
        rates: dict[int, list[float]] = {threads: [] for threads in choices}
        cpu: dict[int, list[float]] = {threads: [] for threads in choices}
        with ExitStack() as stack:
            servers = {
                threads: stack.enter_context(serving(rig, WORKERS, kind=kind, threads=threads)) for threads in choices
            }
            answered_in(servers[PER_CONNECTION].port, min(seconds, 1.0))  # warm up: the store's tables, connections
            for round_ in range(rounds):
                # Alternating order, so that neither always runs on a machine the other has just warmed.
                for threads in sorted(choices, reverse=round_ % 2 == 1):
                    before = servers[threads].cpu_seconds()
                    answered = answered_in(servers[threads].port, seconds)
                    rates[threads].append(answered / seconds)
                    cpu[threads].append((servers[threads].cpu_seconds() - before) / answered)
        figures[kind] = {
            threads: (statistics.median(rates[threads]), statistics.median(cpu[threads])) for threads in choices
        }
    return figures


def markdown(figures: dict[str, dict[int, tuple[float, float]]]) -> str:
    """One row per store and pool size: claims/s and CPU per claim, each against a thread per connection."""
    title = f"oncegate serve --workers {WORKERS}, {SERVER_CALLERS} callers"
    lines = [f"| {title} | handler threads | claims/s | x before | server CPU per claim | x before |"]
    lines.append("| --- | --- | --- | --- | --- | --- |")
    for kind, by_threads in figures.items():
        rate_before, cpu_before = by_threads[PER_CONNECTION]
        for threads, (rate, cpu) in by_threads.items():
            lines.append(
                f"| {kind} | {label(threads)} | {rate:,.0f} | {rate / rate_before:.2f} | {cpu * 1e6:,.0f} µs | "
                f"{cpu / cpu_before:.2f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.threads", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short round, to check this part")
    parser.add_argument("--threads", default=str(DEFAULT_THREADS), help="pool sizes, comma-separated")
    args = parser.parse_args()
    pools = tuple(int(number) for number in args.threads.split(","))
    rounds, seconds = (1, 1.0) if args.quick else (ROUNDS, SECONDS)
    with tempfile.TemporaryDirectory() as workdir, Rig(Path(workdir)) as rig:
        print(markdown(measure(rig, rounds=rounds, seconds=seconds, pools=pools)))


if __name__ == "__main__":
    main()
