"""The daily purge timer also repairs the claim index (Table Storage's index rows by source and reference)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from oncegate.errors import StoreUnavailable
from tests.gate import Gate
from tests.http.test_governance import TIMERS_LOGGER, run_timer


def test_the_purge_timer_repairs_the_claims_of_the_last_two_days(
    service: Gate, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[datetime] = []

    def repair(*, received_since: datetime) -> int:
        asked.append(received_since)
        return 3

    monkeypatch.setattr(service.store, "repair_index", repair)
    with caplog.at_level(logging.INFO, logger=TIMERS_LOGGER):
        run_timer("purge_finished_claims")

    [since] = asked
    assert abs((datetime.now(UTC) - since).total_seconds() - 2 * 86_400) < 60
    assert any("Claim index repair: 3 claims" in record.getMessage() for record in caplog.records)


def test_a_failed_repair_is_a_warning_and_the_purge_still_reports(
    service: Gate, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def down(*, received_since: datetime) -> int:
        raise StoreUnavailable("Table Storage is unavailable: ServiceRequestError")

    monkeypatch.setattr(service.store, "repair_index", down)
    with caplog.at_level(logging.INFO, logger=TIMERS_LOGGER):
        run_timer("purge_finished_claims")

    messages = [(record.levelno, record.getMessage()) for record in caplog.records if record.name == TIMERS_LOGGER]
    assert messages[0][0] == logging.INFO
    assert any(level == logging.WARNING and "Claim index repair failed" in text for level, text in messages)
