"""Keys that carry personal data are refused (or flagged) before anything is stored."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.sensitive import SensitivePolicy, sensitive_findings
from oncegate.domain.statuses import Decision
from oncegate.errors import NotFound, SensitiveKey
from oncegate.models import LookupRequest, ReportConflictRequest
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.service.calls import SCOPE, claim


@pytest.fixture
def store_kind() -> str:
    """SQLite only: the sensitive-data check of keys runs before anything is written, whatever the store.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


PERSONAL = {
    "ana.lopez@contoso.com": "an e-mail address",
    "order for ana+shop@mail.example.cn": "an e-mail address",
    "11010519491231002X": "a resident identity number",
    "claim-440524198001010013-2026": "a resident identity number",
    "card 4111111111111111": "a payment card number",
    "4111/1111/1111/1111": "a payment card number",
    "card 5555 5555 5555 4444": "a payment card number",
    "3782 822463 10005": "a payment card number",
    "13800138000": "a phone number",
    "(+86) 13800138000": "a phone number",
    "6212-3456-7890-1232": "a payment card number",
}
BUSINESS = [
    "SO-1001",
    "shop-eu/SO-2026-000123",
    "4500012345",  # an SAP purchase order: ten digits
    "PO4711-0042",
    "INV-2026-000004711",
    "110105194912310021",  # eighteen digits, wrong check digit
    "110105209912310018",  # valid check digit, born in 2099
    "4111111111111112",  # a Visa prefix that fails Luhn
    "9111111111111111",  # Luhn-valid but no known issuer
    "4111111111111111",  # Luhn-valid with a card's prefix, but unbroken and unlabelled: an id
    "4804184259247742423",  # a platform order id: 19 digits, a Visa prefix, Luhn-valid
    "310115202612039028",  # an order number <area><yyyymmdd><seq> dated last week, with a valid check digit
    "ticket 12345678901234567",
    "release@2.0",
]


@pytest.mark.parametrize(("key", "found"), PERSONAL.items())
def test_personal_data_is_found_and_named(key: str, found: str) -> None:
    assert sensitive_findings(key) == [found]


@pytest.mark.parametrize("key", BUSINESS)
def test_business_keys_are_not_flagged(key: str) -> None:
    assert sensitive_findings(key) == []


def test_a_key_with_personal_data_is_refused_by_every_entrance_and_nothing_is_stored(service: Gate) -> None:
    key = "order for ana.lopez@contoso.com"

    with pytest.raises(SensitiveKey) as refused:
        claim(service, key=key)
    with pytest.raises(SensitiveKey):
        service.lookup(LookupRequest(scope=SCOPE, key=key))
    with pytest.raises(SensitiveKey):
        service.report_conflict(ReportConflictRequest(scope=SCOPE, key=key, run_id="r", reason="differs"))

    assert refused.value.target == "key"
    assert "an e-mail address" in refused.value.message
    assert "ana.lopez" not in refused.value.message
    unchecked = Gate(service.store, KeyHasher(KEY_SECRET), sensitive_keys=SensitivePolicy.OFF)
    with pytest.raises(NotFound):
        unchecked.lookup(LookupRequest(scope=SCOPE, key=key))


@pytest.fixture
def service_with(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[SensitivePolicy], Gate]:
    return lambda policy: Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, sensitive_keys=policy)


def test_warn_lets_the_key_through_with_a_warning(service_with: Callable[[SensitivePolicy], Gate]) -> None:
    answer = claim(service_with(SensitivePolicy.WARN), key="4111 1111 1111 1111")

    assert answer.decision is Decision.PROCEED
    assert "sensitive_key" in answer.warnings


def test_off_checks_nothing(service_with: Callable[[SensitivePolicy], Gate]) -> None:
    answer = claim(service_with(SensitivePolicy.OFF), key="ana@contoso.com")

    assert answer.decision is Decision.PROCEED
    assert "sensitive_key" not in answer.warnings
