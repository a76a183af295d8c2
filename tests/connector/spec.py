"""Reading the connector's files: where they are, and walks over every operation, parameter and schema."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CONNECTOR = REPO / "connector"
# The Power Platform schemas, vendored (schemas/README.md), and the team's reference copy they came from,
# beside the repository (or beside the folder of worktrees it is checked out in) where it is there.
SCHEMAS = Path(__file__).resolve().parent / "schemas"
SHARED_SCHEMAS = next(
    (
        folder / "shared" / "reference" / "powerplatform-schemas"
        for folder in (REPO.parent, REPO.parent.parent)
        if (folder / "shared" / "reference" / "powerplatform-schemas").is_dir()
    ),
    REPO.parent / "shared" / "reference" / "powerplatform-schemas",
)

DEFINITIONS = {
    "key": CONNECTOR / "apiDefinition.swagger.json",
    "entra": CONNECTOR / "entra" / "apiDefinition.swagger.json",
}
PROPERTIES = {
    "key": CONNECTOR / "apiProperties.json",
    "entra": CONNECTOR / "entra" / "apiProperties.json",
}
METHODS = ("get", "put", "post", "delete", "options", "head", "patch")
# A publisher as one fills in connector/README.md's publisher file: real-looking, none of it reserved.
PUBLISHER = {
    "name": "Northbank Logistics integration team",
    "email": "integration@northbank-logistics.eu",
    "supportUrl": "https://northbank-logistics.eu/oncegate/support",
    "website": "https://northbank-logistics.eu/oncegate",
    "privacyPolicy": "https://northbank-logistics.eu/privacy",
    "host": "oncegate.northbank-logistics.eu",
}

Schema = dict[str, Any]


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def load_schema(name: str) -> Schema:
    """One of the repository's JSON schemas, without the comments that make it invalid JSON."""
    text = (SCHEMAS / name).read_text(encoding="utf-8")
    # Three `// TODO` lines and one trailing `// ...` comment; `://` in URLs is never preceded by a space.
    text = re.sub(r"(^|\s)//[^\n\"]*$", "", text, flags=re.MULTILINE)
    schema: Schema = json.loads(text)
    return schema


@dataclass(frozen=True)
class Op:
    path: str
    method: str
    spec: Schema

    @property
    def id(self) -> str:
        return str(self.spec.get("operationId", f"{self.method.upper()} {self.path}"))


def operations(doc: Schema) -> list[Op]:
    return [
        Op(path, method, spec)
        for path, item in doc["paths"].items()
        for method, spec in item.items()
        if method in METHODS
    ]


def operation(doc: Schema, operation_id: str) -> Op:
    return next(op for op in operations(doc) if op.id == operation_id)


def parameter(op: Op, name: str) -> Schema:
    return next(param for param in op.spec.get("parameters", []) if param["name"] == name)


def resolve(doc: Schema, schema: Schema) -> Schema:
    while "$ref" in schema:
        schema = doc["definitions"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def success_schema(doc: Schema, op: Op) -> Schema:
    return resolve(doc, op.spec["responses"]["200"]["schema"])


def schemas(doc: Schema) -> Iterator[tuple[str, Schema]]:
    """Every schema object in the document, nested ones included, with where it is."""
    roots: list[tuple[str, Schema]] = [(f"#/definitions/{name}", node) for name, node in doc["definitions"].items()]
    for op in operations(doc):
        for param in op.spec.get("parameters", []):
            if "schema" in param:
                roots.append((f"{op.id} parameter {param['name']}", param["schema"]))
        for status, response in op.spec["responses"].items():
            if "schema" in response:
                roots.append((f"{op.id} response {status}", response["schema"]))
    for where, root in roots:
        yield from _walk(where, root)


def _walk(where: str, node: Schema) -> Iterator[tuple[str, Schema]]:
    yield where, node
    for name, child in node.get("properties", {}).items():
        yield from _walk(f"{where}.{name}", child)
    if isinstance(node.get("items"), dict):
        yield from _walk(f"{where}[]", node["items"])
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(f"{where}{{}}", node["additionalProperties"])


def properties(doc: Schema) -> Iterator[tuple[str, Schema]]:
    """Every property of every object schema: what the designer shows as a field or as dynamic content."""
    for where, node in schemas(doc):
        for name, child in node.get("properties", {}).items():
            yield f"{where}.{name}", child


def descriptions(doc: Schema) -> Iterator[tuple[str, str]]:
    """Every description a maker can read, with where it is."""
    yield "info", doc["info"]["description"]
    for op in operations(doc):
        yield op.id, op.spec["description"]
        for param in op.spec.get("parameters", []):
            yield f"{op.id} parameter {param['name']}", param["description"]
        for status, response in op.spec["responses"].items():
            yield f"{op.id} response {status}", response["description"]
            for header, spec in response.get("headers", {}).items():
                yield f"{op.id} response {status} header {header}", spec["description"]
    for where, node in properties(doc):
        yield where, node["description"]
