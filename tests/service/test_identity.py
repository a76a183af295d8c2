"""What counts as the same business object and the same intent: keys, scopes, fingerprints, flows."""

from __future__ import annotations

from typing import Any

import pytest

from oncegate.domain.keys import payload_fingerprint
from oncegate.domain.statuses import Decision
from oncegate.errors import InvalidRequest
from oncegate.models import LookupRequest
from tests.gate import Gate
from tests.service.calls import FLOW, FLOW_COPY, claim, succeeded


@pytest.fixture
def store_kind() -> str:
    """SQLite only: keys, scopes and fingerprints are made into a claim id and digests before the store sees them.

    The store contract suite (tests/stores/contract.py) runs the store's part on both stores.
    """
    return "sqlite"


ORDER = {"customer": "C-7", "amount": 1.0, "lines": [{"sku": "A-1", "qty": 2}], "note": None}
# The same JSON value: other key order, other number spellings.
ORDER_RESPELT = {"lines": [{"qty": 2.0, "sku": "A-1"}], "note": None, "amount": 1, "customer": "C-7"}


# -- payload fingerprints -------------------------------------------------------------------------


def test_the_same_payload_in_another_key_order_and_number_spelling_is_a_duplicate(service: Gate) -> None:
    succeeded(service, payload=ORDER)

    again = claim(service, run="run-2", payload=ORDER_RESPELT)

    assert again.decision is Decision.DUPLICATE
    assert again.warnings == []


def test_a_changed_payload_is_a_conflict(service: Gate) -> None:
    succeeded(service, payload=ORDER)

    changed = claim(service, run="run-2", payload={**ORDER, "amount": 1.5})

    assert changed.decision is Decision.CONFLICT


def test_a_payload_fingerprint_is_keyed_and_the_payload_is_not_kept(service: Gate) -> None:
    answer = claim(service, payload=ORDER)

    stored = service.get_claim(answer.claim_id)

    # A plain SHA-256 of a guessable payload could be confirmed by hashing guesses (issue 9): never stored.
    assert stored.fingerprint is not None
    assert stored.fingerprint.startswith("hmac:")
    assert stored.fingerprint != payload_fingerprint(ORDER)
    history = stored.model_dump_json()
    assert "C-7" not in history
    assert payload_fingerprint(ORDER) not in history


def test_a_payload_that_json_cannot_canonicalise_is_rejected_before_any_write(service: Gate) -> None:
    with pytest.raises(InvalidRequest) as rejected:
        claim(service, payload={"amount": 2**60})

    assert rejected.value.target == "payload"
    assert claim(service, run="run-2").decision is Decision.PROCEED


def test_without_any_fingerprint_only_the_key_is_compared_and_a_warning_says_so(service: Gate) -> None:
    first = claim(service, fingerprint=None)
    assert first.warnings == ["no_fingerprint"]

    with_payload = claim(service, run="run-2", payload=ORDER)
    without = claim(service, run="run-3", fingerprint=None)

    assert with_payload.decision is Decision.IN_PROGRESS
    assert with_payload.warnings == []
    assert (without.decision, without.warnings) == (Decision.IN_PROGRESS, ["no_fingerprint"])


def test_a_duplicate_asked_without_a_fingerprint_still_finds_the_result(service: Gate) -> None:
    succeeded(service, payload=ORDER, target="SO-77")

    again = claim(service, run="run-2", fingerprint=None)

    assert again.decision is Decision.DUPLICATE
    assert again.result is not None
    assert again.result.target_record_id == "SO-77"
    assert again.warnings == ["no_fingerprint"]


# -- keys and scopes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ({"key": "ORDER-1001"}, {"key": "  ORDER-1001\t"}, True),
        ({"key": "ORDER-1001"}, {"key": "\nORDER-1001 "}, True),
        ({"key": "Caf\u00e9-42"}, {"key": "Cafe\u0301-42"}, True),
        ({"key": "ORDER-ab"}, {"key": "order-AB"}, False),
        ({"scope": "ERP.Create-Order"}, {"scope": "erp.create-order"}, True),
        ({"scope": "erp.create-order"}, {"scope": "mail.send-invoice"}, False),
    ],
    ids=["outer-spaces", "outer-newlines", "unicode-nfc", "key-case", "scope-case", "two-scopes"],
)
def test_what_makes_the_same_business_key(
    service: Gate, first: dict[str, Any], second: dict[str, Any], same: bool
) -> None:
    """Outer whitespace, Unicode normal forms and a scope's case make no other key; a key's case and the scope do."""
    made = claim(service, **first)

    again = claim(service, run="run-2", **second)

    assert (again.claim_id == made.claim_id) is same
    assert again.decision is (Decision.IN_PROGRESS if same else Decision.PROCEED)


def test_scopes_are_stored_lowercase(service: Gate) -> None:
    made = claim(service, scope="ERP.Create-Order")

    assert service.get_claim(made.claim_id).scope == "erp.create-order"


def test_a_key_of_512_characters_after_trimming_is_accepted_and_513_is_not(service: Gate) -> None:
    assert claim(service, key=" " + "k" * 512 + " ").decision is Decision.PROCEED

    with pytest.raises(InvalidRequest) as rejected:
        claim(service, key="k" * 513)

    assert rejected.value.target == "key"


def test_lookup_finds_the_claim_by_scope_and_key_spelt_as_the_flow_spells_them(service: Gate) -> None:
    first = claim(service, key="Caf\u00e9-42", scope="erp.create-order")

    found = service.lookup(LookupRequest(scope="ERP.CREATE-ORDER", key=" Cafe\u0301-42 "))

    assert found.claim_id == first.claim_id
    assert found.history is not None


# -- flows ----------------------------------------------------------------------------------------


def test_a_duplicate_for_another_flow_copy_carries_a_warning(service: Gate) -> None:
    succeeded(service, flow=FLOW)

    same_flow = claim(service, run="run-2", flow=FLOW)
    copy = claim(service, run="run-3", flow=FLOW_COPY)
    renamed = claim(service, run="run-4", flow=FLOW.model_copy(update={"name": "Create ERP order (old)"}))

    assert same_flow.warnings == []
    assert (copy.decision, copy.warnings) == (Decision.DUPLICATE, ["another_flow_copy"])
    assert renamed.warnings == ["another_flow_copy"]


def test_an_in_progress_answer_to_another_flow_copy_carries_a_warning(service: Gate) -> None:
    claim(service, flow=FLOW)

    copy = claim(service, run="run-2", flow=FLOW_COPY)

    assert (copy.decision, copy.warnings) == (Decision.IN_PROGRESS, ["another_flow_copy"])


def test_a_proceed_for_another_flow_carries_no_copy_warning(service: Gate) -> None:
    claim(service, key="ORDER-1", flow=FLOW)

    other_key = claim(service, key="ORDER-2", run="run-2", flow=FLOW_COPY)

    assert (other_key.decision, other_key.warnings) == (Decision.PROCEED, [])
