"""Telemetry (issue 14): one event per answer, with its documented dimensions and nothing sensitive.

Events are caught as the Azure Monitor distro would send them: an OpenTelemetry ``LoggingHandler``
on the events logger, here exporting to memory instead of to Application Insights.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.monitor import opentelemetry as distro
from opentelemetry.instrumentation.logging.handler import LoggingHandler
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from oncegate import bootstrap, telemetry
from oncegate.domain.backups import Restore
from oncegate.domain.keys import KeyHasher
from oncegate.errors import StoreUnavailable
from oncegate.stores.port import ClaimStore
from oncegate.stores.tables.store import TableStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.faults.faulty_store import Fault, FaultyStore
from tests.gate import Gate
from tests.http.client import Api, FunctionsApi, succeed
from tests.http.test_actions import FLOW, claim_body, ok
from tests.http.test_governance import failed_for_good, run_timer
from tests.support.azurite import TableStoreFactory

ROOT = Path(__file__).resolve().parents[2]
CONNECTION_STRING = "InstrumentationKey=00000000-0000-0000-0000-000000000000"
KEY_SECRET_ALERT = ROOT / "infra" / "core" / "monitor" / "alerts" / "key-secret.kql"


@dataclass(frozen=True)
class Sent:
    """One event as Application Insights would get it: its name and its dimensions."""

    name: str
    dimensions: dict[str, Any]


class Events:
    """The events sent since the test began, by the service made once telemetry was on."""

    def __init__(self, exporter: InMemoryLogRecordExporter, service: Gate) -> None:
        self._exporter = exporter
        self.service = service

    def take(self) -> list[Sent]:
        """The events sent since the last take."""
        sent = []
        for record in self._exporter.get_finished_logs():
            attributes = dict(record.log_record.attributes or {})
            name = attributes.pop(telemetry.EVENT_NAME_ATTRIBUTE)
            assert record.log_record.body == name
            sent.append(Sent(str(name), attributes))
        self._exporter.clear()
        return sent

    def one(self) -> Sent:
        (sent,) = self.take()
        return sent


@dataclass
class Distro:
    """The distro's setup, replaced: it puts an OpenTelemetry handler exporting to memory on the logger it is given."""

    exporter: InMemoryLogRecordExporter
    calls: list[dict[str, Any]]


@pytest.fixture
def distro_setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[Distro]:
    """Telemetry not yet set up, and the Azure Monitor distro replaced by one that exports to memory."""
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    handler = LoggingHandler(logger_provider=provider)
    replaced = Distro(exporter, [])

    def configure_azure_monitor(**options: Any) -> None:
        replaced.calls.append(options)
        logging.getLogger(options["logger_name"]).addHandler(handler)

    monkeypatch.setattr(distro, "configure_azure_monitor", configure_azure_monitor)
    monkeypatch.setattr(telemetry, "sending", None)
    yield replaced
    logging.getLogger(telemetry.LOGGER_NAME).removeHandler(handler)
    provider.shutdown()


@pytest.fixture
def events(distro_setup: Distro, monkeypatch: pytest.MonkeyPatch, new_service: Callable[[], Gate]) -> Events:
    """Telemetry on, as with a connection string in Azure, its events caught in memory.

    The service is made afresh once it is on, as the app's is: a SQLite connection counts its
    statements only when made with telemetry on.
    """
    monkeypatch.setenv(telemetry.CONNECTION_STRING_SETTING, CONNECTION_STRING)
    assert telemetry.enabled()
    service = new_service()
    bootstrap.use_services(service.services)
    return Events(distro_setup.exporter, service)


@pytest.fixture
def faults(events: Events, open_store: Callable[[], ClaimStore], clock: FakeClock) -> FaultyStore:
    """The service of ``events`` made again over a store that fails where the test arms it (unarmed, it does not)."""
    store = FaultyStore(open_store(), Fault.BEFORE)
    events.service = Gate(store, KeyHasher(KEY_SECRET), clock=clock)
    bootstrap.use_services(events.service.services)
    return store


def declared(sent: Sent) -> None:
    """Every dimension an event carries is one its event declares (docs/operations.md lists them)."""
    (event,) = [event for event in telemetry.EVENTS if event.name == sent.name]
    assert set(sent.dimensions) <= event.dimensions, set(sent.dimensions) - event.dimensions


# -- Check and claim -----------------------------------------------------------------------------------


