"""Two ways to reach the app's functions: directly, as the Functions host calls them, and over real HTTP."""

from __future__ import annotations

import http.client
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import azure.functions as func

import function_app

Route = dict[str, str]
# Query parameters: by name, or as pairs in the order sent, a name given more than once included.
Query = Route | list[tuple[str, str]]
FUNCTIONS = {function.get_function_name(): function for function in function_app.app.get_functions()}
# The function serving each list whose nextLink a test follows, by the link's path and its route's parameters.
LISTS = {
    re.compile("/api/conflicts"): "list_conflicts",
    re.compile("/api/claims"): "list_claims_needing_attention",
    re.compile("/api/claim-list"): "list_claims",
    re.compile("/api/claims/(?P<claimId>[^/]+)/history"): "list_claim_history",
    # Not a list: the poll address of Check and claim (wait), which a test follows as the engine does.
    re.compile("/api/claims/(?P<claimId>[^/]+)/wait"): "wait_for_claim",
    re.compile("/api/perform/(?P<claimId>[^/]+)/wait"): "wait_for_perform",
}


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, headers with lower-case names, and the JSON body."""

    status: int
    headers: dict[str, str]
    body: Any

    @property
    def code(self) -> str:
        code: str = self.body["error"]["code"]
        return code

    @property
    def targets(self) -> list[str | None]:
        return [detail.get("target") for detail in self.body["error"]["details"]]


def _reply(status: int, headers: list[tuple[str, str]], raw: bytes) -> Reply:
    names = {name.lower(): value for name, value in headers}
    if status == 202 and not raw:
        return Reply(status, names, None)  # the polling trigger's "nothing new": only Location and Retry-After
    assert names.get("content-type", "").startswith("application/json"), f"{status} without a JSON body: {raw[:200]!r}"
    return Reply(status, names, json.loads(raw))


def _raw(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    return b"" if body is None else json.dumps(body).encode()


class Api:
    """Calls one function of the app by name; a subclass carries the request there."""

    def call(
        self,
        name: str,
        body: Any = None,
        *,
        route: Route | None = None,
        params: Query | None = None,
        method: str | None = None,
        headers: Route | None = None,
    ) -> Reply:
        trigger: Any = FUNCTIONS[name].get_trigger()
        method = method or str(trigger.methods[0].value)
        path = str(trigger.route).replace("{*", "{").format(**(route or {}))
        return self.send(name, method, path, route or {}, params or {}, _raw(body), headers or {})

    def follow(self, link: str) -> Reply:
        """GET a link the service handed out (a ``nextLink``)."""
        parts = urlsplit(link)
        served = [(name, found.groupdict()) for path, name in LISTS.items() if (found := path.fullmatch(parts.path))]
        assert served, link
        (name, route), *_ = served
        return self.call(name, route=route, params=dict(parse_qsl(parts.query)))

    def send(self, name: str, method: str, path: str, route: Route, params: Query, raw: bytes, headers: Route) -> Reply:
        raise NotImplementedError


class FunctionsApi(Api):
    """Calls the user function itself, as the Functions host would."""

    def send(self, name: str, method: str, path: str, route: Route, params: Query, raw: bytes, headers: Route) -> Reply:
        query = f"?{urlencode(params)}" if params else ""
        request = func.HttpRequest(
            method,
            f"http://localhost:7071/api/{path}{query}",
            headers={"Content-Type": "application/json", **headers},
            params=dict(params),  # the host gives the function one value a name
            route_params=route,
            body=raw,
        )
        response: func.HttpResponse = FUNCTIONS[name].get_user_function()(request)
        return _reply(response.status_code, list(response.headers.items()), response.get_body())


class ServerApi(Api):
    """Real HTTP to the local server, one connection per request."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.host, self.port = address

    def send(self, name: str, method: str, path: str, route: Route, params: Query, raw: bytes, headers: Route) -> Reply:
        query = f"?{urlencode(params)}" if params else ""
        return self.request(method, f"/api/{path}{query}", raw, headers)

    def follow(self, link: str) -> Reply:
        parts = urlsplit(link)
        assert (parts.hostname, parts.port) == (self.host, self.port), link
        return self.request("GET", f"{parts.path}?{parts.query}")

    def request(self, method: str, target: str, raw: bytes = b"", headers: Route | None = None) -> Reply:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(
                method, target, body=raw, headers={"Content-Type": "application/json", **(headers or {})}
            )
            response = connection.getresponse()
            return _reply(response.status, response.getheaders(), response.read())
        finally:
            connection.close()


def succeed(api: Api, answer: dict[str, Any], **fields: Any) -> Reply:
    """Record ``succeeded`` for the attempt a Check and claim answer granted."""
    body = {"claimToken": answer["claimToken"], "outcome": "succeeded", **fields}
    return api.call("record_result", body, route={"claimId": answer["claimId"]})
