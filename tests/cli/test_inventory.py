"""``oncegate flows`` and ``oncegate scopes`` against the local server: tables, ``--json``, paging and refusals."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from tests.cli.conftest import Oncegate, Seen
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.http.client import ServerApi, succeed
from tests.http.test_actions import FLOW, claim_body, ok, utc

ERP = ["--name", FLOW["name"], "--environment", FLOW["environment"]]
PROD_COPY = {"name": FLOW["name"], "environment": "Prod-contoso"}


def cells(line: str) -> list[str]:
    """A table row's cells (no cell holds a double space)."""
    return re.split(r"\s{2,}", line.strip())


def test_flows_register_then_list_shows_registered_and_seen_flows(api: ServerApi, oncegate: Oncegate) -> None:
    ok(api.call("check_and_claim", claim_body(flow=PROD_COPY)))

    registered = oncegate("flows", "register", *ERP, "--owner", "ana@contoso.com", "--notes", "the v1 flow")
    listed = oncegate("flows", "list")
    raw = oncegate("flows", "list", "--json")

    assert registered.code == listed.code == raw.code == 0, registered.err + listed.err + raw.err
    assert "Owner        ana@contoso.com" in registered.out
    assert "Enabled      yes" in registered.out
    header, *rows = listed.out.splitlines()
    assert cells(header) == [
        "FLOW", "ENVIRONMENT", "REGISTERED", "ENABLED", "OWNER", "CLAIMS", "DUPLICATES", "LAST SEEN", "NOTES",
    ]  # fmt: skip
    # The registered flow never claimed (no counts, no last seen); the other was only seen (no owner, no notes).
    assert [cells(row) for row in rows] == [
        ["Create ERP order", "Default-contoso", "yes", "yes", "ana@contoso.com", "0", "0", "the v1 flow"],
        ["Create ERP order", "Prod-contoso", "no", "yes", "1", "0", "2024-05-01T08:30:15Z"],
    ]
    assert json.loads(raw.out) == ok(api.call("list_flows"))


def test_a_flow_registered_disabled_is_blocked_with_its_notes(api: ServerApi, oncegate: Oncegate) -> None:
    run = oncegate("flows", "register", *ERP, "--disabled", "--notes", "replaced by the v2 flow", "--json")

    answer = ok(api.call("check_and_claim", claim_body()))

    assert run.code == 0, run.err
    assert (json.loads(run.out)["enabled"], json.loads(run.out)["registered"]) == (False, True)
    assert answer["decision"] == "blocked"
    assert "replaced by the v2 flow" in answer["reason"]


def test_registering_again_changes_only_the_options_given(oncegate: Oncegate, wired: Gate) -> None:
    """Issue 31: registering again sent every option, so an option left out enabled the flow and cleared the rest."""
    oncegate("flows", "register", *ERP, "--owner", "ana@contoso.com", "--disabled", "--notes", "replaced by v2")

    bare = oncegate("flows", "register", *ERP, "--json")
    one = oncegate("flows", "register", *ERP, "--owner", "kim@contoso.com", "--json")

    assert bare.code == one.code == 0, bare.err + one.err
    shown = ("enabled", "owner", "notes")
    assert [json.loads(bare.out).get(name) for name in shown] == [False, "ana@contoso.com", "replaced by v2"]
    assert [json.loads(one.out).get(name) for name in shown] == [False, "kim@contoso.com", "replaced by v2"]
    (stored,) = wired.store.list_flows()
    assert (stored.enabled, stored.owner, stored.notes) == (False, "kim@contoso.com", "replaced by v2")


def test_registering_with_options_given_empty_clears_them(oncegate: Oncegate) -> None:
    oncegate("flows", "register", *ERP, "--owner", "ana@contoso.com", "--disabled", "--notes", "replaced by v2")

    cleared = oncegate("flows", "register", *ERP, "--owner", "", "--notes", "", "--json")
    enabled = oncegate("flows", "register", *ERP, "--enabled", "--json")

    assert cleared.code == enabled.code == 0, cleared.err + enabled.err
    assert [json.loads(cleared.out).get(name) for name in ("enabled", "owner", "notes")] == [False, None, None]
    assert json.loads(enabled.out)["enabled"] is True


def test_flows_list_follows_next_link_with_all_pages(api: ServerApi, oncegate: Oncegate, seen: list[Seen]) -> None:
    names = [f"Flow {index}" for index in range(5)]
    for name in names:
        oncegate("flows", "register", "--name", name, "--environment", "Default-contoso")
    seen.clear()

    every = oncegate("flows", "list", "--top", "2", "--all-pages", "--json")
    first = oncegate("flows", "list", "--top", "2")

    assert every.code == first.code == 0, every.err + first.err
    assert [flow["name"] for flow in json.loads(every.out)["value"]] == names
    assert "nextLink" not in json.loads(every.out)
    assert [request.url.split("/api/")[1].split("?")[0] for request in seen] == ["flows"] * 4
    assert [cells(row)[0] for row in first.out.splitlines()[1:]] == names[:2]
    assert first.err == "More flows than shown: add --all-pages, or a larger --top.\n"