def test_every_check_and_claim_answer_sends_one_check_event(api: Api, events: Events) -> None:
    first = ok(api.call("check_and_claim", claim_body(scope="ERP.Create-Order")))
    proceed = events.one()
    ok(api.call("check_and_claim", claim_body(run="run-2")))
    in_progress = events.one()
    ok(succeed(api, first))
    events.take()
    ok(api.call("check_and_claim", claim_body(run="run-3")))
    duplicate = events.one()
    ok(api.call("check_and_claim", claim_body(run="run-4", payload={"customer": "C-7", "amount": 99.0})))
    conflict = events.one()

    checks = [proceed, in_progress, duplicate, conflict]
    assert {sent.name for sent in checks} == {telemetry.CHECK.name}
    assert [sent.dimensions[telemetry.DECISION] for sent in checks] == [
        "proceed",
        "in_progress",
        "duplicate",
        "conflict",
    ]
    for sent in checks:
        declared(sent)
        assert sent.dimensions[telemetry.SCOPE] == "erp.create-order"
        assert sent.dimensions[telemetry.FLOW_NAME] == FLOW["name"]
        assert sent.dimensions[telemetry.FLOW_ENVIRONMENT] == FLOW["environment"]
        assert sent.dimensions[telemetry.HTTP_STATUS] == 200
        assert sent.dimensions[telemetry.ROUND_TRIPS] > 0
        assert sent.dimensions[telemetry.LATENCY_MS] > 0
        assert telemetry.ERROR_CODE not in sent.dimensions


def test_warnings_and_the_other_flow_of_a_copy_are_sent(api: Api, events: Events) -> None:
    ok(api.call("check_and_claim", claim_body()))
    events.take()
    copy = {"name": "Create ERP order (copy)", "environment": FLOW["environment"]}

    ok(api.call("check_and_claim", claim_body(run="run-2", flow=copy, payload=None)))

    sent = events.one()
    assert sent.dimensions[telemetry.WARNINGS] == "no_fingerprint,another_flow_copy"
    assert sent.dimensions[telemetry.FLOW_NAME] == copy["name"]
    assert sent.dimensions[telemetry.HOLDER_FLOW_NAME] == FLOW["name"]
    assert sent.dimensions[telemetry.HOLDER_FLOW_ENVIRONMENT] == FLOW["environment"]


def test_a_conflict_sends_the_changed_parts_never_their_values(api: Api, events: Events) -> None:
    order = {"Amount": 120.5, "Lines": [{"Qty": 1}, {"Qty": 2}, {"Qty": 3}]}
    ok(succeed(api, ok(api.call("check_and_claim", claim_body(payload=order))), targetRecordId="ERP-1"))
    events.take()

    changed = {"Amount": 987.25, "Lines": [{"Qty": 1}, {"Qty": 2}, {"Qty": 4444}]}
    ok(api.call("check_and_claim", claim_body(run="run-2", payload=changed)))

    sent = events.one()
    declared(sent)
    assert sent.dimensions[telemetry.DECISION] == "conflict"
    assert json.loads(str(sent.dimensions[telemetry.CHANGED_PARTS])) == ["/Amount", "/Lines/2/Qty"]
    assert "987.25" not in str(sent.dimensions)
    assert "4444" not in str(sent.dimensions)


def test_a_refused_check_sends_its_error_code(api: Api, events: Events) -> None:
    refused = api.call("check_and_claim", claim_body(key="jane.doe@contoso.com"))

    assert (refused.status, refused.code) == (400, "sensitive_key")
    sent = events.one()
    declared(sent)
    assert sent.name == telemetry.CHECK.name
    assert sent.dimensions[telemetry.HTTP_STATUS] == 400
    assert sent.dimensions[telemetry.ERROR_CODE] == "sensitive_key"
    assert sent.dimensions[telemetry.SCOPE] == "erp.create-order"
    assert telemetry.DECISION not in sent.dimensions


