"""What the app logs: ONCEGATE_LOG_LEVEL, a line per request only at DEBUG, and the Azure SDK quiet but for warnings."""

from __future__ import annotations

import http.client
import logging
from collections.abc import Iterator

import pytest

from oncegate.entrypoints import logs


@pytest.fixture(autouse=True)
def levels_restored() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("oncegate", "azure")]
    before = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, before, strict=True):
        logger.setLevel(level)


@pytest.mark.parametrize(
    ("value", "level"),
    [(None, logging.INFO), ("debug", logging.DEBUG), (" Warning ", logging.WARNING), ("Information", logging.INFO)],
)
def test_the_level_follows_the_setting_in_either_spelling(value: str | None, level: int) -> None:
    assert logs.level_from(value) == level


def test_an_unknown_level_names_the_setting_and_the_values_it_takes() -> None:
    with pytest.raises(ValueError, match=r"ONCEGATE_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, not 'loud'"):
        logs.level_from("loud")


@pytest.mark.parametrize(("value", "sdk"), [("INFO", logging.WARNING), ("DEBUG", logging.DEBUG)])
def test_the_azure_sdk_logs_its_requests_only_at_debug(monkeypatch: pytest.MonkeyPatch, value: str, sdk: int) -> None:
    monkeypatch.setenv("ONCEGATE_LOG_LEVEL", value)

    logs.configure()

    assert logging.getLogger("azure.core.pipeline.policies.http_logging_policy").getEffectiveLevel() == sdk
    assert logging.getLogger("oncegate").level == logs.level_from(value)


def test_an_unreadable_level_logs_at_info_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ONCEGATE_LOG_LEVEL", "loud")

    assert logs.configure() == logging.INFO
    assert "ONCEGATE_LOG_LEVEL must be one of" in caplog.text


def request_lines(local_server: tuple[str, int], caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    logging.getLogger("oncegate").setLevel(level)
    caplog.clear()
    with caplog.at_level(level, logger="oncegate"):
        connection = http.client.HTTPConnection(*local_server, timeout=10)
        connection.request("GET", "/api/health")
        connection.getresponse().read()
        connection.close()
    return [record.getMessage() for record in caplog.records if "GET /api/health" in record.getMessage()]


def test_each_request_is_logged_at_debug_only(local_server: tuple[str, int], caplog: pytest.LogCaptureFixture) -> None:
    assert request_lines(local_server, caplog, logging.INFO) == []
    assert len(request_lines(local_server, caplog, logging.DEBUG)) == 1
