"""Personal data in what a request stores besides its key: refused, flagged or let through.

``ONCEGATE_SENSITIVE_DATA`` decides, and follows ``ONCEGATE_SENSITIVE_KEYS`` when unset.

Every field a flow or a person stores as sent is looked at: result data (values, member names and
array items, however nested), the target record id, the error, the release reason, review and
resolution notes, a reported conflict's reason and details, a flow's notes and a scope's
description. A refusal names the field, never the value, and changes nothing. The reviewer (and
a flow's or scope's owner) are kept on purpose and never looked at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from oncegate import bootstrap, models
from oncegate.config import ConfigError, Settings
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import ClaimFilter
from oncegate.domain.sensitive import SensitivePolicy, sensitive_findings
from oncegate.domain.statuses import ClaimStatus, Decision, Outcome, Resolution
from oncegate.domain.warnings import SENSITIVE_DATA
from oncegate.entrypoints import error_map
from oncegate.entrypoints.parse import NOT_LOOKED_AT, STORED_FIELDS, stored_findings
from oncegate.errors import SensitiveData, SensitiveKey
from oncegate.models import (
    ClaimRequest,
    HeartbeatRequest,
    ListConflictsQuery,
    LookupRequest,
    RecordResultRequest,
    ResolveConflictRequest,
    ReviewClaimRequest,
)
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import (
    FLOW,
    claim,
    flows,
    record,
    register,
    release,
    report,
    resolve,
    scopes,
    set_scope,
)


@pytest.fixture
def store_kind() -> str:
    """SQLite only: the sensitive-data check runs before anything is written, whatever the store.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


EMAIL = "ana.lopez@contoso.com"
Policy = Callable[..., Gate]


@pytest.fixture
def service_with(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Policy:
    """A service over this test's store, with the key and data policies given (data follows keys when not given)."""

    def make(data: SensitivePolicy | None = None, keys: SensitivePolicy = SensitivePolicy.REJECT) -> Gate:
        return Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, sensitive_keys=keys, sensitive_data=data)

    return make


# -- one action at a time: what it stores, where the refusal points, and everything it could change ----------


@dataclass
class Stored:
    """One action storing ``text`` in one field: the field the refusal names, the action, what it could change."""

    target: str
    act: Callable[[str], BaseModel]
    state: Callable[[], Any]


def _held(service: Gate) -> tuple[str, str]:
    answer = claim(service)
    assert answer.claim_token is not None
    return answer.claim_id, answer.claim_token


def _record(field: str, target: str, wrap: Callable[[str], Any]) -> Callable[[Gate], Stored]:
    def setup(service: Gate) -> Stored:
        claim_id, token = _held(service)
        outcome = Outcome.FAILED if field == "error" else Outcome.SUCCEEDED
        return Stored(
            target=target,
            act=lambda text: service.record_result(
                claim_id, RecordResultRequest(claim_token=token, outcome=outcome, **{field: wrap(text)})
            ),
            state=lambda: service.get_claim(claim_id),
        )

    return setup


def _claim_reference(service: Gate) -> Stored:
    # The reference is stored in clear, unlike the key (issue 16).
    return Stored(
        "reference",
        lambda text: claim(service, reference=f"Order of {text}"),
        lambda: service.store.list_claims(ClaimFilter(tuple(ClaimStatus)), limit=10).items,
    )


def _release(service: Gate) -> Stored:
    answer = claim(service)
    return Stored(
        "reason", lambda text: release(service, answer, reason=text), lambda: service.get_claim(answer.claim_id)
    )


def _review(service: Gate) -> Stored:
    answer = claim(service)
    record(service, answer, "failed", retryable=False, error="The ERP refused the order.")

    def act(text: str) -> BaseModel:
        return service.review(answer.claim_id, ReviewClaimRequest(reviewer="ops@contoso.com", note=text))

    return Stored("note", act, lambda: service.get_claim(answer.claim_id))


