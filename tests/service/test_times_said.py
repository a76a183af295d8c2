"""Times in what a person reads, answers' reasons and the history's lines, are one form: ``2024-05-01T08:35:15Z``
(issue 33: the history said ``until 2024-05-01T08:35:15.123456+00:00`` and ``expired at 2024-05-01
08:35:15.123456+00:00``, whose space a terminal folded mid-value)."""

from __future__ import annotations

import re

from oncegate.domain.statuses import Decision
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim

SAID = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
ANY_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d[^\s,;)]*?(?=\.?(?:\s|$))")


def test_a_held_and_an_expired_lease_are_said_to_the_second_in_utc(service: Gate, clock: FakeClock) -> None:
    held = claim(service, run="run-1", lease_seconds=300)
    waiting = claim(service, run="run-2")
    clock.advance(301)
    taken_over = claim(service, run="run-3")

    lines = [entry.recognised_by for entry in service.get_claim(held.claim_id).history or []]
    times = ANY_TIME.findall(" ".join([*lines, waiting.reason, taken_over.reason]))

    assert (waiting.decision, taken_over.decision) == (Decision.IN_PROGRESS, Decision.RECONCILE)
    assert "2024-05-01T08:35:15Z" in " ".join(lines)
    assert len(times) >= 2
    assert all(SAID.fullmatch(time) for time in times), times
