"""What every model of the contract shares: wire names, size limits, field types and designer text.

Field names are snake_case in Python and camelCase on the wire (``runId``, ``claimToken``).
Requests forbid unknown fields, so a misspelt field is a 400 naming it rather than a value
silently ignored. A body's fields take only their own JSON type (``"60"`` is not a number, ``0``
not a boolean), while a query's parameters, strings by nature, are read as their types
(:class:`_Query`). Size limits are checked on the canonical JSON of a value.

Every field that the connector sends or shows carries its designer text (:func:`designer`), which
``tools/connector`` writes into the connector's definition: renaming a field takes its text along.
"""

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue
from pydantic.fields import FieldInfo

# The contract's bounds live in the domain; the models check requests against them.
from oncegate.domain.limits import MAX_LEASE_SECONDS, MAX_NESTING, MIN_LEASE_SECONDS, json_depth
from oncegate.domain.limits import json_size as json_size  # the size limits' unit, for the models that check them


def stored_json(name: str, limit_bytes: int) -> AfterValidator:
    """The limits of a JSON value OnceGate keeps and shows again (a result's data, a conflict's details): at most
    ``limit_bytes`` as JSON, and nested no deeper than every answer that shows it can be written."""

    def checked(value: JsonValue) -> JsonValue:
        if json_size(value) > limit_bytes:
            raise ValueError(f"{name} is over {limit_bytes} bytes as JSON")
        if json_depth(value) > MAX_NESTING:
            raise ValueError(f"{name} nests objects and arrays more than {MAX_NESTING} deep")
        return value

    return AfterValidator(checked)


def shown(value: Any) -> Any:
    """A kept JSON value as an answer shows it (``SHOWN_JSON``)."""
    # Kept before the limit: nested past it, a value every answer could not write (a 500 for each read) is shown as
    # its compact JSON text, which all can, and from which nothing is lost.
    if isinstance(value, dict | list) and json_depth(value) > MAX_NESTING:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return value


# A kept JSON value (a result's data, a conflict's details) as an answer shows it; put it in the field's Annotated.
SHOWN_JSON = BeforeValidator(shown)
# A history line's details: each member, as SHOWN_JSON shows a value.
SHOWN_MEMBERS = BeforeValidator(
    lambda details: {name: shown(value) for name, value in details.items()} if isinstance(details, dict) else details
)


# The longest cursor handed out: the place of a flow whose name and environment are 256 characters
# of four UTF-8 bytes each, in base64, sealed.
MAX_CURSOR_LENGTH = 4096

# The key under which designer() keeps the text of a nested model's fields (tools/connector reads it).
PARTS = "x-oncegate-parts"

# Where the designer shows a field: up front, behind "Show advanced options", or not at all.
Visibility = Literal["important", "advanced", "internal"]
IMPORTANT: Visibility = "important"
ADVANCED: Visibility = "advanced"
INTERNAL: Visibility = "internal"


def designer(
    summary: str,
    description: str,
    visibility: Visibility | None = None,
    *,
    null: tuple[str, str] | None = None,
    parts: Mapping[str, tuple[str, str]] | None = None,
) -> FieldInfo:
    """The connector designer's title (title case), help text (sentences) and, if set, visibility of a field.

    Put it in the field's ``Annotated``. ``null`` is the value and display name by which a query
    parameter spells "none" (``status=all``), when the action reads it so. ``parts`` retitles the
    fields of a model used in several places (a flow), by field name: title and help text here.
    """
    extra: dict[str, JsonValue] = {"x-ms-summary": summary}
    if visibility:
        extra["x-ms-visibility"] = visibility
    if null:
        extra["x-null-value"] = {"value": null[0], "displayName": null[1]}
    if parts:
        extra[PARTS] = {name: {"x-ms-summary": title, "description": text} for name, (title, text) in parts.items()}
    # The FieldInfo that Field(description=..., json_schema_extra=...) makes, made without Field's forty parameters:
    # a quarter of the instructions, for the 11 fields a first Check and claim's model declares with their text
    # (issue 36's cold start). tests/http/test_cold_start.py holds it to Field's.
    return FieldInfo(description=description, json_schema_extra=extra)