def _report(field: str) -> Callable[[Gate], Stored]:
    def setup(service: Gate) -> Stored:
        answer = claim(service)
        fields: Callable[[str], dict[str, Any]] = (
            (lambda text: {"reason": f"The ERP holds another customer: {text}"})
            if field == "reason"
            else (lambda text: {"details": {"erp": [{"contact": text}]}})
        )
        return Stored(
            "reason" if field == "reason" else "details.erp.0.contact",
            lambda text: report(service, **fields(text)),
            lambda: (service.get_claim(answer.claim_id), service.list_conflicts(ListConflictsQuery(status=None))),
        )

    return setup


def _resolve(service: Gate) -> Stored:
    first = claim(service)
    record(service, first)
    conflict_id = claim(service, run="run-2", fingerprint="v2").conflict_id
    assert conflict_id is not None

    def act(text: str) -> BaseModel:
        request = ResolveConflictRequest(decision=Resolution.DISMISS, reviewer="ops@contoso.com", note=text)
        return service.resolve_conflict(conflict_id, request)

    return Stored("note", act, lambda: (service.get_conflict(conflict_id), service.get_claim(first.claim_id)))


def _register_flow(service: Gate) -> Stored:
    return Stored("notes", lambda text: register(service, notes=f"Ask {text}"), lambda: flows(service))


def _set_scope(service: Gate) -> Stored:
    return Stored(
        "description", lambda text: set_scope(service, description=f"Orders of {text}"), lambda: scopes(service)
    )


ACTIONS: dict[str, Callable[[Gate], Stored]] = {
    "claim-reference": _claim_reference,
    "record-data": _record(
        "data", "data.order.customer.email", lambda text: {"order": {"customer": {"email": text}}, "amount": 10}
    ),
    "record-target-record-id": _record("target_record_id", "targetRecordId", lambda text: text),
    "record-error": _record("error", "error", lambda text: f"The ERP refused the contact {text}"),
    "release-reason": _release,
    "review-note": _review,
    "report-reason": _report("reason"),
    "report-details": _report("details"),
    "resolve-note": _resolve,
    "register-flow-notes": _register_flow,
    "set-scope-description": _set_scope,
}


@pytest.mark.parametrize("action", ACTIONS)
def test_reject_names_the_field_never_the_value_and_changes_nothing(service_with: Policy, action: str) -> None:
    service = service_with()
    stored = ACTIONS[action](service)
    before = stored.state()

    with pytest.raises(SensitiveData) as refused:
        stored.act(EMAIL)

    target = stored.target
    assert error_map.code(refused.value) == "sensitive_data"
    assert error_map.status(refused.value) == 400
    assert refused.value.target == target
    assert [detail[0] for detail in refused.value.details] == [target]
    assert "an e-mail address" in refused.value.message
    assert "Nothing was stored" in refused.value.message
    assert "ana.lopez" not in refused.value.message
    assert all("ana.lopez" not in message for _, message in refused.value.details)
    assert stored.state() == before


@pytest.mark.parametrize("action", ACTIONS)
def test_warn_stores_it_with_the_warning_sensitive_data(service_with: Policy, action: str) -> None:
    service = service_with(SensitivePolicy.WARN)
    stored = ACTIONS[action](service)

    answer = stored.act(EMAIL)

    assert SENSITIVE_DATA in (getattr(answer, "warnings", None) or [])
    assert EMAIL in answer.model_dump_json() or EMAIL in str(stored.state())


def test_warn_logs_where_personal_data_was_stored_never_the_value(
    service_with: Policy, caplog: pytest.LogCaptureFixture
) -> None:
    service = service_with(SensitivePolicy.WARN)
    answer = claim(service)

    with caplog.at_level("WARNING", logger="oncegate.entrypoints.parse"):
        record(service, answer, data={"customer": {"email": EMAIL}})

    [line] = [entry.getMessage() for entry in caplog.records if "ONCEGATE_SENSITIVE_DATA=warn" in entry.getMessage()]
    assert f"claim {answer.claim_id}" in line
    assert "data.customer.email seems to contain an e-mail address" in line
    assert "ana.lopez" not in line


