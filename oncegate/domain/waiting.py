"""A run waiting for the holder of its claim: what Check and claim (wait) asks again at each poll (issue 25).

When a run that asked with ``wait`` meets another run's lease, the HTTP edge answers ``202 Accepted``
with a poll address that carries the run's :class:`Waiting`, sealed (``oncegate.entrypoints.waits``).
Each poll runs Check and claim again for it, as the run would if it asked itself: the same run id,
flow, fingerprint and lease. It holds the key only as the claim ids and keyed fingerprints the key
secrets make of it, never the business key or its data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta

from oncegate.domain.copies import frozen
from oncegate.domain.records import Flow

DEFAULT_MAX_WAIT_SECONDS = 900
MIN_MAX_WAIT_SECONDS = 1
MAX_MAX_WAIT_SECONDS = 86_400
# How long after its wait ended a poll address still answers (a poll repeated after it answered, say).
POLL_GRACE = timedelta(hours=1)
# The polls' schedule (issue 33): the engine comes back after half as long as the run has waited, no sooner
# than FIRST_POLL_SECONDS and no later than MAX_POLL_SECONDS. A holder done after 20 s is seen within 8 s of it,
# one done after 10 minutes within 14 polls; docs/performance.md has the table.
FIRST_POLL_SECONDS = 5
MAX_POLL_SECONDS = 90


def poll_after(waited: timedelta, left: timedelta) -> int:
    """Seconds until the next poll of a run that has ``waited`` so far, ``left`` before its wait or the
    holder's lease ends: half as long as it waited, 5 to 90 s, never past ``left`` (and never 0)."""
    seconds = min(max(FIRST_POLL_SECONDS, math.ceil(waited.total_seconds() / 2)), MAX_POLL_SECONDS)
    return max(1, min(seconds, math.ceil(left.total_seconds())))


@frozen
class WaitingIdentity:
    """The key as one secret makes it: its check value, the claim id, and the keyed fingerprint under each
    version of the scope's fingerprint rules a comparison may need (the current one, the claim's)."""

    key_id: str
    claim_id: str
    fingerprints: Mapping[int, str]


@frozen
class Unwritten:
    """The ``in_progress`` answers a wait's polls gave without writing them (issue 36): ``count`` answers of the
    series line ``series`` of a claim's history (written with the wait's first answer), the last at ``last_at``.
    The poll that ends the wait counts them in that line; until then each poll only reads the claim."""

    claim_id: str
    series: str
    attempt: int
    count: int
    last_at: datetime


@frozen
class Waiting:
    """A run's Check and claim, as it is asked again at each poll until ``deadline``.

    ``identities`` are in the key ring's lookup order (older secrets first); ``granted_to`` is the
    signed-in caller as the current secret digests it (None with function keys): only that caller's
    polls count. ``rules_version`` is the version its new claim would be made under.
    """

    scope: str
    run_id: str
    flow: Flow | None
    lease_seconds: int
    identities: tuple[WaitingIdentity, ...]
    rules_version: int
    deadline: datetime
    # When the wait began (the first request), which the polls' schedule counts from.
    since: datetime
    source: str | None = None
    reference: str | None = None
    granted_to: str | None = None
    has_fingerprint: bool = True
    # The answers its polls gave and did not write yet; None for a ticket of a release before issue 36.
    unwritten: Unwritten | None = None

    def over(self, now: datetime) -> bool:
        """Whether the wait is over: the poll answers what Check and claim says, 202 no more."""
        return now >= self.deadline

    def poll_after(self, now: datetime, lease_expires_at: datetime | None) -> int:
        """Seconds until the next poll: :func:`poll_after`, never past the wait's deadline or the holder's lease."""
        ends = min(self.deadline, lease_expires_at or self.deadline)
        return poll_after(now - self.since, ends - now)

    def expired(self, now: datetime) -> bool:
        """Whether the poll address is no longer honoured at all."""
        return now >= self.deadline + POLL_GRACE
