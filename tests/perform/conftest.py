"""Perform once's suite: the service wired to declared targets and the outbound adapter, a stand-in on loopback.

Every test reaches the service through real HTTP or the app's own functions (``api``, as the HTTP suite), on
both stores, against :class:`~tests.support.target_server.StandInTarget`, a real server on 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from oncegate import bootstrap
from oncegate.domain.keys import KeyHasher
from oncegate.domain.targets import Target
from oncegate.errors import NotFound
from oncegate.stores.port import ClaimStore
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.http.client import Api, ServerApi
from tests.load.served import serving
from tests.support.target_server import StandInTarget


class Declared:
    """Declares targets in the service's store, as ``oncegate targets set`` does (replacing one of the same name)."""

    def __init__(self, store: ClaimStore) -> None:
        self.store = store

    def declare(self, target: Target) -> Target:
        try:
            version = self.store.get_target(target.name).version
        except NotFound:
            version = None
        return self.store.save_target(replace(target, version=version))


@pytest.fixture
def stand_in() -> Iterator[StandInTarget]:
    with StandInTarget() as target:
        yield target


@pytest.fixture
def declared(service: Gate) -> Declared:
    return Declared(service.store)


@pytest.fixture
def erp(declared: Declared, stand_in: StandInTarget) -> Target:
    """The order system: a look-up by reference, the record's id at /id, the body's id and reference kept."""
    return declared.declare(
        Target(
            name="erp",
            base_url=stand_in.base_url,
            timeout_seconds=1,
            lookup_path="/orders?reference={reference}",
            record_pointer="/id",
            kept_pointers=("/id", "/reference"),
            kept_headers=("Location",),
        )
    )


@pytest.fixture
def erp_store(open_store: Callable[[], ClaimStore], stand_in: StandInTarget) -> Target:
    """The order system of :func:`erp`, declared in the test's store before any service over it is made."""
    return Declared(open_store()).declare(
        Target(
            name="erp",
            base_url=stand_in.base_url,
            timeout_seconds=1,
            lookup_path="/orders?reference={reference}",
            record_pointer="/id",
            kept_pointers=("/id", "/reference"),
        )
    )


@pytest.fixture
def new_service(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[], Gate]:
    """A service over the test's store whose adapter may reach the stand-in on loopback."""
    return lambda: Gate(open_store(), KeyHasher(KEY_SECRET), clock=clock, targets_allow_loopback=True)


@pytest.fixture
def service(new_service: Callable[[], Gate]) -> Iterator[Gate]:
    gate = new_service()
    bootstrap.use_services(gate.services)
    yield gate
    bootstrap.use_services(None)


@pytest.fixture(scope="session")
def local_server() -> Iterator[tuple[str, int]]:
    with serving() as address:
        yield address


@pytest.fixture
def api(service: Gate, local_server: tuple[str, int]) -> Api:
    """Real HTTP to the local server (the HTTP suite holds the app's functions to the server's answers)."""
    return ServerApi(local_server)


def with_target(target: Target, **changes: object) -> Target:
    return replace(target, **changes)  # type: ignore[arg-type]
