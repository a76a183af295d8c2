"""Check and claim's one value in (issue 32): the intent the edge makes of what the run sent is identified by the
service once, and only an identified intent is decided on."""

from __future__ import annotations

import pytest

from oncegate.domain.decisions import UNREAD, Intent
from oncegate.domain.records import Flow
from oncegate.domain.statuses import Decision
from tests.gate import Gate
from tests.service.calls import FLOW, KEY, SCOPE, claim

SENT = Intent(
    scope=SCOPE.upper(), key=KEY, supplied_fingerprint="v1", run_id="run-1", flow=Flow(FLOW.name, FLOW.environment)
)


def test_an_intent_sent_is_identified_once_and_keeps_what_the_run_sent(service: Gate) -> None:
    identified = service.services.new_claims.identified(SENT)  # as Check and claim and its bulk call identify it

    assert (identified.key, identified.supplied_fingerprint, identified.run_id) == (KEY, "v1", "run-1")
    assert identified.scope == SCOPE  # lowered, as stored
    assert identified.now is not UNREAD
    assert len(identified.claim_id) == 52
    assert identified.fingerprint is not None
    assert identified.lease.total_seconds() > 0
    assert (SENT.now, SENT.claim_id, SENT.fingerprint) == (UNREAD, "", None)  # what the edge made is left as it was


def test_the_intent_sent_is_answered_as_the_wire_s_request(service: Gate) -> None:
    told = service.services.claims.check_and_claim(SENT)
    again = claim(service)  # the same key, fingerprint, run and flow through the wire: the same run asking again

    assert (told.decision, told.attempt) == (Decision.PROCEED, 1)
    assert (again.decision, again.claim_id) == (Decision.PROCEED, told.claim_id)


def test_an_intent_not_identified_is_never_decided_on(service: Gate) -> None:
    with pytest.raises(AssertionError, match="identified"):
        service.services.claims.decide_for(SENT)
