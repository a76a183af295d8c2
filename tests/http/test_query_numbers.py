"""A query's whole numbers are written in digits only, within their bounds; anything else is a 400 naming it.

Read leniently, ``top=1_0`` was 10, ``top=+5`` (a space once the address is decoded) and ``top=5.0`` were 5, as
Python's ``int`` reads text: a typo or an expression the flow did not evaluate became a page size instead of a
refusal. A body's numbers are JSON's own and strict already (issue 31); a query's are text, read here as digits.
"""

from __future__ import annotations

import pytest

from tests.http.client import Api
from tests.http.test_hostile_input import refused

LISTS = [
    ("list_conflicts", {}),
    ("list_claims_needing_attention", {"attention": "true"}),
    ("list_claims", {"reference": "SO-1"}),
    ("list_flows", {}),
    ("list_scopes", {}),
]
NOT_DIGITS = ["1_0", "+5", " 5", "5 ", "5.0", "5e0", "0x10", "\u0665", "\uff15", "-1", "", "five"]


@pytest.mark.parametrize("written", NOT_DIGITS)
@pytest.mark.parametrize(("name", "params"), LISTS, ids=[name for name, _ in LISTS])
def test_a_page_size_not_written_in_digits_is_a_400_naming_top(
    api: Api, name: str, params: dict[str, str], written: str
) -> None:
    refused(api.call(name, params={**params, "top": written}), "top")


@pytest.mark.parametrize("written", ["0", "201", "9" * 5_000])
def test_a_page_size_out_of_bounds_is_a_400_naming_top(api: Api, written: str) -> None:
    refused(api.call("list_conflicts", params={"top": written}), "top")


@pytest.mark.parametrize(("written", "size"), [("1", 1), ("007", 7), ("200", 200)])
def test_a_page_size_in_digits_is_taken(api: Api, written: str, size: int) -> None:
    for index in range(8):
        api.call("register_flow", {"name": f"Flow {index}", "environment": "Default-contoso", "owner": "ops@contoso"})

    reply = api.call("list_flows", params={"top": written})

    assert reply.status == 200, reply.body
    assert len(reply.body["value"]) == min(size, 8)


@pytest.mark.parametrize("written", ["yes", "no", "1", "0", "on", "off", "t", "y", " true", "true ", "", "truth"])
def test_attention_not_written_true_or_false_is_a_400_naming_it(api: Api, written: str) -> None:
    # Lax, yes, on, 1, t and y were true and their opposites false: a body's booleans never were (issue 31).
    refused(api.call("list_claims_needing_attention", params={"attention": written}), "attention")


@pytest.mark.parametrize("written", ["true", "True", "TRUE"])
def test_attention_true_in_any_case_lists_the_claims_needing_attention(api: Api, written: str) -> None:
    reply = api.call("list_claims_needing_attention", params={"attention": written})

    assert reply.status == 200, reply.body
    assert reply.body["value"] == []


def test_attention_false_is_refused_naming_what_to_add(api: Api) -> None:
    reply = api.call("list_claims_needing_attention", params={"attention": "False"})

    refused(reply, "attention")
    assert "attention=true" in reply.body["error"]["message"], reply.body
