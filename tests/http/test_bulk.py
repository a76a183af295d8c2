"""Bulk calls (issue 24): Check and claim many and Record results, item by item, on both stores.

Each item is answered as its single call answers it, in its place; a refused item fails alone; a
body that is not 1 to 100 items is one refusal that changes nothing; a store failing mid-call
answers store_unavailable for exactly the items not applied, and the whole call sent again gets back the claims
the store kept behind a 503 (issue 31).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.entrypoints.http import MAX_BODY_BYTES
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore, cut_claims_mid_call
from tests.faults.lossy_proxy import LossyProxy
from tests.gate import Gate
from tests.http.client import Api, FunctionsApi
from tests.http.test_actions import claim_body, ok
from tests.support.azurite import ExternalTables, TableStoreFactory


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Bulk calls meet each store differently (one transaction, or items at once): both are tested."""
    kind: str = request.param
    return kind


def rows(count: int, *, start: int = 0, run: str = "run-import") -> list[dict[str, Any]]:
    """An import's rows as a Select action builds the items: each with the reference that finds its row."""
    return [claim_body(f"SO-{n}", run=run, reference=f"row-{n}") for n in range(start, start + count)]


def many(api: Api, items: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = ok(api.call("check_and_claim_many", {"items": items}))["value"]
    return entries


def results(api: Api, items: Any) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = ok(api.call("record_results", {"items": items}))["value"]
    return entries


def succeeded(entry: dict[str, Any], record: str) -> dict[str, Any]:
    return {
        "claimId": entry["claimId"],
        "claimToken": entry["claimToken"],
        "outcome": "succeeded",
        "targetRecordId": record,
    }


def test_each_item_is_answered_as_its_single_call_in_its_place(api: Api) -> None:
    items = rows(3)
    # The second row again, from another run: answered as a second request after the first would be.
    items.append({**items[1], "runId": "run-other", "reference": "row-1-again"})

    entries = many(api, items)

    assert [entry["decision"] for entry in entries] == ["proceed", "proceed", "proceed", "in_progress"]
    assert [entry["reference"] for entry in entries] == ["row-0", "row-1", "row-2", "row-1-again"]
    assert entries[3]["claimId"] == entries[1]["claimId"]
    assert "claimToken" not in entries[3]
    assert all(entry["claimToken"] and entry["warnings"] == [] for entry in entries[:3])
    single = ok(api.call("check_and_claim", {**items[0], "runId": "run-single"}))
    assert (single["decision"], single["claimId"]) == ("in_progress", entries[0]["claimId"])


def test_results_are_recorded_item_by_item_and_duplicates_follow(api: Api) -> None:
    claimed = many(api, rows(3))
    items = [succeeded(entry, f"ERP-{n}") for n, entry in enumerate(claimed)]
    # A token that is not this attempt's: that item's own stale_claim, the others recorded.
    items[2] = {**items[2], "claimToken": "x" * 43}

    recorded = results(api, [*items, items[0]])

    assert [entry.get("status") for entry in recorded] == ["succeeded", "succeeded", None, "succeeded"]
    assert recorded[2]["error"]["code"] == "stale_claim"
    assert recorded[2]["claimId"] == claimed[2]["claimId"]
    assert recorded[3]["targetRecordId"] == "ERP-0"  # the same result again changes nothing
    again = many(api, rows(3, run="run-again"))
    assert [entry["decision"] for entry in again] == ["duplicate", "duplicate", "in_progress"]
    assert again[1]["result"]["targetRecordId"] == "ERP-1"


def test_a_row_repeated_with_another_result_is_refused_naming_the_field_that_differs(api: Api) -> None:
    # A Select over rows that repeat an order: the same claim twice in one call, the second with other values.
    claimed = many(api, rows(2))
    first = succeeded(claimed[0], "ERP-0")
    failed = {"claimId": claimed[1]["claimId"], "claimToken": claimed[1]["claimToken"], "outcome": "failed"}
    items = [
        first,
        {**first, "outcome": "failed"},
        {**first, "targetRecordId": "ERP-0-again"},
        {**first, "data": {"total": 12}},
        {**failed, "error": "ERP down", "retryable": True},
        {**failed, "error": "ERP still down", "retryable": True},
        {**failed, "error": "ERP down", "retryable": False},
    ]

    recorded = results(api, items)
    body = {name: value for name, value in items[2].items() if name != "claimId"}
    single = api.call("record_result", body, route={"claimId": items[2]["claimId"]})

    assert [entry.get("status") for entry in recorded] == ["succeeded", None, None, None, "failed", None, None]
    refused = [entry["error"] for entry in recorded if "error" in entry]
    assert {error["code"] for error in refused} == {"stale_claim"}
    assert [error["details"][0]["target"] for error in refused] == [
        "outcome",
        "targetRecordId",
        "data",
        "error",
        "retryable",
    ]
    assert "already ended as succeeded with another targetRecordId" in refused[1]["message"]
    assert single.status == 409
    assert single.body["error"]["details"][0]["target"] == "targetRecordId"


def test_a_failed_result_keeps_its_text_beside_the_item_error(api: Api) -> None:
    (claimed,) = many(api, rows(1))
    failed = {"claimId": claimed["claimId"], "claimToken": claimed["claimToken"], "outcome": "failed"}

    (entry,) = results(api, [{**failed, "error": "ERP down", "retryable": True}])

    assert (entry["status"], entry["errorMessage"]) == ("failed", "ERP down")
    assert "error" not in entry


def test_refused_items_fail_alone(api: Api) -> None:
    items: list[Any] = rows(5)
    items[1] = {**items[1], "key": "ana.silva@contoso.com"}
    items[2] = "SO-2"
    items[3] = {**items[3], "runId": None}
    items[4] = {**items[4], "payload": {"notes": "x" * MAX_BODY_BYTES}}

    entries = many(api, items)

    assert entries[0]["decision"] == "proceed"
    assert [entry.get("error", {}).get("code") for entry in entries[1:]] == [
        "sensitive_key",
        "invalid_request",
        "invalid_request",
        "too_large",
    ]
    assert entries[1]["reference"] == "row-1"
    assert [detail["target"] for detail in entries[3]["error"]["details"]] == ["runId"]
    assert "decision" not in entries[1]


def test_an_item_asking_to_wait_is_refused_alone_as_a_bulk_call_answers_at_once(api: Api) -> None:
    held = many(api, rows(1, run="run-holder"))[0]
    items = rows(2)
    items[0] = {**items[0], "wait": True}

    entries = many(api, items)

    assert held["decision"] == "proceed"
    assert entries[0]["error"]["code"] == "invalid_request"
    assert [detail["target"] for detail in entries[0]["error"]["details"]] == ["wait"]
    assert entries[1]["decision"] == "proceed"


@pytest.mark.parametrize(
    ("body", "target"),
    [
        ({"items": rows(101)}, "items"),
        ({"items": []}, "items"),
        ({"items": rows(1)[0]}, "items"),
        ({"rows": rows(1)}, "rows"),
        ([rows(1)], "body"),
    ],
    ids=["101 items", "no item", "not a list", "another field", "not an object"],
)
def test_a_body_that_is_not_1_to_100_items_is_refused_whole(api: Api, body: Any, target: str) -> None:
    for name in ("check_and_claim_many", "record_results"):
        reply = api.call(name, body)

        assert (reply.status, reply.code) == (400, "invalid_request"), reply.body
        assert target in reply.targets
    assert ok(api.call("check_and_claim", rows(1)[0]))["decision"] == "proceed"  # nothing was claimed


def test_the_count_of_items_is_refused_in_plain_words(api: Api) -> None:
    reply = api.call("check_and_claim_many", {"items": rows(101)})

    assert reply.body["error"]["message"] == (
        "The request is not valid: give 1 to 100 items in one call, not 101: send more in further calls (items)."
    )


@pytest.mark.parametrize(
    ("defect", "target"),
    [(b'"key": "SO-a", "key": "SO-b"', "key"), (b'"key": "SO-a", "leaseSeconds": NaN', "leaseSeconds")],
    ids=["a member given twice", "a number that is not finite"],
)
def test_json_an_item_alone_breaks_is_that_items_refusal(api: Api, defect: bytes, target: str) -> None:
    """Strict JSON inside one item (a member twice, NaN) refuses that item, named as the single call names it."""
    good = json.dumps(rows(2)).encode()[1:-1]
    bad = b'{"scope": "erp.create-order", "runId": "run-import", "fingerprint": "v1", ' + defect + b"}"

    entries = many_raw(api, b'{"items": [' + good + b", " + bad + b"]}")

    assert [entry.get("decision") for entry in entries] == ["proceed", "proceed", None]
    assert entries[2]["error"]["code"] == "invalid_request"
    assert [detail["target"] for detail in entries[2]["error"]["details"]] == [target]


def test_json_broken_outside_the_items_still_refuses_the_whole_call(api: Api) -> None:
    reply = api.call("check_and_claim_many", b'{"items": [], "items": ' + json.dumps(rows(1)).encode() + b"}")

    assert (reply.status, reply.targets) == (400, ["items"])
    assert ok(api.call("check_and_claim", rows(1)[0]))["decision"] == "proceed"  # nothing was claimed


def many_raw(api: Api, body: bytes) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = ok(api.call("check_and_claim_many", body))["value"]
    return entries


def test_a_bulk_body_may_hold_100_items_at_their_limit_and_no_more(api: Api) -> None:
    # Each item just under the single call's 64 KiB: the whole body is far over it.
    fat = [{**item, "payload": {"notes": "x" * (MAX_BODY_BYTES - 1024)}} for item in rows(100)]

    entries = many(api, fat)

    assert [entry["decision"] for entry in entries] == ["proceed"] * 100
    # Over HTTP the server refuses a longer body by its Content-Length (tests/http/test_server_framing.py).
    over = FunctionsApi().call("check_and_claim_many", b'{"items": [' + b" " * (101 * MAX_BODY_BYTES) + b"]}")
    assert (over.status, over.code) == (413, "too_large")


def _served_faulty(store: ClaimStore, fault: Fault, clock: FakeClock) -> tuple[FaultyStore, Any, FunctionsApi]:
    """The app served over ``store`` made faulty, with the services to close and an API to call it."""
    faulty = FaultyStore(store, fault)
    services = Gate(faulty, KeyHasher(KEY_SECRET), clock=clock).services
    bootstrap.use_services(services)
    return faulty, services, FunctionsApi()


@pytest.mark.parametrize("store_kind", ["tables"])
@pytest.mark.parametrize("fault", [Fault.BEFORE])
def test_a_store_failing_mid_call_answers_503_for_exactly_the_items_not_applied(
    open_store: Any, clock: FakeClock, fault: Fault
) -> None:
    store, services, api = _served_faulty(open_store(), fault, clock)
    many(api, rows(1, start=99))  # the store is marked and its secrets read before the outage
    store.arm(21, only="create_claim", lasting=True)

    entries = many(api, rows(60))
    store.disarm()

    applied = [n for n, entry in enumerate(entries) if "decision" in entry]
    unapplied = [n for n, entry in enumerate(entries) if "error" in entry]
    assert len(applied) == 20
    assert all(entries[n]["error"]["code"] == "store_unavailable" for n in unapplied)
    # Nothing applied is lost, and every item not applied proceeds when sent again.
    again = many(api, rows(60, run="run-retry"))
    assert {n for n, entry in enumerate(again) if entry["decision"] == "proceed"} == set(unapplied)
    assert all(again[n]["decision"] == "in_progress" for n in applied)
    services.close()


@pytest.mark.parametrize("store_kind", ["sqlite"])
@pytest.mark.parametrize("fault", [Fault.BEFORE])
def test_a_store_failing_mid_call_answers_503_for_exactly_the_items_not_applied_one_after_another(
    open_store: Any, clock: FakeClock, fault: Fault
) -> None:
    store, services, api = _served_faulty(open_store(), fault, clock)
    many(api, rows(20))  # 20 keys claimed before: in the next call each is decided alone, after the new ones
    # The 11th of them meets the outage.
    store.arm(11, only="create_claim", lasting=True)

    entries = many(api, rows(60))
    store.disarm()

    unapplied = [n for n, entry in enumerate(entries) if "error" in entry]
    assert unapplied == list(range(10, 20))
    assert all(entries[n]["error"]["code"] == "store_unavailable" for n in unapplied)
    assert [entry["decision"] for entry in entries[:10]] == ["in_progress"] * 10
    assert [entry["decision"] for entry in entries[20:]] == ["proceed"] * 40
    # Nothing applied is lost: the new keys claimed together before the outage stand.
    again = many(api, rows(60, run="run-retry"))
    assert [entry["decision"] for entry in again] == ["in_progress"] * 60
    services.close()


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_store_failing_in_the_write_of_the_new_claims_answers_503_for_every_item_and_keeps_none(
    open_store: Any, clock: FakeClock
) -> None:
    """Issue 36: a call's new keys are written together, in its one transaction: an outage there loses them all."""
    store = FaultyStore(open_store(), Fault.AFTER)  # the write made, then the store fails: the call still keeps none
    services = Gate(store, KeyHasher(KEY_SECRET), clock=clock).services
    bootstrap.use_services(services)
    api = FunctionsApi()
    many(api, rows(1, start=99))  # the store is marked and its secrets read before the outage
    store.arm(1, only="create_claims")

    entries = many(api, rows(60))
    store.disarm()

    assert {entry["error"]["code"] for entry in entries} == {"store_unavailable"}
    again = many(api, rows(60, run="run-retry"))
    assert [entry["decision"] for entry in again] == ["proceed"] * 60
    services.close()


def test_items_answered_503_after_the_store_kept_their_claims_get_them_back_when_the_whole_call_is_sent_again(
    open_store: Any, clock: FakeClock
) -> None:
    """Issue 31: the store's connection cut mid-call after it kept a claim answers 503 for an item that holds it. A
    call of only those items is other runs (another digest), told in_progress; the whole call sent again unchanged,
    as the answer says, is each item's run asking again: every claim comes back."""
    store = FaultyStore(open_store(), Fault.AFTER)
    send_the_whole_call_again_after_a_cut(store, clock, lambda: cut_claims_mid_call(store), store.disarm)


@pytest.mark.parametrize("store_kind", ["tables"])
def test_a_table_write_answered_500_over_http_is_given_back_when_the_whole_call_is_sent_again(
    azurite: Any, test_tables: list[str], clock: FakeClock
) -> None:
    """The same over real HTTP: Table Storage applies an insert and its answer is lost (a 500, not retried, as a
    connection cut is not)."""
    if isinstance(azurite, ExternalTables):
        pytest.skip("the lossy proxy speaks plain HTTP to the emulator this suite starts")
    proxy = LossyProxy(azurite.connection_string)
    factory = TableStoreFactory(proxy.connection_string, test_tables)
    try:
        send_the_whole_call_again_after_a_cut(factory(retry_total=0), clock, lambda: proxy.arm(30), proxy.disarm)
    finally:
        factory.close()
        proxy.close()


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_sqlite_call_committed_but_not_answered_gets_every_claim_back_when_the_whole_call_is_sent_again(
    open_store: Any, clock: FakeClock
) -> None:
    """SQLite commits a bulk call in one transaction: the commit kept and its answer lost, every item answers 503 and
    holds its claim."""
    store = FaultyStore(open_store(), Fault.AFTER)
    send_the_whole_call_again_after_a_cut(store, clock, lambda: store.arm(1, only="writing_together"), store.disarm)


def send_the_whole_call_again_after_a_cut(
    store: ClaimStore, clock: FakeClock, arm: Callable[[], object], disarm: Callable[[], object]
) -> None:
    """A call of 60 new rows, the store cut during it (``arm``); then the calls a flow sends, as the answers say."""
    services = Gate(store, KeyHasher(KEY_SECRET), clock=clock).services
    bootstrap.use_services(services)
    api = FunctionsApi()
    many(api, rows(1, start=99))  # the store is marked and its secrets read before the cut
    items = rows(60)
    arm()

    entries = many(api, items)
    disarm()

    unavailable = [n for n, entry in enumerate(entries) if entry.get("error", {}).get("code") == "store_unavailable"]
    lookups = {n: api.call("lookup_claim", {"scope": "erp.create-order", "key": f"SO-{n}"}) for n in unavailable}
    kept = [n for n, lookup in lookups.items() if lookup.status == 200]
    assert kept, "the cut kept no claim behind a 503: nothing to show"
    # Each item not applied says what to do; only an item that met the cut (its write kept) has the store's words.
    advice = "Send the whole call again, unchanged"
    advised = {n for n in unavailable if advice in entries[n]["error"]["message"]}
    assert advised
    assert set(unavailable) - advised <= set(kept)
    # Those items in a call of their own (last first, so never the same call): other runs, held off by the claims
    # their first answers lost.
    assert {entry["decision"] for entry in many(api, [items[n] for n in reversed(kept)])} == {"in_progress"}
    # The whole call, unchanged: every item is the same run asking again, and holds its claim.
    again = many(api, items)
    assert [entry["decision"] for entry in again] == ["proceed"] * 60
    for n, entry in enumerate(entries):
        if "decision" in entry:
            assert again[n]["claimToken"] == entry["claimToken"], n
    assert all(again[n]["claimId"] == lookups[n].body["claimId"] for n in kept)
    recorded = results(api, [succeeded(entry, f"ERP-{n}") for n, entry in enumerate(again)])
    assert [entry["status"] for entry in recorded] == ["succeeded"] * 60
    later = many(api, rows(60, run="run-later"))
    assert [entry["decision"] for entry in later] == ["duplicate"] * 60
    services.close()


def test_rows_given_the_flow_runs_one_run_id_are_each_a_run_of_their_own(api: Api) -> None:
    """A Select gives every item the flow run's id: a row repeated in the page must not be given the claim twice,
    a later page of the same run is another run, and the platform's retry of the very call gets its claims back."""
    items = rows(3, run="run-nightly")
    items.append({**items[1], "reference": "row-1-again"})

    entries = many(api, items)
    again = many(api, items)
    later = many(api, rows(2, start=1, run="run-nightly"))

    assert [entry["decision"] for entry in entries] == ["proceed", "proceed", "proceed", "in_progress"]
    assert [(entry["decision"], entry.get("claimToken")) for entry in again] == [
        (entry["decision"], entry.get("claimToken")) for entry in entries
    ]
    assert [entry["decision"] for entry in later] == ["in_progress", "in_progress"]
    first = ok(api.call("get_claim", route={"claimId": entries[0]["claimId"]}))
    assert first["runId"].startswith("run-nightly#")
    assert first["runId"].endswith(".1")


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_sqlite_bulk_call_whose_commit_fails_keeps_nothing_and_says_so_for_each_item(
    open_store: Any, clock: FakeClock
) -> None:
    """SQLite commits a bulk call in one transaction: a commit that fails loses every item's write, so every item
    that was not refused answers store_unavailable, however it was answered before the commit."""
    store = FaultyStore(open_store(), Fault.BEFORE)
    services = Gate(store, KeyHasher(KEY_SECRET), clock=clock).services
    bootstrap.use_services(services)
    api = FunctionsApi()
    (done,) = many(api, rows(1, start=99))
    results(api, [succeeded(done, "ERP-99")])
    earlier = ok(api.call("lookup_claim", {"scope": "erp.create-order", "key": "SO-99"}))
    # Three new rows, a sensitive key (refused before the store), and a row done earlier (a duplicate).
    items = [*rows(3), {**rows(1)[0], "key": "ana.silva@contoso.com"}, *rows(1, start=99, run="run-later")]
    store.arm(1, only="writing_together")

    entries = many(api, items)

    assert store.disarm() == ["writing_together"]
    codes = [entry.get("error", {}).get("code") for entry in entries]
    assert codes == ["store_unavailable"] * 3 + ["sensitive_key", "store_unavailable"]
    assert all("decision" not in entry and "claimToken" not in entry for entry in entries)
    assert entries[0]["error"]["message"].startswith("Not kept: the store failed to commit this call")
    # Nothing was kept: not the new claims, not the duplicate's line in the history.
    for n in range(3):
        missing = api.call("lookup_claim", {"scope": "erp.create-order", "key": f"SO-{n}"})
        assert (missing.status, missing.code) == (404, "not_found")
    assert ok(api.call("lookup_claim", {"scope": "erp.create-order", "key": "SO-99"})) == earlier
    again = many(api, items)
    assert [entry.get("decision") for entry in again] == ["proceed"] * 3 + [None, "duplicate"]
    services.close()
