"""The postprovision hook (``tools/store_mark.py``): a deployment marks its new store and pins its id (issue 31).

No Azure CLI runs here: ``az`` is a stand-in holding the app's settings. ``oncegate store init`` is
the real command, run as the hook runs it, on Azurite tables of this test (by connection string where
Azure signs in with the deployer's identity). What is checked: a first deployment marks the store and
writes the same id into the app's settings, so the app's first claim finds a marked, pinned store; a
redeploy changes nothing; a store that lost its claims table makes the hook fail and change nothing;
a store that does not answer yet (the role still being applied) is tried again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import Decision
from oncegate.errors import NotConfigured
from oncegate.service.safeguard import PinnedSetting
from oncegate.stores.tables.store import table_names
from tests.gate import Gate
from tests.service.calls import claim, record
from tools import store_mark as hook

SECRET = "hook-test-secret-" + "h" * 32
ENV = {
    "AZURE_RESOURCE_GROUP": "rg-oncegate-prod",
    "SERVICE_API_NAME": "func-oncegate-abc",
    "STORE_TABLES_ENDPOINT": "https://stoncegateabc.table.core.windows.net/",
    "STORE_TABLE_PREFIX": "OnceGate",
}


class App:
    """``az`` for one function app: its settings, read and written as the hook asks."""

    def __init__(self) -> None:
        self.settings: dict[str, str] = {}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(tuple(args))
        assert args[:4] == ("az", "functionapp", "config", "appsettings")
        assert option(args, "--resource-group") == ENV["AZURE_RESOURCE_GROUP"]
        assert option(args, "--name") == ENV["SERVICE_API_NAME"]
        if args[4] == "list":
            assert option(args, "--query") == "[?name=='ONCEGATE_STORE_ID'].value | [0]"
            return subprocess.CompletedProcess(args, 0, self.settings.get("ONCEGATE_STORE_ID", "") + "\n", "")
        assert args[4] == "set"
        name, _, value = option(args, "--settings").partition("=")
        self.settings[name] = value
        return subprocess.CompletedProcess(args, 0, "", "")


def option(args: Sequence[str], name: str) -> str:
    return args[list(args).index(name) + 1]


@pytest.fixture
def steps(table_store_factory: Any) -> hook.Plan:
    """The hook's plan, its store settings pointed at this test's Azurite tables."""
    table_store_factory()  # the factory drops the test's tables afterwards
    planned = hook.plan(ENV)
    store = {
        "ONCEGATE_STORE": "tables",
        "ONCEGATE_TABLES_CONNECTION_STRING": table_store_factory.connection_string,
        "ONCEGATE_TABLE_PREFIX": table_store_factory.prefix,
    }
    return hook.Plan(group=planned.group, app=planned.app, store=store)


def store_init(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The real command, as the hook runs it; nothing of the test's own environment leaks in but the PATH."""
    assert not {name for name in env if name.startswith("ONCEGATE_")} - {
        "ONCEGATE_STORE",
        "ONCEGATE_TABLES_CONNECTION_STRING",
        "ONCEGATE_TABLE_PREFIX",
        "ONCEGATE_STORE_ID",
    }
    return hook.run_store_init(env)


def app_instance(table_store_factory: Any, app: App) -> Gate:
    """The deployed app's instance: Table Storage, pinned by the setting the hook wrote."""
    pin = PinnedSetting(app.settings.get("ONCEGATE_STORE_ID") or None)
    return Gate(table_store_factory(), KeyHasher(SECRET), pin=pin, check_interval=timedelta(0))


@pytest.mark.azurite
def test_a_first_deployment_marks_the_store_and_pins_its_id_before_the_first_claim(
    steps: hook.Plan, table_store_factory: Any
) -> None:
    app = App()
    unmarked = app_instance(table_store_factory, app)
    with pytest.raises(NotConfigured):
        claim(unmarked, key="SO-1", run="run-1")  # the code alone, before the hook: refused, never new

    store_id, written = hook.execute(steps, {"PATH": "/usr/bin:/bin"}, az=app, store_init=store_init)
    served = app_instance(table_store_factory, app)

    assert written
    assert app.settings == {"ONCEGATE_STORE_ID": store_id}
    assert served.store.read_marks().store_id == store_id
    assert claim(served, key="SO-1", run="run-1").decision is Decision.PROCEED


@pytest.mark.azurite
def test_a_redeploy_changes_nothing(steps: hook.Plan, table_store_factory: Any) -> None:
    app = App()
    store_id, _ = hook.execute(steps, {}, az=app, store_init=store_init)
    served = app_instance(table_store_factory, app)
    record(served, claim(served, key="SO-1", run="run-1"))
    calls = len(app.calls)

    again, written = hook.execute(steps, {}, az=app, store_init=store_init)

    assert (again, written) == (store_id, False)
    assert [call[4] for call in app.calls[calls:]] == ["list"]
    assert claim(app_instance(table_store_factory, app), key="SO-1", run="run-2").decision is Decision.DUPLICATE


