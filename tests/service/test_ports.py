"""No service is handed the whole store: each declares the groups of the port it uses (issue 23)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing

import pytest

from oncegate import service
from oncegate.stores import port


def _members(protocol: type) -> set[str]:
    return {name for name in dir(protocol) if not name.startswith("_")}


def handed_a_store() -> list[tuple[str, type]]:
    """Every service class taking a ``store`` and the type its ``__init__`` declares for it, as Python resolves it."""
    found = []
    for module_info in pkgutil.iter_modules(service.__path__, service.__name__ + "."):
        module = importlib.import_module(module_info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or "store" not in inspect.signature(cls.__init__).parameters:
                continue
            found.append(
                (f"{module_info.name.rsplit('.', 1)[-1]}.{name}", typing.get_type_hints(cls.__init__)["store"])
            )
    return found


HANDED = handed_a_store()


@pytest.mark.parametrize(("service_class", "store_type"), HANDED, ids=[name for name, _ in HANDED])
def test_a_service_is_handed_part_of_the_store_never_all_of_it(service_class: str, store_type: type) -> None:
    # Read from the resolved annotation, so an alias or a re-export of the whole store counts as the store.
    assert getattr(store_type, "_is_protocol", False), f"{service_class} takes a {store_type}, not a port protocol"
    assert _members(store_type) < _members(port.ClaimStore), f"{service_class} is handed the whole store"


def test_the_check_sees_the_services_and_would_see_the_whole_store() -> None:
    assert len(HANDED) >= 8
    assert not _members(port.ClaimStore) < _members(port.ClaimStore)


def test_the_whole_store_is_the_groups_together_and_nothing_else() -> None:
    # An adapter implements ClaimStore: every method belongs to a group a service can be handed alone.
    groups = (
        port.ClaimReads,
        port.ClaimWrites,
        port.HistoryRecords,
        port.ClaimListing,
        port.ClaimIndex,
        port.WritesTogether,
        port.ConflictRecords,
        port.InventoryRecords,
        port.StoreMarkRecords,
        port.BackupRecords,
        port.RestoreReads,
        port.Reachable,
        port.TargetRecords,
    )
    in_groups = {name for group in groups for name in vars(group) if not name.startswith("_")}
    whole = {name for name in dir(port.ClaimStore) if not name.startswith("_")}

    assert whole - {"close"} <= in_groups | {"kind"}
