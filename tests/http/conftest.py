"""The HTTP suite: the Functions app's own functions, called directly and through the local server.

``api`` runs a test twice: once calling the user functions of ``function_app.app`` with an
``azure.functions.HttpRequest``, as the Functions host does, and once over real HTTP through
``oncegate serve``'s server. Both reach the service under test, wired with ``bootstrap.use_services``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oncegate import bootstrap
from tests.gate import Gate
from tests.http.client import Api, FunctionsApi, ServerApi
from tests.load.served import serving
from tests.service.calls import claim


@pytest.fixture
def store_kind() -> str:
    """HTTP tests run on SQLite; the service suite covers both stores."""
    return "sqlite"


@pytest.fixture(autouse=True)
def wired(service: Gate) -> Iterator[Gate]:
    """The service every request of this test reaches."""
    bootstrap.use_services(service.services)
    yield service
    bootstrap.use_services(None)


@pytest.fixture
def held(service: Gate) -> tuple[str, str]:
    """A live claim: its id and token."""
    answer = claim(service)
    assert answer.claim_token is not None
    return answer.claim_id, answer.claim_token


@pytest.fixture(scope="session")
def local_server() -> Iterator[tuple[str, int]]:
    """``oncegate serve``'s server on a free port; it asks bootstrap for the service on every request."""
    with serving() as address:
        yield address


@pytest.fixture(params=["functions", "server"])
def api(request: pytest.FixtureRequest) -> Api:
    if request.param == "server":
        return ServerApi(request.getfixturevalue("local_server"))
    return FunctionsApi()
