"""Where a business object came from, and the flow's label to find it again (issue 16).

The source system and the reference are kept in clear on the claim, as the first request naming
them gave them; neither is part of the business intent, so a request naming another source is the
same claim, answered with the warning ``source_differs``.
"""

from __future__ import annotations

from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus, Decision
from oncegate.models import ListConflictsQuery
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.service.calls import FLOW, FLOW_COPY, SCOPE, claim, flows, record, release, report, scopes


def test_the_claim_keeps_its_source_and_reference_and_shows_them(service: Gate) -> None:
    answer = claim(service, source="Shop-EU", reference="SO-1001")

    view = service.get_claim(answer.claim_id)

    assert (view.source, view.reference) == ("shop-eu", "SO-1001")
    assert [entry.source for entry in view.history or []] == ["shop-eu"]
    assert answer.warnings == []


def test_another_source_is_the_same_claim_with_a_warning_and_the_first_source_stays(
    service: Gate, clock: FakeClock
) -> None:
    first = claim(service, source="shop-eu", reference="SO-1001")
    clock.advance(1)
    record(service, first)
    clock.advance(1)

    again = claim(service, run="run-2", source="shop-us", reference="SO-9")
    clock.advance(1)
    unnamed = claim(service, run="run-3")

    assert again.decision is Decision.DUPLICATE
    assert "source_differs" in again.warnings
    assert "source_differs" not in unnamed.warnings
    view = service.get_claim(first.claim_id)
    assert (view.source, view.reference) == ("shop-eu", "SO-1001")
    assert [entry.source for entry in view.history or []] == ["shop-eu", None, "shop-us", None]


def test_a_claim_made_without_a_source_takes_the_next_attempt_s(service: Gate) -> None:
    first = claim(service)
    release(service, first)

    again = claim(service, run="run-2", source="sharepoint:expenses", reference="EXP-7")

    assert again.decision is Decision.PROCEED
    assert again.warnings == []
    view = service.get_claim(first.claim_id)
    assert (view.source, view.reference) == ("sharepoint:expenses", "EXP-7")


def test_requests_without_source_or_reference_answer_as_before(service: Gate) -> None:
    answer = claim(service)

    view = service.get_claim(answer.claim_id)
    shown = view.model_dump(by_alias=True, exclude_none=True)

    assert "source" not in shown
    assert "reference" not in shown
    assert all("source" not in entry for entry in shown["history"])


def test_conflicts_carry_the_source_system_the_run_named(service: Gate, clock: FakeClock) -> None:
    first = claim(service, source="shop-eu")
    record(service, first)
    clock.advance(1)

    met = claim(service, run="run-2", fingerprint="v2", source="shop-us")
    clock.advance(1)
    reported = report(service, fingerprint="v3", source="Shop-EU")

    listed, _ = service.list_conflicts(ListConflictsQuery(status=None))
    conflicts = {view.conflict_id: view for view in listed}
    assert met.conflict_id is not None
    assert conflicts[met.conflict_id].source_system == "shop-us"
    assert reported.source_system == "shop-eu"
    assert reported.origin.value == "reported"
    history = service.get_claim(first.claim_id).history or []
    assert history[-1].source == "shop-eu"


def test_claims_are_found_by_source_and_reference_in_the_store(service: Gate, clock: FakeClock) -> None:
    claim(service, key="ORDER-1", source="shop-eu", reference="SO-1")
    claim(service, key="ORDER-2", source="shop-us", reference="SO-1")

    found = service.store.list_claims(
        ClaimFilter(tuple(ClaimStatus), source="shop-eu", received_since=clock()), limit=10
    )

    assert [(found_claim.source, found_claim.reference) for found_claim in found.items] == [("shop-eu", "SO-1")]


def test_scopes_and_flows_count_the_claims_of_each_source(service: Gate) -> None:
    claim(service, key="ORDER-1", source="shop-eu")
    claim(service, key="ORDER-2", source="shop-eu")
    claim(service, key="ORDER-2", run="run-2", source="shop-us")  # the same claim: counted once, for shop-eu
    claim(service, key="ORDER-3", source="sharepoint:expenses", flow=FLOW_COPY)
    claim(service, key="ORDER-4")

    scope = scopes(service)[SCOPE]
    by_flow = flows(service)

    assert [(count.source, count.claims) for count in scope.sources or []] == [
        ("shop-eu", 2),
        ("sharepoint:expenses", 1),
    ]
    assert [(count.source, count.claims) for count in by_flow[(FLOW.name, FLOW.environment)].sources or []] == [
        ("shop-eu", 2)
    ]
    assert [count.source for count in by_flow[(FLOW_COPY.name, FLOW_COPY.environment)].sources or []] == [
        "sharepoint:expenses"
    ]


def test_inventory_answers_without_sources_leave_them_out(service: Gate) -> None:
    claim(service)

    shown = scopes(service)[SCOPE].model_dump(by_alias=True, exclude_none=True)

    assert "sources" not in shown
