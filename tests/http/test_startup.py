"""A bad setting stops the app at import with one CRITICAL line naming it, not at the first request."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest

import function_app
from oncegate.config import ConfigError

SETTINGS = (
    "ONCEGATE_STORE", "ONCEGATE_SQLITE_PATH", "ONCEGATE_TABLES_CONNECTION_STRING", "ONCEGATE_TABLES_ENDPOINT",
    "ONCEGATE_TABLE_PREFIX", "ONCEGATE_KEY_SECRET", "ONCEGATE_AUTH", "ONCEGATE_REQUIRE_REGISTERED_FLOWS",
    "ONCEGATE_UNKNOWN_ALERT_MINUTES",
)  # fmt: skip


def import_fresh_function_app() -> None:
    """Run function_app.py again as the Functions host would at start-up, apart from the module tests use."""
    spec = importlib.util.spec_from_file_location("function_app_at_startup", Path(function_app.__file__))
    assert spec is not None
    assert spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


@pytest.mark.parametrize(
    ("environment", "setting"),
    [
        ({"ONCEGATE_STORE": "bogus"}, "ONCEGATE_STORE"),
        (
            {"ONCEGATE_STORE": "tables", "ONCEGATE_TABLES_CONNECTION_STRING": "UseDevelopmentStorage=true"},
            "ONCEGATE_KEY_SECRET",
        ),
        ({"ONCEGATE_STORE": "tables", "ONCEGATE_KEY_SECRET": "s" * 40}, "ONCEGATE_TABLES_ENDPOINT"),
        ({"ONCEGATE_KEY_SECRET": "too-short"}, "ONCEGATE_KEY_SECRET"),
        ({"ONCEGATE_TABLE_PREFIX": "1-bad"}, "ONCEGATE_TABLE_PREFIX"),
        ({"ONCEGATE_AUTH": "password"}, "ONCEGATE_AUTH"),
        ({"ONCEGATE_REQUIRE_REGISTERED_FLOWS": "yes"}, "ONCEGATE_REQUIRE_REGISTERED_FLOWS"),
        ({"ONCEGATE_UNKNOWN_ALERT_MINUTES": "0"}, "ONCEGATE_UNKNOWN_ALERT_MINUTES"),
        ({"ONCEGATE_UNKNOWN_ALERT_MINUTES": "15m"}, "ONCEGATE_UNKNOWN_ALERT_MINUTES"),
        (
            {
                "ONCEGATE_KEY_SECRET": "@Microsoft.KeyVault(SecretUri=https://kv.vault.azure.net/secrets/oncegate-key-secret)"
            },
            "ONCEGATE_KEY_SECRET",
        ),
    ],
    ids=[
        "unknown-store",
        "tables-without-secret",
        "tables-without-endpoint",
        "short-secret",
        "bad-prefix",
        "unknown-auth",
        "require-registered-not-true-or-false",
        "unknown-alert-zero",
        "unknown-alert-not-a-number",
        "unresolved-key-vault-reference",
    ],
)
def test_a_bad_setting_fails_the_import_with_one_critical_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, environment: dict[str, str], setting: str
) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigError) as failed:
        import_fresh_function_app()

    assert failed.value.setting == setting
    critical = [record for record in caplog.records if record.levelno >= logging.ERROR]
    assert len(critical) == 1
    assert critical[0].levelno == logging.CRITICAL
    assert setting in critical[0].getMessage()


def test_good_settings_import_cleanly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "oncegate.db"))

    with caplog.at_level(logging.WARNING):
        import_fresh_function_app()

    assert caplog.records == []
