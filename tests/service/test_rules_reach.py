"""Rules reach the claims made before them, conflicts name what changed, a mistyped pointer is warned (issue 33).

Every test runs on both stores. A claim keeps a keyed digest of each member of its payload
(``oncegate.domain.members``), so a request is compared with it under the scope's current rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from oncegate.domain.fingerprint_rules import MAX_POINTER_LENGTH, MAX_POINTERS, FingerprintPreset
from oncegate.domain.keys import MAX_MEMBERS
from oncegate.domain.members import MAX_NAMED
from oncegate.domain.statuses import Decision
from oncegate.domain.warnings import RULE_MATCHED_NOTHING
from oncegate.models import ListConflictsQuery
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim, record, resolve, scopes, set_scope, succeeded
from tests.service.test_fingerprint_rules import CASES, RE_FIRES, SHAREPOINT, sharepoint_edit


def false_conflicts(service: Gate, clock: FakeClock, body: dict[str, Any], edit: Callable[..., Any]) -> int:
    """Of ``RE_FIRES`` re-fires with only system fields changed, how many were answered conflict."""
    decisions = []
    for n in range(RE_FIRES):
        clock.advance(30)
        decisions.append(claim(service, run=f"re-fire-{n}", payload=edit(body, n)).decision)
    return decisions.count(Decision.CONFLICT)


@pytest.mark.parametrize("preset", list(CASES))
def test_a_preset_set_after_the_claim_reaches_it(service: Gate, clock: FakeClock, preset: str) -> None:
    body, edit, amount = CASES[preset]
    succeeded(service, payload=body)
    before = false_conflicts(service, clock, body, lambda item, n: edit(item, n + RE_FIRES))

    set_scope(service, fingerprint_preset=FingerprintPreset(preset))
    after = false_conflicts(service, clock, body, edit)
    changed = claim(service, run="run-amount", payload={**edit(body, 99), amount: 99.0})

    print(f"{preset}: false conflicts per {RE_FIRES} re-fires of a claim made before its preset: {before} before it")
    print(f"{preset}: and {after} after it")
    assert (before, after) == (RE_FIRES, 0)
    assert changed.decision is Decision.CONFLICT
    assert changed.changed_parts == [f"/{amount}"]


def test_conflicts_kept_as_the_original_before_a_preset_stay_kept_and_later_edits_are_duplicates(
    service: Gate, clock: FakeClock
) -> None:
    succeeded(service, payload=SHAREPOINT)
    opened = [claim(service, run=f"run-{n}", payload=sharepoint_edit(SHAREPOINT, n)) for n in range(3)]
    for answer in opened:
        resolve(service, answer.conflict_id, "keep_original")

    set_scope(service, fingerprint_preset=FingerprintPreset.SHAREPOINT)
    kept_again = claim(service, run="run-kept", payload=sharepoint_edit(SHAREPOINT, 1))
    later = [claim(service, run=f"run-later-{n}", payload=sharepoint_edit(SHAREPOINT, 10 + n)) for n in range(3)]

    assert [answer.decision for answer in opened] == [Decision.CONFLICT] * 3
    assert kept_again.decision is Decision.DUPLICATE
    assert [answer.decision for answer in later] == [Decision.DUPLICATE] * 3


def test_a_conflict_names_the_changed_parts_and_never_their_values(service: Gate) -> None:
    order = {"Amount": 120.5, "Customer": "Fabrikam", "Lines": [{"Qty": 1}, {"Qty": 2}, {"Qty": 3}]}
    succeeded(service, payload=order)
    changed = {**order, "Amount": 987.25, "Lines": [{"Qty": 1}, {"Qty": 2}, {"Qty": 4444}]}

    answer = claim(service, run="run-2", payload=changed)
    conflict = service.get_conflict(answer.conflict_id or "")
    listed, _ = service.list_conflicts(ListConflictsQuery(scope=SCOPE))
    polled, _ = service.services.conflicts.poll_conflicts(scope=SCOPE, state="", limit=10)

    assert answer.changed_parts == conflict.changed_parts == ["/Amount", "/Lines/2/Qty"]
    assert answer.more_changed_parts is conflict.more_changed_parts is None
    assert "/Amount, /Lines/2/Qty changed" in answer.reason
    assert [view.changed_parts for view in listed] == [["/Amount", "/Lines/2/Qty"]]
    assert [item.changed for item in polled] == [("/Amount", "/Lines/2/Qty")]
    shown = (
        answer.model_dump_json()
        + conflict.model_dump_json()
        + json.dumps(service.get_claim(answer.claim_id).model_dump(mode="json"))
    )
    for value in ("987.25", "4444", "Fabrikam", "120.5"):
        assert value not in shown


def test_a_conflict_names_the_first_changed_parts_and_counts_the_rest(service: Gate) -> None:
    order = {f"field{n:02d}": n for n in range(MAX_NAMED + 5)}
    succeeded(service, payload=order)

    answer = claim(service, run="run-2", payload={name: value + 1 for name, value in order.items()})

    assert answer.changed_parts == [f"/field{n:02d}" for n in range(MAX_NAMED)]
    assert answer.more_changed_parts == 5
    assert service.get_conflict(answer.conflict_id or "").more_changed_parts == 5


def test_a_mistyped_include_pointer_is_warned_and_listed_until_it_matches(service: Gate) -> None:
    set_scope(service, fingerprint_include=["/Amount", "/Amout"], fingerprint_ignore=["/Optional"])
    mistyped = claim(service, payload={"Amount": 10})
    unmatched = scopes(service)[SCOPE].fingerprint_unmatched

    set_scope(service, fingerprint_include=["/Amount"], fingerprint_ignore=["/Optional"])
    right = claim(service, run="run-2", key="other", payload={"Amount": 10})

    assert RULE_MATCHED_NOTHING in mistyped.warnings
    assert unmatched == ["/Amout"]
    assert RULE_MATCHED_NOTHING not in right.warnings
    assert scopes(service)[SCOPE].fingerprint_unmatched is None


def test_an_include_pointer_no_payload_matched_yet_is_listed(service: Gate) -> None:
    view = set_scope(service, fingerprint_include=["/Amount"])

    assert view.fingerprint_unmatched == ["/Amount"]


def test_rules_set_on_one_instance_reach_another_at_once_for_a_claim_made_before_them(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    first, second = new_service(), new_service()
    succeeded(second, payload=SHAREPOINT)  # the second instance has read the scope: no rules
    set_scope(first, fingerprint_preset=FingerprintPreset.SHAREPOINT)

    conflicts = false_conflicts(second, clock, SHAREPOINT, sharepoint_edit)
    # A key claimed on the second instance still under the rules it read, re-fired there and on the first.
    succeeded(second, key="claimed-under-old-rules", payload=SHAREPOINT, run="run-old")
    again = [
        claim(gate, key="claimed-under-old-rules", run=f"run-{n}", payload=sharepoint_edit(SHAREPOINT, n)).decision
        for n, gate in enumerate((first, second))
    ]

    assert conflicts == 0
    assert again == [Decision.DUPLICATE, Decision.DUPLICATE]


def test_a_claim_past_the_bound_keeps_its_fingerprint_and_the_rules_it_was_made_with(service: Gate) -> None:
    order = {"Modified": "09:00", **{f"line{n}": n for n in range(MAX_MEMBERS)}}
    succeeded(service, payload=order)
    set_scope(service, fingerprint_ignore=["/Modified"])

    again = claim(service, run="run-2", payload={**order, "Modified": "10:00"})

    assert again.decision is Decision.CONFLICT
    assert again.changed_parts is None


def test_a_payload_whose_member_names_seem_personal_data_is_claimed_and_keeps_its_fingerprint(service: Gate) -> None:
    order = {"Modified": "09:00", "alex@contoso.com": "approver"}
    first = claim(service, payload=order)
    set_scope(service, fingerprint_ignore=["/Modified"])

    record(service, first, "succeeded", target_record_id="SO-1")
    again = claim(service, run="run-2", payload={**order, "Modified": "10:00"})

    assert first.decision is Decision.PROCEED
    assert again.decision is Decision.CONFLICT
    assert service.store.get_claim(first.claim_id).members is None


def test_a_scope_takes_any_number_of_maximal_rule_changes_keeping_the_versions_its_claims_use(service: Gate) -> None:
    def pointers(change: int, kind: str) -> list[str]:
        return [f"/{kind}{change:02d}{n:02d}-" + "x" * (MAX_POINTER_LENGTH - 9) for n in range(MAX_POINTERS)]

    versions = []
    for change in range(20):
        view = set_scope(service, fingerprint_include=pointers(change, "i"), fingerprint_ignore=pointers(change, "g"))
        versions.append(view.fingerprint_rules_version)
        if change == 2:
            claim(service, key="made-under-3", payload={"a": 1})

    kept = [rules.version for rules in service.store.list_scopes()[0].fingerprint_rules]
    assert versions == list(range(1, 21))
    assert kept[0] == 3
    assert kept[-1] == 20
    assert len(kept) < 20


def test_a_re_fire_whose_ignored_members_were_all_there_is_is_a_duplicate(service: Gate) -> None:
    # The only ETag of Meta, the only attachment: ignored, what is left is an empty object and an empty array, as
    # in a re-fire that has none. Both ways round, a duplicate; Meta turned into an array is a change.
    set_scope(service, fingerprint_ignore=["/Meta/ETag", "/Attachments/*"])
    succeeded(service, payload={"Amount": 1, "Meta": {"ETag": "w1"}, "Attachments": ["a.pdf"]})

    bare = claim(service, run="run-bare", payload={"Amount": 1, "Meta": {}, "Attachments": []})
    again = claim(service, run="run-again", payload={"Amount": 1, "Meta": {"ETag": "w2"}, "Attachments": ["b.pdf"]})
    other = claim(service, run="run-other", payload={"Amount": 1, "Meta": [], "Attachments": []})

    assert (bare.decision, again.decision) == (Decision.DUPLICATE, Decision.DUPLICATE)
    assert other.decision is Decision.CONFLICT
    assert other.changed_parts == ["/Meta"]


def test_a_claim_made_with_an_empty_container_is_the_same_as_a_re_fire_whose_members_there_are_all_ignored(
    service: Gate,
) -> None:
    succeeded(service, payload={"Amount": 1, "Meta": {}})
    set_scope(service, fingerprint_ignore=["/Meta/ETag"])

    answer = claim(service, run="run-2", payload={"Amount": 1, "Meta": {"ETag": "w2"}})

    assert answer.decision is Decision.DUPLICATE
