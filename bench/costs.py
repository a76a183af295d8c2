"""The Python cost of a claim and what stands under it (issue 36), each figure next to its floor in the same run.

* **SQLite claim CPU**: one Check and claim in process (the request model in, the answer out) against the
  bare write of the same two rows: its claim and history rows as the store wrote them, inserted with bare
  ``sqlite3`` into a file of the store's schema (``BEGIN IMMEDIATE; INSERT; INSERT; COMMIT``), call by call,
  interleaved; CPU time of this process, medians of rounds. The floor measured before (two rows of three
  columns in a table without indexes) is measured beside it.
* **SQLite batch of 100**: one bulk call of 100 new claims in process against 100 single calls.
* **Table Storage batch**: the same bulk call on Azurite against its storage floor: the same 100 two-row
  transactions sent bare from 8 threads.
* **Table Storage Get claim**: a claim with 5,000 history rows against one with 1 (wall time of Get claim,
  which answers the claim and its history's first page); and List claim history's page in the middle of the
  5,000 rows against the page of the claim with 1.
* **Table Storage polls**: storage requests per poll of a waiting Check and claim that nothing changed, from
  one poller and from 8 at once; the floor is one read.
* **Cold start**: a new process from ``import function_app`` to its first Check and claim's answer (in
  process, on SQLite), against a new process importing ``azure.functions`` alone.
* **Serve CPU** is measured with the local server's rate (``bench.targets``): ``oncegate serve``'s CPU a
  claim against a stdlib hello server's a request (``bench.targets.hello_server``), under the same callers.

``python -m bench.costs [--quick]`` runs this part alone, with the two figures of issue 36 that other parts
measure in ``make bench``, and prints their targets. ``python -m bench.costs --cold-against DIR [--quick]``
measures the cold start alone, of the checkout ``DIR`` (main's, say) and of this one taking turns: a change to
what a new process imports is judged side by side, on the same load. ``--claim-against DIR`` does the same for
the SQLite claim CPU (each checkout's own code measuring its own claims, in new processes taking turns), and
``--serve-against DIR`` for serve CPU (both checkouts' ``oncegate serve --workers 2`` and the hello server up at
once, measured in alternating rounds): on two cores shared with other work, two runs minutes apart differ by more
than most changes do.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import bulk, targets
from bench.rig import SECRET, Calls, Rig, claim_request, new_key
from bench.targets import Target
from oncegate.domain.keys import KeyHasher
from oncegate.entrypoints import http as pipeline
from oncegate.entrypoints.operations import BY_NAME, Call
from oncegate.models import ClaimRequest, ListPageQuery
from oncegate.stores import row_writing
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite_rows import _claim_row, _insert_sql, _sql_row
from oncegate.stores.sqlite_schema import ADDED_INDEXES, SCHEMA, add_columns
from tests.gate import Gate

ROOT = Path(__file__).resolve().parents[1]
BATCH = 100
BATCH_THREADS = 8
LONG_HISTORY = 5000
# Lines a page of List claim history, as Get claim's first page has them.
HISTORY_PAGE = 50
# Rounds of the long history's calls for each of the other figures': a call of the short one costs about 2 ms, and
# a median of three blocks of ten such calls moved with the load of the two shared cores between them.
HISTORY_ROUNDS = 3
POLLERS = 8


@dataclass(frozen=True)
class Sizes:
    """How much this part measures."""

    rounds: int
    calls: int
    history: int
    polls: int
    starts: int


FULL = Sizes(rounds=3, calls=300, history=LONG_HISTORY, polls=20, starts=5)
QUICK = Sizes(rounds=1, calls=30, history=200, polls=4, starts=2)


def _median_of(rounds: int, measure: Callable[[], tuple[float, float]]) -> tuple[float, float]:
    pairs = [measure() for _ in range(rounds)]
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


# -- SQLite: a claim's CPU and a batch -------------------------------------------------------------


class SameRows:
    """The rows the store wrote for a claim, read back from its file, and the bare write of the same rows.

    The floor issue 36 names, "the bare write of the same rows": the claim row and its first history row as the
    store writes them (the same columns in the same order, the same values), inserted with bare ``sqlite3`` into a
    file made with the store's own schema (``stores/sqlite_schema``: the claim row's 35 columns into the claims
    table with its indexes, the history row into the history's), in ``BEGIN IMMEDIATE; INSERT; INSERT; COMMIT``
    with the store's pragmas. What is left above it is OnceGate's Python, and the store's locks between its
    processes.
    """

    def __init__(self, rig: Rig, store: ClaimStore, source: str, name: str, first: str) -> None:
        self._source = rig.sqlite_connections(source)
        with closing(sqlite3.connect(rig.location("sqlite", name), isolation_level=None)) as making:
            making.row_factory = sqlite3.Row
            making.execute("PRAGMA journal_mode = WAL")
            making.executescript(SCHEMA)
            add_columns(making)
            making.executescript(ADDED_INDEXES)
        self._connection = rig.sqlite_connections(name)
        # The columns the store names in its two INSERTs, in its order: those of its row builders.
        claim_names = (*_claim_row(store.get_claim(first)), "Version")
        event_names = tuple(_sql_row(row_writing.event_to_row(store.list_events(first)[0])))
        self._reads = tuple(
            f"SELECT {', '.join(names)} FROM {table} WHERE ClaimId = ?"
            for table, names in (("claims", claim_names), ("history", event_names))
        )
        self._inserts = tuple(
            _insert_sql(table, names) for table, names in (("claims", claim_names), ("history", event_names))
        )
        # Nothing the store wrote is left out: the columns it does not name are empty in its row.
        for table, names in (("claims", claim_names), ("history", event_names)):
            row = self._source().execute(f"SELECT * FROM {table} WHERE ClaimId = ?", (first,)).fetchone()
            described = self._source().execute(f"SELECT * FROM {table} LIMIT 0").description
            unnamed = {column[0]: value for column, value in zip(described, row, strict=True)}
            assert all(unnamed[column] is None for column in unnamed.keys() - set(names)), (table, unnamed)

    def rows(self, claim_id: str) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The claim's row and its one history row, as the store wrote them."""
        claim = self._source().execute(self._reads[0], (claim_id,)).fetchone()
        events = self._source().execute(self._reads[1], (claim_id,)).fetchall()
        assert claim is not None, claim_id
        assert len(events) == 1, (claim_id, events)
        return tuple(claim), tuple(events[0])

    def write(self, rows: tuple[tuple[Any, ...], tuple[Any, ...]]) -> None:
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(self._inserts[0], rows[0])
        connection.execute(self._inserts[1], rows[1])
        connection.execute("COMMIT")


