"""What a reader of the tables (a portal reader, a leaked backup) finds: nothing to act with (issue 9).

A claim token in clear let anyone who could read the table record a result for a live claim,
and a plain SHA-256 fingerprint let them confirm a guessed payload by hashing it.
"""

from __future__ import annotations

import pytest

from oncegate.domain.keys import payload_fingerprint
from oncegate.domain.statuses import ClaimStatus
from oncegate.entrypoints import error_map
from oncegate.errors import StateConflict
from oncegate.models import ClaimRequest, RecordResultRequest
from oncegate.stores import row_writing
from tests.gate import Gate
from tests.service.calls import FLOW, SCOPE, claim, record, release

PAYLOAD = {"customer": "C-7", "email": "ana@contoso.com", "amount": 12.5}


def _everything_stored(service: Gate, claim_id: str) -> str:
    stored = service.store.get_claim(claim_id)
    rows = [
        row_writing.claim_to_row(stored),
        *(row_writing.event_to_row(e) for e in service.store.list_events(claim_id)),
    ]
    return repr(rows)


def test_no_stored_value_holds_the_claim_token_or_a_plain_fingerprint(service: Gate) -> None:
    answer = claim(service, payload=PAYLOAD)
    supplied = claim(service, key="SO-2", fingerprint="customer C-7 amount 12.5")

    for granted, plain in ((answer, payload_fingerprint(PAYLOAD)), (supplied, "customer C-7 amount 12.5")):
        assert granted.claim_token is not None
        stored = _everything_stored(service, granted.claim_id)
        assert granted.claim_token not in stored
        assert granted.claim_token.split(".", 1)[1] not in stored
        assert plain not in stored


def test_a_token_made_up_from_the_stored_row_is_refused_and_changes_nothing(service: Gate) -> None:
    answer = claim(service, payload=PAYLOAD)
    stored = service.store.get_claim(answer.claim_id)
    guesses = [f"{stored.attempt}.{stored.grant_id}", str(stored.grant_id), f"{stored.attempt}.{stored.claim_id}"]

    for guess in guesses:
        with pytest.raises(StateConflict) as refused:
            service.record_result(
                answer.claim_id, RecordResultRequest(claim_token=guess, outcome="failed", retryable=False)
            )
        assert error_map.code(refused.value) == "stale_claim", guess

    assert service.get_claim(answer.claim_id).status is ClaimStatus.IN_PROGRESS
    assert record(service, answer).status is ClaimStatus.SUCCEEDED


def test_a_new_attempt_gets_a_token_the_old_one_cannot_pass_for(service: Gate) -> None:
    first = claim(service, run="run-1")
    release(service, first)
    second = claim(service, run="run-2")

    assert second.claim_token not in (None, first.claim_token)
    assert record(service, second).status is ClaimStatus.SUCCEEDED


def test_who_a_claim_was_granted_to_is_kept_as_a_digest(service: Gate) -> None:
    answer = service.check_and_claim(
        ClaimRequest(scope=SCOPE, key="SO-3", run_id="run-1", flow=FLOW, payload=PAYLOAD), signed_in="ana@contoso.com"
    )

    stored = service.store.get_claim(answer.claim_id)

    assert stored.granted_to is not None
    assert "ana@contoso.com" not in _everything_stored(service, answer.claim_id)
