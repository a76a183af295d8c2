"""A result within the API's limits is recorded on every store (issue 9, defect 4: Table Storage answered 500)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import FakeClock
from tests.http.client import Api
from tests.http.test_actions import claim_body, ok
from tests.stores.contract import API_MAX_ERRORS, CONTROL, api_max_data, api_max_length


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Both stores, unlike the rest of the HTTP suite: sizes are where they used to part."""
    kind: str = request.param
    return kind


RESULTS: dict[str, dict[str, Any]] = {
    # The request: 40,598 characters of history details once JSON-escaped.
    "issue 9": {"outcome": "failed", "data": "x" * 16000, "error": CONTROL * 4096},
    **{
        f"every field at its limit, error in {kind}": {
            "outcome": "failed",
            "targetRecordId": CONTROL * api_max_length("target_record_id"),
            "data": api_max_data(),
            "error": error,
            "retryable": False,
        }
        for kind, error in API_MAX_ERRORS.items()
    },
}


@pytest.mark.parametrize("result", RESULTS.values(), ids=RESULTS.keys())
def test_a_result_within_the_api_limits_is_recorded_and_reads_back(
    api: Api, clock: FakeClock, result: dict[str, Any]
) -> None:
    answer = ok(api.call("check_and_claim", claim_body()))
    clock.advance(1)
    # UTF-8 as a flow sends it: \u-escaped, 4,096 emoji alone would take 48 KiB of the 64 KiB a body may hold.
    body = json.dumps({"claimToken": answer["claimToken"], **result}, ensure_ascii=False).encode()

    recorded = ok(api.call("record_result", body, route={"claimId": answer["claimId"]}))
    got = ok(api.call("get_claim", route={"claimId": answer["claimId"]}))

    assert (recorded["status"], recorded["data"], recorded["error"]) == ("failed", result["data"], result["error"])
    assert (got["status"], got["data"], got["error"]) == ("failed", result["data"], result["error"])
    assert got.get("targetRecordId") == result.get("targetRecordId")
    last = got["history"][-1]
    assert (last["event"], last["outcome"]) == ("result", "failed")
    assert (last["details"]["data"], last["details"]["error"]) == (result["data"], result["error"])
