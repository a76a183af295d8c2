"""Whole processes for the tests that race them, started from one process that imported the suite's modules once.

``multiprocessing``'s spawn starts each process as a new interpreter that imports whatever its target's module
imports (the claim service, pydantic, the Azure SDK, the suite's conftest and pytest): 0.3 to 0.5 s of CPU a
process, paid again by every racer of every test. Its forkserver starts one interpreter the same way (none of the
test process's threads, locks or state, which plain fork would copy), imports the modules once there, and forks
each process from it: every racer is still a process of its own, started with nothing a test did in its parent,
only its modules already imported. What the racers race (a file, a store's tables, a secret's folder) they are
handed as arguments, as before; they read no setting from the environment, which the forked processes have as it
was when the first of them started.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext

# What every racer imports: the suite's conftest (Hypothesis, the stores, the service) and the Azure SDK's tables.
COMMON = ("tests.conftest", "tests.gate", "oncegate.stores.tables.store")


def racing(module: str) -> ForkServerContext:
    """The context to start racers with; ``module`` (the caller's ``__name__``), which holds their target, is
    imported once with the rest when the first racer of this test process starts."""
    context = multiprocessing.get_context("forkserver")
    # Read when the server starts, once per test process: a module named later is imported by each racer instead.
    context.set_forkserver_preload([*COMMON, module])
    return context
