"""The SQLite store: the contract, and a race between processes sharing one file."""

from __future__ import annotations

import contextlib
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any, cast

import pytest

from oncegate.domain.records import ClaimFilter, Conflict
from oncegate.domain.statuses import ClaimStatus
from oncegate.errors import AlreadyExists, NotFound, StoreUnavailable
from oncegate.stores import row_writing
from oncegate.stores.paging import utc_text
from oncegate.stores.port import ClaimStore
from oncegate.stores.row_writing import Row
from oncegate.stores.sqlite import SqliteStore
from tests.stores.contract import Meter, StoreContract
from tests.stores.target_contract import TargetContract
from tests.support import records
from tests.support.processes import racing

PROCESSES = 4
LEGACY_FILE = Path(__file__).parent.parent / "fixtures" / "legacy" / "claims-0.1.0.sqlite"


class TestSqliteStore(StoreContract, TargetContract):
    def test_writes_made_together_commit_at_the_end_of_the_block_or_not_at_all(self, tmp_path: Path) -> None:
        store, other = SqliteStore(tmp_path / "together.db"), SqliteStore(tmp_path / "together.db")
        kept, lost = records.claim(), records.claim()
        try:
            with store.writing_together():
                store.create_claim(kept, records.event(kept.claim_id))
                with pytest.raises(NotFound):
                    other.get_claim(kept.claim_id)  # not committed yet: another connection does not see it
            assert other.get_claim(kept.claim_id).run_id == kept.run_id

            def cut_short() -> None:
                with store.writing_together():
                    store.create_claim(lost, records.event(lost.claim_id))
                    raise RuntimeError("the call ends before its commit")

            with pytest.raises(RuntimeError):
                cut_short()
            with pytest.raises(NotFound):
                other.get_claim(lost.claim_id)
        finally:
            store.close()
            other.close()

    def test_writes_answer_what_they_wrote_without_reading_it_back(self, tmp_path: Path) -> None:
        store = SqliteStore(tmp_path / "oncegate.db")
        statements: list[str] = []
        store._connection().set_trace_callback(statements.append)
        claim = records.claim()

        created = store.create_claim(claim, records.event(claim.claim_id))
        store.update_claim(replace(created, attempt=2), None)

        assert not [statement for statement in statements if statement.lstrip().upper().startswith("SELECT")]
        assert store.get_claim(claim.claim_id).attempt == 2
        store.close()

    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Iterator[Callable[[], SqliteStore]]:
        stores: list[SqliteStore] = []

        def make() -> SqliteStore:
            stores.append(SqliteStore(tmp_path / "oncegate.db"))
            return stores[-1]

        yield make
        for store in stores:
            store.close()

    @pytest.fixture
    def write_legacy_conflicts(self, tmp_path: Path) -> Callable[[list[Conflict]], None]:
        def write(conflicts: list[Conflict]) -> None:
            rows = [{**_text_times(row_writing.conflict_to_row(conflict)), "Version": 1} for conflict in conflicts]
            # The columns of that release: SourceSystem came with issue 16, Changed with issue 33.
            names = [
                *(name for name in row_writing.CONFLICT_COLUMNS if name not in ("SourceSystem", "Changed")),
                "Version",
            ]
            insert = f"INSERT INTO conflicts ({', '.join(names)}) VALUES ({', '.join(':' + name for name in names)})"
            with contextlib.closing(sqlite3.connect(tmp_path / "oncegate.db")) as connection, connection:
                for statement in _legacy_conflicts_table():
                    connection.execute(statement)
                connection.executemany(insert, rows)

        return write

    @pytest.fixture
    def seed_conflicts(self) -> Callable[[ClaimStore, list[Conflict]], None]:
        def seed(store: ClaimStore, conflicts: list[Conflict]) -> None:
            for conflict in conflicts:
                store.create_conflict(conflict)

        return seed

    @pytest.fixture
    def metered_store(self, make_store: Callable[[], SqliteStore]) -> tuple[SqliteStore, Meter]:
        """A store, and the steps of SQLite's virtual machine an action takes: they grow with the rows it visits."""
        store = make_store()

        def meter(action: Callable[[], object]) -> int:
            steps = 0

            def step() -> int:
                nonlocal steps
                steps += 1
                return 0  # go on

            connection = store._connection()  # this thread's, which the action uses
            connection.set_progress_handler(step, 1)
            try:
                action()
            finally:
                connection.set_progress_handler(None, 1)
            return steps

        return store, meter