def test_flows_overlaps_lists_a_copy_of_a_flow_meeting_its_claims(api: ServerApi, oncegate: Oncegate) -> None:
    ok(succeed(api, ok(api.call("check_and_claim", claim_body())), targetRecordId="ERP-1"))
    duplicate = ok(api.call("check_and_claim", claim_body(run="run-2", flow=PROD_COPY)))

    listed = oncegate("flows", "overlaps")
    raw = oncegate("flows", "overlaps", "--json")

    assert listed.code == raw.code == 0, listed.err + raw.err
    assert "another_flow_copy" in duplicate["warnings"]
    header, row = listed.out.splitlines()
    assert cells(header) == ["FLOW", "OTHER FLOW", "COUNT", "LAST SEEN", "EXAMPLE CLAIM"]
    first, other, count, _, example = cells(row)
    assert {first, other} == {"Create ERP order (Default-contoso)", "Create ERP order (Prod-contoso)"}
    assert (count, example) == ("1", duplicate["claimId"])
    assert json.loads(raw.out) == ok(api.call("list_flow_overlaps"))


def test_scopes_set_then_list_with_claims_by_status(api: ServerApi, oncegate: Oncegate, clock: FakeClock) -> None:
    ok(succeed(api, ok(api.call("check_and_claim", claim_body())), targetRecordId="ERP-1"))
    ok(api.call("check_and_claim", claim_body(key="ORDER-2")))
    setting = ["--owner", "team-erp", "--lease-seconds", "60", "--retention-days", "30"]

    done = oncegate("scopes", "set", "erp.create-order", *setting, "--description", "Orders in the ERP")
    listed = oncegate("scopes", "list")
    raw = oncegate("scopes", "list", "--json")
    served = ok(api.call("list_scopes"))
    claimed = ok(api.call("check_and_claim", claim_body(key="ORDER-3")))

    assert done.code == listed.code == raw.code == 0, done.err + listed.err + raw.err
    assert "Default lease   60 s" in done.out
    assert "Retention       30 days" in done.out
    header, row = listed.out.splitlines()
    assert cells(header) == [
        "SCOPE", "OWNER", "LEASE", "RETENTION", "HORIZON", "CLAIMS", "OPEN CONFLICTS", "FINGERPRINT RULES",
        "LAST SEEN", "KEY PATTERN", "DESCRIPTION",
    ]  # fmt: skip
    scope = cells(row)
    assert scope[:7] == ["erp.create-order", "team-erp", "60 s", "30 d", "365 d", "in_progress 1, succeeded 1", "0"]
    assert scope[-1] == "Orders in the ERP"
    assert json.loads(raw.out) == served
    assert utc(claimed["leaseExpiresAt"]) == clock.now + timedelta(seconds=60)


def test_a_setting_the_service_refuses_is_exit_2_naming_it(oncegate: Oncegate) -> None:
    run = oncegate("scopes", "set", "erp.create-order", "--owner", "x" * 300)

    assert (run.code, run.out) == (2, "")
    assert run.err.startswith("invalid_request: ")
    assert "(owner)" in run.err


@pytest.mark.parametrize(
    ("command", "empty"),
    [("flows list", "No flows."), ("flows overlaps", "No overlapping flows."), ("scopes list", "No scopes.")],
)
def test_empty_lists_say_so(oncegate: Oncegate, command: str, empty: str) -> None:
    run = oncegate(*command.split())

    assert (run.code, run.out, run.err) == (0, empty + "\n", "")


def test_scopes_set_changes_only_what_is_given(oncegate: Oncegate) -> None:
    oncegate("scopes", "set", "erp.create-order", "--owner", "team-erp", "--lease-seconds", "60")
    oncegate("scopes", "set", "erp.create-order", "--description", "Orders [in the ERP]")

    run = oncegate("scopes", "set", "ERP.Create-Order", "--retention-days", "1", "--json")

    scope = json.loads(run.out)
    assert (scope["owner"], scope["leaseSeconds"], scope["retentionDays"]) == ("team-erp", 60, 1)
    assert scope["description"] == "Orders [in the ERP]"
    text = oncegate("scopes", "set", "erp.create-order", "--retention-days", "1").out
    assert re.search(r"^Retention\s+1 day$", text, re.MULTILINE)
    # A value is shown as it is, never read as rich markup.
    assert re.search(r"^Description\s+Orders \[in the ERP\]$", text, re.MULTILINE)


def test_scopes_set_sends_only_the_options_given(oncegate: Oncegate, wired: Gate) -> None:
    """Issue 31: the command sent every setting as it read it, so a default shown was stored as set."""
    run = oncegate("scopes", "set", "erp.create-order", "--owner", "team-erp")

    (stored,) = wired.store.list_scopes()
    assert run.code == 0, run.err
    assert (stored.owner, stored.lease_seconds, stored.retention_days, stored.horizon_days) == (
        "team-erp",
        None,
        None,
        None,
    )


