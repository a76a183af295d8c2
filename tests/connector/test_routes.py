"""Every operation of the definition is a route of the function app, and every route an operation but the
operators' own (targets, issue 34), which the connector never offers a maker."""

from __future__ import annotations

from typing import Any

from oncegate.entrypoints.operations import OPERATIONS
from oncegate.entrypoints.routes import function_routes
from tests.connector.spec import operations

CATCH_ALL = "unknown_route"


def app_routes() -> set[tuple[str, str]]:
    import function_app

    return {
        (method.lower(), f"/api/{route.route}")
        for route in function_routes(function_app.app)
        if route.name != CATCH_ALL
        for method in route.methods
    }


def operators_routes() -> set[tuple[str, str]]:
    return {(op.method.lower(), f"/api/{op.route}") for op in OPERATIONS if not op.in_connector}


def test_every_operation_is_a_route(any_definition: dict[str, Any]) -> None:
    assert {(op.method, op.path) for op in operations(any_definition)} - app_routes() == set()


def test_every_route_is_an_operation(any_definition: dict[str, Any]) -> None:
    assert app_routes() - operators_routes() - {(op.method, op.path) for op in operations(any_definition)} == set()


def test_the_operators_actions_are_served_and_never_offered(any_definition: dict[str, Any]) -> None:
    offered = {(op.method, op.path) for op in operations(any_definition)}
    assert operators_routes() == {("put", "/api/targets"), ("get", "/api/targets")}
    assert operators_routes() <= app_routes()
    assert operators_routes() & offered == set()


def test_health_is_internal(any_definition: dict[str, Any]) -> None:
    (health,) = [op for op in operations(any_definition) if op.path == "/api/health"]
    assert health.spec["x-ms-visibility"] == "internal"
