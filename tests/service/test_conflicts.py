"""Conflicts: found by Check and claim or reported by a flow, listed, and resolved three ways."""

from __future__ import annotations

import pytest

from oncegate.domain.statuses import ClaimStatus, ConflictOrigin, ConflictStatus, Decision, EventKind, Resolution
from oncegate.entrypoints import error_map
from oncegate.errors import NotFound, StateConflict
from oncegate.models import ClaimResponse, ListConflictsQuery
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import claim, history, keyed, record, report, resolve, succeeded

# -- resolve --------------------------------------------------------------------------------------


def resolved_after_success(service: Gate, fingerprint: str, decision: str) -> ClaimResponse:
    """v1 succeeded (target SO-1); then ``fingerprint`` met it, and its conflict was resolved with ``decision``."""
    succeeded(service, fingerprint="v1", target="SO-1")
    conflict = claim(service, run="run-2", fingerprint=fingerprint)
    resolve(service, conflict.conflict_id, decision)
    return conflict


def test_accept_new_lets_the_new_version_proceed_and_keeps_the_earlier_result(service: Gate, clock: FakeClock) -> None:
    first = succeeded(service, fingerprint="v1", target="SO-1")
    clock.advance(60)
    conflict = claim(service, run="run-2", fingerprint="v2")
    clock.advance(60)

    resolved = resolve(service, conflict.conflict_id, "accept_new")
    clock.advance(60)
    new_version = claim(service, run="run-3", fingerprint="v2")

    assert resolved.status is ConflictStatus.RESOLVED
    assert resolved.resolution is not None
    assert (resolved.resolution.decision, resolved.resolution.reviewer) == (Resolution.ACCEPT_NEW, "ops@contoso")
    assert new_version.decision is Decision.PROCEED
    assert new_version.attempt == 2
    record(service, new_version, target_record_id="SO-2")
    view = service.get_claim(first.claim_id)
    assert (view.fingerprint, view.target_record_id) == (keyed("v2"), "SO-2")
    results = [entry.details.get("targetRecordId") for entry in view.history or [] if entry.kind is EventKind.RESULT]
    assert results == ["SO-1", "SO-2"]
    assert (EventKind.RESOLUTION, "accept_new") in history(service, first.claim_id)
    again = claim(service, run="run-4", fingerprint="v2")
    assert again.result is not None
    assert (again.decision, again.result.target_record_id) == (Decision.DUPLICATE, "SO-2")


def test_after_accept_new_the_old_version_does_not_proceed_and_the_new_one_still_does(service: Gate) -> None:
    resolved_after_success(service, "v2", "accept_new")

    old_version = claim(service, run="run-3", fingerprint="v1")
    new_version = claim(service, run="run-4", fingerprint="v2")

    # v1 differs from the claim's current version v2 (a conflict by the table), and its side effect was done once.
    assert old_version.decision is Decision.CONFLICT
    assert new_version.decision is Decision.PROCEED


def test_keep_original_makes_the_new_fingerprint_a_duplicate_of_the_original(service: Gate) -> None:
    conflict = resolved_after_success(service, "v1-reformatted", "keep_original")

    alias = claim(service, run="run-3", fingerprint="v1-reformatted")
    original = claim(service, run="run-4", fingerprint="v1")
    other = claim(service, run="run-5", fingerprint="v3")

    assert alias.result is not None
    assert (alias.decision, alias.result.target_record_id) == (Decision.DUPLICATE, "SO-1")
    assert original.decision is Decision.DUPLICATE
    assert other.decision is Decision.CONFLICT
    assert other.conflict_id != conflict.conflict_id


def test_dismiss_closes_the_conflict_and_the_next_mismatch_opens_a_new_one(service: Gate) -> None:
    succeeded(service, fingerprint="v1")
    conflict = claim(service, run="run-2", fingerprint="v2")

    resolve(service, conflict.conflict_id, "dismiss")
    again = claim(service, run="run-3", fingerprint="v2")

    assert conflict.conflict_id is not None
    assert again.conflict_id is not None
    assert again.decision is Decision.CONFLICT
    assert again.conflict_id != conflict.conflict_id
    assert service.get_conflict(again.conflict_id).status is ConflictStatus.OPEN
    assert service.get_conflict(conflict.conflict_id).status is ConflictStatus.RESOLVED
    # The new conflict is as stable as the first was.
    assert claim(service, run="run-4", fingerprint="v2").conflict_id == again.conflict_id


@pytest.mark.parametrize("decision", ["accept_new", "keep_original", "dismiss"])
def test_resolving_again_the_same_way_is_a_no_op(service: Gate, clock: FakeClock, decision: str) -> None:
    first = succeeded(service, fingerprint="v1")
    conflict = claim(service, run="run-2", fingerprint="v2")
    resolved = resolve(service, conflict.conflict_id, decision)
    claim_before = service.get_claim(first.claim_id)
    clock.advance(60)

    again = resolve(service, conflict.conflict_id, decision, reviewer="someone-else@contoso")

    assert again == resolved
    assert service.get_claim(first.claim_id) == claim_before


