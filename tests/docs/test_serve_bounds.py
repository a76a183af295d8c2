"""docs/operations.md names every bound ``oncegate serve`` puts on a connection, in the seconds the server uses.

An operator reading why a client was dropped finds each case there: a request's head or body arriving too
slowly, a kept-alive connection left silent, and an answer its client does not read (not named before, though
the server has dropped such clients since the writer stopped waiting in a send for them); and why one was turned
away: a connection past the most a worker holds, or a large body past what they hold of those.
"""

from __future__ import annotations

import re

import pytest

from oncegate.entrypoints.framing import IDLE_SECONDS
from oncegate.entrypoints.holdings import BUSY_RETRY_SECONDS, LARGE_BODIES_BYTES, MAX_CONNECTIONS
from oncegate.entrypoints.parse import MAX_BULK_BODY_BYTES
from tests.docs.markdown import REPO

OPERATIONS = REPO / "docs" / "operations.md"
PARAGRAPH = "Slow clients hold no handler thread"
BOUNDS = {
    "a request's head or body": r"its body must each arrive within (\d+) s",
    "a kept-alive connection left silent": r"kept-alive connection silent for (\d+) s",
    "an answer its client does not read": r"client takes nothing for (\d+) s is abandoned and its connection closed",
}


def slow_clients() -> str:
    """The paragraph on slow clients, its lines joined."""
    text = OPERATIONS.read_text(encoding="utf-8")
    paragraph = text[text.index(PARAGRAPH) :].split("\n\n")[0]
    return " ".join(paragraph.split())


@pytest.mark.parametrize("pattern", BOUNDS.values(), ids=BOUNDS.keys())
def test_each_bound_on_a_connection_is_documented_in_the_seconds_the_server_uses(pattern: str) -> None:
    found = re.search(pattern, slow_clients())

    assert found is not None, f"docs/operations.md does not say: {pattern}"
    assert int(found.group(1)) == IDLE_SECONDS


def test_what_a_worker_holds_is_documented_as_the_server_bounds_it() -> None:
    said = slow_clients()
    bulk_bodies = LARGE_BODIES_BYTES // MAX_BULK_BODY_BYTES
    words = {10: "ten"}  # as the paragraph spells it

    assert f"A worker holds at most {MAX_CONNECTIONS:,} connections" in said
    assert f"bounded at {words[bulk_bodies]} bulk bodies' worth, about {LARGE_BODIES_BYTES // 2**20} MiB" in said
    assert f"`Retry-After: {BUSY_RETRY_SECONDS}`" in said
