"""The side-effect catalogue on both stores: claims by status, open conflicts, default leases and retention."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from oncegate.domain.limits import DEFAULT_HORIZON_DAYS
from oncegate.domain.statuses import AnswerStatus, Decision
from oncegate.errors import InvalidRequest
from oncegate.models import DEFAULT_LEASE_SECONDS, DEFAULT_RETENTION_DAYS, ClaimCounts, ScopeView, SetScopeRequest
from oncegate.service.inventory import REGISTRY_TTL
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import (
    SCOPE,
    claim,
    heartbeat,
    record,
    release,
    resolve,
    scopes,
    set_scope,
    succeeded,
)

OTHER_SCOPE = "mail.send-invoice"


def test_claims_by_status_follow_every_transition(service: Gate, clock: FakeClock) -> None:
    first_seen = clock.now
    claim(service, run="run-1", key="held")
    succeeded(service, run="run-2", key="done")
    failed = claim(service, run="run-3", key="failed")
    record(service, failed, "failed", error="ERP said no", retryable=True)
    release(service, claim(service, run="run-4", key="released"))
    record(service, claim(service, run="run-5", key="unknown"), "unknown", error="timed out")
    changed = claim(service, run="run-6", key="done", fingerprint="v2")
    claim(service, run="run-1", key="other", scope=OTHER_SCOPE)
    last_seen = clock.advance(5)
    claim(service, run="run-7", key="ORDER-late")

    catalogue = scopes(service)

    view = catalogue[SCOPE]
    assert changed.decision is Decision.CONFLICT
    assert view.claims == ClaimCounts(in_progress=2, succeeded=1, failed=1, unknown=1, released=1)
    assert view.open_conflicts == 1
    assert (view.first_seen_at, view.last_seen_at) == (first_seen, last_seen)
    assert catalogue[OTHER_SCOPE].claims == ClaimCounts(in_progress=1)
    assert catalogue[OTHER_SCOPE].open_conflicts == 0
    assert (view.lease_seconds, view.retention_days, view.owner) == (
        DEFAULT_LEASE_SECONDS,
        DEFAULT_RETENTION_DAYS,
        None,
    )

    # Taking over (a retry of the failure, a reconcile of the unknown) and accepting new data move claims too.
    assert claim(service, run="run-8", key="failed").decision is Decision.PROCEED
    assert claim(service, run="run-9", key="unknown").decision is Decision.RECONCILE
    resolve(service, changed.conflict_id, "accept_new")

    view = scopes(service)[SCOPE]
    assert view.claims == ClaimCounts(in_progress=4, succeeded=0, failed=1, unknown=0, released=1)
    assert view.open_conflicts == 0


def test_counts_of_two_instances_add_up(new_service: Callable[[], Gate]) -> None:
    one, two = new_service(), new_service()
    answer = claim(one, run="run-1")
    record(two, answer, target_record_id="SO-1")

    one.inventory.usage.flush()
    assert scopes(two)[SCOPE].claims == ClaimCounts(succeeded=1)


def test_a_scope_default_lease_applies_when_a_claim_asks_for_none(service: Gate, clock: FakeClock) -> None:
    set_scope(service, lease_seconds=900)

    default = claim(service, run="run-1", key="ORDER-1")
    explicit = claim(service, run="run-2", key="ORDER-2", lease_seconds=60)
    elsewhere = claim(service, run="run-3", key="ORDER-3", scope=OTHER_SCOPE)
    clock.advance(30)
    renewed = heartbeat(service, default, lease_seconds=None)

    assert default.lease_expires_at == clock.now - timedelta(seconds=30) + timedelta(seconds=900)
    assert explicit.lease_expires_at == default.lease_expires_at - timedelta(seconds=840)
    assert elsewhere.lease_expires_at == default.lease_expires_at - timedelta(seconds=600)
    assert renewed.lease_expires_at == clock.now + timedelta(seconds=900)


def test_a_scope_is_matched_whatever_its_case(service: Gate, clock: FakeClock) -> None:
    set_scope(service, "ERP.Create-Order", lease_seconds=120)

    assert claim(service, scope="erp.CREATE-order").lease_expires_at == clock.now + timedelta(seconds=120)
    assert list(scopes(service)) == [SCOPE]


def test_a_new_default_lease_reaches_other_instances_within_the_ttl(
    new_service: Callable[[], Gate], clock: FakeClock
) -> None:
    here, there = new_service(), new_service()
    for service in (here, there):  # each loads its registry
        claim(service, run="run-0", key="ORDER-0")

    set_scope(here, lease_seconds=600)

    assert claim(here, run="run-1", key="ORDER-1").lease_expires_at == clock.now + timedelta(seconds=600)
    assert claim(there, run="run-2", key="ORDER-2").lease_expires_at == clock.now + timedelta(seconds=300)
    clock.advance(REGISTRY_TTL.total_seconds())
    assert claim(there, run="run-3", key="ORDER-3").lease_expires_at == clock.now + timedelta(seconds=600)


def test_settings_are_stored_and_returned_and_the_counts_stay(service: Gate, clock: FakeClock) -> None:
    claim(service)
    scopes(service)
    set_at = clock.advance(5)

    first = set_scope(
        service, owner="erp-team@contoso.com", lease_seconds=600, retention_days=30, description="Creates the order."
    )
    clock.advance(5)
    second = set_scope(service, owner="ops@contoso.com")

    assert (first.owner, first.lease_seconds, first.retention_days, first.description) == (
        "erp-team@contoso.com",
        600,
        30,
        "Creates the order.",
    )
    assert (first.registered_at, first.claims) == (set_at, ClaimCounts(in_progress=1))
    # Only what a request names changes (issue 31): what the second call left out stays as the first set it.
    assert (second.owner, second.lease_seconds, second.retention_days, second.description) == (
        "ops@contoso.com",
        600,
        30,
        "Creates the order.",
    )
    assert second.registered_at == set_at
    assert scopes(service)[SCOPE] == second


def test_setting_a_scope_answers_with_the_claims_this_instance_has_not_merged_yet(service: Gate) -> None:
    """Setting a scope right after its claims (`oncegate scopes set drill.check` after a drill) answered "Claims
    none": the answer showed the stored counts without this instance's, merged only at the next list."""
    succeeded(service)
    claim(service, run="run-2", key="ORDER-2")

    answer = set_scope(service, retention_days=1)

    assert answer.claims == ClaimCounts(in_progress=1, succeeded=1)
    assert scopes(service)[SCOPE] == answer


