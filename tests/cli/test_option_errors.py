"""A value the service refuses is named as the option the person typed, not only as the field it became.

``oncegate scopes set S --key-pattern '[x'`` said ``... (keyPattern).`` and ``claims review ... --outcome
succeeded`` said ``attempt is required with outcome``: the request's field names, which the person never
typed. Each refusal of a field now has a line naming its option (``--key-pattern: ...``); nothing changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.conftest import Oncegate
from tests.http.client import ServerApi
from tests.http.test_actions import claim_body, ok

SCOPE = "erp.create-order"


def claim_id(api: ServerApi) -> str:
    answer: dict[str, Any] = ok(api.call("check_and_claim", claim_body(key="SO-1")))
    return str(answer["claimId"])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("scopes", "set", SCOPE, "--key-pattern", "[x"), "--key-pattern: the key pattern is not a regular expression"),
        (("scopes", "set", SCOPE, "--retention-days", "30", "--horizon-days", "10"), "--horizon-days: the horizon"),
        (("scopes", "set", SCOPE, "--fingerprint-ignore", "/a", "--fingerprint-ignore", "b"), "--fingerprint-ignore: "),
        (("flows", "register", "--name", "", "--environment", "Default"), "--name: "),
        (("claims", "review", "{claim}", "--reviewer", "ana", "--outcome", "failed"), "--attempt: attempt is required"),
        (("claims", "review", "{claim}", "--reviewer", "ana", "--data", "{}"), "--data: data settles an attempt"),
    ],
    ids=["key pattern", "horizon", "pointer", "flow name", "outcome without attempt", "data without outcome"],
)
def test_a_refused_value_names_its_option(
    api: ServerApi, oncegate: Oncegate, argv: tuple[str, ...], named: str
) -> None:
    claim = claim_id(api)
    scopes_before = ok(api.call("list_scopes"))

    run = oncegate(*(word.replace("{claim}", claim) for word in argv))

    assert run.code == 2
    assert run.err.splitlines()[0].startswith("invalid_request: ")
    assert run.err.splitlines()[-1].startswith(f"  {named}"), run.err
    assert ok(api.call("list_scopes")) == scopes_before
    assert ok(api.call("get_claim", route={"claimId": claim}))["status"] == "in_progress"
