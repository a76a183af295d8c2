"""A costly result computed once per pytest run, however many processes run the suite.

``make test`` runs the suite in two processes (pytest-xdist), each a session of its own, so a session-scoped
fixture runs once in each. ``once_per_run`` keeps the first process's result as JSON in the temporary folder
the run's processes share, under a lock: another process that needs it meanwhile waits for it, then reads it.
A computation that fails writes nothing, so each process that needs it fails on its own. Checkov's report
(about 3 s of CPU) and the Kusto parser's diagnostics use it, whichever process their tests run in.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from typing import Any

import pytest


def once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON-able result, computed by the first process of the run to ask for ``name``."""
    base = tmp_path_factory.getbasetemp()
    # A worker's base is popen-gwN inside the run's own folder; pytest alone uses the run's folder itself.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    kept = shared / f"{name}.json"
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
        if kept.is_file():
            return json.loads(kept.read_text(encoding="utf-8"))
        result = compute()
        kept.write_text(json.dumps(result), encoding="utf-8")
        return result