def test_scopes_set_resets_each_option_given_empty(oncegate: Oncegate) -> None:
    options = ["--owner", "team-erp", "--lease-seconds", "60", "--retention-days", "30", "--horizon-days", "400"]
    oncegate("scopes", "set", "erp.create-order", *options, "--description", "Orders")
    resets = ["--owner", "", "--lease-seconds", "", "--retention-days", "", "--horizon-days", "", "--description", ""]

    kept = json.loads(oncegate("scopes", "set", "erp.create-order", "--json").out)
    reset = json.loads(oncegate("scopes", "set", "erp.create-order", *resets, "--json").out)

    settings = ("owner", "leaseSeconds", "retentionDays", "horizonDays", "description")
    assert [kept.get(name) for name in settings] == ["team-erp", 60, 30, 400, "Orders"]
    assert [reset.get(name) for name in settings] == [None, 300, 90, 365, None]


def test_scopes_set_declares_a_key_pattern_shown_in_the_list_and_kept_until_cleared(oncegate: Oncegate) -> None:
    declared = oncegate("scopes", "set", "erp.create-order", "--key-pattern", "1[3-9][0-9]{9}")
    kept = oncegate("scopes", "set", "erp.create-order", "--owner", "team-erp", "--json")
    header, row = oncegate("scopes", "list").out.splitlines()
    # Not seen yet, the scope has no last seen: its key pattern is the row's last cell.
    refused = oncegate("scopes", "set", "erp.create-order", "--key-pattern", "([0-9]+)+")
    cleared = oncegate("scopes", "set", "erp.create-order", "--key-pattern", "", "--json")

    assert re.search(r"^Key pattern\s+1\[3-9\]\[0-9\]\{9\}$", declared.out, re.MULTILINE)
    assert json.loads(kept.out)["keyPattern"] == "1[3-9][0-9]{9}"
    assert "KEY PATTERN" in cells(header)
    assert cells(row)[-1] == "1[3-9][0-9]{9}"
    assert refused.code == 2
    assert "(keyPattern)" in refused.err
    assert "repeats a group" in refused.err
    assert "keyPattern" not in json.loads(cleared.out)


def test_scopes_set_fingerprint_rules_kept_until_cleared_and_a_bad_pointer_refused(oncegate: Oncegate) -> None:
    rules = ["--fingerprint-preset", "sharepoint", "--fingerprint-ignore", "/Created", "--fingerprint-ignore", "/ID"]
    declared = oncegate("scopes", "set", "erp.create-order", *rules)
    kept = oncegate("scopes", "set", "erp.create-order", "--owner", "team-erp", "--json")
    refused = oncegate("scopes", "set", "erp.create-order", "--fingerprint-include", "Title")
    cleared = oncegate(
        "scopes", "set", "erp.create-order", "--fingerprint-ignore", "", "--fingerprint-preset", "", "--json"
    )

    assert declared.code == 0, declared.err
    assert re.search(r"^Fingerprint ignore\s+/Created, /ID$", declared.out, re.MULTILINE)
    assert re.search(r"^Fingerprint preset\s+sharepoint$", declared.out, re.MULTILINE)
    # The owner's change left the rules as they were: no new version.
    assert json.loads(kept.out)["fingerprintIgnore"] == ["/Created", "/ID"]
    assert json.loads(kept.out)["fingerprintRulesVersion"] == 1
    assert refused.code == 2
    assert "(fingerprintInclude)" in refused.err
    assert "'Title'" in refused.err
    assert "fingerprintIgnore" not in json.loads(cleared.out)
    assert json.loads(cleared.out)["fingerprintRulesVersion"] == 2


def test_all_pages_says_how_far_it_got_on_stderr(api: ServerApi, oncegate: Oncegate) -> None:
    for index in range(5):
        oncegate("flows", "register", "--name", f"Flow {index}", "--environment", "Default-contoso")

    run = oncegate("flows", "list", "--top", "2", "--all-pages")

    assert run.code == 0, run.err
    assert run.err.splitlines() == [
        "page 1: 2 flows so far, reading the next page",
        "page 2: 4 flows so far, reading the next page",
    ]
    assert len(run.out.splitlines()) == 1 + 5


def test_scopes_list_shows_the_include_pointers_no_payload_matched(api: ServerApi, oncegate: Oncegate) -> None:
    rules = ["--fingerprint-include", "/amount", "--fingerprint-include", "/Amout"]
    oncegate("scopes", "set", "erp.create-order", *rules)
    ok(api.call("check_and_claim", claim_body(payload={"amount": 10})))

    listed = oncegate("scopes", "list")
    shown = oncegate("scopes", "set", "erp.create-order", "--owner", "team-erp")

    assert listed.code == 0, listed.err
    assert "no payload has matched yet" in listed.out
    assert "erp.create-order: /Amout" in listed.out
    assert re.search(r"^Never matched\s+/Amout$", shown.out, re.MULTILINE)
