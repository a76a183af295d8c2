"""What each service action takes: plain values, already checked for shape at the edge.

The HTTP entry points (and the tests' ``Gate``) parse the wire's pydantic requests into these in
:mod:`oncegate.entrypoints.parse`; a service never sees a wire model. Each field is the request's,
with the wire's types made domain ones (a flow reference is a :class:`~oncegate.domain.records.Flow`).

Check and claim has no command of its own: its request is parsed straight into the
:class:`~oncegate.domain.decisions.Intent` the claim service identifies and the decision table reads (issue 32).
Here are the commands the claim service and the lists read; each other action's are in the module named for it
(:mod:`.results`, :mod:`.conflicts`, :mod:`.registry`, :mod:`.perform`), made only when its action is first
called, so that a new process answering its first claim does not build them (issue 36's cold start).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from oncegate.domain.copies import frozen


@frozen(kw_only=True)
class KeyOf:
    """A business key in its scope: what Look up claim takes, and what Perform once and Report conflict add to."""

    scope: str
    key: str


@frozen(kw_only=True)
class BusinessData(KeyOf):
    """A business key with its data: the payload (or the caller's own fingerprint) and the source system."""

    payload: Any = None
    fingerprint: str | None = None
    source: str | None = None


@frozen(kw_only=True)
class Paging:
    """Which page of a list: at most ``limit`` items after ``cursor`` (the store's, or None for the first)."""

    limit: int
    cursor: str | None = None


@frozen(kw_only=True)
class ListAttention(Paging):
    """The claims that need a person, of one scope or all."""

    scope: str | None = None


class Unchanged(Enum):
    """A setting that Set scope or Register flow did not name: it stays as it is (issue 31)."""

    KEEP = "keep"


KEEP = Unchanged.KEEP
