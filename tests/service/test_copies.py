"""The claim path's quick copy of a record is the copy ``dataclasses.replace`` makes, and its records' quick
``__init__`` makes what the one ``dataclasses`` writes makes (issue 36)."""

from __future__ import annotations

import dataclasses
import inspect
from datetime import UTC, datetime, timedelta

import pytest

from oncegate.domain.copies import WRITTEN_BY_DATACLASSES, replaced
from oncegate.domain.decisions import ClaimAnswer, Identity, Intent
from oncegate.domain.keys import Fingerprint, KeyHasher
from oncegate.domain.records import Claim, Flow, HistoryEvent
from oncegate.domain.statuses import AnswerStatus, Decision
from tests.support.records import event, full_claim

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


QUICK = (Claim, HistoryEvent, Intent, ClaimAnswer, Identity, Fingerprint)


def test_the_claim_path_s_records_are_made_quickly() -> None:
    assert set(WRITTEN_BY_DATACLASSES) == set(QUICK)


@pytest.mark.parametrize("kind", QUICK, ids=lambda kind: kind.__name__)
def test_a_quick_init_takes_the_parameters_dataclasses_writes(kind: type) -> None:
    quick = inspect.signature(vars(kind)["__init__"])
    written = inspect.signature(WRITTEN_BY_DATACLASSES[kind])
    assert [(p.name, p.kind) for p in quick.parameters.values()] == [
        (p.name, p.kind) for p in written.parameters.values()
    ]
    for name, parameter in written.parameters.items():
        default = dataclasses.MISSING if parameter.default is inspect.Parameter.empty else parameter.default
        field = next((one for one in dataclasses.fields(kind) if one.name == name), None)
        if field is not None and field.default_factory is not dataclasses.MISSING:
            continue  # the factory's marker: checked by what it makes below
        assert quick.parameters[name].default == parameter.default, name
        assert default is dataclasses.MISSING or quick.parameters[name].default is parameter.default, name


def _made_both_ways(kind: type, /, *args: object, **kwargs: object) -> tuple[object, object]:
    quick = kind(*args, **kwargs)
    written: object = object.__new__(kind)
    WRITTEN_BY_DATACLASSES[kind](written, *args, **kwargs)
    return quick, written


@pytest.mark.parametrize(
    "record",
    [full_claim(), full_claim(flow=None, fingerprint=None), event("c" * 52), _intent()],
    ids=["claim", "bare claim", "history line", "intent"],
)
def test_a_record_made_quickly_is_the_record_dataclasses_makes(record: object) -> None:
    kind = type(record)
    values = {one.name: getattr(record, one.name) for one in dataclasses.fields(kind)}  # type: ignore[arg-type]
    quick, written = _made_both_ways(kind, **values)
    assert quick == written == record
    assert vars(quick) == vars(written)
    assert list(vars(quick)) == list(vars(written))


def test_defaults_and_factories_are_what_dataclasses_gives() -> None:
    quick, written = _made_both_ways(
        ClaimAnswer,
        decision=Decision.PROCEED,
        recognised_by="new",
        claim_id="c",
        status=AnswerStatus.IN_PROGRESS,
        attempt=1,
        reason="r",
    )
    assert vars(quick) == vars(written)
    assert quick.warnings == []  # type: ignore[attr-defined]
    assert quick.warnings is not written.warnings  # type: ignore[attr-defined]  # a new list each time, never shared
    quick_intent, written_intent = _made_both_ways(Intent, run_id="r", flow=None, fingerprint=None, now=NOW, scope="s")
    assert vars(quick_intent) == vars(written_intent)
    quick_decided, written_decided = _made_both_ways(ClaimAnswer, Decision.DUPLICATE, "seen", "done")
    assert vars(quick_decided) == vars(written_decided)
    fingerprint = Fingerprint("fp1:keyed", "sha256:plain")
    assert vars(fingerprint) == vars(_made_both_ways(Fingerprint, "fp1:keyed", plain="sha256:plain")[1])
    hasher = KeyHasher("s" * 32)
    quick_identity, written_identity = _made_both_ways(Identity, hasher, "c" * 52, fingerprint)
    assert vars(quick_identity) == vars(written_identity)
    assert (vars(quick_identity)["members"], vars(quick_identity)["granted_to"]) == (None, None)
    quick_full, written_full = _made_both_ways(Identity, hasher, "c", None, members={"": "o:1"}, granted_to="fp1:who")
    assert vars(quick_full) == vars(written_full)


def test_a_frozen_record_made_quickly_stays_frozen_and_refuses_what_its_init_refuses() -> None:
    claim = full_claim()
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.attempt = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        HistoryEvent("c")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Intent("r")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Claim(**{one.name: getattr(claim, one.name) for one in dataclasses.fields(Claim)}, extra=1)  # type: ignore[call-arg]