def test_no_event_carries_a_key_payload_token_run_or_result(api: Api, events: Events, clock: FakeClock) -> None:
    marks = {"key": "KEY-MARK-4711", "payload": "PAYLOAD-MARK-88", "run": "RUN-MARK-12"}
    body = claim_body(key=marks["key"], run=marks["run"], payload={"order": marks["payload"]})
    first = ok(api.call("check_and_claim", body))
    ok(succeed(api, first, targetRecordId="TARGET-MARK-5", data={"erp": "RESULT-MARK-6"}))
    ok(api.call("check_and_claim", {**body, "runId": "RUN-MARK-13"}))
    ok(api.call("check_and_claim", {**body, "runId": "RUN-MARK-14", "payload": {"order": "PAYLOAD-MARK-99"}}))
    clock.advance(1)
    run_timer("watch_claims_needing_attention")

    sent = events.take()
    assert len(sent) >= 5
    values = " ".join(f"{name}={value}" for event in sent for name, value in event.dimensions.items())
    for forbidden in [*marks.values(), "TARGET-MARK", "RESULT-MARK", "PAYLOAD-MARK-99", "RUN-MARK-1"]:
        assert forbidden not in values
    assert first["claimToken"] not in values
    assert first["claimId"] not in values


# -- the other events -------------------------------------------------------------------------------------


def test_record_result_review_and_resolution_send_their_events(api: Api, events: Events) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    ok(succeed(api, first))
    conflict = ok(api.call("check_and_claim", claim_body(run="run-2", payload={"customer": "C-7", "amount": 99.0})))
    blocked = failed_for_good(api, "BLOCKED-1")
    events.take()

    resolution = {"decision": "dismiss", "reviewer": "ana@contoso.com"}
    ok(api.call("resolve_conflict", resolution, route={"conflictId": conflict["conflictId"]}))
    resolved = events.one()
    review = {"reviewer": "ana@contoso.com", "note": "customer closed"}
    ok(api.call("review_claim", review, route={"claimId": blocked["claimId"]}))
    reviewed = events.one()
    stale = {"claimToken": first["claimToken"], "outcome": "failed", "retryable": True}
    refused = api.call("record_result", stale, route={"claimId": conflict["claimId"]})
    result = events.one()

    for sent in (resolved, reviewed, result):
        declared(sent)
    assert (resolved.name, resolved.dimensions[telemetry.RESOLUTION]) == (telemetry.CONFLICT_RESOLVED.name, "dismiss")
    assert (resolved.dimensions[telemetry.SCOPE], resolved.dimensions[telemetry.ORIGIN]) == (
        "erp.create-order",
        "claim",
    )
    assert (reviewed.name, reviewed.dimensions[telemetry.SCOPE]) == (telemetry.REVIEW.name, "erp.create-order")
    assert refused.status == 409
    assert result.name == telemetry.RESULT.name
    assert (result.dimensions[telemetry.OUTCOME], result.dimensions[telemetry.RETRYABLE]) == ("failed", True)
    assert (result.dimensions[telemetry.HTTP_STATUS], result.dimensions[telemetry.ERROR_CODE]) == (409, refused.code)


def test_a_recorded_result_names_its_scope_and_flow(api: Api, events: Events) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    events.take()

    ok(succeed(api, first))

    sent = events.one()
    assert sent.name == telemetry.RESULT.name
    assert sent.dimensions[telemetry.OUTCOME] == "succeeded"
    assert (sent.dimensions[telemetry.SCOPE], sent.dimensions[telemetry.FLOW_NAME]) == (
        "erp.create-order",
        FLOW["name"],
    )


def test_an_action_without_an_event_of_its_own_sends_nothing(api: Api, events: Events) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    events.take()

    ok(api.call("get_claim", route={"claimId": first["claimId"]}))
    ok(api.call("list_conflicts"))

    assert events.take() == []


# -- bulk calls ------------------------------------------------------------------------------------------------


def test_each_item_of_check_and_claim_many_sends_its_single_calls_event_marked_bulk(api: Api, events: Events) -> None:
    items = [claim_body(), claim_body(run="run-2"), claim_body(key="jane.doe@contoso.com"), claim_body(key="ORDER-2")]

    ok(api.call("check_and_claim_many", {"items": items}))

    # One event per item, none for the call itself, in the items' order whichever thread applied each.
    sent = events.take()
    assert [event.name for event in sent] == [telemetry.CHECK.name] * 4
    assert [event.dimensions.get(telemetry.DECISION) for event in sent] == ["proceed", "in_progress", None, "proceed"]
    assert [event.dimensions[telemetry.HTTP_STATUS] for event in sent] == [200, 200, 400, 200]
    assert sent[2].dimensions[telemetry.ERROR_CODE] == "sensitive_key"
    for event in sent:
        declared(event)
        assert event.dimensions[telemetry.BULK] is True
        assert event.dimensions[telemetry.SCOPE] == "erp.create-order"
        assert event.dimensions[telemetry.FLOW_NAME] == FLOW["name"]
        assert event.dimensions[telemetry.LATENCY_MS] > 0
    # Each item's own store round trips: the held key reads the claim its insert was refused for.
    trips = [event.dimensions[telemetry.ROUND_TRIPS] for event in sent]
    assert 0 < trips[0] < trips[1]
    assert trips[2] == 0
    ok(api.call("check_and_claim", claim_body(key="ORDER-3")))
    assert telemetry.BULK not in events.one().dimensions


