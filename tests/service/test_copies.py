"""The claim path's quick copy of a record is the copy ``dataclasses.replace`` makes (issue 36)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from oncegate.domain.copies import replaced
from oncegate.domain.intent import Intent
from oncegate.domain.records import Flow

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def _intent() -> Intent:
    return Intent(
        run_id="run-1",
        flow=Flow("Create ERP order", "Default-contoso"),
        fingerprint=None,
        now=NOW,
        scope="erp.create-order",
        lease=timedelta(seconds=300),
        warnings=("no-flow",),
    )


def test_a_copy_equals_what_replace_makes_and_leaves_the_original_alone() -> None:
    intent = _intent()
    later = NOW + timedelta(seconds=1)
    copy = replaced(intent, decided_at=later, run_id="run-2")
    assert copy == dataclasses.replace(intent, decided_at=later, run_id="run-2")
    assert type(copy) is Intent
    assert (intent.decided_at, intent.run_id) == (None, "run-1")


def test_a_name_that_is_no_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field"):
        replaced(_intent(), decision="proceed")