def test_a_retention_job_reads_each_scope_retention_from_the_store(service: Gate) -> None:
    set_scope(service, retention_days=7)
    set_scope(service, OTHER_SCOPE)
    claim(service, scope="seen.only")
    service.inventory.usage.flush()

    retention = {record.scope: record.retention_days for record in service.store.list_scopes()}

    # A scope set without a retention holds none: the default applies, and a later default would too (issue 31).
    assert retention == {SCOPE: 7, OTHER_SCOPE: None, "seen.only": None}
    assert scopes(service)[OTHER_SCOPE].retention_days == DEFAULT_RETENTION_DAYS


def test_a_new_scope_is_in_progress_only(service: Gate) -> None:
    answer = claim(service)

    assert answer.status == AnswerStatus.IN_PROGRESS
    assert scopes(service)[SCOPE].claims == ClaimCounts(in_progress=1)


# Every setting of a scope, on the wire, set away from its default.
OPERATOR_SET: dict[str, Any] = {
    "owner": "erp-team@contoso.com",
    "leaseSeconds": 600,
    "retentionDays": 30,
    "horizonDays": 730,
    "description": "Creates the order.",
    "keyPattern": "SO-[0-9]{6}",
    "fingerprintInclude": ["/order"],
    "fingerprintIgnore": ["/order/Modified"],
    "fingerprintPreset": "sharepoint",
}


def _put(service: Gate, **settings: Any) -> ScopeView:
    """PUT /api/scopes with exactly these wire fields, as a flow or the CLI sends them."""
    return service.set_scope(SetScopeRequest.model_validate({"scope": SCOPE, **settings}, by_name=False))


def _settings(view: ScopeView) -> dict[str, Any]:
    shown = view.model_dump(by_alias=True, mode="json")
    return {name: shown.get(name) for name in [*OPERATOR_SET, "fingerprintRulesVersion"]}


def test_a_bare_set_scope_changes_nothing_an_operator_set(service: Gate) -> None:
    """Issue 31: a bare PUT /api/scopes reset the horizon, the retention and the rules (every setting) to defaults."""
    operated = _settings(_put(service, **OPERATOR_SET))

    bare = _put(service)
    one = _put(service, owner="ops@contoso.com")

    assert operated == {**OPERATOR_SET, "fingerprintRulesVersion": 1}
    assert _settings(bare) == operated
    assert _settings(one) == {**operated, "owner": "ops@contoso.com"}
    assert _settings(scopes(service)[SCOPE]) == _settings(one)


@pytest.mark.parametrize("name", list(OPERATOR_SET))
def test_a_setting_sent_as_null_is_reset_to_its_default_and_the_others_stay(service: Gate, name: str) -> None:
    _put(service, **OPERATOR_SET)
    defaults = _settings(_put(service, **{name: None}))
    reset = _settings(scopes(service)[SCOPE])

    default = {
        "owner": None,
        "leaseSeconds": DEFAULT_LEASE_SECONDS,
        "retentionDays": DEFAULT_RETENTION_DAYS,
        "horizonDays": DEFAULT_HORIZON_DAYS,
        "description": None,
        "keyPattern": None,
        "fingerprintInclude": None,
        "fingerprintIgnore": None,
        "fingerprintPreset": None,
    }[name]
    rules_changed = name.startswith("fingerprint")
    assert reset == defaults == {**OPERATOR_SET, name: default, "fingerprintRulesVersion": 2 if rules_changed else 1}


def test_a_horizon_shorter_than_the_retention_is_refused_whichever_the_request_names(service: Gate) -> None:
    _put(service, retentionDays=30, horizonDays=100)

    with pytest.raises(InvalidRequest) as longer_retention:
        _put(service, retentionDays=120)
    with pytest.raises(InvalidRequest) as shorter_horizon:
        _put(service, horizonDays=20)
    reset = _put(service, retentionDays=400, horizonDays=None)

    assert longer_retention.value.target == "retentionDays"
    assert "horizonDays" in longer_retention.value.message
    assert shorter_horizon.value.target == "horizonDays"
    # Back to the default, the horizon is never shorter than the retention.
    assert (reset.retention_days, reset.horizon_days) == (400, 400)


def test_a_longer_retention_lengthens_a_horizon_nobody_set(service: Gate) -> None:
    _put(service, owner="erp-team@contoso.com")

    view = _put(service, retentionDays=400)

    assert (view.retention_days, view.horizon_days) == (400, 400)
    assert _put(service, retentionDays=None).horizon_days == DEFAULT_HORIZON_DAYS