def test_each_item_of_record_results_sends_its_single_calls_event_marked_bulk(api: Api, events: Events) -> None:
    claimed = ok(api.call("check_and_claim_many", {"items": [claim_body(), claim_body(key="ORDER-2")]}))["value"]
    events.take()
    items = [
        {"claimId": answer["claimId"], "claimToken": answer["claimToken"], "outcome": "succeeded"} for answer in claimed
    ]
    items[1] = {**items[1], "claimToken": "x" * 43, "outcome": "failed", "retryable": True}

    ok(api.call("record_results", {"items": items}))

    sent = events.take()
    assert [event.name for event in sent] == [telemetry.RESULT.name] * 2
    for event in sent:
        declared(event)
        assert event.dimensions[telemetry.BULK] is True
    assert [event.dimensions[telemetry.OUTCOME] for event in sent] == ["succeeded", "failed"]
    assert [event.dimensions[telemetry.HTTP_STATUS] for event in sent] == [200, 409]
    assert sent[1].dimensions[telemetry.ERROR_CODE] == "stale_claim"
    assert sent[0].dimensions[telemetry.SCOPE] == "erp.create-order"


def test_every_bulk_item_the_store_did_not_apply_sends_unavailable(
    api: Api, events: Events, faults: FaultyStore
) -> None:
    ok(api.call("check_and_claim", claim_body(key="WARM-UP")))  # the store's marks read before the outage
    # Half the keys claimed before: decided one by one after the new half is claimed together (issue 36).
    ok(api.call("check_and_claim_many", {"items": [claim_body(key=f"ORDER-{n}") for n in range(20)]}))
    events.take()
    faults.arm(2, only="create_claim", lasting=True, message="the store is down")

    entries = ok(api.call("check_and_claim_many", {"items": [claim_body(key=f"ORDER-{n}") for n in range(40)]}))

    applied = [entry for entry in entries["value"] if "decision" in entry]
    sent = events.take()
    assert len(sent) == 40
    assert len([event for event in sent if event.name == telemetry.CHECK.name]) == len(applied) >= 1
    unavailable = [event for event in sent if event.name == telemetry.UNAVAILABLE.name]
    assert len(unavailable) == 40 - len(applied)
    for event in unavailable:
        declared(event)
        assert event.dimensions[telemetry.ACTION] == "check_and_claim_many"
        assert (event.dimensions[telemetry.HTTP_STATUS], event.dimensions[telemetry.ERROR_CODE]) == (
            503,
            "store_unavailable",
        )


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_items_a_failed_sqlite_commit_lost_send_unavailable_not_their_decision(
    api: Api, events: Events, faults: FaultyStore
) -> None:
    """Issue 24: each item sent its decision before the commit, so a lost call counted proceeds that never were."""
    items = [claim_body(), claim_body(key="ORDER-2"), claim_body(key="jane.doe@contoso.com")]
    faults.arm(1, only="writing_together")

    ok(api.call("check_and_claim_many", {"items": items}))

    sent = events.take()
    assert [event.name for event in sent] == [telemetry.UNAVAILABLE.name] * 2 + [telemetry.CHECK.name]
    assert [event.dimensions[telemetry.HTTP_STATUS] for event in sent] == [503, 503, 400]
    assert all(telemetry.DECISION not in event.dimensions for event in sent)
    assert sent[0].dimensions[telemetry.SCOPE] == "erp.create-order"
    assert sent[2].dimensions[telemetry.BULK] is True


# -- 503s ----------------------------------------------------------------------------------------------------


