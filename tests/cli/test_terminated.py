"""A store command stopped by SIGTERM, as ``timeout``, ``kill`` or a job's stop send it, ends as Ctrl+C ends it.

SIGTERM killed the process where it stood: ``purge`` had deleted claims whose scope counts it keeps in memory
until it closes, and the catalogue (``oncegate scopes``) went on counting the deleted claims until someone
ran ``store recount``. Now SIGTERM interrupts the command as Ctrl+C does: it closes what it opened, the
counts are written, exit 130.

The command runs as a separate process, its stderr a pipe of one page that this test stops reading after
the first progress line: the purge blocks on its next lines, so SIGTERM reaches it mid-way, every time.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus
from oncegate.local_secret import local_key_secret
from oncegate.stores.sqlite import SqliteStore
from tests.cli.test_governance import STORE_SETTINGS
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import succeeded

REPO = Path(__file__).resolve().parents[2]
CLAIMS = 300
# The smallest pipe Linux makes: a page, some 150 progress lines, fewer than the purge's 300 pages.
PIPE_BYTES = 4096
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A SQLite store of claims made 400 days ago, past their retention, counted in the scope catalogue."""
    path = tmp_path / "store" / "oncegate.db"
    clock = FakeClock()
    clock.now = datetime.now(UTC) - timedelta(days=400)
    service = Gate(SqliteStore(path), KeyHasher(local_key_secret(path)), clock=clock)
    for index in range(CLAIMS):
        succeeded(service, key=f"订单-{index}", run=f"run-{index}")
    service.close()
    return path


def counts(path: Path) -> tuple[int, int]:
    """The succeeded claims the scope catalogue counts, and those the store holds."""
    store = SqliteStore(path)
    try:
        (scope,) = store.list_scopes()
        held = Counter(claim.status for claim in store.list_claims(ClaimFilter(tuple(ClaimStatus)), limit=1000).items)
    finally:
        store.close()
    return scope.claims_by_status.get(ClaimStatus.SUCCEEDED, 0), held[ClaimStatus.SUCCEEDED]


@pytest.mark.skipif(sys.platform != "linux", reason="a pipe of one page is Linux's F_SETPIPE_SZ")
def test_a_purge_stopped_by_sigterm_writes_the_counts_of_what_it_deleted(database: Path) -> None:
    assert counts(database) == (CLAIMS, CLAIMS)
    environment = {name: value for name, value in os.environ.items() if name not in STORE_SETTINGS}
    reading, writing = os.pipe()
    fcntl.fcntl(writing, F_SETPIPE_SZ, PIPE_BYTES)
    process = subprocess.Popen(
        [sys.executable, "-m", "oncegate.cli", "purge", "--page-size", "1"],
        cwd=REPO,
        env={**environment, "ONCEGATE_SQLITE_PATH": str(database)},
        stdout=subprocess.DEVNULL,
        stderr=writing,
    )
    os.close(writing)
    with os.fdopen(reading, encoding="utf-8") as stderr:
        assert stderr.readline().startswith("Purging on sqlite at ")
        assert stderr.readline().startswith("page 1: ")
        process.send_signal(signal.SIGTERM)
        rest = stderr.read()
    code = process.wait(timeout=60)

    assert code == 130, rest
    assert "Traceback" not in rest
    counted, held = counts(database)
    assert 0 < held < CLAIMS, "the purge ended mid-way"
    assert counted == held
