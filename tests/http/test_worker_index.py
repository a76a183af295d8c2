"""Microsoft's Python worker indexes every function of the app, under the names that shipped.

``function_app.py`` declares the actions' functions in a loop over the operation table. The Functions
host's Python worker indexes them as it indexes hand-written ones (``app.get_functions()``), then
checks each user function against its bindings: every parameter of the function is a binding of
that name, annotated with the binding's type (``typing.get_type_hints``), and the function is
registered under its name. Function keys, telemetry and saved deployments refer to functions by
name, so the names are pinned here as they shipped.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
import typing

import azure.functions as func
import pytest
from azure.functions.decorators.http import HttpTrigger
from azure.functions.decorators.timer import TimerTrigger

from oncegate.entrypoints import http, operations
from oncegate.entrypoints.operations import BY_NAME, OPERATIONS, Operation
from oncegate.entrypoints.operations.functions import FUNCTIONS, Listed
from tests.http.test_startup import import_fresh_function_app, loaded_functions
from tools import functions as written_list

# Every function of release 0.x, as the host lists them (function keys are kept per function).
SHIPPED = {
    "check_and_claim", "check_and_claim_many", "record_results", "list_claims_needing_attention", "list_claims",
    "lookup_claim", "get_claim", "list_claim_history", "wait_for_claim", "record_result", "release_claim",
    "renew_claim", "review_claim", "report_conflict", "list_conflicts", "on_conflict_reported", "get_conflict",
    "resolve_conflict", "list_flows", "register_flow", "list_flow_overlaps", "list_scopes", "set_scope", "health",
    "purge_finished_claims", "watch_claims_needing_attention", "unknown_route",
}  # fmt: skip
# The app's functions that are no action: the timers and the catch-all's 404/405.
OUTSIDE_THE_TABLE = {"purge_finished_claims", "watch_claims_needing_attention", "unknown_route"}


@pytest.fixture(scope="module")
def indexed() -> dict[str, typing.Any]:
    """The app's functions as the worker indexes them at start-up: a fresh import, one ``get_functions()``."""
    return loaded_functions(import_fresh_function_app())


def test_the_worker_indexes_every_function_under_its_shipped_name(indexed: dict[str, typing.Any]) -> None:
    # A new action adds a function; none that shipped goes or changes its name.
    assert SHIPPED - set(indexed) == set()
    assert set(indexed) == {operation.name for operation in OPERATIONS} | OUTSIDE_THE_TABLE


def test_each_entry_of_the_table_is_one_function_at_its_route_and_method(indexed: dict[str, typing.Any]) -> None:
    for operation in OPERATIONS:
        trigger = indexed[operation.name].get_trigger()
        assert (trigger.route, [str(method.value) for method in trigger.methods]) == (
            operation.route,
            [operation.method],
        )


@pytest.mark.parametrize("name", sorted(SHIPPED | {operation.name for operation in OPERATIONS}))
def test_each_function_takes_exactly_its_bindings_with_their_types(indexed: dict[str, typing.Any], name: str) -> None:
    function = indexed[name]
    user_function = function.get_user_function()
    bindings = {binding.name: binding for binding in function.get_bindings() if binding.name != "$return"}
    hints = typing.get_type_hints(user_function)  # what the worker resolves; a name it cannot resolve stops it

    assert user_function.__name__ == name
    assert list(inspect.signature(user_function).parameters) == list(bindings)
    trigger = function.get_trigger()
    if isinstance(trigger, HttpTrigger):
        assert (hints[trigger.name], hints["return"]) == (func.HttpRequest, func.HttpResponse)
    else:
        assert isinstance(trigger, TimerTrigger)
        assert (hints[trigger.name], hints["return"]) == (func.TimerRequest, type(None))
    assert function.get_dict_repr()["scriptFile"] == "function_app.py"


def test_the_list_the_app_declares_its_functions_from_is_written_from_the_table() -> None:
    # function_app.py reads operations/functions.py instead of importing every entry (issue 36's cold start).
    assert written_list.main(["--check"]) == 0
    assert [listed.name for listed in FUNCTIONS] == [operation.name for operation in OPERATIONS]


