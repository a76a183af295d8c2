"""GET /api/claims by where claims came from: source system, reference, status and first received (issue 16)."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.conftest import FakeClock
from tests.http.client import Api
from tests.http.test_actions import claim_body, ok

FIND = "list_claims_needing_attention"  # one function serves GET /api/claims, both lists


def every_page(api: Api, **params: str) -> list[list[dict[str, Any]]]:
    pages, body = [], ok(api.call(FIND, params=params))
    pages.append(body["value"])
    while "nextLink" in body:
        body = ok(api.follow(body["nextLink"]))
        pages.append(body["value"])
    return pages


def test_claims_are_found_by_source_and_reference_and_show_both(api: Api, clock: FakeClock) -> None:
    since = clock().isoformat()
    ok(api.call("check_and_claim", claim_body(key="SO-1001", source="shop-eu", reference="SO-1001")))
    ok(api.call("check_and_claim", claim_body(key="SO-1002", source="shop-eu")))
    ok(api.call("check_and_claim", claim_body(key="E-7", source="sharepoint:expenses", reference="SO-1001")))

    [found] = every_page(api, source="Shop-EU", reference="SO-1001")
    by_source = [claim for page in every_page(api, source="shop-eu", top="1") for claim in page]

    assert [(claim["source"], claim["reference"]) for claim in found] == [("shop-eu", "SO-1001")]
    assert "history" not in found[0]
    assert sorted(claim.get("reference", "") for claim in by_source) == ["", "SO-1001"]
    assert len([claim for page in every_page(api, status="in_progress", since=since) for claim in page]) == 3


def test_a_filter_that_matches_nothing_is_an_empty_last_page(api: Api) -> None:
    ok(api.call("check_and_claim", claim_body(source="shop-eu")))

    body = ok(api.call(FIND, params={"source": "shop-nowhere"}))

    assert body == {"value": []}


def test_unknown_and_malformed_parameters_are_refused_naming_them(api: Api) -> None:
    unknown = api.call(FIND, params={"source": "shop-eu", "colour": "red"})
    malformed = api.call(FIND, params={"since": "last week"})
    bad_source = api.call(FIND, params={"source": "shop eu"})

    assert (unknown.status, unknown.code) == (400, "invalid_request")
    assert "colour" in unknown.body["error"]["message"]
    assert (malformed.status, malformed.targets) == (400, ["since"])
    assert (bad_source.status, bad_source.targets) == (400, ["source"])


def test_a_since_utc_cannot_write_is_refused_naming_it_not_a_500(api: Api) -> None:
    # Found by an outside test: both overflowed converting to UTC in the store, answering 500.
    late = api.call(FIND, params={"since": "9999-12-31T23:59:59-23:59"})
    early = api.call(FIND, params={"since": "0001-01-01T00:00:00+23:59"})

    assert (late.status, late.targets) == (400, ["since"])
    assert (early.status, early.targets) == (400, ["since"])
    assert "between the years 1 and 9999" in late.body["error"]["message"]


def test_a_cursor_of_the_attention_list_is_refused_by_the_found_list(api: Api, clock: FakeClock) -> None:
    for key in ("A-1", "A-2"):
        ok(api.call("check_and_claim", claim_body(key=key, leaseSeconds=15)))
    clock.advance(60)
    attention = ok(api.call(FIND, params={"attention": "true", "top": "1"}))
    cursor = dict(parse_qsl(urlsplit(attention["nextLink"]).query))["cursor"]

    refused = api.call(FIND, params={"source": "shop-eu", "cursor": cursor})

    assert (refused.status, refused.targets) == (400, ["cursor"]), refused.body


def test_the_connector_s_route_lists_the_same_claims_and_pages_on_itself(api: Api) -> None:
    for key in ("SO-1", "SO-2", "SO-3"):
        ok(api.call("check_and_claim", claim_body(key=key, source="shop-eu")))

    first = ok(api.call("list_claims", params={"source": "shop-eu", "top": "2"}))
    rest = ok(api.follow(first["nextLink"]))

    assert "/api/claim-list?" in first["nextLink"]
    listed = [claim["claimId"] for claim in [*first["value"], *rest["value"]]]
    assert sorted(listed) == sorted(claim["claimId"] for page in every_page(api, source="shop-eu") for claim in page)
    assert len(listed) == 3


def test_the_connector_s_route_wants_a_filter(api: Api) -> None:
    refused = api.call("list_claims")

    assert (refused.status, refused.targets) == (400, ["source"])