def wire_name(name: str) -> str:
    """A field's name on the wire: ``run_id`` is ``runId``, as pydantic's ``to_camel`` spells a snake_case name.

    Five times quicker than ``to_camel``'s regular expressions, for the 400 fields named when the models are
    imported (issue 36's cold start).
    """
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class _Model(BaseModel):
    # defer_build: a model's validator and serializer are built when it is first used, not when its module is
    # imported, so a new process builds the few its first request needs instead of all of them (issue 36).
    model_config = ConfigDict(alias_generator=wire_name, populate_by_name=True, frozen=True, defer_build=True)


class _Request(_Model):
    # Strict: a body comes decoded from JSON (entrypoints/parse.py), and each field takes its own JSON type
    # only; lax, "60" would be 60 and 0 would be false for every field (issue 31).
    model_config = ConfigDict(
        alias_generator=wire_name, populate_by_name=True, frozen=True, extra="forbid", strict=True
    )


class _Query(_Request):
    """A query's parameters: strings by nature, each read as its field's type (``top=50``, ``attention=true``)."""

    model_config = ConfigDict(strict=False)


def _in_digits(value: Any) -> Any:
    # Lax, a query's number is read as Python's int reads text: "1_0" is 10, "+5", " 5" and "5.0" are 5.
    if isinstance(value, str) and not (value.isascii() and value.isdigit()):
        raise ValueError("must be a whole number written in digits")
    return value


# A whole number in a query (``top=50``): digits only, then the field's bounds.
QueryInteger = Annotated[int, BeforeValidator(_in_digits)]


def _true_or_false(value: Any) -> Any:
    # Lax, a query's boolean took yes, on, 1, t and y for true and their opposites for false, as a body's never
    # does. Any case: PowerShell writes $true into an address as True.
    if isinstance(value, str):
        if value.lower() not in ("true", "false"):
            raise ValueError("must be true or false")
        return value.lower()
    return value


# A boolean in a query (``attention=true``): true or false, in any case.
QueryBoolean = Annotated[bool, BeforeValidator(_true_or_false)]

# An enum field of a request takes the enum's value: strict mode takes only the enum's members from Python, and a
# body comes decoded from JSON, where the value is all there is. Put it in the field's Annotated.
BY_VALUE = Field(strict=False)


Text256 = Annotated[str, Field(min_length=1, max_length=256)]
LeaseSeconds = Annotated[int, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
Scope = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
# A scope's shape, and ':' to name a list within a system (sharepoint:expenses); see domain/keys.py.
Source = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")]
Reference = Annotated[str, Field(min_length=1, max_length=256)]

# Fields that several models share, with the same designer text.
ScopeInput = Annotated[
    Scope,
    designer(
        "Scope",
        "The side effect being protected, such as erp.create-order: 1 to 64 letters, digits, dots, underscores "
        "or hyphens, compared case-insensitively. The same key in two scopes is two independent claims.",
        IMPORTANT,
    ),
]
SourceInput = Annotated[
    Source | None,
    designer(
        "Source System",
        "The system the business object comes from, such as shop-eu or sharepoint:expenses: 1 to 64 letters, "
        "digits, dots, colons, underscores or hyphens, compared case-insensitively. Stored in clear, so that "
        "claims can be found by it; it is not part of the business key.",
        IMPORTANT,
    ),
]
Cursor = Annotated[
    str | None,
    Field(max_length=MAX_CURSOR_LENGTH),
    designer("Cursor", "Where the page starts; the next link carries it.", INTERNAL),
]
NextLink = Annotated[
    str | None, designer("Next Link", "The address of the next page, absent on the last page.", INTERNAL)
]
WARNINGS = designer(
    "Warnings",
    "Codes worth a look: no_fingerprint (changed data cannot be detected), no_flow (the flow was not named), "
    "another_flow_copy (the claim was made by another flow or environment), source_differs (the claim was made "
    "for another source system, which it keeps), rule_matched_nothing (a Fingerprint Include pointer of the scope "
    "matched nothing in Payload: mistyped, it would make every payload alike), and sensitive_key or sensitive_data "
    "(the key, or a field stored as sent, seems to carry personal data and was accepted because the service only "
    "warns).",
)
CHANGED_PARTS = designer(
    "Changed Parts",
    "The parts of Payload that differ from the claim's under the scope's fingerprint rules, as JSON Pointers such as "
    "/Amount or /Lines/2/Qty, never their values: where to look. Present with a conflict when both payloads were "
    "compared part by part; the first 20.",
)
MORE_CHANGED_PARTS = designer(
    "More Changed Parts", "How many more parts changed than Changed Parts names; absent when it names them all."
)