@pytest.mark.azurite
def test_a_store_that_lost_its_claims_table_fails_the_hook_and_nothing_changes(
    steps: hook.Plan, table_store_factory: Any
) -> None:
    app = App()
    store_id, _ = hook.execute(steps, {}, az=app, store_init=store_init)
    served = app_instance(table_store_factory, app)
    record(served, claim(served, key="SO-1", run="run-1"))
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as service:
        claims_table = table_names(table_store_factory.prefix)[0]
        service.delete_table(claims_table)
        service.create_table(claims_table)  # as `azd provision` makes it again from the template

    with pytest.raises(hook.HookError) as failed:
        hook.execute(steps, {}, az=app, store_init=store_init)

    assert "not_configured:" in str(failed.value)
    assert "lost its mark" in str(failed.value)
    assert app.settings == {"ONCEGATE_STORE_ID": store_id}
    with pytest.raises(NotConfigured):
        claim(app_instance(table_store_factory, app), key="SO-1", run="run-2")


@pytest.mark.azurite
def test_a_store_wiped_whole_and_made_again_by_a_redeploy_fails_the_hook_and_stays_refused(
    steps: hook.Plan, table_store_factory: Any
) -> None:
    """Every table deleted (an account deleted and made again, or a prefix emptied), then `azd provision` makes
    the template's tables anew, empty and unmarked: exactly what a first deployment finds. The pin the first
    deployment wrote is what tells them apart: the hook refuses, keeps the pin, and the app claims nothing."""
    app = App()
    store_id, _ = hook.execute(steps, {}, az=app, store_init=store_init)
    served = app_instance(table_store_factory, app)
    record(served, claim(served, key="SO-1", run="run-1"))
    with TableServiceClient.from_connection_string(table_store_factory.connection_string) as service:
        for table in table_names(table_store_factory.prefix):
            service.delete_table(table)
        for table in table_names(table_store_factory.prefix):
            service.create_table(table)

    with pytest.raises(hook.HookError) as failed:
        hook.execute(steps, {}, az=app, store_init=store_init)

    assert "not_configured:" in str(failed.value)
    assert store_id in str(failed.value)
    assert app.settings == {"ONCEGATE_STORE_ID": store_id}
    assert [call[4] for call in app.calls].count("set") == 1  # the first deployment's write, and no other
    with pytest.raises(NotConfigured):
        claim(app_instance(table_store_factory, app), key="SO-1", run="run-2")


def test_a_store_that_does_not_answer_yet_is_tried_again_and_a_refusal_is_not() -> None:
    steps = hook.plan(ENV)
    answers = [(3, "", "oncegate store init: store_unavailable: Table Storage refused access (403)")] * 2 + [
        (0, '{"storeId": "3f2a9c1e5b7d4a60"}', "")
    ]
    waits: list[float] = []

    def slow(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        assert env["ONCEGATE_TABLES_ENDPOINT"] == "https://stoncegateabc.table.core.windows.net"
        return subprocess.CompletedProcess([], *answers.pop(0))

    def refusing(env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 3, "", "oncegate store init: not_configured: This store is store x")

    app = App()
    assert hook.execute(steps, {}, az=app, store_init=slow, sleep=waits.append) == ("3f2a9c1e5b7d4a60", True)
    assert waits == [hook.WAIT_SECONDS] * 2
    with pytest.raises(hook.HookError, match="not_configured"):
        hook.execute(steps, {}, az=App(), store_init=refusing, sleep=waits.append)
    assert len(waits) == 2


def test_the_hook_needs_the_provisioned_outputs_and_passes_no_other_setting() -> None:
    with pytest.raises(hook.HookError, match="STORE_TABLES_ENDPOINT"):
        hook.plan({**ENV, "STORE_TABLES_ENDPOINT": ""})
    steps = hook.plan(ENV)
    base = {"PATH": "/usr/bin", "ONCEGATE_KEY_SECRET": "x" * 40, "ONCEGATE_NEW_KEY_SECRET": "y" * 40}

    assert hook.store_environment(base, steps, None) == {
        "PATH": "/usr/bin",
        "ONCEGATE_STORE": "tables",
        "ONCEGATE_TABLES_ENDPOINT": "https://stoncegateabc.table.core.windows.net",
        "ONCEGATE_TABLE_PREFIX": "OnceGate",
    }
    assert hook.store_environment(base, steps, "3f2a")["ONCEGATE_STORE_ID"] == "3f2a"
