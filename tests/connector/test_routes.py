"""Every operation of the definition is a route of the function app, and every route an operation."""

from __future__ import annotations

from typing import Any

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


def test_every_operation_is_a_route(any_definition: dict[str, Any]) -> None:
    assert {(op.method, op.path) for op in operations(any_definition)} - app_routes() == set()


def test_every_route_is_an_operation(any_definition: dict[str, Any]) -> None:
    assert app_routes() - {(op.method, op.path) for op in operations(any_definition)} == set()


def test_health_is_internal(any_definition: dict[str, Any]) -> None:
    (health,) = [op for op in operations(any_definition) if op.path == "/api/health"]
    assert health.spec["x-ms-visibility"] == "internal"
