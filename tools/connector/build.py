"""The connector's whole definition: every operation the app serves, with its parameters and answers.

``python -m tools.connector`` writes ``connector/apiDefinition.swagger.json`` (function key
connection) and ``connector/entra/apiDefinition.swagger.json`` (Microsoft Entra ID connection);
``--check`` writes nothing and exits 1 when a committed file differs, so the definition cannot drift
from the code. The tests run the same check. ``--publisher FILE --out DIR`` writes the package for the
gallery instead: the same definitions with the publisher's contact, pages and host (``publisher``).

The operations are the HTTP functions of ``function_app.app`` (route, method, function name) with
the designer text of ``operations``; the bodies are the models' JSON schemas (``schemas``).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel

from oncegate import __version__, models
from oncegate.entrypoints.operations import Operation
from oncegate.entrypoints.routes import FunctionRoute, function_routes
from oncegate.models import IMPORTANT
from tools.connector import operations
from tools.connector.operations import ERRORS, NOT_OFFERED, OPERATIONS, PATH_PARAMETERS
from tools.connector.publisher import Publisher, PublisherError, read_publisher
from tools.connector.schemas import Schema, model_definition, query_parameters

Auth = Literal["key", "entra"]

COMMAND = "python -m tools.connector"
DEFINITION_FILE = "apiDefinition.swagger.json"
# Where each connection type's definition lives, relative to the connector folder.
VARIANTS: dict[Auth, Path] = {"key": Path(DEFINITION_FILE), "entra": Path("entra") / DEFINITION_FILE}

# The host is replaced at run time by the `dynamichosturl` policy (the connection's Function App
# host). A reserved example name keeps a connector imported without that policy from calling a
# stranger's host with the maker's key. Paths keep their /api prefix and the base path stays "/",
# so the URL is right whether or not the policy's URL replaces the base path too.
PLACEHOLDER_HOST = "oncegate.example.com"
ROUTE_PREFIX = "/api/"

# The publisher's contact, website and privacy policy are not here: OnceGate has no domain of its own, and
# the package for the gallery takes the publisher's (tools/connector/publisher.py, connector/README.md).
TITLE = "OnceGate"
# The string guidance: no product of the platform (nor the word for a programming interface) in it.
DESCRIPTION = (
    "Check and claim before every side effect of a workflow: however often it is triggered, the business "
    "result happens once. Branch on the decision, record the real result, and route changed business data "
    "to its owner instead of silently repeating or skipping it."
)
CATEGORIES = ("IT Operations", "Productivity")

SECURITY_DEFINITIONS: dict[Auth, Schema] = {
    # The gateway sends the connection's key in the header Azure Functions reads.
    "key": {"api_key": {"type": "apiKey", "in": "header", "name": "x-functions-key"}},
    "entra": {
        "oauth2_auth": {
            "type": "oauth2",
            "flow": "accessCode",
            "authorizationUrl": "https://login.microsoftonline.com/common/oauth2/authorize",
            "tokenUrl": "https://login.microsoftonline.com/common/oauth2/token",
            "scopes": {},
        }
    },
}

# The trigger answers a ConflictList that never has a next page: ConflictList without nextLink.
BATCH_DEFINITION, BATCH_SOURCE = "ConflictBatch", "ConflictList"
# Every answer of the table's entries, and the error body every action may answer.
RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    models.ErrorBody,
    *dict.fromkeys(operation.response_model for operation in OPERATIONS.values()),
)

RETRY_AFTER_HEADER = {
    "Retry-After": {
        "type": "integer",
        "x-ms-summary": "Retry After",
        "description": "How many seconds to wait before calling again.",
    }
}
LOCATION_HEADER = {
    "Location": {
        "type": "string",
        "x-ms-summary": "Location",
        "description": "The address to poll next, carrying the trigger state.",
    }
}
WAIT_LOCATION_HEADER = {
    "Location": {
        "type": "string",
        "x-ms-summary": "Location",
        "description": "The address to poll next, carrying the waiting run's request, sealed.",
    }
}
NO_NEW_CONFLICT = "No new conflict yet: poll the Location address again after the given seconds."
# Every error answer has the error body, so a flow can branch on error.code whatever the status.
ERROR_SCHEMA = {"$ref": f"#/definitions/{models.ErrorBody.__name__}"}
OTHER_ERROR = (
    "Any other error, such as a 500 internal_error, in the same error body: branch on its code. Only a function "
    "key that the host refuses gets a 401 without a body."
)
# With Entra ID the app checks the token and the app role itself, and answers in its error body.
SIGN_IN_ERRORS = {
    401: "The caller is not signed in, or its access token is not one for this app (unauthorized).",
    403: "The signed-in caller lacks the app role that the action needs (forbidden).",
}


class Served(NamedTuple):
    """An operation at the route and method where the app serves it."""

    route: str
    method: str
    operation: Operation


def app_routes() -> Sequence[FunctionRoute]:
    """The HTTP functions of the app that Azure runs."""
    import function_app  # reads the app's settings at import, so only when a definition is built

    return function_routes(function_app.app)


def served(routes: Sequence[FunctionRoute]) -> list[Served]:
    """Each operation with its route and method, in the order of OPERATIONS; the catch-all is no operation."""
    by_name = {route.name: route for route in routes if not route.catch_all}
    table = f"{operations.__name__}.OPERATIONS"
    unserved = sorted(set(OPERATIONS) - set(by_name))
    if unserved:
        raise KeyError(f"{table} names {unserved[0]}, which is no function of function_app.app")
    undescribed = sorted(set(by_name) - set(OPERATIONS) - NOT_OFFERED)
    if undescribed:
        raise KeyError(f"function_app.{undescribed[0]} has no operation: add it to {table}")
    result = []
    for name, operation in OPERATIONS.items():
        route = by_name[name]
        if len(route.methods) != 1:
            raise ValueError(f"function_app.{name} takes {sorted(route.methods)}: an operation has one method")
        (method,) = route.methods
        result.append(Served(route.route, method.lower(), operation))
    return result


def definitions() -> dict[str, Schema]:
    """Every request and response body: requests as the service parses them, responses as it writes them."""
    result = {
        operation.body.__name__: model_definition(operation.body.__name__, operation.body, "validation")
        for operation in OPERATIONS.values()
        if operation.body is not None
    }
    for model in RESPONSE_MODELS:
        result[model.__name__] = model_definition(model.__name__, model, "serialization")
    batch = copy.deepcopy(result[BATCH_SOURCE])
    del batch["properties"]["nextLink"]
    result[BATCH_DEFINITION] = batch
    return dict(sorted(result.items()))


def path_parameter(name: str) -> Schema:
    if name not in PATH_PARAMETERS:
        raise KeyError(f"the route parameter {name} has no designer text in PATH_PARAMETERS")
    spec = PATH_PARAMETERS[name]
    return {
        "name": name,
        "in": "path",
        "required": True,
        "type": "string",
        "pattern": f"^{spec.pattern}$",
        "x-ms-url-encoding": "single",
        "x-ms-summary": spec.summary,
        "description": spec.description,
        "x-ms-visibility": IMPORTANT,  # the action cannot run without it
        **spec.extra,
    }


def parameters_of(route: str, operation: Operation) -> list[Schema]:
    names = [segment[1:-1] for segment in route.split("/") if segment.startswith("{")]
    parameters = [path_parameter(name) for name in names]
    if operation.query_model is not None:
        parameters += query_parameters(operation.query_model)
    if operation.body is not None:
        parameters.append(
            {
                "name": "body",
                "in": "body",
                "required": True,
                "schema": {"$ref": f"#/definitions/{operation.body.__name__}"},
                "x-ms-summary": "Request",
                "description": operation.designer.body_description,
            }
        )
    return parameters


def response_name(operation: Operation) -> str:
    """The definition of the operation's answer: a polling trigger's batch has no next page (ConflictBatch)."""
    if operation.designer.extra.get("x-ms-trigger"):
        return BATCH_DEFINITION
    return operation.response_model.__name__


def responses_of(operation: Operation, auth: Auth = "key") -> Schema:
    designer = operation.designer
    answer = {"$ref": f"#/definitions/{response_name(operation)}"}
    success: Schema = {"description": designer.success, "schema": answer}
    responses: Schema = {"200": success}
    if designer.extra.get("x-ms-trigger"):
        # The Logic Apps polling contract: Location carries the state, Retry-After the interval.
        success["headers"] = {**LOCATION_HEADER, **RETRY_AFTER_HEADER}
        responses["202"] = {"description": NO_NEW_CONFLICT, "headers": {**LOCATION_HEADER, **RETRY_AFTER_HEADER}}
    if designer.accepted:
        # The asynchronous pattern: Power Automate and Logic Apps poll Location until the answer is not 202.
        responses["202"] = {
            "description": designer.accepted,
            "schema": answer,
            "headers": {**WAIT_LOCATION_HEADER, **RETRY_AFTER_HEADER},
        }
    described = {status: ERRORS[status] for status in designer.errors}
    if 409 in described:
        described[409] = designer.conflict_description
    # Every action but health, which anyone may call, needs a signed-in caller with Entra ID.
    if auth == "entra" and operation.role is not None:
        described |= SIGN_IN_ERRORS
    for status, description in sorted(described.items()):
        responses[str(status)] = {"description": description, "schema": ERROR_SCHEMA}
        if status == 503:
            responses[str(status)]["headers"] = RETRY_AFTER_HEADER
    responses["default"] = {"description": OTHER_ERROR, "schema": ERROR_SCHEMA}
    return responses


def operation_object(route: str, operation: Operation, auth: Auth = "key") -> Schema:
    designer = operation.designer
    return {
        "operationId": designer.operation_id,
        "summary": designer.summary,
        "description": designer.description,
        "x-ms-visibility": designer.visibility,
        **designer.extra,
        "parameters": parameters_of(route, operation),
        "responses": responses_of(operation, auth),
    }


def paths(auth: Auth = "key") -> dict[str, Schema]:
    result: dict[str, Schema] = {}
    for route, method, operation in served(app_routes()):
        result.setdefault(ROUTE_PREFIX + route, {})[method] = operation_object(route, operation, auth)
    return result


def build(auth: Auth = "key", publisher: Publisher | None = None) -> Schema:
    """The whole Swagger 2.0 document of the connector for one connection type, with the publisher's facts if given."""
    security_definitions = SECURITY_DEFINITIONS[auth]
    info: Schema = {"title": TITLE, "description": DESCRIPTION, "version": __version__}
    pages: list[Schema] = []
    if publisher is not None:
        info["contact"] = {"name": publisher.name, "url": publisher.support_url, "email": publisher.email}
        pages = [
            {"propertyName": "Website", "propertyValue": publisher.website},
            {"propertyName": "Privacy policy", "propertyValue": publisher.privacy_policy},
        ]
    return {
        "swagger": "2.0",
        "info": info,
        "host": publisher.host if publisher is not None else PLACEHOLDER_HOST,
        "basePath": "/",
        "schemes": ["https"],
        "consumes": ["application/json"],
        "produces": ["application/json"],
        "paths": paths(auth),
        "definitions": definitions(),
        "securityDefinitions": security_definitions,
        "security": [{name: []} for name in security_definitions],
        "x-ms-connector-metadata": [
            *pages,
            {"propertyName": "Categories", "propertyValue": ";".join(CATEGORIES)},
        ],
    }