def _legacy_conflicts_table() -> list[str]:
    """The conflicts table and its index as release 0.1.0 made them, read from the file it wrote."""
    uri = f"file:{LEGACY_FILE}?mode=ro&immutable=1"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as legacy:
        found = legacy.execute("SELECT sql FROM sqlite_master WHERE tbl_name = 'conflicts' AND sql IS NOT NULL")
        return [sql for (sql,) in found]


def _text_times(row: Row) -> Row:
    return {name: utc_text(value) if isinstance(value, datetime) else value for name, value in row.items()}


def _create_in_process(
    path: str, claim_id: str, run_id: str, barrier: Barrier, results: Queue[tuple[str, str]]
) -> None:
    store = SqliteStore(path)
    claim = records.claim(claim_id, run_id=run_id)
    barrier.wait(timeout=30)
    try:
        store.create_claim(claim, records.event(claim_id, run_id=run_id))
        results.put(("won", run_id))
    except AlreadyExists as exc:
        results.put(("lost", exc.existing.run_id))
    finally:
        store.close()


def test_processes_sharing_the_file_have_exactly_one_winner(tmp_path: Path) -> None:
    path = str(tmp_path / "oncegate.db")
    SqliteStore(path).close()  # the schema exists before the race, as in a deployed server
    context = racing(__name__)
    barrier = context.Barrier(PROCESSES)
    results = context.Queue()
    claim_id = records.new_id()
    processes = [
        context.Process(target=_create_in_process, args=(path, claim_id, f"run-{i}", barrier, results))
        for i in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=30)

    winners = [run_id for outcome, run_id in outcomes if outcome == "won"]
    assert len(winners) == 1
    assert sorted(outcomes) == sorted([("won", winners[0])] + [("lost", winners[0])] * (PROCESSES - 1))
    store = SqliteStore(path)
    assert [event.run_id for event in store.list_events(claim_id)] == winners
    store.close()


def test_a_new_database_and_its_journal_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    # Claims, history and conflicts are nobody else's to read (issue 9: the file was 0644).
    path = tmp_path / "data" / "claims.db"
    store = SqliteStore(path)
    made = records.claim()
    store.create_claim(made, records.event(made.claim_id))

    modes = {file.name: stat.S_IMODE(file.stat().st_mode) for file in path.parent.iterdir()}
    store.close()

    assert modes["claims.db"] == 0o600
    assert modes.get("claims.db-wal", 0o600) == 0o600


def test_writers_of_a_process_take_their_turn_in_the_order_they_asked() -> None:
    from oncegate.stores.sqlite_locks import WritersQueue

    queue = WritersQueue()
    order: list[int] = []
    threads = []
    with queue:
        for number in range(8):

            def write(number: int = number) -> None:
                with queue:
                    order.append(number)

            threads.append(threading.Thread(target=write))
            threads[-1].start()
            # The next writer asks only once this one waits in the queue.
            while len(queue._waiters) <= number:
                threading.Event().wait(0.001)
    for thread in threads:
        thread.join()

    assert order == list(range(8))
    with queue:  # and it is free again
        pass


# A claim row of the columns the file requires, for a write made by hand within the store's own transaction.
_BARE_CLAIM = (
    "INSERT INTO claims (ClaimId, Scope, Status, Attempt, ClaimToken, RunId, FirstReceivedAt, LastAttemptAt, "
    "UpdatedAt, Version) VALUES (?, 'orders', 'in_progress', 1, '', 'run', 't', 't', 't', 1)"
)


