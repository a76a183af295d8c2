"""The forms of personal data issue 22 found stored as sent: refused as keys and in every stored field.

Phone numbers of mainland China without "+" (``(+86) …``, ``0086 …``, ``86-138-…``, bare),
a card grouped by slashes, e-mail addresses with a quoted local part or a domain literal, a card
number split across two fields of result data, and a release reason carrying a mobile number.
Issue 31: a mobile number written with 00 glued to its country code (``008613800138000``).
"""

from __future__ import annotations

import random

import phonenumbers
import pytest

from oncegate.domain.sensitive import NUMBER_FINDINGS, sensitive_findings
from oncegate.domain.statuses import ClaimStatus
from oncegate.errors import SensitiveData, SensitiveKey
from oncegate.models import LookupRequest
from tests.gate import Gate
from tests.service.business_ids import ISSUE_MISSES
from tests.service.calls import SCOPE, claim, record, release
from tests.service.test_sensitive_data import ACTIONS


@pytest.fixture
def store_kind() -> str:
    """SQLite only: the sensitive-data check runs before anything is written, whatever the store.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


@pytest.mark.parametrize("key", ISSUE_MISSES)
def test_each_form_is_refused_as_a_key_and_nothing_is_stored(service: Gate, key: str) -> None:
    with pytest.raises(SensitiveKey) as refused:
        claim(service, key=key)

    assert refused.value.target == "key"
    assert key not in refused.value.message
    # For a number an id may share the shape of, the refusal says how the scope's owner declares such ids.
    number = bool(NUMBER_FINDINGS.intersection(sensitive_findings(key)))
    assert ("--key-pattern" in refused.value.message) is number
    assert service.store.list_scopes() == []
    with pytest.raises(SensitiveKey):
        service.lookup(LookupRequest(scope=SCOPE, key=key))


@pytest.mark.parametrize("action", ACTIONS)
def test_each_form_is_refused_in_every_stored_field_and_nothing_changes(service: Gate, action: str) -> None:
    stored = ACTIONS[action](service)
    before = stored.state()

    for text in ISSUE_MISSES:
        with pytest.raises(SensitiveData) as refused:
            stored.act(text)
        assert refused.value.target == stored.target, text
        assert text not in refused.value.message

    assert stored.state() == before


def test_a_release_reason_with_a_mobile_number_is_refused(service: Gate) -> None:
    answer = claim(service)

    with pytest.raises(SensitiveData) as refused:
        release(service, answer, reason="Customer asked to cancel, call back on 138 0013 8000")

    assert refused.value.target == "reason"
    assert "a phone number" in refused.value.message
    assert service.get_claim(answer.claim_id).status is ClaimStatus.IN_PROGRESS


@pytest.mark.parametrize(
    "data",
    [
        {"cardFirst": "4111 1111", "cardLast": "1111 1111"},
        {"paymentCard": {"first": "4111-1111", "last": "1111-1111"}},
        {"pan": ["41111111", "11111111"]},
        {"panStart": "411111", "panEnd": "1111111111"},
    ],
    ids=["grouped-halves", "dashed-halves", "array-halves", "labelled-digits"],
)
def test_a_card_number_split_across_two_fields_is_refused(service: Gate, data: dict[str, object]) -> None:
    answer = claim(service)

    with pytest.raises(SensitiveData) as refused:
        record(service, answer, target_record_id="SO-1", data=data)

    assert "together seem to contain a payment card number" in refused.value.message
    assert "4111" not in refused.value.message
    assert record(service, answer, target_record_id="SO-1", data={"cardLast4": "1111"}).data == {"cardLast4": "1111"}


def _china_mobiles(count: int) -> list[str]:
    """``count`` mainland China mobile numbers of every carrier prefix, the same every run."""
    rng = random.Random(31)
    found: list[str] = []
    while len(found) < count:
        number = f"1{rng.choice('3456789')}{rng.randrange(10**9):09d}"
        if phonenumbers.is_valid_number(phonenumbers.parse(number, "CN")):
            found.append(number)
    return found


# Issue 31: 40 of 40 were missed written 0086 and the number with no space, found with a space or as 86 and the number.
GLUED = [f"0086{number}" for number in _china_mobiles(40)]


def test_a_mobile_written_0086_and_the_number_is_refused_as_a_key(service: Gate) -> None:
    refused_at: dict[str, str | None] = {}
    for key in GLUED:
        try:
            claim(service, key=key)
        except SensitiveKey as refused:
            refused_at[key] = refused.target
        else:
            refused_at[key] = None

    assert refused_at == dict.fromkeys(GLUED, "key")
    assert service.store.list_scopes() == []


def test_a_mobile_written_0086_and_the_number_is_refused_as_stored_data(service: Gate) -> None:
    answer = claim(service)
    refused_at: dict[str, str | None] = {}
    for text in GLUED:
        try:
            record(service, answer, target_record_id="SO-1", data={"contact": text})
        except SensitiveData as refused:
            refused_at[text] = refused.target
        else:
            refused_at[text] = None

    assert refused_at == dict.fromkeys(GLUED, "data.contact")
    assert service.get_claim(answer.claim_id).status is ClaimStatus.IN_PROGRESS
