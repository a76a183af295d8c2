"""docs/operations.md names every bound ``oncegate serve`` puts on a connection, in the seconds the server uses.

An operator reading why a client was dropped finds each case there: a request's head or body arriving too
slowly, a kept-alive connection left silent, and an answer its client does not read (not named before, though
the server has dropped such clients since the writer stopped waiting in a send for them).
"""

from __future__ import annotations

import re

import pytest

from oncegate.entrypoints.framing import IDLE_SECONDS
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