@pytest.mark.parametrize(
    ("failing", "raised"),
    [
        # A statement SQLite refuses as the file stands: translated, as every store error is.
        ("INSERT INTO claims (NoSuchColumn) VALUES (?)", StoreUnavailable),
        # A constraint (the same claim id again): passed on as it is, for the caller that expects it (create_claim
        # makes it AlreadyExists).
        (_BARE_CLAIM, sqlite3.IntegrityError),
    ],
)
def test_a_write_that_fails_is_undone_whole_and_leaves_the_writers_locks_free(
    tmp_path: Path, failing: str, raised: type[Exception]
) -> None:
    """A write's own transaction (``_write``) rolls back what its block wrote before the statement that failed, and
    lets go of both writers' locks, whichever way the failure is passed on: the next writer, on another thread,
    writes at once."""
    store = SqliteStore(tmp_path / "claims.db")
    try:
        claim = records.claim()

        def fail() -> None:
            with store._write() as connection:
                connection.execute(_BARE_CLAIM, (claim.claim_id,))
                connection.execute(failing, (claim.claim_id,))

        with pytest.raises(raised):
            fail()
        with pytest.raises(NotFound):
            store.get_claim(claim.claim_id)
        done = threading.Event()

        def write() -> None:
            store.create_claim(claim, records.event(claim.claim_id))
            done.set()

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=30)
        assert done.is_set(), "the next writer still waits for the locks of the write that failed"
        assert store.get_claim(claim.claim_id).claim_id == claim.claim_id
    finally:
        store.close()