@pytest.mark.parametrize(("first", "second"), [("accept_new", "keep_original"), ("dismiss", "accept_new")])
def test_resolving_again_another_way_is_rejected(service: Gate, first: str, second: str) -> None:
    answer = succeeded(service, fingerprint="v1")
    conflict = claim(service, run="run-2", fingerprint="v2")
    resolved = resolve(service, conflict.conflict_id, first)
    claim_before = service.get_claim(answer.claim_id)

    with pytest.raises(StateConflict) as rejected:
        resolve(service, conflict.conflict_id, second)

    assert (error_map.code(rejected.value), error_map.status(rejected.value)) == ("conflict_resolved", 409)
    assert conflict.conflict_id is not None
    assert service.get_conflict(conflict.conflict_id) == resolved
    assert service.get_claim(answer.claim_id) == claim_before


@pytest.mark.parametrize("outcome", [None, "unknown"], ids=["in_progress", "unknown"])
def test_accept_new_while_an_attempt_runs_or_is_in_doubt_is_rejected(service: Gate, outcome: str | None) -> None:
    first = claim(service, run="run-1", fingerprint="v1")
    if outcome:
        record(service, first, outcome)
    conflict = claim(service, run="run-2", fingerprint="v2")
    assert conflict.conflict_id is not None

    with pytest.raises(StateConflict) as busy:
        resolve(service, conflict.conflict_id, "accept_new")

    assert error_map.code(busy.value) == "claim_busy"
    assert service.get_conflict(conflict.conflict_id).status is ConflictStatus.OPEN
    assert service.get_claim(first.claim_id).fingerprint == keyed("v1")
    # Once the attempt has its result, the same decision goes through.
    if outcome is None:
        record(service, first, target_record_id="SO-1")
    else:
        reconciled = claim(service, run="run-3", fingerprint="v1")
        record(service, reconciled, target_record_id="SO-1")
    assert resolve(service, conflict.conflict_id, "accept_new").status is ConflictStatus.RESOLVED


def test_resolving_a_conflict_that_does_not_exist_is_not_found(service: Gate) -> None:
    with pytest.raises(NotFound):
        resolve(service, "a" * 24, "dismiss")


# -- report ---------------------------------------------------------------------------------------


def test_a_reported_conflict_is_open_and_the_same_for_the_same_claim_and_fingerprint(service: Gate) -> None:
    answer = succeeded(service, fingerprint="v1")

    reported = report(service, fingerprint="v2", details={"erpAmount": 12.5})
    again = report(service, run="run-10", fingerprint="v2")
    other = report(service, fingerprint="v3")
    found_by_claim = claim(service, run="run-11", fingerprint="v2")

    assert (reported.status, reported.origin, reported.claim_id) == (
        ConflictStatus.OPEN,
        ConflictOrigin.REPORTED,
        answer.claim_id,
    )
    assert reported.details == {"erpAmount": 12.5}
    assert again.conflict_id == reported.conflict_id
    assert other.conflict_id != reported.conflict_id
    assert found_by_claim.conflict_id == reported.conflict_id
    assert (EventKind.CONFLICT, "conflict") in history(service, answer.claim_id)


def test_a_reported_conflict_for_a_key_never_claimed_is_not_found(service: Gate) -> None:
    with pytest.raises(NotFound) as missing:
        report(service, key="ORDER-never-claimed")

    assert missing.value.target == "key"
    assert service.list_conflicts(ListConflictsQuery(status=None))[0] == []


def test_a_reported_conflict_after_dismissal_opens_a_new_one(service: Gate) -> None:
    succeeded(service, fingerprint="v1")
    first = report(service, fingerprint="v2")
    resolve(service, first.conflict_id, "dismiss")

    second = report(service, fingerprint="v2")

    assert second.conflict_id != first.conflict_id
    assert second.status is ConflictStatus.OPEN


# -- list -----------------------------------------------------------------------------------------


def test_conflicts_list_by_status_and_case_insensitive_scope(service: Gate, clock: FakeClock) -> None:
    succeeded(service, key="ORDER-1", fingerprint="v1")
    succeeded(service, key="MAIL-1", scope="mail.send-invoice", fingerprint="v1")
    order = claim(service, run="run-2", key="ORDER-1", fingerprint="v2")
    clock.advance(1)
    mail = claim(service, run="run-3", key="MAIL-1", scope="mail.send-invoice", fingerprint="v2")
    clock.advance(1)
    resolve(service, order.conflict_id, "dismiss")

    def listed(**query: object) -> list[str]:
        return [
            conflict.conflict_id for conflict in service.list_conflicts(ListConflictsQuery.model_validate(query))[0]
        ]

    assert listed() == [mail.conflict_id]
    assert listed(status="resolved") == [order.conflict_id]
    assert listed(status=None) == [order.conflict_id, mail.conflict_id]
    assert listed(status=None, scope="ERP.Create-Order") == [order.conflict_id]
    assert listed(status="open", scope="erp.create-order") == []
    assert service.get_claim(order.claim_id).status is ClaimStatus.SUCCEEDED
