"""The safeguard's good reading of the store's marks stands for its interval, and a refusal never does (issue 22).

The claims of one interval take the last good reading's key ring as it is, with no read of the marks: the core
holds it while it stands (issue 32's walk). Health reads the marks at once whatever the last reading; when that
read refuses, the reading it replaced no longer stands, and the next claim reads again rather than claim on it.
Above the store's port, so on SQLite alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.marks import StoreMarks
from oncegate.domain.statuses import Decision
from oncegate.errors import StoreUnavailable
from oncegate.stores.sqlite import SqliteStore
from tests.conftest import KEY_SECRET, SQLITE_FILE, FakeClock
from tests.gate import Gate
from tests.service.calls import claim
from tests.support.sqlite_template import fresh_sqlite_file


class CountedMarks:
    """The store's reads of its marks, counted, and refused while ``refusing``."""

    def __init__(self, store: SqliteStore) -> None:
        self.reads = 0
        self.refusing = False
        self._read = store.read_marks

    def __call__(self) -> StoreMarks:
        self.reads += 1
        if self.refusing:
            raise StoreUnavailable("the store does not answer (test)")
        return self._read()


@pytest.fixture
def gate(tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Gate, CountedMarks]]:
    store = SqliteStore(fresh_sqlite_file(tmp_path / SQLITE_FILE))
    marks = CountedMarks(store)
    monkeypatch.setattr(store, "read_marks", marks)
    service = Gate(store, KeyHasher(KEY_SECRET), clock=clock, check_interval=timedelta(hours=1))
    yield service, marks
    service.close()


def test_the_claims_of_one_interval_read_the_marks_once(gate: tuple[Gate, CountedMarks]) -> None:
    service, marks = gate

    answers = [claim(service, key=f"ORDER-{number}").decision for number in range(5)]

    assert answers == [Decision.PROCEED] * 5
    assert marks.reads == 1


def test_health_reads_the_marks_now_and_the_claims_after_it_take_its_reading(
    gate: tuple[Gate, CountedMarks],
) -> None:
    service, marks = gate
    claim(service, key="ORDER-1")

    service.health()
    claim(service, key="ORDER-2")

    assert marks.reads == 2


def test_a_refusal_found_by_health_is_not_bridged_by_the_reading_it_replaced(
    gate: tuple[Gate, CountedMarks],
) -> None:
    service, marks = gate
    claim(service, key="ORDER-1")  # a good reading, standing for an hour
    marks.refusing = True

    with pytest.raises(StoreUnavailable):
        service.health()
    with pytest.raises(StoreUnavailable):
        claim(service, key="ORDER-2")  # read again, and refused: not claimed on the earlier reading
    marks.refusing = False

    assert claim(service, key="ORDER-2").decision is Decision.PROCEED
    assert marks.reads == 4