@pytest.mark.parametrize("action", ACTIONS)
def test_off_stores_it_without_a_warning(service_with: Policy, action: str) -> None:
    service = service_with(SensitivePolicy.OFF)
    stored = ACTIONS[action](service)

    answer = stored.act(EMAIL)

    assert not getattr(answer, "warnings", None)
    assert EMAIL in answer.model_dump_json() or EMAIL in str(stored.state())


@pytest.mark.parametrize("action", ACTIONS)
def test_business_text_is_stored_without_a_warning(service_with: Policy, action: str) -> None:
    stored = ACTIONS[action](service_with())

    answer = stored.act("SO-2026-000123 of 2026-12-04, 1.234,56 EUR")

    assert not getattr(answer, "warnings", None)


def test_a_refused_result_leaves_the_lease_so_the_run_records_it_again_without_the_personal_data(
    service: Gate,
) -> None:
    answer = claim(service)

    with pytest.raises(SensitiveData):
        record(service, answer, target_record_id="SO-1", data={"customer": {"phone": "+34 612 345 678"}})
    done = record(service, answer, target_record_id="SO-1", data={"customer": {"id": "C-100234"}})

    assert done.status is ClaimStatus.SUCCEEDED
    assert claim(service, run="run-2").decision is Decision.DUPLICATE


# -- the walk through result data -------------------------------------------------------------------------


def _targets(data: Any) -> list[str]:
    request = RecordResultRequest(claim_token="1.x", outcome=Outcome.SUCCEEDED, data=data)
    return [target for target, _ in stored_findings(request)]


def test_every_string_in_result_data_is_looked_at_wherever_it_is_nested() -> None:
    data = {
        "order": "SO-1",
        "customer": {"email": EMAIL, "ids": ["C-1", {"iban": "DE89 3704 0044 0532 0130 00"}]},
        "lines": [[{"note": "call +34 612 345 678"}]],
        "card": "4111 1111 1111 1111",
        "amount": 12.5,
        "paid": True,
        "missing": None,
    }

    assert _targets(data) == [
        "data.customer.email",
        "data.customer.ids.1.iban",
        "data.lines.0.0.note",
        "data.card",
    ]
    assert _targets("11010519491231002X") == ["data"]
    assert _targets(["SO-1", EMAIL]) == ["data.1"]


@pytest.mark.parametrize(
    "model",
    [*(getattr(models, name) for name in STORED_FIELDS), ClaimRequest, LookupRequest, HeartbeatRequest],
    ids=lambda model: model.__name__,
)
def test_every_field_of_every_request_is_looked_at_or_left_out_on_purpose(model: type[BaseModel]) -> None:
    # A field added later fails here until someone decides whether personal data may land in it.
    undecided = set(model.model_fields) - set(STORED_FIELDS.get(model.__name__, ())) - NOT_LOOKED_AT

    assert undecided == set()


def test_a_member_name_is_looked_at_and_never_echoed_in_a_target() -> None:
    data = {"contacts": {EMAIL: {"phone": "+34 612 345 678"}, "SO-1": "ok"}}

    found = stored_findings(RecordResultRequest(claim_token="1.x", outcome=Outcome.SUCCEEDED, data=data))

    assert [target for target, _ in found] == ["data.contacts", "data.contacts.*.phone"]
    assert "a member name" in found[0][1]
    assert all("ana.lopez" not in target + message for target, message in found)


def test_a_refusal_lists_every_field_and_the_first_is_its_target(service: Gate) -> None:
    answer = claim(service)

    with pytest.raises(SensitiveData) as refused:
        record(service, answer, "failed", target_record_id="DE89370400440532013000", error=f"mail {EMAIL}")

    assert refused.value.target == "targetRecordId"
    assert [target for target, _ in refused.value.details] == ["targetRecordId", "error"]
    assert "an IBAN" in refused.value.details[0][1]
    assert "DE89" not in refused.value.message


