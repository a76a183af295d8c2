"""Serves the Azure Functions app locally, as Core Tools would, without Core Tools.

The routes come from ``app.get_functions()`` of the very ``FunctionApp`` that Azure runs,
so there is no second route table to drift. Function keys are not checked, as Core Tools
does not check them locally either.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import azure.functions as func

from oncegate.entrypoints.http import function_routes

logger = logging.getLogger(__name__)

ROUTE_PREFIX = "/api/"


@dataclass(frozen=True)
class Route:
    """One function of the app, matched by method and route template."""

    name: str
    methods: frozenset[str]
    pattern: re.Pattern[str]
    specificity: tuple[int, int]
    function: Any


def _compile(template: str) -> tuple[re.Pattern[str], tuple[int, int]]:
    parts, literals, catch_all = [], 0, 0
    for segment in template.strip("/").split("/"):
        if segment.startswith("{*"):
            parts.append(f"(?P<{segment[2:-1]}>.*)")
            catch_all = 1
        elif segment.startswith("{"):
            parts.append(f"(?P<{segment[1:-1]}>[^/]+)")
        else:
            parts.append(re.escape(segment))
            literals += 1
    # Literal segments win over parameters and a catch-all loses to everything, as in ASP.NET routing.
    return re.compile("/".join(parts)), (-catch_all, literals)


def routes_of(app: func.FunctionApp) -> list[Route]:
    """The app's HTTP functions, most specific first."""
    routes = []
    for function in function_routes(app):
        pattern, specificity = _compile(function.route)
        routes.append(Route(function.name, function.methods, pattern, specificity, function.function))
    return sorted(routes, key=lambda route: route.specificity, reverse=True)


def dispatch(routes: list[Route], method: str, url: str, headers: dict[str, str], body: bytes) -> func.HttpResponse:
    """Call the function whose route and method match, exactly as the Functions host would."""
    parts = urlsplit(url)
    path = parts.path[len(ROUTE_PREFIX) :] if parts.path.startswith(ROUTE_PREFIX) else "\0" + parts.path
    for route in routes:
        match = route.pattern.fullmatch(path.rstrip("/")) if method in route.methods else None
        if match:
            request = func.HttpRequest(
                method,
                url,
                headers=headers,
                params=dict(parse_qsl(parts.query, keep_blank_values=True)),
                route_params={name: value or "" for name, value in match.groupdict().items()},
                body=body,
            )
            response: func.HttpResponse = route.function(request)
            return response
    return func.HttpResponse(
        '{"error":{"code":"not_found","message":"Routes live under /api.","details":[]}}',
        status_code=404,
        headers={"Content-Type": "application/json; charset=utf-8"},
    )


class _Handler(BaseHTTPRequestHandler):
    server: _AppServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle on, each response waits for a delayed ACK.
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
        response = dispatch(
            self.server.routes, self.command, f"http://{host}{self.path}", dict(self.headers.items()), body
        )
        payload = response.get_body() or b""
        self.send_response(response.status_code)
        for name, value in response.headers.items():
            if name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


class _AppServer(ThreadingHTTPServer):
    daemon_threads = True
    # Flows fire in bursts; a deep accept queue keeps 32+ simultaneous callers from being refused.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], routes: list[Route]) -> None:
        super().__init__(address, _Handler)
        self.routes = routes


def make_server(app: func.FunctionApp, host: str = "127.0.0.1", port: int = 7071) -> ThreadingHTTPServer:
    """A threaded HTTP server for ``app``; port 0 picks a free port (see ``server_address``)."""
    return _AppServer((host, port), routes_of(app))
