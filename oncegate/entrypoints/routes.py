"""The app's routes, read from the ``FunctionApp`` itself, and the one matcher of a path against them.

``function_app.py`` declares them from the operation table (``oncegate.entrypoints.operations``): the only
route table. The local server finds the function to call with
:func:`match`; the catch-all function finds what a path allows with :func:`allowed_methods`.
Templates match as the Functions host matches them: ``{name}`` is one path segment, ``{*name}``
the rest of the path, and a literal segment wins over a parameter, any route over a catch-all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

import azure.functions as func
from azure.functions.decorators.http import HttpTrigger

from oncegate.domain.copies import frozen


@frozen
class FunctionRoute:
    """One HTTP function of the app: its route template, methods and the pattern compiled from the template."""

    name: str
    route: str
    methods: frozenset[str]
    function: Callable[[func.HttpRequest], func.HttpResponse]
    pattern: re.Pattern[str]
    catch_all: bool
    # Whether the host lets anyone call it, without a function key (health, the catch-all; every one in entra mode).
    anonymous: bool = False


@functools.cache
def function_routes(app: func.FunctionApp) -> tuple[FunctionRoute, ...]:
    """The app's HTTP functions, most specific first; read and compiled once per process."""
    # get_functions() records the names it has seen and refuses a second call; the Python worker
    # has already made the first one while indexing, so keep its record as it was.
    seen = app.functions_bindings
    app.functions_bindings = None
    try:
        functions = app.get_functions()
    finally:
        app.functions_bindings = seen
    routes = []
    for function in functions:
        trigger = function.get_trigger()
        name = function.get_function_name()
        if isinstance(trigger, HttpTrigger) and trigger.route is not None and name is not None:
            methods = frozenset(str(getattr(method, "value", method)) for method in trigger.methods or [])
            pattern, catch_all, literals = _compile(trigger.route)
            anonymous = trigger.auth_level == func.AuthLevel.ANONYMOUS
            function_route = function.get_user_function()
            route = FunctionRoute(name, trigger.route, methods, function_route, pattern, catch_all, anonymous)
            routes.append((route, (not catch_all, literals)))
    return tuple(route for route, _ in sorted(routes, key=lambda ranked: ranked[1], reverse=True))


def _compile(template: str) -> tuple[re.Pattern[str], bool, int]:
    """The template's pattern, whether it ends in a catch-all, and how many literal segments it has."""
    parts, literals, catch_all = [], 0, False
    for segment in template.strip("/").split("/"):
        if segment.startswith("{*"):
            parts.append(f"(?P<{segment[2:-1]}>.*)")
            catch_all = True
        elif segment.startswith("{"):
            parts.append(f"(?P<{segment[1:-1]}>[^/]+)")
        else:
            parts.append(re.escape(segment))
            literals += 1
    return re.compile("/".join(parts)), catch_all, literals


def match(routes: Sequence[FunctionRoute], method: str, path: str) -> tuple[FunctionRoute, re.Match[str]] | None:
    """The function the host calls for ``method`` at ``path`` (below ``/api/``), and the match of its parameters.

    A method no function takes (HEAD, OPTIONS...) goes to the catch-all, which answers it as it
    answers any wrong method: 405 naming what the path allows, or 404.
    """
    for route in routes:
        found = route.pattern.fullmatch(path) if method in route.methods else None
        if found:
            return route, found
    for route in routes:
        found = route.pattern.fullmatch(path) if route.catch_all else None
        if found:
            return route, found
    return None


def allowed_methods(routes: Sequence[FunctionRoute], path: str) -> list[str]:
    """The methods the app's actions take at ``path``, sorted; none when no action (the catch-all aside) serves it."""
    served = (route for route in routes if not route.catch_all and route.pattern.fullmatch(path))
    return sorted({method for route in served for method in route.methods})