def render(document: Schema) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def rendered(connector_dir: Path, publisher: Publisher | None = None) -> dict[Path, str]:
    """Each definition file under ``connector_dir`` and the text it should have."""
    return {connector_dir / path: render(build(auth, publisher)) for auth, path in VARIANTS.items()}


# What a package holds besides the definitions, copied as they are (paconn and pac read them beside them).
PACKAGE_FILES = ("icon.png",)
# The properties, each with the publisher as its ``publisher``; and the readme a submission carries, whose
# "## Publisher:" heading names the publisher (the PowerPlatformConnectors repository's readme template).
PROPERTIES_FILES = ("apiProperties.json", "entra/apiProperties.json")
README = "README.md"
PACKAGE_README = "readme.md"
PUBLISHER_HEADING = "## Publisher: "


def package(connector_dir: Path, publisher_file: Path, out: Path) -> None:
    """The package for the gallery: the definitions, properties and readme with the publisher's facts, and the icon."""
    publisher = read_publisher(publisher_file)
    for name in (*PACKAGE_FILES, *PROPERTIES_FILES):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE_FILES:
        (out / name).write_bytes((connector_dir / name).read_bytes())
    for name in PROPERTIES_FILES:
        properties = json.loads((connector_dir / name).read_text(encoding="utf-8"))
        properties["properties"]["publisher"] = publisher.name
        (out / name).write_text(render(properties), encoding="utf-8")
    lines = (connector_dir / README).read_text(encoding="utf-8").splitlines(keepends=True)
    heading = PUBLISHER_HEADING + publisher.name + "\n"
    readme = [heading if line.startswith(PUBLISHER_HEADING) else line for line in lines]
    (out / PACKAGE_README).write_text("".join(readme), encoding="utf-8")
    for path, text in rendered(out, publisher).items():
        path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write or check the connector's definitions.")
    parser.add_argument("--connector-dir", type=Path, default=Path("connector"), help="default: ./connector")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is out of date")
    parser.add_argument("--publisher", type=Path, help="with --out: the publisher's JSON (connector/README.md)")
    parser.add_argument("--out", type=Path, help="with --publisher: write the package for the gallery here")
    args = parser.parse_args(argv)
    if (args.publisher is None) != (args.out is None) or (args.out is not None and args.check):
        parser.error("--publisher and --out go together, without --check")
    if args.out is not None:
        try:
            package(args.connector_dir, args.publisher, args.out)
        except PublisherError as exc:
            print(f"No package written: {exc}", file=sys.stderr)
            return 1
        print(f"{args.out} written with {args.publisher}", file=sys.stderr)
        return 0
    stale = []
    for path, text in rendered(args.connector_dir).items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for path in stale:
        verb = f"is out of date: run {COMMAND}" if args.check else "written"
        print(f"{path} {verb}", file=sys.stderr)
    return 1 if args.check and stale else 0
