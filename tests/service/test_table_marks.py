"""Each table that guards the promise carries its own mark, and a store is marked anew only on purpose (issue 31).

The store's id kept beside the key secrets says the store exists; it says nothing of a claims table
emptied, dropped or replaced behind it. Measured on main before this change: on SQLite, `DELETE FROM
claims` or `DROP TABLE claims` with the store-id file intact let 10 of 10 done keys proceed again; on
Table Storage with `ONCEGATE_STORE_ID` pinned, deleting the claims table alone and restarting made it
again empty and let 10 of 10 proceed; and an app on Table Storage without the pin took a wiped store
for a new one (10 of 10). Each instance here is wired as bootstrap wires the app: on SQLite the
store-id file beside the database, on Table Storage the setting (``PinnedSetting``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate import bootstrap
from oncegate.config import Settings
from oncegate.domain.keys import KeyHasher
from oncegate.domain.marks import StoreMarks, TableMark
from oncegate.domain.statuses import Decision
from oncegate.domain.store_id import check_store_id
from oncegate.entrypoints import error_map
from oncegate.errors import InvalidRequest, NotConfigured
from oncegate.models import ClaimRequest
from oncegate.service.safeguard import PinnedFile, PinnedSetting, StoreIdPin
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from oncegate.stores.sqlite_rows import MARK_ROW
from oncegate.stores.tables.entities import STORE_PARTITION
from oncegate.stores.tables.keys import STORE_ROW
from oncegate.stores.tables.store import TableStore, table_names
from tests.conftest import SQLITE_FILE, FakeClock
from tests.gate import Gate
from tests.service.calls import claim, record

A = "secret-a-" + "a" * 32
DONE = 10


def done_before(service: Gate, count: int = DONE) -> list[str]:
    keys = [f"SO-done-{index}" for index in range(count)]
    for key in keys:
        record(service, claim(service, key=key, run="run-first"))
    return keys


def answers(service: Gate, keys: list[str]) -> list[str]:
    """Each key asked again: the decision, or the code of the refusal."""
    found = []
    for key in keys:
        try:
            found.append(claim(service, key=key, run="run-again").decision.value)
        except NotConfigured as refused:
            found.append(error_map.code(refused))
    return found


class App:
    """App instances over the test's store, pinned as bootstrap pins them, reading the marks on every request."""

    def __init__(self, store_kind: str, open_store: Callable[[], ClaimStore], clock: FakeClock, tmp_path: Path):
        self.kind = store_kind
        self._open_store = open_store
        self._clock = clock
        self._file = PinnedFile(tmp_path / (Path(SQLITE_FILE).stem + bootstrap.STORE_ID_SUFFIX))

    def pin(self, store_id: str | None) -> StoreIdPin:
        return self._file if self.kind == "sqlite" else PinnedSetting(store_id)

    def start(self, store_id: str | None = None) -> Gate:
        return Gate(
            self._open_store(), KeyHasher(A), clock=self._clock, pin=self.pin(store_id), check_interval=timedelta(0)
        )

    def first(self) -> tuple[Gate, str]:
        """A new store as the deployment leaves it (Table Storage: `store init --new-only`), served by a pinned app."""
        app = self.start()
        store_id = app.services.key_secrets.start_store(new_only=True)
        return self.start(store_id), store_id


@pytest.fixture
def app(store_kind: str, open_store: Callable[[], ClaimStore], clock: FakeClock, tmp_path: Path) -> App:
    return App(store_kind, open_store, clock, tmp_path)


def _sql(store: Any, *statements: str) -> None:
    connection = store._connection()  # the test's own damage: nothing in the app does this
    with connection:
        for statement in statements:
            connection.execute(statement)


def _tables(factory: Any) -> TableServiceClient:
    return TableServiceClient.from_connection_string(factory.connection_string)


def lose_claims_table(app: App, store: ClaimStore, request: pytest.FixtureRequest, *, drop: bool) -> None:
    """The claims table emptied (`DELETE FROM claims`; on Table Storage every row deleted, as a storage browser's
    "delete all" does) or dropped (on Table Storage, the table deleted)."""
    if app.kind == "sqlite":
        _sql(store, "DROP TABLE claims" if drop else "DELETE FROM claims")
        return
    factory = request.getfixturevalue("table_store_factory")
    with _tables(factory) as service:
        if drop:
            service.delete_table(table_names(factory.prefix)[0])
            return
        table = service.get_table_client(table_names(factory.prefix)[0])
        for row in list(table.list_entities(select=["PartitionKey", "RowKey"])):
            table.delete_entity(row["PartitionKey"], row["RowKey"])


# -- 2. a lost claims table behind an intact store id -----------------------------------------------