def _next_write_goes_through(store: SqliteStore) -> bool:
    """Whether a write on another thread, and one from another connection to the file, are made at once."""
    done = threading.Event()

    def write() -> None:
        claim = records.claim()
        store.create_claim(claim, records.event(claim.claim_id))
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(timeout=30)
    with contextlib.closing(sqlite3.connect(store._path, timeout=0, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # "database is locked" at once while a transaction holds SQLite's lock
        other.execute("ROLLBACK")
    return done.is_set()


def test_a_stop_landing_as_a_write_lets_go_of_the_writers_file_lets_go_of_the_process_s_queue_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl+C or SIGTERM (a command's stop) handled as the unlock of the writers' file returns: the write is made,
    the stop passed on, and the process's own queue of writers let go as well. It was held for good, and every later
    write of the process waited on it (the command's last flush of its counts as it closed its store)."""
    import fcntl

    store = SqliteStore(tmp_path / "claims.db")
    unlock = fcntl.flock
    stops: list[int] = []

    def stopped_as_it_returns(descriptor: int, operation: int) -> None:
        unlock(descriptor, operation)
        if operation == fcntl.LOCK_UN and not stops:
            stops.append(operation)
            raise KeyboardInterrupt  # as Python raises it at the first instruction after the call

    try:
        claim = records.claim()
        with monkeypatch.context() as patched:
            patched.setattr(fcntl, "flock", stopped_as_it_returns)
            with pytest.raises(KeyboardInterrupt):
                store.create_claim(claim, records.event(claim.claim_id))
        assert store.get_claim(claim.claim_id).claim_id == claim.claim_id  # committed before the stop
        assert _next_write_goes_through(store), "the next writer still waits for the process's queue"
    finally:
        store.close()


class _StoppedAfterBegin:
    """A connection whose BEGIN IMMEDIATE returns and is then stopped (Ctrl+C, SIGTERM), as Python raises a signal's
    exception at the first instruction after the call."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, *parameters: Any) -> sqlite3.Cursor:
        cursor = self._connection.execute(sql, *parameters)
        if sql == "BEGIN IMMEDIATE":
            raise KeyboardInterrupt
        return cursor

    def __getattr__(self, name: str) -> object:
        return getattr(self._connection, name)


def test_a_stop_landing_as_begin_immediate_returns_undoes_the_transaction_it_began(tmp_path: Path) -> None:
    """Ctrl+C or SIGTERM handled as the write's BEGIN IMMEDIATE returns (a write waits there while a tool holds
    SQLite's lock): the transaction is rolled back before the stop is passed on. It stayed open on the thread's
    connection, holding SQLite's write lock: every other writer of the file was answered "database is locked",
    and the thread's next write "cannot start a transaction within a transaction"."""
    store = SqliteStore(tmp_path / "claims.db")
    own = store._checked_connection

    try:
        claim = records.claim()
        store._checked_connection = lambda: cast(sqlite3.Connection, _StoppedAfterBegin(own()))  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            store.create_claim(claim, records.event(claim.claim_id))
        del store._checked_connection
        assert not store._connection().in_transaction
        assert _next_write_goes_through(store)
        store.create_claim(claim, records.event(claim.claim_id))  # and on this thread
        assert store.get_claim(claim.claim_id).claim_id == claim.claim_id
    finally:
        store.close()


def test_a_stop_landing_as_writes_made_together_begin_undoes_the_transaction_and_the_thread_writes_alone_again(
    tmp_path: Path,
) -> None:
    """The same stop as a bulk call's or an import's transaction (``writing_together``) is begun: rolled back, and
    the thread's later writes are its own transactions again, under the writers' locks. The transaction stayed open
    until the store closed, SQLite's lock held, and so did the thread's mark of writes made together, so that its
    later writes went in savepoints, outside the writers' locks."""
    store = SqliteStore(tmp_path / "claims.db")
    own = store._checked_connection

    try:
        claim = records.claim()
        store._checked_connection = lambda: cast(sqlite3.Connection, _StoppedAfterBegin(own()))  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt), store.writing_together():
            store.create_claim(claim, records.event(claim.claim_id))
        del store._checked_connection
        assert not store._connection().in_transaction
        assert not store._local.together
        assert _next_write_goes_through(store)
        with store._write() as connection:
            assert connection.in_transaction  # its own transaction, under the writers' locks
            assert store._writer._held
    finally:
        store.close()


def test_a_write_whose_commit_fails_ends_its_transaction_and_the_next_writes_go_through(tmp_path: Path) -> None:
    """A COMMIT SQLite refuses and leaves the transaction open (as it does for SQLITE_BUSY, and may for a disk
    full or an I/O error): the write is refused (503), rolled back, and SQLite's lock let go, as a bulk call's
    transaction is (``writing_together``). It stayed open on the thread's connection: every other writer of the
    file was answered "database is locked", and every later write of that thread (a server's worker) "cannot start a
    transaction within a transaction"."""
    store = SqliteStore(tmp_path / "claims.db")
    own = store._checked_connection

    class CommitRefused:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self._connection = connection

        def execute(self, sql: str, *parameters: Any) -> sqlite3.Cursor:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("database or disk is full")
            return self._connection.execute(sql, *parameters)

        def __getattr__(self, name: str) -> object:
            return getattr(self._connection, name)

    try:
        claim = records.claim()
        store._checked_connection = lambda: cast(sqlite3.Connection, CommitRefused(own()))  # type: ignore[method-assign]
        with pytest.raises(StoreUnavailable, match="disk is full"):
            store.create_claim(claim, records.event(claim.claim_id))
        del store._checked_connection
        assert not store._connection().in_transaction
        with pytest.raises(NotFound):
            store.get_claim(claim.claim_id)
        assert _next_write_goes_through(store)
        store.create_claim(claim, records.event(claim.claim_id))  # and on this thread
        assert store.get_claim(claim.claim_id).claim_id == claim.claim_id
    finally:
        store.close()


def test_once_the_database_is_moved_aside_every_write_is_refused_on_a_thread_with_a_connection_or_a_new_one(
    tmp_path: Path,
) -> None:
    # The file is looked at once a write (issue 36): on this thread, whose connection is open, and on a new thread,
    # whose first connection would otherwise open (or make) whatever file is at the path now.
    from oncegate.errors import NotConfigured

    path = tmp_path / "oncegate.db"
    store = SqliteStore(path)
    first = records.claim()
    store.create_claim(first, records.event(first.claim_id))
    path.rename(tmp_path / "aside.db")
    refused: list[BaseException] = []

    def write() -> None:
        made = records.claim()
        try:
            store.create_claim(made, records.event(made.claim_id))
        except NotConfigured as exc:
            refused.append(exc)

    write()
    thread = threading.Thread(target=write)
    thread.start()
    thread.join()
    with pytest.raises(NotConfigured, match="was moved, deleted or replaced"):
        store.update_claim(replace(first, attempt=2), None)
    store.close()

    assert len(refused) == 2
    assert not path.exists()  # nothing made at the path


# What releases before issue 36 made: every claim in both indexes, a source and a reference or not.
FULL_INDEXES = """
CREATE INDEX claims_by_source ON claims (Source, UpdatedAt, ClaimId);
CREATE INDEX claims_by_reference ON claims (Reference, UpdatedAt, ClaimId);
"""


def _claims_indexes(path: Path) -> dict[str, str]:
    """The claims table's own indexes (its primary key's aside) by name, with the SQL that made each."""
    with contextlib.closing(sqlite3.connect(path)) as reading:
        made = reading.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'claims'")
        return {name: sql for name, sql in made if sql is not None}


def _plan_of_list(store: SqliteStore, matching: ClaimFilter) -> str:
    """The query plan of the list the store runs for ``matching``, as SQLite chose it."""
    connection = store._connection()
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    try:
        store.list_claims(matching, limit=10)
    finally:
        connection.set_trace_callback(None)
    (query,) = [sql for sql in statements if sql.startswith("SELECT * FROM claims")]
    return " ".join(str(row[-1]) for row in connection.execute(f"EXPLAIN QUERY PLAN {query}"))


def test_a_claim_naming_no_source_or_reference_is_in_neither_index_and_a_list_by_either_reads_its_index(
    tmp_path: Path,
) -> None:
    # Most claims name neither: their writes update two B-trees fewer (issue 36).
    path = tmp_path / "oncegate.db"
    store = SqliteStore(path)
    plain, labelled = records.claim(), records.claim(source="shop-eu", reference="SO-1001")
    for made in (plain, labelled):
        store.create_claim(made, records.event(made.claim_id))

    indexes = _claims_indexes(path)
    assert indexes["claims_with_source"].endswith("WHERE Source IS NOT NULL")
    assert indexes["claims_with_reference"].endswith("WHERE Reference IS NOT NULL")
    assert set(indexes) == {"claims_by_change", "claims_with_source", "claims_with_reference"}
    with contextlib.closing(sqlite3.connect(path)) as reading:
        for index, column in (("claims_with_source", "Source"), ("claims_with_reference", "Reference")):
            held = reading.execute(f"SELECT ClaimId FROM claims INDEXED BY {index} WHERE {column} IS NOT NULL")
            assert [row[0] for row in held] == [labelled.claim_id]
    by_source = ClaimFilter((ClaimStatus.IN_PROGRESS,), source="shop-eu")
    assert "USING INDEX claims_with_source" in _plan_of_list(store, by_source)
    assert "USING INDEX claims_with_reference" in _plan_of_list(
        store, ClaimFilter((ClaimStatus.IN_PROGRESS,), reference="SO-1001")
    )
    found = store.list_claims(by_source, limit=10).items
    assert [claim.claim_id for claim in found] == [labelled.claim_id]
    store.close()


def test_a_file_with_the_full_indexes_of_earlier_releases_gets_the_partial_ones_and_finds_its_claims(
    tmp_path: Path,
) -> None:
    path = tmp_path / "oncegate.db"
    store = SqliteStore(path)
    labelled = records.claim(source="shop-eu", reference="SO-1001")
    store.create_claim(labelled, records.event(labelled.claim_id))
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as older:  # the file as an earlier release left it
        older.executescript("DROP INDEX claims_with_source; DROP INDEX claims_with_reference;" + FULL_INDEXES)

    reopened = SqliteStore(path)
    try:
        assert set(_claims_indexes(path)) == {"claims_by_change", "claims_with_source", "claims_with_reference"}
        in_progress = (ClaimStatus.IN_PROGRESS,)
        for matching in (ClaimFilter(in_progress, source="shop-eu"), ClaimFilter(in_progress, reference="SO-1001")):
            found = reopened.list_claims(matching, limit=10).items
            assert [claim.claim_id for claim in found] == [labelled.claim_id]
    finally:
        reopened.close()


def test_the_wal_is_copied_into_the_database_every_so_many_pages_not_every_thousand(tmp_path: Path) -> None:
    # Each checkpoint copies the pages nearly every claim writes again: rarer ones copy them fewer times (issue 36).
    from oncegate.stores.sqlite import WAL_AUTOCHECKPOINT_PAGES

    path = tmp_path / "oncegate.db"
    store = SqliteStore(path)
    frame = 24 + store._connection().execute("PRAGMA page_size").fetchone()[0]
    largest = 0
    # A claim writes 4 to 10 pages: this writes the bound's worth of pages twice over, or more.
    for _ in range(WAL_AUTOCHECKPOINT_PAGES // 2):
        made = records.claim()
        store.create_claim(made, records.event(made.claim_id))
        largest = max(largest, Path(f"{path}-wal").stat().st_size)
    store.close()

    # Past SQLite's default of 1,000 pages, and started over once past the bound (the file keeps its size).
    assert WAL_AUTOCHECKPOINT_PAGES * frame <= largest < (WAL_AUTOCHECKPOINT_PAGES + 100) * frame
