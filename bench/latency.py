"""Claim latency next to the bare operation underneath, single-threaded and with 8 and 32 callers at once.

Four paths on each store, measured in the same round one after the other (their order turns
from round to round): the bare insert; a bare transaction of two rows (what a claim writes: the
claim and its first history row); a new claim through the service in this process; and a new
claim over HTTP through the local server in a process of its own. Each round gives a
median and a p99 per path; the ratios claim/bare are taken round by round, then their median
over the rounds is reported, so a slow round slows both sides of its own ratio.
"""

from __future__ import annotations

import http.client
import itertools
import json
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field

from bench.rig import STORES, Rig, claim, claim_request, new_key
from tests.gate import Gate

CONCURRENCY = (1, 8, 32)
PATHS = ("bare", "bare-txn", "service", "http")
Call = Callable[[str], object]
# Each caller thread opens what it calls through (an HTTP connection of its own) and closes it after.
Session = Callable[[], AbstractContextManager[Call]]


def p99(samples: list[float]) -> float:
    """The nearest-rank 99th percentile."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def timed(session: Session, calls: int, concurrency: int) -> list[float]:
    """Seconds of each of ``calls`` calls, made by ``concurrency`` threads released together."""
    start = threading.Barrier(concurrency)
    numbers = itertools.count()
    lock = threading.Lock()

    def caller() -> list[float]:
        seconds: list[float] = []
        with session() as call:
            start.wait(timeout=60)
            while True:
                with lock:
                    number = next(numbers)
                if number >= calls:
                    return seconds
                key = new_key()
                began = time.perf_counter()
                call(key)
                seconds.append(time.perf_counter() - began)

    with ThreadPoolExecutor(concurrency) as pool:
        futures = [pool.submit(caller) for _ in range(concurrency)]
        return [second for future in futures for second in future.result()]


@contextmanager
def http_session(address: tuple[str, int]) -> Iterator[Call]:
    """One keep-alive connection to the local server; each call is a new claim that must get proceed."""
    connection = http.client.HTTPConnection(*address, timeout=60)

    def call(key: str) -> None:
        body = json.dumps(claim_request(key, "run-1"))
        connection.request("POST", "/api/claims", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200 or answer["decision"] != "proceed":
            raise AssertionError(f"a new claim over HTTP answered {response.status}: {answer}")

    try:
        yield call
    finally:
        connection.close()


def service_call(service: Gate) -> Call:
    def call(key: str) -> None:
        decision = claim(service, key, "run-1").decision.value
        if decision != "proceed":
            raise AssertionError(f"a new claim answered {decision}")

    return call


@dataclass
class Measured:
    """Per store, path and concurrency: each round's median and p99, in seconds."""

    medians: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)
    p99s: dict[tuple[str, str, int], list[float]] = field(default_factory=dict)

    def add(self, where: tuple[str, str, int], samples: list[float]) -> None:
        self.medians.setdefault(where, []).append(statistics.median(samples))
        self.p99s.setdefault(where, []).append(p99(samples))

    def median(self, where: tuple[str, str, int], *, tail: bool = False) -> float:
        """The median over rounds of the round's median (or p99)."""
        return statistics.median((self.p99s if tail else self.medians)[where])

    def ratio(self, kind: str, path: str, concurrency: int, *, tail: bool = False, under: str = "bare") -> float:
        """The median over rounds of ``path`` / ``under``, each round's ratio taken within that round."""
        rounds = self.p99s if tail else self.medians
        pairs = zip(rounds[(kind, path, concurrency)], rounds[(kind, under, concurrency)], strict=True)
        return statistics.median(claimed / bare for claimed, bare in pairs)


def measure(rig: Rig, *, rounds: int, calls: int) -> Measured:
    measured = Measured()
    for kind in STORES:
        _measure_store(rig, kind, measured, rounds=rounds, calls=calls)
    return measured


def _measure_store(rig: Rig, kind: str, measured: Measured, *, rounds: int, calls: int) -> None:
    bare, transaction = rig.bare_insert(kind, "latencyraw"), rig.bare_transaction(kind, "latencytxn")
    service = rig.service(kind, "latency")
    with rig.server(kind, "latency") as address:
        sessions: dict[str, Session] = {
            "bare": lambda: nullcontext(bare),
            "bare-txn": lambda: nullcontext(transaction),
            "service": lambda: nullcontext(service_call(service)),
            "http": lambda: http_session(address),
        }
        for round_ in range(rounds):
            order = PATHS[round_ % len(PATHS) :] + PATHS[: round_ % len(PATHS)]
            for concurrency in CONCURRENCY:
                for path in order:
                    measured.add((kind, path, concurrency), timed(sessions[path], calls, concurrency))
