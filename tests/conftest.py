"""Fixtures shared by the service and HTTP suites: a clock moved by hand and the claim service on each store.

``store_kind`` runs a test once on SQLite and once on Table Storage (Azurite); a suite that needs
only one store overrides it. A service suite runs on both stores only where the store's own paths
are what it tests (races, ETags, listings and counts, retention, tombstones, legacy rows, outages);
one whose behaviour is the service's alone runs on SQLite, and the store contract suite
(tests/stores/contract.py) runs every store write and read on both. ``new_service`` makes further
service instances over the same stored data, as several Functions instances or server threads would be.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from oncegate.domain.keys import KeyHasher
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from tests.gate import Gate
from tests.support.sqlite_template import fresh_sqlite_file

pytest_plugins = ["tests.support.azurite", "tests.support.entra"]

# The suite starts hundreds of Python processes (the workers of -n 2, every CLI command, served workers), each
# importing the same modules; where the environment says PYTHONDONTWRITEBYTECODE each compiled them all again
# from source (and pytest rewrote every test module again in each worker): 6.2 s of CPU to collect the suite,
# against 2.4 s with bytecode kept. The suite keeps it, in the __pycache__ folders .gitignore leaves out, as
# Python does by default; set by this module, before the workers and any command start.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    sys.dont_write_bytecode = False

# Where the suite's temporary folders go (tmp_path, every SQLite store a test opens, Azurite's): in memory where
# Linux has room for them (/dev/shm), not on the disk. A store syncs its file to the disk as it should (WAL with
# synchronous NORMAL: at a checkpoint, and when its last connection closes), and the suite opens and closes
# thousands of stores: on this machine's virtual disk a store opened, given a claim and closed took 17 to 23 ms of
# wall time and 3 ms of CPU, in memory 1 to 3 ms and 1 ms (the 660 stores of six SQLite-heavy test files spent
# 3.0 s opening and closing, 1.2 s in memory). No test can tell the two apart: a process killed mid-write leaves
# the same file in either (the page cache is shared); only a power cut differs. A TMPDIR the reader set is kept,
# as is a TEMP or TMP, and a /dev/shm that is small (Docker's is 64 MiB; a run writes about 460 MiB, and the last
# run's folders are kept: pyproject.toml's tmp_path_retention_count) or where nothing may be run.
MEMORY_TEMP = Path("/dev/shm")
MEMORY_TEMP_ROOM = 2 * 1024**3


def _memory_temp_fits() -> bool:
    named = any(os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP"))  # what tempfile reads, in this order
    if sys.platform != "linux" or named or not MEMORY_TEMP.is_dir():
        return False
    if not os.access(MEMORY_TEMP, os.W_OK | os.X_OK):
        return False
    room = os.statvfs(MEMORY_TEMP)
    return not room.f_flag & os.ST_NOEXEC and room.f_bavail * room.f_frsize >= MEMORY_TEMP_ROOM


if _memory_temp_fits():
    tempfile.tempdir = str(MEMORY_TEMP)

# Hypothesis fails an example that takes over 200 ms of wall time, and a test whose examples are slow to draw:
# on two cores shared by the suite's processes, Azurite and the servers it starts, a thread that waited for a
# core met either through no fault of the code (test_checked_times failed so once, at 0.4 ms an example). The
# properties hold what the code answers; how fast it answers is the benchmark's, and a test's own time is
# bounded by the suite's timeout.
settings.register_profile("oncegate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("oncegate")

KEY_SECRET = "test-secret-" + "x" * 32
SQLITE_FILE = "oncegate.db"


class FakeClock:
    """A UTC clock that only moves when the test says so: leases expire without anyone sleeping."""

    def __init__(self) -> None:
        # Microseconds on purpose: a store that truncates timestamps shows up as a wrong lease.
        self.now = datetime(2024, 5, 1, 8, 30, 15, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a worker of a run in several processes (make test: -n 2), the slow tests go first, so that
    the workers end together rather than one running the last slow test alone."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def open_store(store_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], ClaimStore]]:
    """Each call opens another store instance on this test's data (one SQLite file, or one set of tables)."""
    if store_kind == "tables":
        yield request.getfixturevalue("table_store_factory")
        return
    stores: list[SqliteStore] = []

    def open_sqlite() -> SqliteStore:
        # A copy of an empty store's file: the schema made once per process, not once per test.
        stores.append(SqliteStore(fresh_sqlite_file(tmp_path / SQLITE_FILE)))
        return stores[-1]

    yield open_sqlite
    for store in stores:
        store.close()


@pytest.fixture
def new_service(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[], Gate]:
    """Another Gate over the same data, clock and key secret."""
    return lambda: Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock)


@pytest.fixture
def service(new_service: Callable[[], Gate]) -> Gate:
    return new_service()
