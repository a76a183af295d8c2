"""The flow inventory on both stores: flows seen and registered, disabled flows blocked, overlaps, counts merged."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import AnswerStatus, ClaimStatus, Decision, EventKind
from oncegate.errors import NotFound, StoreUnavailable
from oncegate.models import FlowRef, FlowView, LookupRequest
from oncegate.service.inventory import FLUSH_INTERVAL, REGISTRY_TTL
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import (
    FLOW,
    FLOW_COPY,
    KEY,
    SCOPE,
    claim,
    flows,
    history,
    overlaps,
    record,
    register,
    set_scope,
    succeeded,
)

OTHER_FLOW = FlowRef(name="Send invoice / EU #2?", environment="Default-contoso")


@pytest.fixture
def strict_service(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Gate:
    """A service that lets only registered flows claim (ONCEGATE_REQUIRE_REGISTERED_FLOWS=true)."""
    return Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, require_registered_flows=True)


# -- flows seen ------------------------------------------------------------------------------------


def test_flows_are_recorded_with_first_and_last_seen_and_counts(service: Gate, clock: FakeClock) -> None:
    first_seen = clock.now
    succeeded(service, run="run-1")
    clock.advance(5)
    claim(service, run="run-2")  # duplicate
    claim(service, run="run-3", key="ORDER-2", flow=OTHER_FLOW)
    last_seen = clock.advance(5)
    claim(service, run="run-4", key="ORDER-3")
    claim(service, run="run-5", flow=None)

    listed = flows(service)

    assert set(listed) == {(FLOW.name, FLOW.environment), (OTHER_FLOW.name, OTHER_FLOW.environment)}
    seen = listed[(FLOW.name, FLOW.environment)]
    assert (seen.first_seen_at, seen.last_seen_at) == (first_seen, last_seen)
    assert (seen.claims, seen.duplicates) == (3, 1)
    assert (seen.registered, seen.enabled, seen.owner, seen.registered_at) == (False, True, None, None)
    other = listed[(OTHER_FLOW.name, OTHER_FLOW.environment)]
    assert (other.claims, other.duplicates) == (1, 0)


def test_counts_stay_in_memory_until_the_flush_interval_is_over(service: Gate, clock: FakeClock) -> None:
    claim(service, run="run-1")
    clock.advance(FLUSH_INTERVAL.total_seconds() - 1)
    claim(service, run="run-2", key="ORDER-2")

    assert service.store.list_flows() == []
    assert service.store.list_scopes() == []

    clock.advance(1)
    claim(service, run="run-3", key="ORDER-3")

    (stored,) = service.store.list_flows()
    assert (stored.flow.name, stored.flow.environment, stored.claims) == (FLOW.name, FLOW.environment, 3)
    assert [scope.scope for scope in service.store.list_scopes()] == [SCOPE]


def test_close_flushes_the_counts(new_service: Callable[[], Gate]) -> None:
    service = new_service()
    claim(service)
    service.inventory.close()

    assert flows(new_service())[(FLOW.name, FLOW.environment)].claims == 1


# -- registering -------------------------------------------------------------------------------------


def test_register_keeps_owner_enabled_and_notes_and_the_counts(service: Gate, clock: FakeClock) -> None:
    claim(service)
    flows(service)
    registered_at = clock.advance(10)

    view = register(service, owner="ana@contoso.com", notes="The production copy.")
    clock.advance(10)
    again = register(service, owner="kim@contoso.com", enabled=False)

    assert (view.registered, view.enabled, view.owner, view.notes) == (
        True,
        True,
        "ana@contoso.com",
        "The production copy.",
    )
    assert (view.registered_at, view.claims) == (registered_at, 1)
    # Only what the request names changes (the notes left out stay); it was first made at registered_at.
    assert (again.enabled, again.owner, again.notes, again.registered_at) == (
        False,
        "kim@contoso.com",
        "The production copy.",
        registered_at,
    )
    assert flows(service)[(FLOW.name, FLOW.environment)] == again


def test_registering_a_flow_answers_with_the_claims_this_instance_has_not_merged_yet(service: Gate) -> None:
    """Registering a flow right after its claims answered the stored counts without this instance's, which only
    the next list merged: `oncegate flows register` after a drill showed none of its claims."""
    succeeded(service)
    claim(service, run="run-2")

    answer = register(service, owner="ana@contoso.com")

    assert (answer.claims, answer.duplicates) == (2, 1)
    assert flows(service)[(FLOW.name, FLOW.environment)] == answer


OPERATOR_SET: dict[str, Any] = {"owner": "ana@contoso.com", "enabled": False, "notes": "Replaced by the v2 flow."}


def _registration(view: FlowView) -> dict[str, Any]:
    return {"owner": view.owner, "enabled": view.enabled, "notes": view.notes}


def test_a_bare_register_flow_changes_nothing_an_operator_set(service: Gate) -> None:
    """Issue 31: a bare PUT /api/flows enabled a disabled flow again and cleared its owner and notes."""
    register(service, **OPERATOR_SET)

    bare = register(service)
    one = register(service, owner="kim@contoso.com")

    assert _registration(bare) == OPERATOR_SET
    assert _registration(one) == {**OPERATOR_SET, "owner": "kim@contoso.com"}
    assert _registration(flows(service)[(FLOW.name, FLOW.environment)]) == _registration(one)
    assert claim(service).decision is Decision.BLOCKED


@pytest.mark.parametrize(("name", "default"), [("owner", None), ("enabled", True), ("notes", None)])
def test_a_flow_setting_sent_as_null_is_reset_and_the_others_stay(service: Gate, name: str, default: object) -> None:
    register(service, **OPERATOR_SET)

    reset = register(service, **{name: None})

    expected = {**OPERATOR_SET, name: default}
    assert _registration(reset) == expected
    assert _registration(flows(service)[(FLOW.name, FLOW.environment)]) == expected


def test_a_flow_name_with_characters_a_table_key_forbids_is_registered(service: Gate) -> None:
    register(service, OTHER_FLOW, owner="ana@contoso.com")
    claim(service, flow=OTHER_FLOW)

    view = flows(service)[(OTHER_FLOW.name, OTHER_FLOW.environment)]
    assert (view.owner, view.claims) == ("ana@contoso.com", 1)


# -- disabled flows ----------------------------------------------------------------------------------


def test_a_disabled_flow_is_blocked_before_any_claim_is_made(service: Gate) -> None:
    register(service, owner="ana@contoso.com", enabled=False, notes="Retired: the ERP connector replaced it.")

    answer = claim(service)

    assert answer.decision is Decision.BLOCKED
    assert (answer.status, answer.attempt, answer.claim_token) == (AnswerStatus.NONE, 0, None)
    assert "disabled" in answer.reason
    assert "ana@contoso.com" in answer.reason
    assert "Retired: the ERP connector replaced it." in answer.reason
    with pytest.raises(NotFound):
        service.lookup(LookupRequest(scope=SCOPE, key=KEY))
    assert flows(service)[(FLOW.name, FLOW.environment)].claims == 1


def test_a_disabled_flow_takes_over_nothing_and_the_claim_history_says_why(service: Gate, clock: FakeClock) -> None:
    held = claim(service, run="run-1", flow=FLOW_COPY, lease_seconds=60)
    done = succeeded(service, run="run-1", key="ORDER-2", flow=FLOW_COPY)
    register(service, enabled=False, notes="Copy in the wrong environment.")
    clock.advance(61)

    expired = claim(service, run="run-2")
    duplicate = claim(service, run="run-3", key="ORDER-2")

    assert (expired.decision, expired.status, expired.attempt) == (Decision.BLOCKED, AnswerStatus.IN_PROGRESS, 1)
    assert (duplicate.decision, duplicate.status, duplicate.claim_token) == (
        Decision.BLOCKED,
        AnswerStatus.SUCCEEDED,
        None,
    )
    stored = service.get_claim(held.claim_id)
    assert (stored.run_id, stored.attempt) == ("run-1", 1)
    assert history(service, held.claim_id) == [(EventKind.CLAIM, "proceed"), (EventKind.CLAIM, "blocked")]
    last = (service.get_claim(done.claim_id).history or [])[-1]
    assert (last.outcome, last.run_id) == ("blocked", "run-3")
    assert "disabled" in last.recognised_by
    assert "Copy in the wrong environment." in last.recognised_by


def test_a_flow_enabled_again_proceeds(service: Gate) -> None:
    register(service, enabled=False)
    assert claim(service, run="run-1").decision is Decision.BLOCKED

    register(service, enabled=True)

    assert claim(service, run="run-2").decision is Decision.PROCEED


def test_disabling_applies_at_once_here_and_within_the_ttl_on_other_instances(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    here, there = new_service(), new_service()
    for service in (here, there):  # each loads its registry
        assert claim(service, run="run-0", key="ORDER-0").decision in (Decision.PROCEED, Decision.IN_PROGRESS)

    register(here, enabled=False)

    assert claim(here, run="run-1", key="ORDER-1").decision is Decision.BLOCKED
    clock.advance(REGISTRY_TTL.total_seconds() - 1)
    assert claim(there, run="run-2", key="ORDER-2").decision is Decision.PROCEED
    clock.advance(1)
    assert claim(there, run="run-3", key="ORDER-3").decision is Decision.BLOCKED


# -- only registered flows ---------------------------------------------------------------------------


def test_only_registered_flows_may_claim_when_registration_is_required(strict_service: Gate) -> None:
    unknown = claim(strict_service, run="run-1")
    flowless = claim(strict_service, run="run-2", flow=None)
    register(strict_service, owner="ana@contoso.com")
    registered = claim(strict_service, run="run-3")

    assert (unknown.decision, unknown.status) == (Decision.BLOCKED, AnswerStatus.NONE)
    assert "not registered" in unknown.reason
    assert (flowless.decision, flowless.status) == (Decision.BLOCKED, AnswerStatus.NONE)
    assert "names no flow" in flowless.reason
    assert flowless.warnings == ["no_flow"]
    assert registered.decision is Decision.PROCEED
    assert registered.attempt == 1
    # The refused flow is in the inventory, so that a person finds it and can register it.
    assert flows(strict_service)[(FLOW.name, FLOW.environment)].claims == 2


def test_a_flow_only_seen_is_not_registered(strict_service: Gate) -> None:
    claim(strict_service, run="run-1")
    flows(strict_service)  # the flush creates the flow's row, unregistered

    assert claim(strict_service, run="run-2").decision is Decision.BLOCKED


# -- overlaps ----------------------------------------------------------------------------------------


def test_another_flow_copy_answers_are_counted_as_one_overlapping_pair(service: Gate, clock: FakeClock) -> None:
    held = claim(service, run="run-1")
    first_seen = clock.advance(1)
    busy = claim(service, run="run-2", flow=FLOW_COPY)
    record(service, held, target_record_id="SO-1")
    clock.advance(5)
    duplicate = claim(service, run="run-3", flow=FLOW_COPY)
    claim(service, run="run-4", flow=FLOW)  # the same flow again: no overlap
    copy_first = succeeded(service, run="run-5", key="ORDER-2", flow=FLOW_COPY)
    last_seen = clock.advance(5)
    reverse = claim(service, run="run-6", key="ORDER-2", flow=FLOW)

    for answer in (busy, duplicate, reverse):
        assert "another_flow_copy" in answer.warnings
    (pair,) = overlaps(service)
    assert {pair.flow, pair.other_flow} == {FLOW, FLOW_COPY}
    assert pair.count == 3
    assert (pair.first_seen_at, pair.last_seen_at) == (first_seen, last_seen)
    assert pair.example_claim_id in (held.claim_id, copy_first.claim_id)


def test_overlaps_from_two_instances_add_up(new_service: Callable[[], Gate]) -> None:
    one, two = new_service(), new_service()
    succeeded(one, run="run-1")
    claim(one, run="run-2", flow=FLOW_COPY)
    claim(two, run="run-3", flow=FLOW_COPY)
    claim(two, run="run-4", flow=OTHER_FLOW)
    assert two.store.list_overlaps() == []

    one.inventory.usage.flush()
    listed = overlaps(two)

    assert {frozenset((pair.flow, pair.other_flow)): pair.count for pair in listed} == {
        frozenset((FLOW, FLOW_COPY)): 2,
        frozenset((FLOW, OTHER_FLOW)): 1,
    }


# -- several instances ---------------------------------------------------------------------------------

INSTANCES = 4
CLAIMS_EACH = 3


def test_counts_of_instances_flushing_at_once_add_up(new_service: Callable[[], Gate]) -> None:
    services = [new_service() for _ in range(INSTANCES)]
    for number, service in enumerate(services):
        for each in range(CLAIMS_EACH):
            claim(service, run=f"run-{number}-{each}", key=f"ORDER-{number}-{each}")
    barrier = threading.Barrier(INSTANCES)

    def flush(service: Gate) -> None:
        barrier.wait(timeout=30)
        service.inventory.usage.flush()

    with ThreadPoolExecutor(INSTANCES) as pool:
        list(pool.map(flush, services))

    view = flows(new_service())[(FLOW.name, FLOW.environment)]
    assert view.claims == INSTANCES * CLAIMS_EACH
    (scope,) = new_service().store.list_scopes()
    assert scope.claims_by_status == {ClaimStatus.IN_PROGRESS: INSTANCES * CLAIMS_EACH}


def test_a_flush_that_fails_keeps_its_counts_for_the_next(service: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    claim(service, run="run-1")

    def unavailable() -> list[object]:
        raise StoreUnavailable("the store is down")

    with monkeypatch.context() as patched:
        patched.setattr(service.store, "list_flows", unavailable)
        with pytest.raises(StoreUnavailable):
            service.inventory.usage.flush()
    claim(service, run="run-2", key="ORDER-2")

    assert flows(service)[(FLOW.name, FLOW.environment)].claims == 2


def test_registration_and_counts_from_two_instances_both_survive(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    counting, registering = new_service(), new_service()
    claim(counting, run="run-1")
    counting.inventory.usage.flush()
    register(registering, owner="ana@contoso.com")
    claim(counting, run="run-2", key="ORDER-2")
    clock.advance(timedelta(minutes=2).total_seconds())
    claim(counting, run="run-3", key="ORDER-3")  # flushes: its merge must keep the registration

    view = flows(registering)[(FLOW.name, FLOW.environment)]
    assert (view.owner, view.registered, view.claims) == ("ana@contoso.com", True, 3)


def test_counts_an_instance_lost_are_counted_again_from_the_store(new_service: Callable[[], Gate]) -> None:
    """An instance stopped without closing (kill -9) loses the counts it had not merged; a recount restores them."""
    kept, lost = new_service(), new_service()
    for number in range(3):
        record(kept, claim(kept, run=f"kept-{number}", key=f"ORDER-K{number}"), "succeeded", target_record_id="ERP-1")
    for number in range(5):
        held = claim(lost, run=f"lost-{number}", key=f"ORDER-L{number}")
        if number < 4:
            record(lost, held, "succeeded", target_record_id="ERP-2")
    kept.inventory.close()
    # ``lost`` never flushes: its process was killed with what it had counted.
    (drifted,) = new_service().store.list_scopes()

    (recounted,) = new_service().inventory.recount_scopes()

    assert drifted.claims_by_status == {ClaimStatus.SUCCEEDED: 3}
    assert recounted.claims_by_status == {ClaimStatus.SUCCEEDED: 7, ClaimStatus.IN_PROGRESS: 1}
    (stored,) = new_service().store.list_scopes()
    assert (stored.scope, stored.claims_by_status) == (SCOPE, recounted.claims_by_status)


def test_a_recount_keeps_the_scopes_settings_and_clears_the_counts_of_claims_gone(
    service: Gate, new_service: Callable[[], Gate]
) -> None:
    set_scope(service, owner="ana@contoso.com", fingerprint_ignore=["/modified"])
    held = claim(service)
    service.inventory.close()
    service.store.delete_claim(service.store.get_claim(held.claim_id))

    (recounted,) = new_service().inventory.recount_scopes()

    assert (recounted.owner, recounted.claims_by_status) == ("ana@contoso.com", {})
    assert recounted.fingerprint_rules[-1].ignore == ("/modified",)
