"""The pattern makers use today against OnceGate's claim, driven by the same duplicate triggers on the same store.

Today's pattern in a flow is "look up the row, and create it if absent": List rows, a Condition,
Add a row — a read, then an unconditional insert (Table Storage: query, then insert-or-replace;
SQLite: SELECT, then INSERT OR REPLACE). Every trigger that found no row goes on to the side
effect. OnceGate's flow asks Check and claim instead and does the side effect on ``proceed`` only.

Each key is triggered ``duplicates`` times at once (a barrier releases them together), as a
webhook redelivery or a copied flow does; keys run ``parallel`` at a time. The pattern is also
run with a pause between its read and its write, as the Condition action between the two takes
in a real flow (the pause only widens the window; the back-to-back run is the pattern's best case).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from azure.data.tables import UpdateMode

from bench.rig import STORES, Rig, claim, new_key, record_succeeded

CONDITION_STEP_SECONDS = 0.05
# (pattern, pause between read and write): what a trigger runs.
PATTERNS = (("look up, then add a row", 0.0), ("look up, then add a row", CONDITION_STEP_SECONDS), ("OnceGate", 0.0))


@dataclass(frozen=True)
class Outcome:
    """What one pattern let through on one store in one round."""

    side_effects: int
    keys: int
    decision_seconds: list[float]
    wall_seconds: float

    @property
    def duplicates(self) -> int:
        return self.side_effects - self.keys


def run_triggers(
    trigger: Callable[[str, int], bool], *, keys: int, duplicates: int, parallel: int, pause: float = 0.0
) -> Outcome:
    """``trigger(key, index)`` says whether that trigger went on to the side effect; count them all.

    A trigger's time is its storage work: the modelled ``pause`` inside it is left out.
    """
    lock = threading.Lock()
    acted = 0
    seconds: list[float] = []

    def key_group(_: int) -> None:
        nonlocal acted
        key = new_key()
        start = threading.Barrier(duplicates)

        def one(index: int) -> None:
            nonlocal acted
            start.wait(timeout=60)
            began = time.perf_counter()
            went_on = trigger(key, index)
            with lock:
                seconds.append(time.perf_counter() - began - pause)
                acted += went_on

        with ThreadPoolExecutor(duplicates) as triggers:
            list(triggers.map(one, range(duplicates)))

    began = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(key_group, range(keys)))
    return Outcome(acted, keys, seconds, time.perf_counter() - began)


def lookup_then_add(rig: Rig, kind: str, pause: float) -> Callable[[str, int], bool]:
    """Today's pattern on ``kind``: True when the row was absent, so the flow does the side effect."""
    if kind == "tables":
        table = rig.table_client("makers")

        def tables_trigger(key: str, index: int) -> bool:
            found = list(table.query_entities("PartitionKey eq @pk", parameters={"pk": key}))
            time.sleep(pause)
            if found:
                return False
            table.upsert_entity(
                {"PartitionKey": key, "RowKey": "row", "RunId": f"run-{index}"}, mode=UpdateMode.REPLACE
            )
            return True

        return tables_trigger
    connect = rig.sqlite_connections("makers")
    connect().execute("CREATE TABLE IF NOT EXISTS rows (Id TEXT PRIMARY KEY, RunId TEXT NOT NULL)")

    def sqlite_trigger(key: str, index: int) -> bool:
        found = connect().execute("SELECT RunId FROM rows WHERE Id = ?", (key,)).fetchone()
        time.sleep(pause)
        if found:
            return False
        connect().execute("INSERT OR REPLACE INTO rows (Id, RunId) VALUES (?, ?)", (key, f"run-{index}"))
        return True

    return sqlite_trigger


def oncegate(rig: Rig, kind: str) -> Callable[[str, int], bool]:
    """OnceGate's flow on ``kind``: Check and claim; on proceed, the side effect and Record result."""
    service = rig.service(kind, "makers")

    def trigger(key: str, index: int) -> bool:
        answer = claim(service, key, f"run-{index}")
        if answer.decision.value != "proceed":
            return False
        record_succeeded(service, answer)
        return True

    return trigger


Results = dict[tuple[str, str], list[Outcome]]


def measure(rig: Rig, *, rounds: int, keys: int, duplicates: int, parallel: int) -> Results:
    """(store, pattern label) -> one outcome per round."""
    results: Results = {}
    for kind in STORES:
        for _ in range(rounds):
            for name, pause in PATTERNS:
                label = name if name == "OnceGate" else f"{name} ({pause * 1000:.0f} ms between)"
                trigger = oncegate(rig, kind) if name == "OnceGate" else lookup_then_add(rig, kind, pause)
                outcome = run_triggers(trigger, keys=keys, duplicates=duplicates, parallel=parallel, pause=pause)
                results.setdefault((kind, label), []).append(outcome)
    return results


def median_seconds(outcomes: list[Outcome]) -> float:
    """The median over rounds of each round's median decision time."""
    return statistics.median(statistics.median(outcome.decision_seconds) for outcome in outcomes)