def sqlite_claim_cpu(rig: Rig, sizes: Sizes) -> tuple[float, float, float]:
    """CPU seconds of one claim in process, of the bare write of the same two rows on the store's schema
    (:class:`SameRows`), and of the floor measured before (two rows of three columns in a table without indexes),
    interleaved call by call."""
    service = rig.service("sqlite", "cost-claim")
    small = rig.bare_transaction("sqlite", "cost-bare")
    requests = [ClaimRequest.model_validate(claim_request(new_key(), "run-1")) for _ in range(sizes.calls * 2)]
    same: SameRows | None = None
    for request in requests[:20]:  # the first claim reads what an instance then keeps
        answer = service.check_and_claim(request)
        same = same or SameRows(rig, service.store, "cost-claim", "cost-floor", answer.claim_id)
        same.write(same.rows(answer.claim_id))
        small(request.key)
    assert same is not None
    pending = iter(requests[20:])
    check, services = BY_NAME["check_and_claim"], service.services

    def one_round() -> tuple[float, float, float]:
        claim = write = small_write = 0.0
        for _ in range(sizes.calls // sizes.rounds or 1):
            request = next(pending)
            began = time.process_time()
            # The entry's steps as the pipeline runs them (the tests' Gate validates the answer as a client would).
            answer = pipeline.perform(check, services, Call(body=request)).model
            claim += time.process_time() - began
            assert isinstance(answer, dict)
            assert answer["decision"] == "proceed", answer
            rows = same.rows(answer["claimId"])
            began = time.process_time()
            same.write(rows)
            write += time.process_time() - began
            began = time.process_time()
            small(request.key)
            small_write += time.process_time() - began
        return claim, write, small_write

    rounds = [one_round() for _ in range(sizes.rounds)]
    count = sizes.calls // sizes.rounds or 1
    claim, write, small_write = (statistics.median(each[n] for each in rounds) / count for n in range(3))
    return claim, write, small_write


def _bulk(services: Any, requests: list[ClaimRequest]) -> list[Any]:
    # Check and claim many as the HTTP pipeline serves it after reading the body: the items as sent, served and
    # rendered by its entry of the operation table (on SQLite its new keys claimed together, issue 36).
    many = BY_NAME["check_and_claim_many"]
    items = [request.model_dump(mode="json", by_alias=True, exclude_defaults=True) for request in requests]
    call: Call[Any, Any] = Call(body=None)
    rendered: Any = many.render(call, many.serve(services, call, items))
    answers: list[Any] = rendered["value"]  # ClaimManyAnswer's members, each entry's too
    return answers


def _fresh(count: int) -> list[ClaimRequest]:
    return [ClaimRequest.model_validate(claim_request(new_key(), "run-1")) for _ in range(count)]


def sqlite_batch(rig: Rig, sizes: Sizes) -> tuple[float, float]:
    """Seconds of a bulk call of 100 new claims and of 100 single calls, in process, alternating."""
    service = rig.service("sqlite", "cost-batch")
    services = service.services
    service.check_and_claim(_fresh(1)[0])

    def one_round() -> tuple[float, float]:
        requests = _fresh(BATCH)
        began = time.perf_counter()
        answers = _bulk(services, requests)
        batch = time.perf_counter() - began
        assert all(answer.get("decision") == "proceed" for answer in answers), answers[:3]
        requests = _fresh(BATCH)
        began = time.perf_counter()
        check = BY_NAME["check_and_claim"]
        for request in requests:
            pipeline.perform(check, services, Call(body=request))  # served and rendered, as HTTP does
        return batch, time.perf_counter() - began

    return _median_of(sizes.rounds * 2, one_round)


# -- Table Storage: a batch, a long history, polls ---------------------------------------------


def tables_batch(rig: Rig, sizes: Sizes) -> tuple[float, float]:
    """Seconds of a bulk call of 100 new claims on Azurite, and of 100 bare two-row transactions from 8 threads."""
    service = rig.service("tables", "costbatch")
    services = service.services
    service.check_and_claim(_fresh(1)[0])
    # A client each, as each of the bulk call's threads sends on a connection of its own.
    floors = [rig.bare_transaction("tables", "costbatchfloor") for _ in range(BATCH_THREADS)]
    floors[0](new_key())

    def one_round() -> tuple[float, float]:
        requests = _fresh(BATCH)
        began = time.perf_counter()
        answers = _bulk(services, requests)
        batch = time.perf_counter() - began
        assert all(answer.get("decision") == "proceed" for answer in answers), answers[:3]
        keys = [new_key() for _ in range(BATCH)]
        with ThreadPoolExecutor(BATCH_THREADS) as pool:
            began = time.perf_counter()
            list(pool.map(lambda n: [floors[n](key) for key in keys[n::BATCH_THREADS]], range(BATCH_THREADS)))
            bare = time.perf_counter() - began
        return batch, bare

    return _median_of(sizes.rounds * 2, one_round)


def tables_long_history(rig: Rig, sizes: Sizes) -> tuple[float, float, float, float]:
    """Seconds of Get claim on a claim with ``sizes.history`` history rows, and on one with 1 row; then of List claim
    history's page in the middle of the long history, and of the short one's page."""
    service = rig.service("tables", "costhistory")
    short = service.check_and_claim(_fresh(1)[0])
    long = service.check_and_claim(_fresh(1)[0])
    store = service.store
    first = store.list_events(long.claim_id)[0]
    # More of the claim's own history, as a claim polled or repeated for months gathers it; written through the
    # store, so that the rows are in the format the store writes today.
    added = [replace(first, event_id=f"{first.event_id}-{n:05d}") for n in range(sizes.history)]
    with ThreadPoolExecutor(BATCH_THREADS) as pool:
        list(pool.map(store.add_event, added))
    calls = max(3, sizes.polls // 2)
    page = ListPageQuery(top=HISTORY_PAGE)
    for _ in range(sizes.history // HISTORY_PAGE // 2):
        page = ListPageQuery(top=HISTORY_PAGE, cursor=service.history(long.claim_id, page)[1])

    def seconds_of(action: Callable[[], object]) -> float:
        began = time.perf_counter()
        for _ in range(calls):
            action()
        return (time.perf_counter() - began) / calls

    def one_round() -> tuple[float, float]:
        return seconds_of(lambda: service.get_claim_page(long.claim_id)), seconds_of(
            lambda: service.get_claim_page(short.claim_id)
        )

    def one_round_of_pages() -> tuple[float, float]:
        return seconds_of(lambda: service.history(long.claim_id, page)), seconds_of(
            lambda: service.history(short.claim_id, ListPageQuery(top=HISTORY_PAGE))
        )

    one_round()  # the connections made and the answers' models built before any call is counted
    one_round_of_pages()
    rounds = sizes.rounds * HISTORY_ROUNDS
    return (*_median_of(rounds, one_round), *_median_of(rounds, one_round_of_pages))


def tables_polls(rig: Rig, sizes: Sizes) -> tuple[float, float]:
    """Table Storage requests per poll of a waiting Check and claim, from one poller and from POLLERS at once."""
    calls = Calls()
    service = Gate(rig.store("tables", "costpolls", calls=calls), KeyHasher(SECRET))
    key = new_key()
    held = service.check_and_claim(ClaimRequest.model_validate(claim_request(key, "run-holder")))
    assert held.decision == "proceed", held

    def waiter(run: str) -> Any:
        body = {**claim_request(key, run), "wait": True, "maxWaitSeconds": 3600}
        answer, waiting = service.check_and_wait(ClaimRequest.model_validate(body))
        assert waiting is not None, answer
        return waiting

    def polls(waiting: Any, count: int) -> None:
        for _ in range(count):
            answer, waiting = service.poll(waiting)
            assert waiting is not None, answer
            assert answer.decision == "in_progress", answer

    alone = waiter("run-alone")
    polls(alone, 1)  # the wait's first poll may write what every later one reads
    before = calls.count
    polls(alone, sizes.polls)
    one = (calls.count - before) / sizes.polls
    together = [waiter(f"run-{n}") for n in range(POLLERS)]
    for waiting in together:
        polls(waiting, 1)
    barrier = threading.Barrier(POLLERS)

    def poller(waiting: Any) -> None:
        barrier.wait(timeout=60)
        polls(waiting, sizes.polls)

    before = calls.count
    with ThreadPoolExecutor(POLLERS) as pool:
        list(pool.map(poller, together))
    return one, (calls.count - before) / (sizes.polls * POLLERS)


# -- A new process ---------------------------------------------------------------------------------

# Each prints the CPU seconds and the wall seconds it took: on shared cores the wall time is mostly waiting for a core.
_FIRST_CLAIM = """
import json, time
began, began_wall = time.process_time(), time.perf_counter()
import function_app
import azure.functions as func
functions = {{f.get_function_name(): f.get_user_function() for f in function_app.app.get_functions()}}
request = func.HttpRequest("POST", "http://localhost/api/claims", body={body!r},
                           headers={{"Content-Type": "application/json"}})
response = functions["check_and_claim"](request)
assert response.status_code == 200 and b'"proceed"' in response.get_body(), response.get_body()
print(time.process_time() - began, time.perf_counter() - began_wall)
"""
_IMPORT_ALONE = """
import time
began, began_wall = time.process_time(), time.perf_counter()
import azure.functions
print(time.process_time() - began, time.perf_counter() - began_wall)
"""
# What pydantic takes of a first claim whatever the rest of OnceGate's code does: after ``import azure.functions``
# and the domain modules the models read their limits from, the claim's request and answer models imported, their
# validators and serializers built and the request validated, with plugins not looked for as function_app has it.
_WIRE_ALONE = """
import os, time
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
import azure.functions
import oncegate.domain.limits, oncegate.domain.statuses, oncegate.domain.waiting
began, began_wall = time.process_time(), time.perf_counter()
from oncegate.models import ClaimRequest, ClaimResponse
ClaimRequest.model_validate_json({body!r})
assert ClaimResponse.model_rebuild() is not False
print(time.process_time() - began, time.perf_counter() - began_wall)
"""


def _in_new_process(code: str, environment: dict[str, str], tree: Path = ROOT) -> tuple[float, float]:
    """What ``code`` printed, run by a new process in ``tree`` (a checkout of this repository: its own code)."""
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, cwd=tree, check=True, capture_output=True, text=True
    )
    cpu, wall = done.stdout.strip().splitlines()[-1].split()
    return float(cpu), float(wall)


def _cold_environment(database: str) -> dict[str, str]:
    """Bytecode is cached, as in a deployment whose packages were installed by pip: the warm-up run writes what
    a setting such as PYTHONDONTWRITEBYTECODE would otherwise have every run compile again."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("ONCEGATE_") and name != "PYTHONDONTWRITEBYTECODE"
    }
    return environment | {"ONCEGATE_SQLITE_PATH": database, "ONCEGATE_KEY_SECRET": SECRET}


def _first_claim() -> str:
    return _FIRST_CLAIM.format(body=json.dumps(claim_request(new_key(), "run-1")).encode())


def cold_start(rig: Rig, sizes: Sizes) -> tuple[float, float, float]:
    """CPU seconds from ``import function_app`` to the first claim's answer, of ``import azure.functions`` alone,
    and of the claim's wire models after it (pydantic's part of the first, ``_WIRE_ALONE``)."""
    environment = _cold_environment(rig.location("sqlite", "cost-cold"))
    wire_alone = _WIRE_ALONE.format(body=json.dumps(claim_request(new_key(), "run-1")).encode())
    _in_new_process(_first_claim(), environment)  # the store's file made, as a restarted instance finds it
    _in_new_process(_IMPORT_ALONE, environment)
    _in_new_process(wire_alone, environment)
    rounds = [
        (
            _in_new_process(_first_claim(), environment)[0],
            _in_new_process(_IMPORT_ALONE, environment)[0],
            _in_new_process(wire_alone, environment)[0],
        )
        for _ in range(sizes.starts)
    ]
    cold, alone, wire = (statistics.median(one[n] for one in rounds) for n in range(3))
    return cold, alone, wire


def cold_starts(workdir: Path, trees: Sequence[Path], starts: int) -> list[tuple[float, float]]:
    """For each tree (a checkout of this repository, such as main's beside a branch's), the CPU seconds of its first
    claim in a new process and of ``import azure.functions`` alone, medians of ``starts`` rounds.

    The trees take turns within each round, each with its own ``import azure.functions`` beside it, so that the
    load of the shared cores falls on each alike: two runs minutes apart differ by more than a change measured.
    Each tree runs with the same interpreter and packages, and its own code and store file.
    """
    environments = [_cold_environment(str(workdir / f"cold-{n}.db")) for n in range(len(trees))]
    for tree, environment in zip(trees, environments, strict=True):
        _in_new_process(_first_claim(), environment, tree)  # the store's file made and the bytecode written
        _in_new_process(_IMPORT_ALONE, environment, tree)
    rounds = [
        [
            (
                _in_new_process(_first_claim(), environment, tree)[0],
                _in_new_process(_IMPORT_ALONE, environment, tree)[0],
            )
            for tree, environment in zip(trees, environments, strict=True)
        ]
        for _ in range(starts)
    ]
    return [
        (statistics.median(one[n][0] for one in rounds), statistics.median(one[n][1] for one in rounds))
        for n in range(len(trees))
    ]


# -- Judged ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """Each figure of this part as (measured, floor)."""

    # The claim, the bare write of its rows on the store's schema, the floor of two 3-column rows measured before.
    claim_cpu: tuple[float, float, float]
    sqlite_batch: tuple[float, float]
    tables_batch: tuple[float, float]
    long_history: tuple[float, float, float, float]
    polls: tuple[float, float]
    # The first claim in a new process, ``import azure.functions`` alone, the claim's wire models after it.
    cold_start: tuple[float, float, float]


def measure(rig: Rig, sizes: Sizes) -> Figures:
    return Figures(
        claim_cpu=sqlite_claim_cpu(rig, sizes),
        sqlite_batch=sqlite_batch(rig, sizes),
        tables_batch=tables_batch(rig, sizes),
        long_history=tables_long_history(rig, sizes),
        polls=tables_polls(rig, sizes),
        cold_start=cold_start(rig, sizes),
    )


def judged(figures: Figures, *, history: int = LONG_HISTORY, over_http: float | None = None) -> list[Target]:
    """Issue 36's targets, each a ratio of two figures measured side by side in this run.

    ``over_http``: the SQLite batch's ratio over HTTP (``bench.bulk``), as the issue measured it; the target is
    judged on it when given, and the ratio in process is shown beside it.
    """
    claim, bare, small = figures.claim_cpu
    batch, singles = figures.sqlite_batch
    tables, floor = figures.tables_batch
    long, short, long_page, short_page = figures.long_history
    alone, together = figures.polls
    cold, import_alone, wire = figures.cold_start
    return [
        Target(
            "SQLite claim CPU in process (request model in, answer out) / the bare write of the same rows "
            "(`BEGIN IMMEDIATE; 2 INSERT; COMMIT` of its claim and history rows on the store's schema)",
            f"{claim / bare:.1f}x ({claim * 1e6:,.0f} / {bare * 1e6:,.0f} µs); against the floor before "
            f"(two 3-column rows, no index) {claim / small:.1f}x ({small * 1e6:,.0f} µs)",
            "≤ 3x",
            claim <= 3 * bare,
        ),
        Target(
            f"SQLite Check and claim many of {BATCH} new keys / {BATCH} single calls"
            + (", over HTTP" if over_http is not None else ", in process"),
            (f"{over_http:.2f}; in process " if over_http is not None else "")
            + f"{batch / singles:.2f} ({batch * 1000:,.0f} / {singles * 1000:,.0f} ms)",
            "≤ 0.25",
            (over_http if over_http is not None else batch / singles) <= 0.25,
        ),
        Target(
            f"Table Storage Check and claim many of {BATCH} / the same {BATCH} two-row transactions "
            f"from {BATCH_THREADS} threads, Azurite",
            f"{tables / floor:.2f} ({tables * 1000:,.0f} / {floor * 1000:,.0f} ms)",
            "≤ 1.2",
            tables <= 1.2 * floor,
        ),
        Target(
            f"Table Storage Get claim, {history:,} history rows / 1 row",
            f"{long / short:.1f}x ({long * 1000:,.1f} / {short * 1000:,.1f} ms)",
            "≤ 3x",
            long <= 3 * short,
        ),
        Target(
            f"Table Storage List claim history, the page in the middle of {history:,} rows / the page of 1 row",
            f"{long_page / short_page:.1f}x ({long_page * 1000:,.1f} / {short_page * 1000:,.1f} ms)",
            "≤ 3x",
            long_page <= 3 * short_page,
        ),
        Target(
            "Table Storage requests per poll of a waiting Check and claim that nothing changed: one poller, "
            f"{POLLERS} at once",
            f"{alone:.2f}, {together:.2f}",
            "1, 1 (a read; a write per wait, not per poll)",
            alone <= 1 and together <= 1,
        ),
        Target(
            "A new process: `import function_app` to its first Check and claim's answer (SQLite) / "
            "`import azure.functions` alone, CPU time",
            f"{cold / import_alone:.1f}x ({cold * 1000:,.0f} / {import_alone * 1000:,.0f} ms); of the first claim, "
            f"pydantic and the claim's wire models {wire * 1000:,.0f} ms ({wire / import_alone:.1f}x)",
            "≤ 2x",
            cold <= 2 * import_alone,
        ),
    ]


def compare_cold_starts(other: Path, starts: int) -> None:
    """The cold start of ``other`` (a checkout, such as main's worktree) and of this one, taking turns."""
    with tempfile.TemporaryDirectory() as workdir:
        measured = cold_starts(Path(workdir), [other, ROOT], starts)
    rows = [
        f"| {tree} | {cold * 1000:,.1f} ms | {alone * 1000:,.1f} ms | {cold / alone:.2f}x |"
        for tree, (cold, alone) in zip([other, ROOT], measured, strict=True)
    ]
    header = "| tree | `import function_app` to the first claim's answer | `import azure.functions` alone | ratio |"
    print("\n".join([header, "| --- | --- | --- | --- |", *rows, f"(CPU time, medians of {starts} turns each)"]))


# Run by each checkout's own interpreter in its own tree: its code measures its claims against the bare write.
_CLAIM_CPU = """
import tempfile
from pathlib import Path
from bench.costs import QUICK, sqlite_claim_cpu
from bench.rig import Rig
from dataclasses import replace
with tempfile.TemporaryDirectory() as workdir:
    claim, bare, _ = sqlite_claim_cpu(Rig(Path(workdir)), replace(QUICK, rounds=3, calls={calls}))
print(claim, bare)
"""


# A turn's claim CPU, bare write and claim CPU over the bare write, from its (claim, bare) pair.
_CLAIM_FIGURES: tuple[Callable[[tuple[float, float]], float], ...] = (
    lambda pair: pair[0],
    lambda pair: pair[1],
    lambda pair: pair[0] - pair[1],
)


def compare_claims(other: Path, turns: int, calls: int) -> None:
    """The SQLite claim CPU and its bare write, of ``other`` (a checkout, such as main's) and of this one, taking
    turns in new processes; medians of ``turns`` each."""
    trees = [other, ROOT]
    measured: dict[Path, list[tuple[float, float]]] = {tree: [] for tree in trees}
    # Each measures in files of its own (bench.rig); no store is opened from the environment.
    environment = _cold_environment(os.path.join(tempfile.gettempdir(), "oncegate-claim-against.db"))
    for turn in range(turns):
        for tree in trees if turn % 2 == 0 else trees[::-1]:
            done = subprocess.run(
                [sys.executable, "-c", _CLAIM_CPU.format(calls=calls)],
                cwd=tree,
                env=environment,
                check=True,
                capture_output=True,
                text=True,
            )
            claim, bare = (float(figure) for figure in done.stdout.split())
            measured[tree].append((claim, bare))
    # Over the floor: what the claim costs beyond the bare write, which a change to the store's schema moves too (a
    # cheaper write of the same rows raises the ratio while the claim's own work stays the same).
    print(
        "| tree | claim CPU | bare write | over the floor | ratio (median of turns) |\n| --- | --- | --- | --- | --- |"
    )
    for tree, pairs in measured.items():
        claim, bare, over = (statistics.median(each(pair) for pair in pairs) for each in _CLAIM_FIGURES)
        ratio = statistics.median(pair[0] / pair[1] for pair in pairs)
        print(f"| {tree} | {claim * 1e6:,.0f} µs | {bare * 1e6:,.0f} µs | {over * 1e6:,.0f} µs | {ratio:.2f}x |")
    print(f"({turns} turns of {calls} claims each, load average {os.getloadavg()[0]:.1f})")


def compare_serving(other: Path, rounds: int, seconds: float) -> None:
    """``oncegate serve --workers 2`` of ``other`` and of this checkout, and the hello server, up at once and measured
    in alternating rounds under the same callers: each one's CPU a request, medians of ``rounds``."""
    with tempfile.TemporaryDirectory() as workdir, contextlib.ExitStack() as stack:
        rig = Rig(Path(workdir))  # SQLite files only: Azurite is not started
        servers = {
            "hello server": stack.enter_context(targets.hello_server()),
            str(other): stack.enter_context(targets.serving(rig, 2, tree=other)),
            str(ROOT): stack.enter_context(targets.serving(rig, 2)),
        }
        for served in servers.values():  # warm up, as server_rates does
            targets.answered_in(served.port, min(seconds, 1.0))
        cpu: dict[str, list[float]] = {name: [] for name in servers}
        for round_ in range(rounds):
            for name in servers if round_ % 2 == 0 else list(servers)[::-1]:
                before = servers[name].cpu_seconds()
                answered = targets.answered_in(servers[name].port, seconds)
                cpu[name].append((servers[name].cpu_seconds() - before) / answered)
    hello = statistics.median(cpu["hello server"])
    print("| server | CPU a request | / hello server's |\n| --- | --- | --- |")
    for name, figures in cpu.items():
        print(f"| {name} | {statistics.median(figures) * 1e6:,.0f} µs | {statistics.median(figures) / hello:.2f}x |")
    print(f"(medians of {rounds} rounds of {seconds:g} s, load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    """This part's targets, with the two of issue 36's table that other parts measure in ``make bench``: the
    SQLite batch over HTTP (``bench.bulk``) and serve CPU against the hello server (``bench.targets``)."""
    quick = "--quick" in sys.argv
    sizes = QUICK if quick else FULL
    if "--cold-against" in sys.argv:
        compare_cold_starts(Path(sys.argv[sys.argv.index("--cold-against") + 1]), sizes.starts * 3)
        return
    if "--claim-against" in sys.argv:
        compare_claims(Path(sys.argv[sys.argv.index("--claim-against") + 1]), 5 if quick else 9, 300 if quick else 900)
        return
    if "--serve-against" in sys.argv:
        compare_serving(Path(sys.argv[sys.argv.index("--serve-against") + 1]), 3 if quick else 7, 1.0 if quick else 2.0)
        return
    with tempfile.TemporaryDirectory() as workdir, Rig(Path(workdir)) as rig:
        figures = measure(rig, sizes)
        times = bulk.http_times(rig, "sqlite", sizes.rounds)
        server = targets.server_rates(rig, rounds=sizes.rounds, seconds=1.0 if quick else 5.0)
    over_http = times["claim many"] / times["claims"]
    judged_here = [*judged(figures, history=sizes.history, over_http=over_http), targets.serve_cpu(server)]
    rows = [f"| {t.name} | {t.figure} | {t.target} | {t.verdict} |" for t in judged_here]
    print("\n".join(["| what | measured in this run | target | |", "| --- | --- | --- | --- |", *rows]))


if __name__ == "__main__":
    main()