@pytest.mark.parametrize("drop", [False, True], ids=["emptied", "dropped"])
def test_a_claims_table_lost_behind_an_intact_store_id_is_refused_until_store_init(
    app: App, request: pytest.FixtureRequest, drop: bool
) -> None:
    running, store_id = app.first()
    done = done_before(running)
    lose_claims_table(app, running.store, request, drop=drop)

    before_restart = answers(running, done)
    restarted = app.start(store_id)
    after_restart = answers(restarted, done)
    with pytest.raises(NotConfigured) as refused:
        restarted.health()
    # Nothing made the table again, or marked it: the refusal stands until an operator decides.
    still = answers(app.start(store_id), done[:1])
    started = restarted.services.key_secrets.start_store()

    assert before_restart == after_restart == ["not_configured"] * DONE
    assert still == ["not_configured"]
    assert refused.value.target == "ONCEGATE_STORE_ID"
    assert "Claims" in refused.value.message or "claims" in refused.value.message
    assert "oncegate store init" in refused.value.message
    assert started == store_id
    assert answers(restarted, done) == ["proceed"] * DONE


def test_a_keys_table_lost_on_sqlite_is_refused(app: App) -> None:
    if app.kind == "tables":
        pytest.skip("on Table Storage the store's id is in the keys table: deleting it loses the id (next test)")
    running, _ = app.first()
    done = done_before(running)
    _sql(running.store, "DELETE FROM key_ids")

    assert answers(app.start(), done) == ["not_configured"] * DONE


@pytest.mark.azurite
def test_a_keys_table_deleted_on_table_storage_is_refused_while_claims_remain(
    table_store_factory: Any, clock: FakeClock
) -> None:
    unpinned = PinnedSetting(None)
    first = Gate(table_store_factory(), KeyHasher(A), clock=clock, pin=unpinned, check_interval=timedelta(0))
    first.services.key_secrets.start_store(new_only=True)
    done = done_before(first)
    with _tables(table_store_factory) as service:
        service.delete_table(table_store_factory.prefix + "Keys")

    restarted = Gate(table_store_factory(), KeyHasher(A), clock=clock, pin=unpinned, check_interval=timedelta(0))
    with pytest.raises(NotConfigured) as refused:
        claim(restarted, key=done[0], run="run-again")

    assert answers(restarted, done) == ["not_configured"] * DONE
    assert "holds claims" in refused.value.message


# -- the upgrade from a store written before the marks ---------------------------------------------


def as_previous_release(store: ClaimStore) -> None:
    """The store as the release before the marks left it: an id without the flag, tables without marks."""
    if isinstance(store, SqliteStore):
        _sql(
            store,
            f"DELETE FROM claims WHERE ClaimId = '{MARK_ROW}'",
            f"DELETE FROM key_ids WHERE KeyId = '{MARK_ROW}'",
            "UPDATE store_identity SET TablesMarked = NULL",
        )
        return
    assert isinstance(store, TableStore)
    store._claims.delete_entity(STORE_PARTITION, "mark")
    identity = store._keys.get_entity(STORE_PARTITION, STORE_ROW)
    store._keys.upsert_entity({key: value for key, value in identity.items() if key != "TablesMarked"}, mode="replace")


def test_a_store_of_the_previous_release_gets_its_marks_at_the_first_start(
    app: App, request: pytest.FixtureRequest
) -> None:
    running, store_id = app.first()
    done = done_before(running)
    as_previous_release(running.store)
    assert not running.store.read_marks().tables_marked

    upgraded = app.start(store_id)
    again = answers(upgraded, done)
    marks = upgraded.store.read_marks()
    # Marked now: losing the claims table after the upgrade is refused.
    lose_claims_table(app, upgraded.store, request, drop=True)

    assert again == ["duplicate"] * DONE
    assert marks.tables_marked
    assert {mark.store_id for mark in marks.tables} == {store_id}
    assert answers(app.start(store_id), done) == ["not_configured"] * DONE


def test_a_store_of_the_previous_release_with_an_empty_claims_table_is_refused_until_store_init(
    app: App, request: pytest.FixtureRequest
) -> None:
    """Its claims table was lost before the upgrade, or it never made a claim: only an operator can tell."""
    running, store_id = app.first()
    done = done_before(running)
    as_previous_release(running.store)
    if app.kind == "sqlite":
        _sql(running.store, "DELETE FROM claims")
    else:
        with _tables(request.getfixturevalue("table_store_factory")) as service:
            name = table_names(request.getfixturevalue("table_store_factory").prefix)[0]
            service.delete_table(name)
            service.create_table(name)  # restored empty

    upgraded = app.start(store_id)

    assert answers(upgraded, done) == ["not_configured"] * DONE
    assert upgraded.services.key_secrets.start_store() == store_id
    assert answers(upgraded, done) == ["proceed"] * DONE


