"""The Functions app served on a free local port over a throwaway SQLite store, for the documents' shell blocks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def served_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """What ``make run`` serves (``function_app.app``, real time), at ``http://127.0.0.1:<free port>``."""
    from tests.load.served import served_on_sqlite  # imports function_app, which reads the settings

    with served_on_sqlite(tmp_path_factory.mktemp("docs") / "oncegate.db", "d" * 40) as url:
        yield url
