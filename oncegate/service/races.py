"""A lost race to another writer, run again: the one retry loop of the claim services.

A conditional write that lost (``StoreRace``) means another run changed the claim in between:
:func:`settled` runs the attempt again, which re-reads and decides again, so two runs can never both
be told ``proceed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from oncegate.errors import StoreRace, StoreUnavailable

# Each lost race means another writer made progress, so a handful of rounds always settles.
RACE_LIMIT = 8
T = TypeVar("T")


def settled(attempt: Callable[[], T]) -> T:
    """Run ``attempt`` again each time it loses a race to another writer (it re-reads what changed)."""
    for _ in range(RACE_LIMIT):
        try:
            return attempt()
        except StoreRace:
            continue
    raise StoreUnavailable("the record kept changing under this request; retry shortly.")
