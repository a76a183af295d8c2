"""What the HTTP edge hands out keeps working across a key secret rotation, on both stores (issue 31).

A poll address (``202`` ``Location`` of Check and claim with ``wait``) and a polling trigger's state
are sealed with a key derived from the key secret, and a poll address names the key only as the
secrets of its day made it. Before this change, both broke at the switch (``ONCEGATE_KEY_SECRET``
set to the new secret): the seal no longer opened, and a poll address made before the switch was
refused once the switch grace was over, so a run waiting across the switch failed with 400 and a
trigger's state was refused for ever.

Each phase of the runbook (docs/operations.md, 'The key secret') is the service wired with that
phase's secrets, as an instance restarted with the new settings would be.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.safeguard import SWITCH_GRACE
from oncegate.stores.port import ClaimStore
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.http.client import ServerApi, succeed
from tests.http.test_waiting import LEASE, Engine, claim_body, holder

A = "secret-a-" + "a" * 32
B = "secret-b-" + "b" * 32
BEFORE = KeyRing(KeyHasher(A))
SWITCHED = KeyRing(KeyHasher(B), previous=KeyHasher(A))
AFTER = KeyRing(KeyHasher(B))


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


@pytest.fixture
def server(local_server: tuple[str, int]) -> ServerApi:
    return ServerApi(local_server)


@pytest.fixture
def phase(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[KeyRing], Gate]:
    """Every request from now on is served by an instance with these secrets (its settings changed, it restarted)."""

    def serve(keys: KeyRing) -> Gate:
        instance = Gate(open_store(), keys, clock=clock, check_interval=timedelta(0))
        instance.health()  # as an instance starting: it reads and writes the store's key secret records
        bootstrap.use_services(instance.services)
        return instance

    return serve


@pytest.mark.parametrize("holder_ends", ["succeeded", "lease_ran_out"])
def test_a_run_waiting_since_before_the_switch_gets_its_answer_through_the_grace_and_after_it(
    server: ServerApi, clock: FakeClock, phase: Callable[[KeyRing], Gate], holder_ends: str
) -> None:
    phase(BEFORE)
    held = holder(server)
    switched_at: list[int] = []
    finished_at: list[int] = []

    def meanwhile(waited: int) -> None:
        if waited == 1:
            phase(SWITCHED)
            switched_at.append(waited)
        # The holder finishes at the first poll after the switch grace, however the polls are paced.
        if holder_ends == "succeeded" and not finished_at and clock.now > grace_over[0]:
            assert succeed(server, held, targetRecordId="ERP-7").status == 200
            finished_at.append(waited)

    grace_over = [clock.now + SWITCH_GRACE]
    engine = Engine(server, clock, meanwhile)

    answer = engine.run(claim_body("run-2", wait=True, leaseSeconds=LEASE))

    assert switched_at == [1]
    assert holder_ends != "succeeded" or finished_at[0] > 1, "polled during the grace before the holder finished"
    assert len(engine.seen) >= 4, "polled before the switch, during its grace and after it"
    assert answer.status == 200, answer.body
    if holder_ends == "succeeded":
        assert (answer.body["decision"], answer.body["result"]["targetRecordId"]) == ("duplicate", "ERP-7")
    else:
        # The attempt in doubt is reconciled under the key the target system got, whichever secret answers.
        assert answer.body["decision"] == "reconcile"
        assert answer.body["idempotencyKey"] == held["idempotencyKey"]
        assert answer.body["claimId"] == held["claimId"]


def test_a_run_waiting_during_the_rotation_gets_its_answer_after_the_previous_secret_is_dropped(
    server: ServerApi, clock: FakeClock, phase: Callable[[KeyRing], Gate]
) -> None:
    phase(BEFORE)
    switched = phase(SWITCHED)
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    held = holder(server)

    def meanwhile(waited: int) -> None:
        if waited == 1:
            switched.services.key_secrets.retire(KeyHasher(A).key_id, orphan=None)  # nothing was made with A
            phase(AFTER)
        if waited == 2:
            succeed(server, held, targetRecordId="ERP-8")

    answer = Engine(server, clock, meanwhile).run(claim_body("run-2", wait=True))

    assert (answer.status, answer.body["decision"]) == (200, "duplicate")
    assert answer.body["result"]["targetRecordId"] == "ERP-8"


def test_a_poll_address_whose_key_was_orphaned_on_purpose_asks_the_run_to_ask_again(
    server: ServerApi, clock: FakeClock, phase: Callable[[KeyRing], Gate]
) -> None:
    phase(BEFORE)
    holder(server)
    waiting = server.call("check_and_claim", claim_body("run-2", wait=True))
    switched = phase(SWITCHED)
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    switched.services.key_secrets.retire(KeyHasher(A).key_id, orphan=1)  # the operator orphans the holder's claim
    phase(AFTER)

    polled = server.follow(waiting.headers["location"])
    again = server.call("check_and_claim", claim_body("run-2"))

    assert waiting.status == 202
    assert (polled.status, polled.code, polled.targets) == (400, "invalid_request", ["ticket"])
    assert "ask Check and claim again" in polled.body["error"]["message"]
    assert again.body["decision"] == "proceed"


def test_a_polling_triggers_state_from_before_the_switch_is_read_after_it(
    server: ServerApi, clock: FakeClock, phase: Callable[[KeyRing], Gate]
) -> None:
    phase(BEFORE)
    first = server.call("on_conflict_reported", params={"scope": "erp.create-order"})
    phase(SWITCHED)
    clock.advance(SWITCH_GRACE.total_seconds() + 1)

    polled = server.follow(first.headers["location"])

    assert first.status == 202
    assert polled.status == 202


def test_a_poll_address_from_before_the_switch_makes_no_claim_with_the_previous_secret(
    server: ServerApi, clock: FakeClock, phase: Callable[[KeyRing], Gate]
) -> None:
    phase(BEFORE)
    held = holder(server)
    waiting = server.call("check_and_claim", claim_body("run-2", wait=True))
    server.call("release_claim", {"claimToken": held["claimToken"]}, route={"claimId": held["claimId"]})
    switched = phase(SWITCHED)
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    switched.store.delete_claim(switched.store.get_claim(held["claimId"]))  # as retention deletes a released claim

    polled = server.follow(waiting.headers["location"])
    again = server.call("check_and_claim", claim_body("run-2"))

    assert (polled.status, polled.targets) == (400, ["ticket"])
    assert "ask Check and claim again" in polled.body["error"]["message"]
    # Asked again, the key is claimed with the secret new claims are made with since the switch.
    assert again.body["decision"] == "proceed"
    assert again.body["claimId"] == KeyHasher(B).claim_id("erp.create-order", "ORDER-1001")
