"""A SQLite store's file made once per test process and copied into each test that opens a store.

``SqliteStore`` makes its schema when it opens a file: about 5 ms of CPU for a new file (the tables, the
indexes, the columns added since 0.1.0, each statement writing pages), about 1 ms for a file that already
holds them, where every statement finds its table and does nothing. A test opening a store on a copy of a
file that one store made and closed gets the same empty tables in the same file, with its own data.
``SqliteStore`` still runs its schema on the copy, as on any existing file, so a schema the product changes
is in the next run's copy with no step here; the store tests (tests/stores/) open new files, and those
test the schema made from nothing.
"""

from __future__ import annotations

import os
import tempfile
from functools import cache
from pathlib import Path

from oncegate.stores.sqlite import SqliteStore


@cache
def _template() -> bytes:
    """The file an empty store leaves once closed (its WAL checkpointed into it), as bytes."""
    with tempfile.TemporaryDirectory(prefix="oncegate-template-") as folder:
        path = Path(folder) / "template.db"
        SqliteStore(path).close()
        leftovers = sorted(p.name for p in Path(folder).iterdir() if p.name.endswith(("-wal", "-shm")))
        assert not leftovers, f"a closed store left {leftovers}: its file alone is not the whole database"
        return path.read_bytes()


def fresh_sqlite_file(path: Path) -> Path:
    """Put an empty store's file at ``path`` (readable by its owner only, as the store makes it) unless a file
    is there already (a test's own data, e.g. rows an earlier release wrote)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(_template())
    return path