# -- 3. the first deployment: a new store is marked on purpose --------------------------------------


@pytest.fixture
def tables_settings(table_store_factory: Any) -> Settings:
    """The app's settings on the test's tables, without ONCEGATE_STORE_ID: a first deployment."""
    table_store_factory()  # the factory drops the test's tables afterwards
    environment = {
        "ONCEGATE_STORE": "tables",
        "ONCEGATE_TABLES_CONNECTION_STRING": table_store_factory.connection_string,
        "ONCEGATE_TABLE_PREFIX": table_store_factory.prefix,
        "ONCEGATE_KEY_SECRET": A,
    }
    return Settings.from_environment(environment)


@pytest.mark.azurite
def test_an_app_on_table_storage_never_marks_a_new_store_itself(tables_settings: Settings) -> None:
    app = Gate.of(bootstrap.build_services(tables_settings))
    with pytest.raises(NotConfigured) as refused:
        claim(app, key="SO-1", run="run-1")
    with pytest.raises(NotConfigured):
        app.health()
    nothing_written = app.store.read_marks()
    store_id = app.services.key_secrets.start_store(new_only=True)

    assert refused.value.target == "ONCEGATE_STORE_ID"
    assert "`oncegate store init`" in refused.value.message
    assert (nothing_written.store_id, nothing_written.secrets, nothing_written.holds_claims) == (None, (), False)
    assert claim(app, key="SO-1", run="run-1").decision is Decision.PROCEED
    assert app.store.read_marks().store_id == store_id
    app.close()


@pytest.mark.azurite
def test_a_wiped_table_store_is_not_taken_for_new_by_an_unpinned_app(
    tables_settings: Settings, table_store_factory: Any
) -> None:
    """Two workers, one of which had not served yet: neither takes the wiped store for a new one."""

    def worker() -> Gate:
        # As bootstrap wires the app, reading the marks on every request rather than every few seconds.
        store = bootstrap.build_store(tables_settings)
        pin = bootstrap.store_pin(tables_settings)
        return Gate(store, KeyHasher(A), pin=pin, check_interval=timedelta(0))

    serving = worker()
    serving.services.key_secrets.start_store(new_only=True)
    done = done_before(serving)
    idle = worker()
    with _tables(table_store_factory) as service:
        for name in table_names(table_store_factory.prefix):
            service.delete_table(name)
            service.create_table(name)  # as an emulator restarted in memory, or a restore to empty tables, leaves it

    restarted = worker()

    assert answers(serving, done) == answers(idle, done) == answers(restarted, done) == ["not_configured"] * DONE
    for gate in (serving, idle, restarted):
        gate.close()


def test_a_new_sqlite_store_is_marked_by_the_app_itself(app: App) -> None:
    if app.kind == "tables":
        pytest.skip("on Table Storage a new store is marked by store init (above)")
    served = app.start()

    assert claim(served, key="SO-1", run="run-1").decision is Decision.PROCEED
    marks = served.store.read_marks()
    assert marks.tables_marked
    assert {mark.store_id for mark in marks.tables} == {marks.store_id}


def test_store_init_refuses_a_whole_store_and_new_only_answers_its_id(app: App) -> None:
    running, store_id = app.first()
    done_before(running, 1)

    with pytest.raises(InvalidRequest) as whole:
        running.services.key_secrets.start_store()

    assert "nothing was changed" in whole.value.message
    assert running.services.key_secrets.start_store(new_only=True) == store_id


# -- the decision alone ----------------------------------------------------------------------------


def test_a_marking_cut_short_is_finished_while_no_claim_was_made() -> None:
    cut_short = StoreMarks(store_id=None, secrets=(), tables=(TableMark("claims", "s1"),))

    assert check_store_id(cut_short, pinned=None, seen=None, fresh="new", may_start=False) == "s1"
    assert check_store_id(cut_short, pinned="s1", seen=None, fresh="new", may_start=False) == "s1"
    with pytest.raises(NotConfigured):
        check_store_id(cut_short, pinned="s2", seen=None, fresh="new")
    with pytest.raises(NotConfigured):
        # The id's own table lost while claims remain: the key secrets' records went with it.
        check_store_id(
            StoreMarks(None, (), tables=(TableMark("claims", "s1"),), holds_claims=True),
            pinned=None,
            seen=None,
            fresh="new",
        )


def test_a_table_of_another_store_is_refused() -> None:
    mixed = StoreMarks("s1", (), tables=(TableMark("claims", "s2"),), tables_marked=True)

    with pytest.raises(NotConfigured) as refused:
        check_store_id(mixed, pinned="s1", seen=None, fresh="new")
    assert "belongs to another store" in refused.value.message