def test_the_reviewer_is_kept_on_purpose_and_never_looked_at(service: Gate) -> None:
    first = claim(service)
    record(service, first)
    conflict_id = claim(service, run="run-2", fingerprint="v2").conflict_id

    resolved = resolve(service, conflict_id, "dismiss", reviewer=EMAIL)

    assert resolved.resolution is not None
    assert resolved.resolution.reviewer == EMAIL
    assert not resolved.warnings
    assert service.get_claim(first.claim_id).reviewer == EMAIL


def test_a_flow_s_owner_is_a_contact_on_purpose_and_never_looked_at(service: Gate) -> None:
    view = register(service, owner=EMAIL, notes="replaced by the v2 flow")

    assert view.owner == EMAIL
    assert not view.warnings
    assert flows(service)[(FLOW.name, FLOW.environment)].owner == EMAIL


# -- the key and the data have their own settings ------------------------------------------------------------


def test_data_follows_the_key_policy_unless_it_has_its_own(service_with: Policy) -> None:
    warned = service_with(keys=SensitivePolicy.WARN)
    answer = claim(warned)
    assert SENSITIVE_DATA in (record(warned, answer, data={"email": EMAIL}).warnings or [])

    strict_keys = service_with(SensitivePolicy.OFF, keys=SensitivePolicy.REJECT)
    with pytest.raises(SensitiveKey):
        claim(strict_keys, key=EMAIL)
    answer = claim(strict_keys, key="SO-2")
    assert not record(strict_keys, answer, data={"email": EMAIL}).warnings


def test_the_key_warning_comes_back_from_report_conflict_too(service_with: Policy) -> None:
    service = service_with(keys=SensitivePolicy.WARN)
    claim(service, key="4111 1111 1111 1111")

    view = report(service, key="4111 1111 1111 1111", reason="The ERP holds another amount.")

    assert view.warnings == ["sensitive_key"]


def _settings(tmp_path: Path, **environment: str) -> Settings:
    return Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "oncegate.db"), **environment})


def test_the_setting_defaults_to_the_key_policy(tmp_path: Path) -> None:
    assert _settings(tmp_path).sensitive_data is SensitivePolicy.REJECT
    assert _settings(tmp_path, ONCEGATE_SENSITIVE_KEYS="warn").sensitive_data is SensitivePolicy.WARN
    both = _settings(tmp_path, ONCEGATE_SENSITIVE_KEYS="reject", ONCEGATE_SENSITIVE_DATA="Warn")
    assert (both.sensitive_keys, both.sensitive_data) == (SensitivePolicy.REJECT, SensitivePolicy.WARN)


def test_a_bad_setting_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as bad:
        _settings(tmp_path, ONCEGATE_SENSITIVE_DATA="log")

    assert bad.value.setting == "ONCEGATE_SENSITIVE_DATA"
    assert "'reject', 'warn' or 'off'" in str(bad.value)


def test_the_service_is_built_with_the_data_setting(tmp_path: Path) -> None:
    service = Gate.of(bootstrap.build_services(_settings(tmp_path, ONCEGATE_SENSITIVE_DATA="warn")))
    try:
        answer = claim(service)
        assert SENSITIVE_DATA in (record(service, answer, error=EMAIL, outcome="failed").warnings or [])
    finally:
        service.close()


# -- the key check's bypasses, closed ------------------------------------------------------------------------

BYPASSES = [
    "PAY card 4111111111111111",
    "order-5555 5555 5555 4444",
    "4111.1111.1111.1111",
    "4111\u00a01111\u00a01111\u00a01111",
    "4111\u202f1111\u202f1111\u202f1111",
    "4111\t1111\t1111\t1111",
    "4111_1111_1111_1111",
    "ana%40contoso.com",
    "ana\uff20contoso.com",
    "ana@b\u00fccher.de",
    "110105 19491231 002X",
    "110105-19491231-002X",
    "DE89 3704 0044 0532 0130 00",
    "+34 612 345 678",
]


@pytest.mark.parametrize("key", BYPASSES)
def test_a_bypass_of_the_key_check_is_refused_as_a_key(service: Gate, key: str) -> None:
    assert sensitive_findings(key)
    with pytest.raises(SensitiveKey) as refused:
        claim(service, key=key)

    assert refused.value.target == "key"