@pytest.mark.parametrize("listed", FUNCTIONS, ids=lambda listed: listed.name)
def test_each_listed_function_serves_its_entry_of_the_table(listed: typing.Any) -> None:
    operation = BY_NAME[listed.name]
    assert http.entry(listed) is operation
    assert (listed.route, listed.method, listed.anonymous) == (
        operation.route,
        operation.method,
        operation.role is None,
    )


def test_a_function_whose_module_does_not_import_answers_the_contracts_500_and_loads_once_it_imports(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A broken deployment (a module missing or failing at import) must not leave the caller without an answer:
    # the entry is imported on the function's first call, outside the pipeline's own error handling.
    listed = FUNCTIONS[0]._replace(aggregate="claims_broken_for_this_test")
    serve = http.function(listed)
    request = func.HttpRequest("POST", "http://localhost/api/claims", body=b"{}")

    broken = serve(request)

    assert broken.status_code == 500
    assert broken.headers["Content-Type"].startswith("application/json")
    assert b'"code":"internal_error"' in broken.get_body().replace(b" ", b""), broken.get_body()
    assert f"The action {listed.name} could not be loaded" in caplog.text
    # Not cached as failed: once the module imports, the same function serves its entry.
    working = importlib.import_module("oncegate.entrypoints.operations.claims")
    monkeypatch.setitem(sys.modules, "oncegate.entrypoints.operations.claims_broken_for_this_test", working)
    assert http.entry(listed) is BY_NAME[listed.name]


class _Collector:
    """The collector as ``http.entry`` sees it (``gc``), state and all, that lets a test stop one thread between
    asking whether the collector runs and turning it off; it never freezes the test process's objects."""

    def __init__(self) -> None:
        self.enabled = True
        self.asked = threading.Event()  # the second thread asked whether the collector runs
        self.first_done = threading.Event()
        self.second: threading.Thread | None = None

    def isenabled(self) -> bool:
        if threading.current_thread() is self.second:
            self.asked.set()
        return self.enabled

    def disable(self) -> None:
        if threading.current_thread() is self.second:
            assert self.first_done.wait(timeout=30), "the first entry never finished"
        self.enabled = False

    def enable(self) -> None:
        self.enabled = True

    def freeze(self) -> None:
        pass


def test_two_entries_made_at_once_leave_the_collector_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two first calls of different functions in two handler threads: the second asked whether the collector ran
    while the first had turned it off, and turned it off once the first had turned it back on. Nobody turned it on
    again: the worker never collected a cycle for the rest of its life."""
    first, second = (FUNCTIONS[0]._replace(aggregate=f"claims_{which}_for_this_test") for which in ("a", "b"))
    claims = importlib.import_module("oncegate.entrypoints.operations.claims")
    for listed in (first, second):
        monkeypatch.setitem(sys.modules, f"oncegate.entrypoints.operations.{listed.aggregate}", claims)
    collector = _Collector()
    importing, imported = threading.Event(), threading.Event()

    def listed_entry(listed: Listed) -> Operation:
        if listed.aggregate == first.aggregate:
            importing.set()
            assert imported.wait(timeout=30), "the first import was never let go on"
        return operations.listed_entry(listed)  # imports the entry's module, as the app's first call does

    monkeypatch.setattr(http, "gc", collector)
    monkeypatch.setattr(http, "listed_entry", listed_entry)

    def first_entry() -> None:
        http.entry(first)
        collector.first_done.set()

    def second_entry() -> None:
        try:
            http.entry(second)
        finally:
            collector.asked.set()  # done without asking: nothing to wait for

    one = threading.Thread(target=first_entry)
    one.start()
    assert importing.wait(timeout=30)
    collector.second = threading.Thread(target=second_entry)
    collector.second.start()
    assert collector.asked.wait(timeout=30)
    imported.set()
    one.join(timeout=30)
    collector.second.join(timeout=30)

    assert collector.enabled, "the collector was left off"
    assert http.entry(first) is http.entry(second) is BY_NAME[first.name]
