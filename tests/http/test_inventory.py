"""The flow inventory and the scope catalogue over HTTP: PUT and GET as an admin's flow calls them, and bad input."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from oncegate import bootstrap
from oncegate.config import Settings
from tests.conftest import FakeClock
from tests.http.client import Api, FunctionsApi, Reply, succeed
from tests.http.test_actions import FLOW, claim_body, ok, utc

FLOW_COPY = {"name": "Create ERP order", "environment": "Test-contoso"}
SCOPE = "erp.create-order"


def register(api: Api, flow: dict[str, str] = FLOW, **fields: Any) -> dict[str, Any]:
    return ok(api.call("register_flow", {**flow, **fields}))


def listed(api: Api, name: str, **params: str) -> list[dict[str, Any]]:
    """Every item of a list, following nextLink."""
    items: list[dict[str, Any]] = []
    page = ok(api.call(name, params=params))
    items += page["value"]
    while "nextLink" in page:
        page = ok(api.call(name, params=dict(parse_qsl(urlsplit(page["nextLink"]).query))))
        items += page["value"]
    return items


def test_a_flow_registered_disabled_is_blocked_with_the_reason(api: Api, clock: FakeClock) -> None:
    registered_at = clock.now

    view = register(api, owner="ana@contoso.com", enabled=False, notes="Replaced by the new ERP flow.")
    answer = ok(api.call("check_and_claim", claim_body()))

    assert view == {
        **FLOW,
        "registered": True,
        "enabled": False,
        "owner": "ana@contoso.com",
        "notes": "Replaced by the new ERP flow.",
        "registeredAt": view["registeredAt"],
        "claims": 0,
        "duplicates": 0,
    }
    assert utc(view["registeredAt"]) == registered_at
    assert (answer["decision"], answer["attempt"]) == ("blocked", 0)
    assert answer["status"] == "none"
    assert "claimToken" not in answer
    assert "Replaced by the new ERP flow." in answer["reason"]
    assert api.call("lookup_claim", {"scope": SCOPE, "key": "ORDER-1001"}).status == 404
    (flow,) = listed(api, "list_flows")
    assert (flow["claims"], utc(flow["lastSeenAt"])) == (1, clock.now)


def test_flows_and_overlaps_are_listed(api: Api, clock: FakeClock) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    clock.advance(1)
    busy = ok(api.call("check_and_claim", claim_body(run="run-2", flow=FLOW_COPY)))
    succeed(api, first, targetRecordId="SO-1")
    clock.advance(5)
    duplicate = ok(api.call("check_and_claim", claim_body(run="run-3", flow=FLOW_COPY)))

    flows = {(flow["name"], flow["environment"]): flow for flow in listed(api, "list_flows")}
    (overlap,) = listed(api, "list_flow_overlaps")

    assert (busy["decision"], duplicate["decision"]) == ("in_progress", "duplicate")
    assert flows[(FLOW["name"], FLOW["environment"])]["claims"] == 1
    copy = flows[(FLOW_COPY["name"], FLOW_COPY["environment"])]
    assert (copy["claims"], copy["duplicates"], copy["registered"], copy["enabled"]) == (2, 1, False, True)
    assert (overlap["flow"], overlap["otherFlow"], overlap["count"]) == (FLOW, FLOW_COPY, 2)
    assert overlap["exampleClaimId"] == first["claimId"]
    assert utc(overlap["lastSeenAt"]) - utc(overlap["firstSeenAt"]) == timedelta(seconds=5)


def test_lists_page_by_next_link(api: Api) -> None:
    for number in range(5):
        register(api, {"name": f"Flow {number}", "environment": "Default-contoso"})

    first = ok(api.call("list_flows", params={"top": "2"}))
    names = [flow["name"] for flow in listed(api, "list_flows", top="2")]

    assert len(first["value"]) == 2
    assert urlsplit(first["nextLink"]).path == "/api/flows"
    assert names == [f"Flow {number}" for number in range(5)]


def test_a_scope_is_set_up_and_its_claims_counted(api: Api, clock: FakeClock) -> None:
    settings = {"owner": "erp-team@contoso.com", "leaseSeconds": 900, "retentionDays": 30, "description": "Orders."}

    view = ok(api.call("set_scope", {"scope": "ERP.Create-Order", **settings}))
    default = ok(api.call("check_and_claim", claim_body()))
    explicit = ok(api.call("check_and_claim", claim_body(key="ORDER-2", leaseSeconds=60)))
    succeed(api, explicit, targetRecordId="SO-2")
    ok(api.call("check_and_claim", claim_body(key="ORDER-2", run="run-3", payload={"amount": 11})))
    (scope,) = listed(api, "list_scopes")

    assert {name: view[name] for name in settings} == settings
    assert (view["scope"], view["openConflicts"]) == (SCOPE, 0)
    assert utc(default["leaseExpiresAt"]) == clock.now + timedelta(seconds=900)
    assert utc(explicit["leaseExpiresAt"]) == clock.now + timedelta(seconds=60)
    assert scope["claims"] == {"inProgress": 1, "succeeded": 1, "failed": 0, "unknown": 0, "released": 0}
    assert (scope["openConflicts"], scope["retentionDays"], scope["leaseSeconds"]) == (1, 30, 900)


def test_a_scope_set_without_settings_gets_the_defaults(api: Api) -> None:
    view = ok(api.call("set_scope", {"scope": SCOPE}))

    assert (view["leaseSeconds"], view["retentionDays"]) == (300, 90)
    assert "owner" not in view


SETTINGS = {
    "owner": "erp-team@contoso.com",
    "leaseSeconds": 600,
    "retentionDays": 30,
    "horizonDays": 730,
    "description": "Orders.",
    "keyPattern": "SO-[0-9]{6}",
    "fingerprintIgnore": ["/Modified"],
    "fingerprintPreset": "sharepoint",
}


def test_a_bare_put_of_a_scope_changes_nothing_and_a_null_resets_the_setting(api: Api) -> None:
    """Issue 31: a bare PUT /api/scopes reset what an operator set; now only a field sent as null is reset."""
    ok(api.call("set_scope", {"scope": SCOPE, **SETTINGS}))

    bare = ok(api.call("set_scope", {"scope": SCOPE}))
    reset = ok(api.call("set_scope", {"scope": SCOPE, **dict.fromkeys(SETTINGS), "fingerprintInclude": None}))

    assert {name: bare.get(name) for name in SETTINGS} == SETTINGS
    assert bare["fingerprintRulesVersion"] == 1
    assert {name: reset.get(name) for name in SETTINGS} == {
        **dict.fromkeys(SETTINGS),
        "leaseSeconds": 300,
        "retentionDays": 90,
        "horizonDays": 365,
    }
    assert reset["fingerprintRulesVersion"] == 2


def test_a_bare_put_of_a_flow_changes_nothing_and_a_null_resets_the_setting(api: Api) -> None:
    """Issue 31: a bare PUT /api/flows enabled a disabled flow again and cleared its owner and notes."""
    registration = {"owner": "ana@contoso.com", "enabled": False, "notes": "Replaced by the v2 flow."}
    register(api, **registration)

    bare = register(api)
    blocked = ok(api.call("check_and_claim", claim_body()))
    reset = register(api, **dict.fromkeys(registration))

    assert {name: bare.get(name) for name in registration} == registration
    assert blocked["decision"] == "blocked"
    assert {name: reset.get(name) for name in registration} == {"owner": None, "enabled": True, "notes": None}


@pytest.mark.parametrize(
    ("name", "body", "target"),
    [
        ("set_scope", {"scope": SCOPE, "leaseSeconds": 14}, "leaseSeconds"),
        ("set_scope", {"scope": SCOPE, "leaseSeconds": 86401}, "leaseSeconds"),
        ("set_scope", {"scope": SCOPE, "retentionDays": 0}, "retentionDays"),
        ("set_scope", {"scope": SCOPE, "retentionDays": 3651}, "retentionDays"),
        ("set_scope", {"scope": SCOPE, "retentionDays": "forever"}, "retentionDays"),
        ("set_scope", {"scope": SCOPE, "retention": 30}, "retention"),
        ("set_scope", {"scope": "erp/orders"}, "scope"),
        ("set_scope", {"owner": "ana@contoso.com"}, "scope"),
        ("set_scope", {"scope": SCOPE, "description": "x" * 1025}, "description"),
        ("set_scope", {"scope": SCOPE, "keyPattern": "[0-9"}, "keyPattern"),
        ("set_scope", {"scope": SCOPE, "keyPattern": "([0-9]+)+"}, "keyPattern"),
        ("register_flow", {"name": "Create ERP order"}, "environment"),
        ("register_flow", {**FLOW, "enabled": "perhaps"}, "enabled"),
        ("register_flow", {**FLOW, "disabled": True}, "disabled"),
        ("register_flow", {**FLOW, "name": ""}, "name"),
        ("register_flow", {**FLOW, "notes": "x" * 2049}, "notes"),
    ],
    ids=[
        "lease-below-15",
        "lease-above-86400",
        "retention-below-1",
        "retention-above-3650",
        "retention-not-a-number",
        "scope-unknown-field",
        "scope-bad-name",
        "scope-missing",
        "description-too-long",
        "key-pattern-not-a-regex",
        "key-pattern-repeats-a-group",
        "flow-without-environment",
        "enabled-not-a-bool",
        "flow-unknown-field",
        "flow-empty-name",
        "notes-too-long",
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(
    api: Api, name: str, body: dict[str, Any], target: str
) -> None:
    reply: Reply = api.call(name, body)

    assert (reply.status, reply.code) == (400, "invalid_request")
    assert target in reply.targets
    assert ok(api.call("list_flows"))["value"] == []
    assert ok(api.call("list_scopes"))["value"] == []


@pytest.mark.parametrize(
    ("name", "params", "target"),
    [
        ("list_flows", {"top": "0"}, "top"),
        ("list_flow_overlaps", {"top": "201"}, "top"),
        ("list_scopes", {"cursor": "not a cursor"}, "cursor"),
    ],
)
def test_a_bad_list_query_is_a_400_naming_the_parameter(
    api: Api, name: str, params: dict[str, str], target: str
) -> None:
    reply = api.call(name, params=params)

    assert (reply.status, reply.code, reply.targets) == (400, "invalid_request", [target])


def test_delete_on_the_flows_is_a_405_naming_get_and_put(api: Api) -> None:
    reply = api.call("unknown_route", route={"path": "flows"}, method="DELETE")

    assert (reply.status, reply.headers["allow"]) == (405, "GET, PUT")


def test_the_setting_requiring_registered_flows_reaches_the_service(tmp_path: Path) -> None:
    settings = Settings.from_environment(
        {"ONCEGATE_SQLITE_PATH": str(tmp_path / "oncegate.db"), "ONCEGATE_REQUIRE_REGISTERED_FLOWS": "True"}
    )
    service = bootstrap.build_services(settings)
    bootstrap.use_services(service, settings=settings)
    api = FunctionsApi()
    try:
        refused = ok(api.call("check_and_claim", claim_body()))
        register(api)
        allowed = ok(api.call("check_and_claim", claim_body(run="run-2")))
    finally:
        service.close()

    assert (refused["decision"], allowed["decision"]) == ("blocked", "proceed")


def test_flows_with_the_longest_non_ascii_names_page_to_the_end(api: Api) -> None:
    # A cursor holds the place of the last flow: its name and environment must fit the cursor's limit.
    names = ["é" * 256, "😀" * 256, "漢" * 256]
    for name in names:
        register(api, {"name": name, "environment": "😀" * 256})

    listed_names = [flow["name"] for flow in listed(api, "list_flows", top="1")]

    assert sorted(listed_names) == sorted(names)


def test_a_scope_s_owner_declares_its_keys_shape_and_such_keys_are_accepted(api: Api) -> None:
    refused = api.call("check_and_claim", claim_body(key="13800138000"))
    view = ok(api.call("set_scope", {"scope": SCOPE, "keyPattern": "1[3-9][0-9]{9}"}))
    accepted = ok(api.call("check_and_claim", claim_body(key="13800138000")))
    [listed] = ok(api.call("list_scopes"))["value"]

    assert (refused.status, refused.code) == (400, "sensitive_key")
    assert "keyPattern" in refused.body["error"]["message"]
    assert f"oncegate scopes set {SCOPE} --key-pattern" in refused.body["error"]["message"]
    assert view["keyPattern"] == listed["keyPattern"] == "1[3-9][0-9]{9}"
    assert accepted["decision"] == "proceed"
    assert "sensitive_key" not in accepted.get("warnings", [])
