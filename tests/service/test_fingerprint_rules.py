"""Fingerprint rules per scope on both stores: the same business data, however the trigger dresses it (issue 25).

The trigger bodies in ``tests/fixtures/triggers`` have the shape SharePoint's "When an item is created or
modified" and Dataverse's "When a row is added, modified or deleted" give a flow.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oncegate.domain.fingerprint_rules import FingerprintPreset, applied, pointer_problem, rules
from oncegate.domain.statuses import Decision
from oncegate.entrypoints.parse import validate
from oncegate.errors import InvalidRequest
from oncegate.models import SetScopeRequest
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, record, scopes, set_scope, succeeded

TRIGGERS = Path(__file__).parent.parent / "fixtures" / "triggers"
SHAREPOINT: dict[str, Any] = json.loads((TRIGGERS / "sharepoint-item.json").read_text())
DATAVERSE: dict[str, Any] = json.loads((TRIGGERS / "dataverse-row.json").read_text())
RE_FIRES = 20


def sharepoint_edit(item: dict[str, Any], n: int) -> dict[str, Any]:
    """The item as the trigger sends it after an edit that changed nothing that matters (the n-th save)."""
    edited = copy.deepcopy(item)
    edited["@odata.etag"] = f'"{4 + n}"'
    edited["Modified"] = f"2026-12-01T10:{n:02d}:00Z"
    edited["{VersionNumber}"] = edited["OData__UIVersionString"] = f"{4 + n}.0"
    edited["{TriggerWindowStartToken}"] = f"0x{0x2E + n:x}0000000000000000"
    edited["{TriggerWindowEndToken}"] = f"0x{0x2F + n:x}0000000000000000"
    edited["Editor"]["DisplayName"] = edited["Editor"]["Email"] = f"editor{n}@contoso.com"
    edited["Editor#Claims"] = f"i:0#.f|membership|editor{n}@contoso.com"
    return edited


def dataverse_edit(row: dict[str, Any], n: int) -> dict[str, Any]:
    edited = copy.deepcopy(row)
    edited["@odata.etag"] = f'W/"{4819032 + n}"'
    edited["versionnumber"] = 4819032 + n
    edited["versionnumber@OData.Community.Display.V1.FormattedValue"] = f"{4819032 + n:,}"
    edited["modifiedon"] = f"2026-12-01T10:{n:02d}:00Z"
    edited["modifiedon@OData.Community.Display.V1.FormattedValue"] = f"12/1/2026 10:{n:02d} AM"
    edited["_modifiedby_value"] = edited["RunAsSystemUserId"] = f"00000000-0000-0000-0000-{n:012d}"
    edited["_modifiedby_value@OData.Community.Display.V1.FormattedValue"] = f"Editor {n}"
    return edited


CASES = {
    "sharepoint": (SHAREPOINT, sharepoint_edit, "Amount"),
    "dataverse": (DATAVERSE, dataverse_edit, "totalamount"),
}


@pytest.mark.parametrize("preset", list(CASES))
def test_re_fires_with_system_fields_changed_are_duplicates_and_a_changed_amount_one_conflict(
    service: Gate, clock: FakeClock, preset: str
) -> None:
    body, edit, amount = CASES[preset]
    set_scope(service, fingerprint_preset=FingerprintPreset(preset))
    succeeded(service, payload=body)
    decisions: list[Decision] = []
    for n in range(RE_FIRES):
        fired = edit(body, n)
        if n == 7:
            fired[amount] = 99.0
        clock.advance(30)
        decisions.append(claim(service, run=f"run-{n + 2}", payload=fired).decision)

    assert decisions.count(Decision.CONFLICT) == 1
    assert decisions.count(Decision.DUPLICATE) == RE_FIRES - 1
    assert decisions[7] is Decision.CONFLICT


@pytest.mark.parametrize("preset", list(CASES))
def test_without_rules_every_re_fire_of_a_trigger_body_is_a_conflict(service: Gate, preset: str) -> None:
    body, edit, _ = CASES[preset]
    succeeded(service, payload=body)

    assert claim(service, run="run-2", payload=edit(body, 1)).decision is Decision.CONFLICT


def test_list_scopes_shows_the_rules_and_their_version(service: Gate) -> None:
    set_scope(service, fingerprint_include=["/order", "/lines/*/amount"], fingerprint_ignore=["/order/note"])
    set_scope(service, fingerprint_include=["/order", "/lines/*/amount"], fingerprint_ignore=["/order/note"])
    view = scopes(service)[SCOPE]

    assert view.fingerprint_include == ["/order", "/lines/*/amount"]
    assert view.fingerprint_ignore == ["/order/note"]
    # The same rules again make no new version.
    assert view.fingerprint_rules_version == 1


def test_a_preset_is_listed_with_its_fields(service: Gate) -> None:
    view = set_scope(service, fingerprint_preset=FingerprintPreset.SHAREPOINT, fingerprint_ignore=["/Created"])

    assert view.fingerprint_preset is FingerprintPreset.SHAREPOINT
    assert view.fingerprint_ignore == ["/Created"]


def test_a_claim_is_compared_under_the_rules_current_when_it_is_answered(service: Gate) -> None:
    order = {"order": "SO-1", "amount": 10, "modified": "09:00"}
    set_scope(service, fingerprint_ignore=["/modified"])
    succeeded(service, key="A", payload=order)
    # Under the first rules, the amount matters: a changed amount is a conflict.
    assert claim(service, run="run-2", key="A", payload={**order, "amount": 11}).decision is Decision.CONFLICT

    # The owner now fingerprints the order number alone: the claim made before is compared under it (issue 33).
    set_scope(service, fingerprint_include=["/order"])
    same_data = claim(service, run="run-3", key="A", payload={**order, "modified": "10:00"})
    other_amount = claim(service, run="run-4", key="A", payload={**order, "amount": 12})
    # And then no rules at all: the modified time matters again, for the claim made under the first rules too.
    set_scope(service, fingerprint_include=None, fingerprint_ignore=None)
    other_time = claim(service, run="run-5", key="A", payload={**order, "modified": "11:00"})

    assert same_data.decision is Decision.DUPLICATE
    assert other_amount.decision is Decision.DUPLICATE
    assert other_time.decision is Decision.CONFLICT
    assert other_time.changed_parts == ["/modified"]


def test_rules_set_on_another_instance_are_read_before_a_claim_made_under_them_is_compared(
    new_service: Callable[[], Gate],
) -> None:
    first, second = new_service(), new_service()
    claim(second, key="warm-up", run="run-0")  # the second instance has read the scopes: no rules yet
    set_scope(first, fingerprint_ignore=["/modified"])
    succeeded(first, payload={"amount": 10, "modified": "09:00"})

    again = claim(second, run="run-2", payload={"amount": 10, "modified": "10:00"})

    assert again.decision is Decision.DUPLICATE


def test_a_retried_attempt_is_compared_under_the_rules_current_when_it_is_answered(service: Gate) -> None:
    set_scope(service, fingerprint_ignore=["/modified"])
    failed = claim(service, payload={"amount": 10, "modified": "09:00"})
    record(service, failed, "failed", error="ERP down", retryable=True)
    set_scope(service, fingerprint_ignore=["/modified", "/sent"])

    retried = claim(service, run="run-2", payload={"amount": 10, "modified": "10:00", "sent": "10:01"})

    assert retried.decision is Decision.PROCEED


def test_a_dataverse_annotation_is_a_pointer_not_an_e_mail_address(service: Gate) -> None:
    # "name@OData.Community.Display.V1.FormattedValue" has the shape of an e-mail address: it is not refused.
    annotation = "/totalamount@OData.Community.Display.V1.FormattedValue"
    view = set_scope(service, fingerprint_ignore=[annotation])
    succeeded(service, payload=DATAVERSE)

    again = claim(service, run="run-2", payload={**DATAVERSE, annotation[1:]: "1 250,00 €"})

    assert view.fingerprint_ignore == [annotation]
    assert again.decision is Decision.DUPLICATE


def test_a_pointer_matching_nothing_is_no_error(service: Gate) -> None:
    set_scope(service, fingerprint_ignore=["/not/in/this/payload", "/lines/7/amount"])
    succeeded(service, payload=[1, 2])

    assert claim(service, run="run-2", payload=[1, 2]).decision is Decision.DUPLICATE


@pytest.mark.parametrize(
    ("field", "pointers", "named"),
    [
        ("fingerprintIgnore", ["/Modified", "Modified"], "'Modified'"),
        ("fingerprintInclude", ["/a~2b"], "'/a~2b'"),
        ("fingerprintIgnore", [""], "whole payload"),
    ],
)
def test_a_malformed_pointer_is_refused_naming_it(field: str, pointers: list[str], named: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        validate(SetScopeRequest, {"scope": SCOPE, field: pointers})

    assert refused.value.details[0][0] == field
    assert named in refused.value.message


@pytest.mark.parametrize(
    ("rules_", "payload", "left"),
    [
        (
            rules(1, include=["/a", "/lines/*/amount"]),
            {"a": 1, "b": 2, "lines": [{"amount": 3, "x": 4}, {}]},
            {"a": 1, "lines": [{"amount": 3}, None]},
        ),
        (
            rules(1, ignore=["/lines/*/x", "/b"]),
            {"a": 1, "b": 2, "lines": [{"amount": 3, "x": 4}]},
            {"a": 1, "lines": [{"amount": 3}]},
        ),
        (rules(1, include=["/a~1b", "/c~0"]), {"a/b": 1, "c~": 2, "d": 3}, {"a/b": 1, "c~": 2}),
        (rules(1, include=["/a"], ignore=["/a/x"]), {"a": {"x": 1, "y": 2}, "b": 3}, {"a": {"y": 2}}),
        (rules(1, include=["/1"]), ["x", "y", "z"], [None, "y", None]),
        (rules(1, include=["/zz"]), {"a": 1}, {}),
        (rules(1, ignore=["/a"]), "a scalar", "a scalar"),
        (rules(1, include=["/*"]), {"*": 1, "b": 2}, {"*": 1}),
    ],
)
def test_rules_leave_the_included_parts_less_the_ignored(rules_: Any, payload: Any, left: Any) -> None:
    assert applied(payload, rules_) == left


def test_pointers_follow_rfc_6901() -> None:
    assert pointer_problem("") is None
    assert pointer_problem("/a~0b~1c/0/*") is None
    assert pointer_problem("a") is not None
    assert pointer_problem("/a~") is not None
