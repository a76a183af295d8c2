"""The suite's Hypothesis settings (tests/conftest.py): no property is failed by the clock."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_no_example_is_failed_for_the_time_it_took_nor_for_the_time_drawing_it_took() -> None:
    """A thread that waits for a core past 200 ms is no failure of the code it runs (test_checked_times failed so
    once, its examples at 0.4 ms each); every property test takes these defaults where it sets no others."""
    default = settings.default
    assert default is not None
    assert default.deadline is None
    assert HealthCheck.too_slow in default.suppress_health_check