def test_the_marks_are_read_inside_a_bulk_calls_transaction(app: App) -> None:
    """Each item checks the store's marks (every request here): on SQLite inside the call's one transaction."""
    served, _ = app.first()
    requests = [
        ClaimRequest(scope="erp.create-order", key=f"SO-{n}", run_id="run-1", fingerprint="v1") for n in range(5)
    ]

    answers = served.services.bulk.each(
        requests, lambda request: Gate.of(served.services).check_and_claim(request), same=lambda request: request.key
    )

    assert [answer.decision for answer in answers] == [Decision.PROCEED] * 5  # type: ignore[union-attr]


def test_instances_starting_together_on_a_new_store_agree_on_its_marks(
    open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    """Four instances that may start a store (SQLite's own, or wired by hand) make their first claims at once:
    one marking wins, the others finish or accept it, and none refuses the new store (see 8be6089)."""
    instances = [Gate(open_store(), KeyHasher(A), clock=clock, check_interval=timedelta(0)) for _ in range(4)]
    barrier = threading.Barrier(len(instances))
    answers: list[str] = []

    def first_claim(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            answers.append(claim(instances[index], key=f"SO-{index}", run="run-1").decision.value)
        except Exception as error:  # every outcome is counted
            answers.append(type(error).__name__)

    threads = [threading.Thread(target=first_claim, args=(index,)) for index in range(len(instances))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    marks = [instance.store.read_marks() for instance in instances]

    assert answers == ["proceed"] * len(instances)
    assert len({mark.store_id for mark in marks}) == 1
    assert all(
        mark.tables_marked and {table.store_id for table in mark.tables} == {marks[0].store_id} for mark in marks
    )


def overtake(store: Any, store_kind: str, *, after: int, meanwhile: Callable[[], None]) -> None:
    """Have ``meanwhile`` run once, when ``store`` has made ``after`` reads of its next reading of the marks.

    Table Storage reads the keys table (the id and the key secrets), the claims table's mark, then whether the
    claims table holds claims, each a request of its own. SQLite reads in one transaction: ``meanwhile`` runs
    before its next statement (the id, the key secrets, the claims table's mark), on another connection.
    """
    ran: list[None] = []

    def once() -> None:
        if not ran:
            ran.append(None)
            meanwhile()

    if store_kind == "tables":
        read = getattr(store, ("_marks_of", "_claims_mark", "_holds_claims")[after - 1])

        def then(*args: Any) -> Any:
            answer = read(*args)
            once()
            return answer

        setattr(store, read.__name__, then)
        return
    statements: list[str] = []

    def traced(statement: str) -> None:
        if statements or statement == "BEGIN":  # the reading's own (a write begins IMMEDIATE)
            statements.append(statement)
        if len(statements) == after + 2:
            once()

    store._connection().set_trace_callback(traced)


@pytest.mark.parametrize("after", [1, 2, 3], ids=["after-1-read", "after-2-reads", "after-3-reads"])
def test_an_instance_overtaken_in_its_reading_of_the_marks_by_one_that_starts_the_store_and_claims_proceeds(
    store_kind: str, open_store: Callable[[], ClaimStore], clock: FakeClock, after: int
) -> None:
    """One instance reads the marks of a new store while another marks it and makes its first claim, after each read
    in turn. On Table Storage the marking writes the claims table's mark, the id, then claims; the reading reads
    the id, the mark, then whether there are claims. Overtaken after the id, the reader found claims without one
    and refused the new store as one whose id was lost (a run of the bulk races); after the mark, it read the id
    again beside that stale mark and refused the store as one whose claims table lost its mark (one of four
    instances starting together in CI). SQLite reads in one transaction: no point in it lets anything in."""
    first = Gate(open_store(), KeyHasher(A), clock=clock, check_interval=timedelta(0))
    reader = Gate(open_store(), KeyHasher(A), clock=clock, check_interval=timedelta(0))
    made: list[str] = []
    overtake(reader.store, store_kind, after=after, meanwhile=lambda: made.append(first_claim(first)))

    answered = first_claim(reader, key="SO-2")
    marks = [gate.store.read_marks() for gate in (first, reader)]

    assert (made, answered) == (["proceed"], "proceed")
    assert marks[0].store_id is not None
    assert all(
        mark.tables_marked and {table.store_id for table in mark.tables} == {marks[0].store_id} for mark in marks
    )


def first_claim(gate: Gate, *, key: str = "SO-1") -> str:
    """The instance's first claim: its decision, or the code of the refusal."""
    try:
        return claim(gate, key=key, run="run-1").decision.value
    except NotConfigured as refused:
        return f"{error_map.code(refused)}: {refused.message}"
