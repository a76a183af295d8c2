"""The key secret cannot change by accident, and can be rotated without a key proceeding twice (issue 10).

Claim ids are HMACs of the business key with the secret, so a service started with another secret
would answer ``proceed`` for every key already done. The store remembers a check value of every
secret it was used with; another secret is refused with 503. A rotation follows the runbook in
docs/operations.md: every instance first learns the next secret (``ONCEGATE_KEY_SECRET_NEXT``),
then the secrets swap (``ONCEGATE_KEY_SECRET_PREVIOUS``), and the previous one goes only once
no claim made with it is left. Instances of two neighbouring phases run side by side here.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.config import ConfigError, Settings
from oncegate.domain import keys
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.records import ClaimFilter
from oncegate.domain.safeguard import SWITCH_GRACE
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision
from oncegate.errors import NotConfigured
from oncegate.models import LookupRequest, ReportConflictRequest
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import KEY, SCOPE, claim, record, release, resolve

OLD = "old-secret-" + "o" * 32
NEW = "new-secret-" + "n" * 32
OTHER = "other-secret-" + "x" * 32
# The runbook's phases, in order: the keys each instance knows, and which one it makes claims with.
PHASES = {
    "before": lambda: KeyRing(KeyHasher(OLD)),
    "next": lambda: KeyRing(KeyHasher(OLD), next_=KeyHasher(NEW)),
    "switched": lambda: KeyRing(KeyHasher(NEW), previous=KeyHasher(OLD)),
    "after": lambda: KeyRing(KeyHasher(NEW)),
}
# Neighbouring phases run side by side while a setting change rolls over the instances.
ROLLOUTS = [("before", "next"), ("next", "switched"), ("switched", "after")]
RACE_ROUNDS = 15
RACERS = 6


@pytest.fixture
def service_in(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[str], Gate]:
    """A service instance in one phase of the rotation, over the test's store."""
    # Each request reads the store's marks: an instance notices another's switch at once.
    return lambda phase: Gate(open_store(), PHASES[phase](), clock=clock, check_interval=timedelta(0))


def _count_rows(service: Gate) -> int:
    statuses = list(ClaimStatus)
    return len(service.store.list_claims(ClaimFilter(statuses), limit=200).items)


# -- another secret is refused ----------------------------------------------------------------------


