"""The models' JSON schemas in Swagger 2.0, with the designer text that each field carries.

Swagger 2.0 has no ``anyOf``, no null type and no ``$defs``, and the designer ignores anything beside
a ``$ref``. So ``Optional[X]`` becomes ``X`` (the service omits absent fields rather than sending
null), enums get display names, and nested models are inlined so that every property carries its
own ``x-ms-summary``, ``description`` and ``x-ms-visibility`` from ``oncegate.models.designer``.
A field without them, or an enum value without a display name, stops the generator, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel

from oncegate.domain.fingerprint_rules import FingerprintPreset
from oncegate.domain.performing import PerformDecision
from oncegate.domain.statuses import (
    AnswerStatus,
    AttentionReason,
    ClaimStatus,
    ConflictOrigin,
    ConflictStatus,
    Decision,
    EventKind,
    Outcome,
    Resolution,
    SettledOutcome,
)
from oncegate.models.base import INTERNAL, PARTS
from oncegate.models.perform import PerformMethod

Schema = dict[str, Any]

DESIGNER_KEYS = ("x-ms-summary", "description", "x-ms-visibility")
# The value and display name by which a query parameter spells "none" (oncegate.models.designer's ``null``).
NULL_VALUE = "x-null-value"

ENUM_NAMES: dict[type[StrEnum], dict[str, str]] = {
    Decision: {
        "proceed": "Proceed",
        "duplicate": "Duplicate",
        "in_progress": "In progress",
        "reconcile": "Reconcile",
        "conflict": "Conflict",
        "blocked": "Blocked",
    },
    ClaimStatus: {
        "in_progress": "In progress",
        "succeeded": "Succeeded",
        "failed": "Failed",
        "unknown": "Unknown",
        "released": "Released",
    },
    AnswerStatus: {
        "in_progress": "In progress",
        "succeeded": "Succeeded",
        "failed": "Failed",
        "unknown": "Unknown",
        "released": "Released",
        "none": "No claim",
    },
    Outcome: {"succeeded": "Succeeded", "failed": "Failed", "unknown": "Unknown"},
    FingerprintPreset: {
        "sharepoint": "SharePoint item (When an item is created or modified)",
        "dataverse": "Dataverse row (When a row is added, modified or deleted)",
    },
    SettledOutcome: {"succeeded": "Succeeded: the target system holds the record", "failed": "Failed: it holds none"},
    ConflictStatus: {"open": "Open", "resolved": "Resolved"},
    Resolution: {"accept_new": "Accept the new data", "keep_original": "Keep the original", "dismiss": "Dismiss"},
    EventKind: {
        "claim": "Claim",
        "result": "Result",
        "release": "Release",
        "conflict": "Conflict",
        "resolution": "Resolution",
        "review": "Review",
        "call": "Call sent by Perform once",
    },
    PerformDecision: {
        "performed": "Performed: the call was made now",
        "duplicate": "Duplicate: made before, nothing sent",
        "in_progress": "In progress",
        "conflict": "Conflict",
        "blocked": "Blocked",
        "failed": "Failed",
        "reconcile": "Reconcile: the outcome is unknown",
    },
    PerformMethod: {"POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE", "GET": "GET"},
    AttentionReason: {
        "lease_expired": "Lease expired without a result",
        "unknown": "Outcome unknown for too long",
        "failed_unreviewed": "Failed for good, not reviewed",
    },
    ConflictOrigin: {"claim": "Found by Check and claim", "reported": "Reported by a flow"},
}


class _Translator:
    """Turns one model's JSON schema into Swagger 2.0 with the designer text of its fields."""

    KEPT = ("type", "format", "pattern", "minLength", "maxLength", "minimum", "maximum", "enum")

    def __init__(self, defs: Mapping[str, Schema]) -> None:
        self.defs = defs

    def model(self, name: str, schema: Schema) -> Schema:
        properties = {
            prop: _retitled({**self.node(node), **designer_text(name, prop, node)}, node.get(PARTS, {}))
            for prop, node in schema.get("properties", {}).items()
        }
        result: Schema = {"type": "object", "properties": properties}
        if schema.get("required"):
            result["required"] = list(schema["required"])
        if schema.get("additionalProperties") is False:
            result["additionalProperties"] = False
        return result

    def node(self, node: Schema) -> Schema:
        if "anyOf" in node:
            # Optional[X]: the service leaves out an absent field instead of sending null.
            options = [option for option in node["anyOf"] if option != {"type": "null"}]
            if len(options) != 1:
                raise ValueError(f"cannot express {node['anyOf']} in Swagger 2.0")
            return self.node(options[0])
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            target = self.defs[name]
            if "enum" in target:
                return enum_schema(name, target["enum"])
            if "properties" in target:
                return self.model(name, target)
            return {}  # JsonValue: any JSON, which Swagger 2.0 writes as a schema without a type
        result = {key: node[key] for key in self.KEPT if key in node}
        if node.get("type") == "array":
            result["items"] = self.node(node["items"])
        values = self.node(node["additionalProperties"]) if isinstance(node.get("additionalProperties"), dict) else {}
        if values:
            result["additionalProperties"] = values
        return result