def test_a_503_sends_unavailable_instead_of_the_actions_event(api: Api, events: Events, faults: FaultyStore) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    events.take()

    faults.arm(1, only=("get_claim", "create_claim"), lasting=True, message="the store is down")
    claimed = api.call("check_and_claim", claim_body(key="ORDER-2"))
    unavailable = events.one()
    read = api.call("get_claim", route={"claimId": first["claimId"]})
    read_unavailable = events.one()

    assert claimed.status == read.status == 503
    declared(unavailable)
    assert unavailable.name == read_unavailable.name == telemetry.UNAVAILABLE.name
    assert unavailable.dimensions[telemetry.ACTION] == "check_and_claim"
    assert unavailable.dimensions[telemetry.ERROR_CODE] == "store_unavailable"
    assert unavailable.dimensions[telemetry.SCOPE] == "erp.create-order"
    assert unavailable.dimensions[telemetry.HTTP_STATUS] == 503
    assert read_unavailable.dimensions[telemetry.ACTION] == "get_claim"


def test_a_key_secret_the_store_does_not_know_sends_what_its_alert_reads(
    api: Api, events: Events, open_store: Callable[[], ClaimStore], clock: FakeClock
) -> None:
    ok(api.call("check_and_claim", claim_body()))
    bootstrap.use_services(Gate(open_store(), KeyHasher("another-secret-" + "z" * 32), clock=clock).services)
    events.take()

    assert api.call("health").status == 503

    sent = events.one()
    assert (sent.name, sent.dimensions[telemetry.ACTION]) == (telemetry.UNAVAILABLE.name, "health")
    code, setting = sent.dimensions[telemetry.ERROR_CODE], sent.dimensions[telemetry.SETTING]
    assert (code, setting) == ("not_configured", "ONCEGATE_KEY_SECRET")
    alert = KEY_SECRET_ALERT.read_text(encoding="utf-8")
    assert f'== "{code}"' in alert
    assert f'== "{setting}"' in alert


# -- store round trips --------------------------------------------------------------------------------------


def new_and_held_round_trips(api: Api, events: Events) -> tuple[int, int]:
    """The round trips counted for a new claim, then for the same key asked by another run."""
    ok(api.call("check_and_claim", claim_body(key="WARM-UP")))
    events.take()
    ok(api.call("check_and_claim", claim_body(key="ORDER-2")))
    new = events.one()
    ok(api.call("check_and_claim", claim_body(key="ORDER-2", run="run-2")))
    held = events.one()
    return new.dimensions[telemetry.ROUND_TRIPS], held.dimensions[telemetry.ROUND_TRIPS]


def test_round_trips_are_the_sqlite_statements_of_the_answer(api: Api, events: Events) -> None:
    new, held = new_and_held_round_trips(api, events)

    # A new claim is one transaction; a held one also reads the claim its insert was refused for.
    assert 0 < new < held


@pytest.mark.azurite
def test_round_trips_are_the_table_storage_requests_of_the_answer(
    table_store_factory: TableStoreFactory, clock: FakeClock, events: Events
) -> None:
    table_store_factory()  # the test's tables, dropped at its end
    store = TableStore.from_connection_string(table_store_factory.connection_string, prefix=table_store_factory.prefix)
    bootstrap.use_services(Gate(store, KeyHasher(KEY_SECRET), clock=clock).services)
    try:
        new, held = new_and_held_round_trips(FunctionsApi(), events)
    finally:
        store.close()

    # As tests/service/test_round_trips.py counts them: one transaction; the refused insert, the read, the history row.
    assert (new, held) == (1, 3)


# -- the timers ---------------------------------------------------------------------------------------------


def failed_at(api: Api, answer: dict[str, Any]) -> datetime:
    """When the claim's failure was recorded: its history's last line (a tick after the claim, on a still clock)."""
    history = ok(api.call("get_claim", route={"claimId": answer["claimId"]}))["history"]
    return datetime.fromisoformat(history[-1]["at"])