def test_a_service_with_another_secret_refuses_every_claim_action_and_writes_nothing(
    open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    first = Gate(open_store(), KeyHasher(OLD), clock=clock)
    done = claim(first, run="run-1")
    record(first, done)
    changed = claim(first, run="run-2", fingerprint="v2")
    assert changed.conflict_id is not None
    before = _count_rows(first)
    wrong = Gate(open_store(), KeyHasher(OTHER), clock=clock)

    actions: dict[str, Callable[[], Any]] = {
        "check and claim": lambda: claim(wrong, run="run-3"),
        "record result": lambda: record(wrong, done),
        "release": lambda: release(wrong, done),
        "lookup": lambda: wrong.lookup(LookupRequest(scope=SCOPE, key=KEY)),
        "report conflict": lambda: wrong.report_conflict(
            ReportConflictRequest(scope=SCOPE, key=KEY, run_id="run-4", reason="the ERP differs")
        ),
        "resolve": lambda: resolve(wrong, str(changed.conflict_id), "dismiss"),
        "health": wrong.health,
    }
    for name, action in actions.items():
        with pytest.raises(NotConfigured) as refused:
            action()
        assert refused.value.target == "ONCEGATE_KEY_SECRET", name
        assert "ONCEGATE_KEY_SECRET_PREVIOUS" in refused.value.message, name

    assert _count_rows(first) == before
    assert claim(first, run="run-5").decision is Decision.DUPLICATE
    assert first.get_conflict(changed.conflict_id).status is ConflictStatus.OPEN


def test_a_new_store_remembers_the_secret_it_is_first_used_with(
    open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    store = open_store()
    assert store.read_marks().secrets == ()

    claim(Gate(store, KeyHasher(OLD), clock=clock))

    marks = open_store().read_marks()
    assert [(record.key_id, record.in_use_from) for record in marks.secrets] == [(KeyHasher(OLD).key_id, clock())]
    assert marks.store_id is not None
    assert OLD not in repr(marks)


# -- keys claimed under the previous secret ---------------------------------------------------------


def test_keys_claimed_before_the_switch_are_answered_as_before_after_it(
    service_in: Callable[[str], Gate], clock: FakeClock
) -> None:
    before = service_in("before")
    done = claim(before, key="SO-done", run="run-1")
    record(before, done)
    held = claim(before, key="SO-held", run="run-2", lease_seconds=600)
    changed_base = claim(before, key="SO-changed", run="run-3")
    record(before, changed_base)
    expiring = claim(before, key="SO-expiring", run="run-4", lease_seconds=60)
    clock.advance(120)
    switched = service_in("switched")

    assert claim(switched, key="SO-done", run="run-5").decision is Decision.DUPLICATE
    assert claim(switched, key="SO-held", run="run-6").decision is Decision.IN_PROGRESS
    assert claim(switched, key="SO-changed", run="run-7", fingerprint="v2").decision is Decision.CONFLICT
    reconciled = claim(switched, key="SO-expiring", run="run-8")
    assert (reconciled.decision, reconciled.claim_id) == (Decision.RECONCILE, expiring.claim_id)
    # The holder's token, granted before the switch, still holds after it.
    assert record(switched, held).status is ClaimStatus.SUCCEEDED
    assert switched.lookup(LookupRequest(scope=SCOPE, key="SO-done")).claim_id == done.claim_id


def test_new_keys_after_the_switch_are_claimed_with_the_new_secret(
    service_in: Callable[[str], Gate],
) -> None:
    answer = claim(service_in("switched"), key="SO-new")

    assert answer.claim_id == KeyHasher(NEW).claim_id(SCOPE, "SO-new")
    assert claim(service_in("after"), key="SO-new", run="run-2").decision is Decision.IN_PROGRESS


# -- the rollouts ----------------------------------------------------------------------------------


def _race(services: list[Gate], key: str) -> list[Any]:
    barrier = threading.Barrier(len(services))
    answers: list[Any] = [None] * len(services)

    def ask(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            answers[index] = claim(services[index], key=key, run=f"run-{index}").decision
        except Exception as error:  # every outcome, an error too, is counted by the test
            answers[index] = type(error).__name__

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(len(services))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def _runbook_up_to(service_in: Callable[[str], Gate], rollout: tuple[str, str], clock: FakeClock) -> None:
    """The store as the runbook leaves it when ``rollout`` begins: a claim made before the rotation, each phase
    up to the rollout's first run, and before the last phase the old secret retired (the runbook's third step)."""
    claim(service_in("before"), key="SO-before-the-rotation", run="run-0")
    for earlier in list(PHASES)[1 : list(PHASES).index(rollout[0]) + 1]:
        service_in(earlier).health()
    if rollout[1] == "after":
        clock.advance(SWITCH_GRACE.total_seconds() + 1)  # retired once the switch is over
        service_in("switched").services.key_secrets.retire(KeyHasher(OLD).key_id, orphan=1)


@pytest.mark.slow
@pytest.mark.parametrize("rollout", ROLLOUTS, ids="+".join)
def test_instances_on_both_sides_of_a_rollout_never_both_proceed(
    service_in: Callable[[str], Gate], rollout: tuple[str, str], clock: FakeClock
) -> None:
    _runbook_up_to(service_in, rollout, clock)
    services = [service_in(rollout[index % 2]) for index in range(RACERS)]
    proceeds: Counter[int] = Counter()
    for round_ in range(RACE_ROUNDS):
        key = f"SO-race-{round_}"
        answers = _race(services, key)
        assert set(answers) <= {Decision.PROCEED, Decision.IN_PROGRESS}, answers
        # Both sides may withdraw at once (told in_progress, retry shortly): then a retry proceeds, once.
        retries = [claim(service, key=key, run=f"run-retry-{index}").decision for index, service in enumerate(services)]
        total = answers.count(Decision.PROCEED) + retries.count(Decision.PROCEED)
        proceeds[total] += 1

    assert set(proceeds) == {1}, f"rounds by number of proceed answers: {dict(proceeds)}"


def test_skipping_the_next_phase_is_refused_instead_of_proceeding_twice(
    service_in: Callable[[str], Gate], clock: FakeClock
) -> None:
    # Issue 10 showed this interleaving letting a key proceed twice: an instance that knows only the old
    # secret never looks for a claim made with the new one. Now the switched instance records the new
    # secret's switch; the old-only instance refuses from then on (issue 22).
    before = service_in("before")
    claim(before, key="SO-earlier", run="run-0")
    switched = service_in("switched")

    first = claim(switched, key="SO-skipped", run="run-1")
    with pytest.raises(NotConfigured) as refused:
        claim(before, key="SO-skipped", run="run-2")
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    with pytest.raises(NotConfigured):
        claim(before, key="SO-skipped", run="run-3")

    assert first.decision is Decision.PROCEED
    assert refused.value.target == "ONCEGATE_KEY_SECRET"
    assert KeyHasher(NEW).key_id in refused.value.message
    assert claim(switched, key="SO-skipped", run="run-4").decision is Decision.IN_PROGRESS


# -- the settings of a rotation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environment", "setting"),
    [
        pytest.param({"ONCEGATE_KEY_SECRET_PREVIOUS": OLD}, "ONCEGATE_KEY_SECRET", id="previous without current"),
        pytest.param(
            {"ONCEGATE_KEY_SECRET": NEW, "ONCEGATE_KEY_SECRET_PREVIOUS": OLD, "ONCEGATE_KEY_SECRET_NEXT": OTHER},
            "ONCEGATE_KEY_SECRET_NEXT",
            id="three secrets",
        ),
        pytest.param(
            {"ONCEGATE_KEY_SECRET": NEW, "ONCEGATE_KEY_SECRET_PREVIOUS": NEW},
            "ONCEGATE_KEY_SECRET_PREVIOUS",
            id="previous is current",
        ),
        pytest.param(
            {"ONCEGATE_KEY_SECRET": NEW, "ONCEGATE_KEY_SECRET_PREVIOUS": "@Microsoft.KeyVault(SecretUri=https://v)"},
            "ONCEGATE_KEY_SECRET_PREVIOUS",
            id="unresolved reference",
        ),
        pytest.param(
            {"ONCEGATE_KEY_SECRET": NEW, "ONCEGATE_KEY_SECRET_NEXT": "short"}, "ONCEGATE_KEY_SECRET_NEXT", id="short"
        ),
    ],
)
def test_a_rotation_setting_that_cannot_work_is_refused_naming_it(environment: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_environment(environment)

    assert refused.value.setting == setting


def test_the_settings_of_each_phase_build_its_key_ring(tmp_path: Path) -> None:
    base = {"ONCEGATE_SQLITE_PATH": str(tmp_path / "db" / "claims.db")}
    phases = {
        "next": {"ONCEGATE_KEY_SECRET": OLD, "ONCEGATE_KEY_SECRET_NEXT": NEW},
        "switched": {"ONCEGATE_KEY_SECRET": NEW, "ONCEGATE_KEY_SECRET_PREVIOUS": OLD},
    }
    for phase, environment in phases.items():
        ring = bootstrap.key_ring(
            Settings.from_environment({**base, **environment}), environment["ONCEGATE_KEY_SECRET"]
        )
        assert ring.key_ids == PHASES[phase]().key_ids, phase
        assert ring.current.key_id == PHASES[phase]().current.key_id, phase


# -- the idempotency key across the switch (issue 31) --------------------------------------------------


def test_an_attempt_hands_the_target_the_same_idempotency_key_on_both_sides_of_the_switch(
    service_in: Callable[[str], Gate], clock: FakeClock
) -> None:
    # The key is made from the claim with the secret of its id, so the claim made under the old secret keeps
    # handing out the old secret's key: the same run asking again, and a run reconciling it, on any instance.
    lease = 120
    first = claim(service_in("before"), run="run-1", lease_seconds=lease)
    step_one, switched = service_in("next"), service_in("switched")
    step_one.health()
    switched.health()
    during_grace = [claim(instance, run="run-1", lease_seconds=lease) for instance in (step_one, switched)]
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    after_grace = [claim(instance, run="run-1", lease_seconds=lease) for instance in (step_one, switched)]
    clock.advance(lease)
    reconciled = claim(switched, run="run-2", lease_seconds=lease)
    record(switched, reconciled, "failed", error="ERP down", retryable=True)
    retried = claim(step_one, run="run-3", lease_seconds=lease)

    again = [*during_grace, *after_grace]
    assert first.decision is Decision.PROCEED
    assert [answer.decision for answer in again] == [Decision.PROCEED] * 4
    assert {answer.idempotency_key for answer in again} == {first.idempotency_key}
    assert {answer.claim_token for answer in again} == {first.claim_token}
    assert (reconciled.decision, reconciled.idempotency_key) == (Decision.RECONCILE, first.idempotency_key)
    # After a recorded failure the next attempt gets a key of its own, still on the claim made before the switch.
    assert retried.decision is Decision.PROCEED
    assert retried.idempotency_key not in (None, first.idempotency_key)
    assert retried.claim_id == reconciled.claim_id == first.claim_id == KeyHasher(OLD).claim_id(SCOPE, KEY)
    assert switched.get_claim(first.claim_id).attempt == 3


def test_a_claim_makes_its_key_secret_s_check_value_no_more(service: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check value every claim carries is made once per secret, not an HMAC per request (issue 36)."""
    made: list[str] = []
    derive = keys._derive
    key_id = KeyHasher(KEY_SECRET).key_id

    def counted(secret: bytes, purpose: str) -> bytes:
        made.append(purpose)
        return derive(secret, purpose)

    monkeypatch.setattr(keys, "_derive", counted)
    first = claim(service, payload={"order": "SO-1", "amount": 10.0})
    again = claim(service, payload={"order": "SO-1", "amount": 10.0}, run="run-2")

    assert (first.decision, again.decision) == (Decision.PROCEED, Decision.IN_PROGRESS)
    assert service.store.get_claim(first.claim_id).key_id == key_id
    assert "key check" not in made