def _retitled(translated: Schema, parts: Mapping[str, Schema]) -> Schema:
    """A nested model's fields with the title and help text its place gives them (``designer``'s ``parts``)."""
    unknown = set(parts) - set(translated.get("properties", {}))
    if unknown:
        raise KeyError(f"designer parts name no field of the nested model: {sorted(unknown)}")
    for field, text in parts.items():
        translated["properties"][field] = {**translated["properties"][field], **text}
    return translated


def designer_text(owner: str, prop: str, node: Schema) -> Schema:
    """The title, help text and visibility that the field ``owner.prop`` carries, as Swagger extensions."""
    if "x-ms-summary" not in node or "description" not in node:
        raise KeyError(f"{owner}.{prop} has no designer text: annotate the field with oncegate.models.designer")
    return {key: node[key] for key in DESIGNER_KEYS if key in node}


def enum_schema(name: str, values: Sequence[str]) -> Schema:
    names = next((names for enum, names in ENUM_NAMES.items() if enum.__name__ == name), None)
    if names is None or set(names) != set(values):
        raise KeyError(f"enum {name} needs a display name for each of {list(values)} in ENUM_NAMES")
    return {
        "type": "string",
        "enum": list(values),
        "x-ms-enum-values": [{"value": value, "displayName": names[value]} for value in values],
    }


def model_definition(name: str, model: type[BaseModel], mode: Literal["validation", "serialization"]) -> Schema:
    schema = model.model_json_schema(by_alias=True, mode=mode)
    return _Translator(schema.get("$defs", {})).model(name, schema)


def query_parameters(model: type[BaseModel]) -> list[Schema]:
    """The fields of a query model as Swagger query parameters."""
    schema = model.model_json_schema(by_alias=True, mode="validation")
    translator = _Translator(schema.get("$defs", {}))
    required = set(schema.get("required", []))
    parameters = []
    for prop, node in schema["properties"].items():
        translated = translator.node(node)
        if NULL_VALUE in node:
            null = {"value": node[NULL_VALUE]["value"], "displayName": node[NULL_VALUE]["displayName"]}
            translated["enum"] = [*translated["enum"], null["value"]]
            translated["x-ms-enum-values"] = [*translated["x-ms-enum-values"], null]
        text = designer_text(model.__name__, prop, node)
        # An internal parameter the designer never asks for may be required only with a default: one without
        # (a poll's ticket, which the engine sends from a Location address) is declared optional, and the
        # service still refuses a request without it.
        asked = text.get("x-ms-visibility") != INTERNAL or node.get("default") is not None
        parameter: Schema = {"name": prop, "in": "query", "required": prop in required and asked, **translated}
        if node.get("default") is not None:
            parameter["default"] = node["default"]
        parameters.append({**parameter, **text})
    return parameters
