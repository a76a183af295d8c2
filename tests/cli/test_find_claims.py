"""``oncegate claims list``: claims by source system, reference, status or first received (issue 16)."""

from __future__ import annotations

import json

from tests.cli.conftest import Oncegate
from tests.http.client import ServerApi
from tests.http.test_actions import claim_body, ok


def test_claims_list_finds_them_by_source_and_reference(api: ServerApi, oncegate: Oncegate) -> None:
    found = ok(api.call("check_and_claim", claim_body(key="SO-1001", source="shop-eu", reference="SO-1001")))
    ok(api.call("check_and_claim", claim_body(key="SO-1002", source="shop-us", reference="SO-1002")))

    text = oncegate("claims", "list", "--source", "shop-eu")
    raw = oncegate("--json", "claims", "list", "--reference", "SO-1001", "--status", "in_progress")

    assert text.code == raw.code == 0
    header, *rows = text.out.splitlines()
    assert header.split()[:4] == ["FIRST", "RECEIVED", "SOURCE", "REFERENCE"]
    assert [row.split()[-1] for row in rows] == [found["claimId"]]
    assert "shop-eu" in rows[0]
    assert [claim["claimId"] for claim in json.loads(raw.out)["value"]] == [found["claimId"]]


def test_claims_list_says_when_nothing_matches(oncegate: Oncegate) -> None:
    run = oncegate("claims", "list", "--source", "shop-nowhere")

    assert (run.code, run.out) == (0, "No claims found.\n")


def test_claims_list_wants_a_filter(oncegate: Oncegate) -> None:
    run = oncegate("claims", "list")

    assert run.code == 2
    assert "--source" in run.err


def test_claims_show_names_the_source_and_reference(api: ServerApi, oncegate: Oncegate) -> None:
    answer = ok(api.call("check_and_claim", claim_body(source="shop-eu", reference="SO-1001")))

    run = oncegate("claims", "show", answer["claimId"])

    assert "shop-eu" in run.out
    assert "SO-1001" in run.out
