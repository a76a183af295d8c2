"""host.json for production: nothing that matters is sampled away, and routes live under /api."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

HOST_JSON = Path(__file__).resolve().parents[2] / "host.json"


@pytest.fixture(scope="module")
def host() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(HOST_JSON.read_text(encoding="utf-8"))
    return loaded


def test_sampling_never_drops_requests_exceptions_or_log_lines(host: dict[str, Any]) -> None:
    # Log lines (warnings included) are Trace telemetry; their volume is set by logLevel, not by sampling.
    excluded = host["logging"]["applicationInsights"]["samplingSettings"]["excludedTypes"].split(";")
    assert {"Request", "Exception", "Trace"} <= set(excluded)


def test_warnings_are_logged_everywhere_and_requests_are_recorded(host: dict[str, Any]) -> None:
    levels = host["logging"]["logLevel"]
    order = ["Trace", "Debug", "Information", "Warning", "Error", "Critical", "None"]
    assert all(order.index(level) <= order.index("Warning") for level in levels.values())
    assert levels["Host.Results"] == "Information"


def test_routes_live_under_api_and_a_stuck_call_ends(host: dict[str, Any]) -> None:
    assert host["extensions"]["http"]["routePrefix"] == "api"
    hours, minutes, seconds = (int(part) for part in host["functionTimeout"].split(":"))
    # Long enough for a slow store behind retries, within the 230 s the Azure front end waits for an answer.
    assert 30 <= hours * 3600 + minutes * 60 + seconds <= 230