def test_the_watch_sends_what_waits_per_scope_oldest_first(api: Api, events: Events, clock: FakeClock) -> None:
    first = ok(api.call("check_and_claim", claim_body()))
    ok(succeed(api, first))
    ok(api.call("check_and_claim", claim_body(run="run-2", payload={"customer": "C-7", "amount": 99.0})))
    opened = clock.now
    clock.advance(60)
    blocked = failed_for_good(api, "BLOCKED-1")
    clock.advance(60)
    other = failed_for_good(api, "BLOCKED-2", scope="mail.send-invoice")
    events.take()

    run_timer("watch_claims_needing_attention")

    sent = events.take()
    for event in sent:
        declared(event)
    watch, *rest = sent
    assert watch.name == telemetry.WATCH.name
    assert (watch.dimensions[telemetry.CLAIMS], watch.dimensions[telemetry.CONFLICTS]) == (2, 1)
    assert {event.dimensions[telemetry.WATCH_RUN] for event in sent} == {watch.dimensions[telemetry.WATCH_RUN]}
    waiting = {
        (event.name, event.dimensions[telemetry.SCOPE], event.dimensions.get(telemetry.REASON)): (
            event.dimensions.get(telemetry.CLAIMS, event.dimensions.get(telemetry.CONFLICTS)),
            datetime.fromisoformat(event.dimensions[telemetry.OLDEST_SINCE]),
        )
        for event in rest
    }
    assert waiting == {
        (telemetry.ATTENTION.name, "erp.create-order", "failed_unreviewed"): (1, failed_at(api, blocked)),
        (telemetry.ATTENTION.name, "mail.send-invoice", "failed_unreviewed"): (1, failed_at(api, other)),
        (telemetry.OPEN_CONFLICTS.name, "erp.create-order", None): (1, opened),
    }


def test_the_watch_reports_all_clear_too(events: Events) -> None:
    run_timer("watch_claims_needing_attention")

    sent = events.one()
    assert sent.name == telemetry.WATCH.name
    assert (sent.dimensions[telemetry.CLAIMS], sent.dimensions[telemetry.CONFLICTS]) == (0, 0)
    assert telemetry.FORGOTTEN_UNTIL not in sent.dimensions


def test_the_watch_of_a_restored_store_says_until_when_it_forgets_the_keys_done_after_the_export(
    events: Events, clock: FakeClock
) -> None:
    exported_at = clock.now - timedelta(days=2)
    forgotten_until = clock.now + timedelta(days=365)
    restore = Restore("0123456789abcdef", "e1", exported_at, clock.now, forgotten_until, completed_at=clock.now)
    events.service.store.save_restore(restore)

    run_timer("watch_claims_needing_attention")

    sent = events.one()
    declared(sent)
    assert datetime.fromisoformat(sent.dimensions[telemetry.EXPORTED_AT]) == exported_at
    assert datetime.fromisoformat(sent.dimensions[telemetry.FORGOTTEN_UNTIL]) == forgotten_until


def test_a_watch_the_store_fails_sends_unavailable(events: Events, faults: FaultyStore) -> None:
    faults.arm(1, only="list_claims", lasting=True, message="the store is down")

    with pytest.raises(StoreUnavailable):
        run_timer("watch_claims_needing_attention")

    sent = events.one()
    assert sent.name == telemetry.UNAVAILABLE.name
    assert sent.dimensions[telemetry.ACTION] == "watch_claims_needing_attention"
    assert sent.dimensions[telemetry.ERROR_CODE] == "store_unavailable"


def test_the_purge_sends_its_figures(api: Api, events: Events, clock: FakeClock) -> None:
    ok(succeed(api, ok(api.call("check_and_claim", claim_body()))))
    clock.advance(91 * 24 * 3600)
    events.take()

    run_timer("purge_finished_claims")

    sent = events.one()
    declared(sent)
    assert sent.name == telemetry.PURGE.name
    assert (sent.dimensions[telemetry.DELETED], sent.dimensions[telemetry.EXAMINED]) == (1, 1)
    assert (sent.dimensions[telemetry.FINISHED], sent.dimensions[telemetry.STORE_FAILED]) == (True, False)


# -- setting it up -----------------------------------------------------------------------------------------


def test_without_a_connection_string_nothing_is_set_up_or_sent(
    distro_setup: Distro, monkeypatch: pytest.MonkeyPatch, api: Api
) -> None:
    monkeypatch.delenv(telemetry.CONNECTION_STRING_SETTING, raising=False)

    ok(api.call("check_and_claim", claim_body()))

    assert not telemetry.enabled()
    assert distro_setup.calls == []
    assert distro_setup.exporter.get_finished_logs() == ()


def test_a_connection_string_sets_up_the_distro_once_for_the_events_logger_alone(
    distro_setup: Distro, events: Events, api: Api
) -> None:
    ok(api.call("check_and_claim", claim_body()))
    ok(api.call("check_and_claim", claim_body(key="ORDER-2")))

    (options,) = distro_setup.calls
    assert options["connection_string"] == CONNECTION_STRING
    assert options["logger_name"] == telemetry.LOGGER_NAME
    assert all(not option["enabled"] for option in options["instrumentation_options"].values())
    assert not logging.getLogger(telemetry.LOGGER_NAME).propagate
    assert len(events.take()) == 2
