"""Check and claim many's new keys claimed together (issue 36) answer, write and count as the single calls would.

The same items go once as one Check and claim many and once as single Check and claim calls, each with the run
id the bulk call gives its item, in two scopes (and two flows) of one store: every answer, claim, history line
and usage count is the same, item for item; an item refused alone, or left to go alone, changes nothing of the
others'.
"""

from __future__ import annotations

import re
from typing import Any

from oncegate.domain.records import HistoryEvent
from oncegate.domain.statuses import Outcome
from oncegate.entrypoints.operations.bulk import claim_each, item_run_id
from oncegate.entrypoints.operations.claims import CHECK_AND_CLAIM
from oncegate.entrypoints.operations.table import Call
from oncegate.errors import OnceGateError
from oncegate.models import ClaimManyEntry, ClaimRequest, LookupRequest, RecordResultRequest
from tests.gate import Gate

RUN = "run-import"
DIGEST = re.compile("#[0-9a-f]{8}[.]")


def items(scope: str, flow: str) -> list[Any]:
    """New keys, a key given twice, one held already, a personal-data key, an item that is no claim body."""
    claimed = {"scope": scope, "runId": RUN, "flow": {"name": flow, "environment": "Default"}}
    return [
        {**claimed, "key": "SO-1", "payload": {"qty": 1}, "reference": "row-1"},
        {**claimed, "key": "SO-2", "fingerprint": "v2", "source": "ERP"},
        {**claimed, "key": "HELD", "payload": {"qty": 3}},
        {**claimed, "key": "jane.doe@contoso.com"},
        {**claimed, "key": "SO-3"},
        {"scope": scope, "key": "SO-4"},  # no runId: refused alone
        {**claimed, "key": "SO-1", "payload": {"qty": 1}},  # another row with SO-1: another run, held off
        {**claimed, "key": "SO-5", "payload": {"qty": 5}, "leaseSeconds": 120},
    ]


def singles(service: Gate, rows: list[Any], digest_of: list[Any]) -> list[Any]:
    """Each row as a single Check and claim, with the run id the bulk call of ``digest_of`` gives it."""
    digest = claim_each.__globals__["_call_digest"](digest_of)
    answers: list[Any] = []
    for index, row in enumerate(rows):
        try:
            request = ClaimRequest.model_validate({**row, "runId": item_run_id(row["runId"], digest, index)})
        except (KeyError, ValueError):
            answers.append("invalid_request")
            continue
        try:
            answers.append(service.check_and_claim(request))
        except OnceGateError as exc:
            answers.append(type(exc).__name__)
    return answers


def said(answer: Any) -> Any:
    """What an answer tells the run, without what is random or named per scope (token, claim id, key)."""
    if isinstance(answer, str):
        return answer
    fields = answer.model_dump(exclude={"claim_token", "claim_id", "idempotency_key", "reference", "error"})
    if fields["holder"]:
        fields["holder"]["flow"] = None  # each call's own flow
    return fields


def line(event: HistoryEvent) -> tuple[Any, ...]:
    """A history line without its claim, time and id, the runs named without their call's digest."""
    run, recognised_by = (DIGEST.sub("#", text) for text in (event.run_id or "", event.recognised_by))
    return (event.kind, event.outcome, event.attempt, recognised_by, run, event.source, event.count)


def test_a_bulk_calls_new_keys_answer_write_and_count_as_its_single_calls(service: Gate) -> None:
    held = ClaimRequest(scope="bulk.a", key="HELD", run_id="run-before", payload={"qty": 3})
    for scope in ("bulk.a", "bulk.b"):
        service.check_and_claim(held.model_copy(update={"scope": scope}))
    bulk_rows, single_rows = items("bulk.a", "Import A"), items("bulk.b", "Import B")

    made = claim_each(service.services, Call(body=None), bulk_rows, CHECK_AND_CLAIM)
    entries = [ClaimManyEntry.model_validate(entry) for entry in made]  # the entries' members, as a client reads them
    alone = singles(service, single_rows, single_rows)

    told = [entry.error.code if entry.error else said(entry) for entry in entries]
    expected = [answer if isinstance(answer, str) else said(answer) for answer in alone]
    expected[3], expected[5] = "sensitive_key", "invalid_request"  # the single call's refusals, as coded
    assert told == expected
    assert [entry.decision.value if entry.decision else None for entry in entries] == [
        "proceed",
        "proceed",
        "in_progress",
        None,
        "proceed",
        None,
        "in_progress",
        "proceed",
    ]
    assert [entry.reference for entry in entries] == ["row-1", *[None] * 7]
    for n in (0, 1, 2, 4, 6, 7):
        found = service.lookup(LookupRequest(scope="bulk.a", key=bulk_rows[n]["key"]))
        assert entries[n].claim_id == found.claim_id
        bulk_lines = [line(event) for event in service.services.store.list_events(found.claim_id)]
        other = service.lookup(LookupRequest(scope="bulk.b", key=single_rows[n]["key"]))
        assert bulk_lines == [line(event) for event in service.services.store.list_events(other.claim_id)]
    # Every token granted is the attempt's own: its result is recorded.
    for entry in entries:
        if entry.claim_token:
            done = RecordResultRequest(claim_token=entry.claim_token, outcome=Outcome.SUCCEEDED, target_record_id="X")
            assert service.record_result(entry.claim_id or "", done).status.value == "succeeded"
    # The scope catalogue and the flow inventory counted the same.
    service.services.inventory.flush()
    scopes = {record.scope: record for record in service.services.store.list_scopes()}
    flows = {record.flow.name: record for record in service.services.store.list_flows()}
    assert scopes["bulk.a"].claims_by_source == scopes["bulk.b"].claims_by_source == {"erp": 1}
    assert (flows["Import A"].claims, flows["Import A"].duplicates, flows["Import A"].claims_by_source) == (
        flows["Import B"].claims,
        flows["Import B"].duplicates,
        flows["Import B"].claims_by_source,
    )
