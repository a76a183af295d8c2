"""The Bicep under ``infra/`` checked against Microsoft's generated Azure type definitions.

The definitions are the files the Bicep compiler itself checks templates against (Azure/bicep-types-az,
``generated/``), vendored unchanged under ``tests/infra/types/`` for the providers and API versions the
templates use (``tests/infra/types/README.md``). What is checked, on the tree-sitter syntax tree:

- every resource's type and API version exists;
- every property of a resource body, at every depth: its name (with its case), its value against the
  property's type (allowed values of a string, bounds of a string or integer, the kind of value), the
  required properties present, no read-only property written;
- ``parent``: a resource of the parent type; an ``existing`` resource: its name fits its type;
- every ``symbol.a.b`` read of a resource: each property exists (with its case), none is write-only;
- modules: the file exists, every parameter given is declared there, every parameter without a default
  is given, values fit the parameter's type, ``@allowed`` values and bounds, a ``@secure()`` value goes to a
  ``@secure()`` parameter, and every ``module.outputs.x`` read is an output of the module (whose declared
  type then counts as the value's);
- a parameter's default fits its own decorators; an output's value fits its declared type;
- every identifier used as a value is a declared symbol or a loop variable.

Expressions known only at deployment (a function of parameters, a reference to another resource) are
not evaluated: a value is checked where it is a literal, a variable leading to literals, a ternary of
those, a ``union()`` of objects, or a parameter (its declared type and ``@allowed`` values).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tree_sitter import Node

from tests.infra.bicep import (
    BicepFile,
    Declaration,
    NotLiteral,
    arguments,
    call_name,
    line,
    literal,
    loop_variables,
    properties,
    references,
    string_value,
    text,
    unwrap,
)

TYPES = Path(__file__).resolve().parent / "types"
REQUIRED, READ_ONLY, WRITE_ONLY = 1, 2, 4
# Keys of a resource body that are Bicep's own, not the resource type's.
BICEP_RESOURCE_KEYS = {"parent", "scope", "dependsOn"}
EXISTING_KEYS = {"name", "parent", "scope"}
MODULE_KEYS = {"name", "params", "scope", "dependsOn"}
# What a few functions return, so that their result can be checked against a property's type.
FUNCTION_KINDS = {
    **dict.fromkeys(
        (
            "guid",
            "uniqueString",
            "toLower",
            "toUpper",
            "format",
            "subscriptionResourceId",
            "resourceId",
            "tenantResourceId",
            "extensionResourceId",
            "substring",
            "replace",
            "trim",
            "string",
            "base64",
            "uri",
        ),
        "string",
    ),
    **dict.fromkeys(("length", "int", "indexOf", "lastIndexOf"), "int"),
    **dict.fromkeys(("empty", "contains", "startsWith", "endsWith", "bool", "equals"), "bool"),
    **dict.fromkeys(("array", "split", "items", "filter", "map", "range"), "array"),
}
BOOLEAN_OPERATORS = {"==", "!=", "=~", "!~", "<", "<=", ">", ">=", "&&", "||"}
LITERAL_KINDS = {"string": "string", "number": "int", "boolean": "bool", "object": "object", "array": "array"}
TYPE_KINDS = {
    "StringType": "string",
    "StringLiteralType": "string",
    "IntegerType": "int",
    "BooleanType": "bool",
    "ObjectType": "object",
    "DiscriminatedObjectType": "object",
    "ArrayType": "array",
}


@dataclass(frozen=True)
class TypeRef:
    """One entry of one ``types.json``: references inside it are relative to that file."""

    entries: tuple[dict[str, Any], ...]
    index: int

    @property
    def entry(self) -> dict[str, Any]:
        return self.entries[self.index]

    @property
    def kind(self) -> str:
        return str(self.entry["$type"])

    def ref(self, reference: dict[str, str]) -> TypeRef:
        target = reference["$ref"]
        assert target.startswith("#/"), f"cross-file reference {target}"
        return TypeRef(self.entries, int(target[2:]))


class Types:
    """The resource types of every ``types.json`` under a folder, by ``Type@version``."""

    def __init__(self, folder: Path = TYPES) -> None:
        self.folder = folder
        self.resources: dict[str, TypeRef] = {}
        self.files: dict[str, Path] = {}
        for path in sorted(folder.rglob("types.json")):
            entries = tuple(json.loads(path.read_text(encoding="utf-8")))
            for index, entry in enumerate(entries):
                if entry["$type"] == "ResourceType":
                    self.resources[entry["name"]] = TypeRef(entries, index)
                    self.files[entry["name"]] = path

    def resource(self, name: str) -> TypeRef | None:
        return self.resources.get(name)

    def versions(self, kind: str) -> list[str]:
        return sorted(name.partition("@")[2] for name in self.resources if name.partition("@")[0] == kind)

    def body(self, name: str) -> TypeRef | None:
        resource = self.resource(name)
        return resource.ref(resource.entry["body"]) if resource else None


def object_members(ref: TypeRef, discriminator_value: str | None = None) -> tuple[dict[str, Any], TypeRef | None]:
    """The properties (name -> ``{"type", "flags"}``) of an object type, and its additionalProperties type.

    A discriminated object type (``sites/config`` by its ``name``) needs the discriminator's value; without
    it only the base properties are known, and anything else is allowed.
    """
    entry = ref.entry
    if ref.kind == "ObjectType":
        extra = entry.get("additionalProperties")
        return dict(entry.get("properties", {})), ref.ref(extra) if extra else None
    if ref.kind == "DiscriminatedObjectType":
        members = dict(entry.get("baseProperties", {}))
        element = entry["elements"].get(discriminator_value) if discriminator_value is not None else None
        if element is None:
            return members, TypeRef(({"$type": "AnyType"},), 0)
        variant, _ = object_members(ref.ref(element))
        return {**members, **variant}, None
    return {}, None


def describe(ref: TypeRef) -> str:
    entry = ref.entry
    if ref.kind == "StringLiteralType":
        return repr(entry["value"])
    if ref.kind == "UnionType":
        return " | ".join(describe(ref.ref(element)) for element in entry["elements"])
    return TYPE_KINDS.get(ref.kind, ref.kind)


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path.as_posix()}:{self.line}: {self.message}"


class Checker:
    """Checks a folder of Bicep files (``main.bicep`` and the modules it uses)."""

    def __init__(self, folder: Path, types: Types | None = None) -> None:
        self.folder = folder
        self.types = types or Types()
        self.files = {path: BicepFile(path) for path in sorted(folder.rglob("*.bicep"))}
        # A module's file by its resolved path: resolved once each, not at every module a template declares.
        self._resolved = {path.resolve(): file for path, file in self.files.items()}
        self.problems: list[Problem] = []

    def run(self) -> list[str]:
        self.problems = []
        for file in self.files.values():
            self.check_symbols(file)
            for resource in file.declarations("resource"):
                self.check_resource(file, resource)
            for module in file.declarations("module"):
                self.check_module(file, module)
            for param in file.declarations("param"):
                if param.value is not None:
                    self.check_argument(file, param.value, param, f"param {param.name}: the default")
            for output in file.declarations("output"):
                self.check_output(file, output)
            self.check_member_reads(file)
        return [str(problem) for problem in self.problems]

    # -- reporting -------------------------------------------------------------------------------------
    def report(self, file: BicepFile, node: Node | int, message: str) -> None:
        where = node if isinstance(node, int) else line(node)
        self.problems.append(Problem(file.path.relative_to(self.folder), where, message))

    # -- identifiers ----------------------------------------------------------------------------------
    def check_symbols(self, file: BicepFile) -> None:
        declared = {statement.name for statement in file.statements if statement.keyword != "output"}
        loop_names = loop_variables(file.root)
        for node in references(file.root):
            name = text(node)
            if name in declared or name in loop_names or name in ("az", "sys"):
                continue
            self.report(file, node, f"'{name}' is not declared in {file.path.name}")

    # -- resources ------------------------------------------------------------------------------------
    def check_resource(self, file: BicepFile, resource: Declaration) -> None:
        name = resource.declared_type
        kind, _, version = name.partition("@")
        where = f"resource {resource.name} ({name})" + (" existing" if resource.existing else "")
        body = resource.value
        if self.types.resource(name) is None:
            known = self.types.versions(kind)
            if known:
                detail = f"no API version {version} in Microsoft's type definitions (known here: {', '.join(known)})"
            else:
                cased = [k for k in self.types.resources if k.lower() == name.lower()]
                detail = f"wrong case, the type is {cased[0]}" if cased else "unknown resource type"
            self.report(file, resource.node, f"{where}: {detail}")
            return
        if body is None or unwrap(body).type != "object":
            self.report(file, resource.node, f"{where}: the body is not an object")
            return
        body = unwrap(body)
        self.check_parent(file, resource, kind)
        body_type = self.types.body(name)
        assert body_type is not None
        if resource.existing:
            for key, key_node, _ in properties(body):
                if key not in EXISTING_KEYS:
                    self.report(file, key_node, f"{where}: an existing resource takes only {sorted(EXISTING_KEYS)}")
            resource_name = resource.get("name")
            if resource_name is None:
                self.report(file, resource.node, f"{where}: no name")
                return
            members, _ = object_members(body_type)
            name_type = members.get("name")
            if name_type is not None and body_type.kind == "ObjectType":
                self.check_value(file, resource_name, body_type.ref(name_type["type"]), f"{where}: name")
            return
        self.check_value(file, body, body_type, where, top_level=True)

    def check_parent(self, file: BicepFile, resource: Declaration, kind: str) -> None:
        parent = resource.get("parent")
        if parent is None:
            return
        symbol = file.symbol(text(unwrap(parent)))
        if symbol is None or symbol.keyword != "resource":
            self.report(file, parent, f"resource {resource.name}: parent {text(parent)} is not a resource")
            return
        expected = kind.rsplit("/", 1)[0]
        actual = symbol.declared_type.partition("@")[0]
        if actual.lower() != expected.lower():
            self.report(file, parent, f"resource {resource.name}: parent is a {actual}, not a {expected}")

    # -- values against types ---------------------------------------------------------------------------
    def kind_of(self, file: BicepFile, node: Node, depth: int = 0) -> str | None:
        """The kind of value an expression gives (string, int, bool, object, array), when it is known."""
        node = unwrap(node)
        if node.type in LITERAL_KINDS:
            return LITERAL_KINDS[node.type]
        if node.type == "for_statement":
            return "array"
        if node.type == "unary_expression":
            operator = text(node.children[0])
            return "bool" if operator == "!" else "int" if operator == "-" else None
        if node.type == "binary_expression":
            operator = text(node.child_by_field_name("operator") or node.children[1])
            if operator in BOOLEAN_OPERATORS:
                return "bool"
            return "int" if operator in ("+", "-", "*", "/", "%") else None
        if node.type == "identifier" and depth < 20:
            symbol = file.symbol(text(node))
            if symbol is None:
                return None
            if symbol.keyword == "param":
                return symbol.declared_type if symbol.declared_type in TYPE_KINDS.values() else None
            if symbol.keyword == "var" and symbol.value is not None:
                return self.kind_of(file, symbol.value, depth + 1)
            return "object"
        if node.type in ("member_expression", "subscript_expression"):
            return self.read_kind(file, node)
        name = call_name(node)
        if name == "union":
            return None
        return FUNCTION_KINDS.get(name or "")

    def check_value(
        self,
        file: BicepFile,
        node: Node,
        ref: TypeRef,
        where: str,
        *,
        partial: bool = False,
        top_level: bool = False,
        depth: int = 0,
    ) -> None:
        node = unwrap(node)
        if ref.kind in ("AnyType", "ResourceFunctionType") or depth > 20:
            return
        if node.type == "ternary_expression":
            for field in ("consequence", "alternative"):
                branch = node.child_by_field_name(field)
                if branch is not None:
                    self.check_value(file, branch, ref, where, partial=partial, depth=depth + 1)
            return
        if node.type == "binary_expression" and text(node.children[1]) == "??":
            for side in (node.child_by_field_name("left"), node.child_by_field_name("right")):
                if side is not None:
                    self.check_value(file, side, ref, where, partial=partial, depth=depth + 1)
            return
        if node.type == "identifier":
            symbol = file.symbol(text(node))
            if symbol is not None and symbol.keyword == "var" and symbol.value is not None:
                self.check_value(file, symbol.value, ref, where, partial=partial, depth=depth + 1)
            elif symbol is not None and symbol.keyword == "param":
                self.check_param(file, node, symbol, ref, where)
            return
        name = call_name(node)
        if name == "fail":
            return  # never returns: the deployment stops there
        if name == "union" and TYPE_KINDS.get(ref.kind) == "object":
            for argument in arguments(node):
                self.check_value(file, argument, ref, where, partial=True, depth=depth + 1)
            if not partial:
                self.check_required(file, node, ref, file.object_keys(node), where)
            return
        if ref.kind == "UnionType":
            self.check_union(file, node, ref, where, partial=partial, depth=depth)
            return
        expected = TYPE_KINDS.get(ref.kind)
        actual = self.kind_of(file, node)
        if node.type == "null":
            return  # an omitted optional property
        if expected and actual and expected != actual:
            self.report(file, node, f"{where}: {text(node)[:60]} is a {actual}, the property takes {describe(ref)}")
            return
        entry = ref.entry
        if ref.kind == "StringLiteralType":
            value = string_value(node)
            if value is not None and value != entry["value"]:
                self.report(file, node, f"{where}: {value!r} is not {entry['value']!r}")
        elif ref.kind == "StringType":
            self.check_string(file, node, entry, where)
        elif ref.kind == "IntegerType":
            self.check_integer(file, node, entry, where)
        elif ref.kind == "ArrayType":
            item = ref.ref(entry["itemType"])
            if node.type == "array":
                for element in node.named_children:
                    if element.type != "comment":
                        self.check_value(file, element, item, f"{where}[]", depth=depth + 1)
            elif node.type == "for_statement":
                body = [c for c in node.named_children if c.type != "comment"][-1]
                self.check_value(file, body, item, f"{where}[]", depth=depth + 1)
        elif expected == "object" and node.type == "object":
            self.check_object(file, node, ref, where, partial=partial, top_level=top_level, depth=depth)

    def check_union(self, file: BicepFile, node: Node, ref: TypeRef, where: str, *, partial: bool, depth: int) -> None:
        elements = [ref.ref(element) for element in ref.entry["elements"]]
        before = len(self.problems)
        failures: list[list[Problem]] = []
        for element in elements:
            self.check_value(file, node, element, where, partial=partial, depth=depth + 1)
            found = self.problems[before:]
            del self.problems[before:]
            if not found:
                return
            failures.append(found)
        literals = [e.entry["value"] for e in elements if e.kind == "StringLiteralType"]
        value = string_value(node)
        if value is not None and len(literals) == len(elements):
            cased = [v for v in literals if v.lower() == value.lower()]
            hint = f" (wrong case: {cased[0]!r})" if cased else ""
            self.report(file, node, f"{where}: {value!r} is not one of {literals}{hint}")
        else:
            shortest: list[Problem] = min(failures, key=len)
            self.problems.extend(shortest)

    def check_string(self, file: BicepFile, node: Node, entry: dict[str, Any], where: str) -> None:
        value = string_value(node)
        if value is None:
            return
        if "minLength" in entry and len(value) < entry["minLength"]:
            self.report(file, node, f"{where}: {value!r} is shorter than {entry['minLength']}")
        if "maxLength" in entry and len(value) > entry["maxLength"]:
            self.report(file, node, f"{where}: {value!r} is longer than {entry['maxLength']}")

    def check_integer(self, file: BicepFile, node: Node, entry: dict[str, Any], where: str) -> None:
        try:
            value = literal(node)
        except NotLiteral:
            return
        if "minValue" in entry and value < entry["minValue"]:
            self.report(file, node, f"{where}: {value} is less than {entry['minValue']}")
        if "maxValue" in entry and value > entry["maxValue"]:
            self.report(file, node, f"{where}: {value} is more than {entry['maxValue']}")

    def check_param(self, file: BicepFile, node: Node, param: Declaration, ref: TypeRef, where: str) -> None:
        """A parameter given to a property: its declared type, and each of its ``@allowed`` values."""
        expected = TYPE_KINDS.get(ref.kind) or (
            "string"
            if all(ref.ref(e).kind in ("StringLiteralType", "StringType") for e in ref.entry.get("elements", []))
            else None
        )
        declared = param.declared_type
        if expected and declared in TYPE_KINDS.values() and declared != expected:
            self.report(
                file, node, f"{where}: parameter {param.name} is a {declared}, the property takes {describe(ref)}"
            )
            return
        allowed = param.decorator("allowed")
        self.check_param_bounds(file, node, param, ref, where)
        literals = self.string_literals(ref)
        if allowed is None or literals is None:
            return
        wrong = [value for value in allowed.value() if value not in literals]
        if wrong:
            self.report(file, node, f"{where}: parameter {param.name} allows {wrong}, not among {sorted(literals)}")

    def check_param_bounds(self, file: BicepFile, node: Node, param: Declaration, ref: TypeRef, where: str) -> None:
        """A parameter given to a bounded integer or string property: every value it lets through is in bounds.

        Its ``@allowed`` values, else its own ``@minValue``/``@maxValue`` (``@minLength``/``@maxLength``), must
        lie within the property's: a value the parameter lets through and the property refuses fails only at
        deployment, after the resources before it were made.
        """
        kinds = {"IntegerType": ("minValue", "maxValue"), "StringType": ("minLength", "maxLength")}
        if ref.kind not in kinds:
            return
        low_key, high_key = kinds[ref.kind]
        low, high = ref.entry.get(low_key), ref.entry.get(high_key)
        allowed = param.decorator("allowed")
        if allowed is not None:
            sizes = [value if ref.kind == "IntegerType" else len(value) for value in allowed.value()]
            least, most = min(sizes), max(sizes)
        else:  # a parameter without bounds of its own is fed by computed names: nothing to compare
            lowest, highest = param.decorator(low_key), param.decorator(high_key)
            least = lowest.value() if lowest is not None else None
            most = highest.value() if highest is not None else None
        if low is not None and least is not None and least < low:
            self.report(
                file, node, f"{where}: parameter {param.name} takes {least}, below the property's {low_key} {low}"
            )
        if high is not None and most is not None and most > high:
            self.report(
                file, node, f"{where}: parameter {param.name} takes {most}, above the property's {high_key} {high}"
            )

    def string_literals(self, ref: TypeRef) -> set[str] | None:
        """The values a closed string enumeration takes; None for an open one (any string)."""
        if ref.kind == "StringLiteralType":
            return {ref.entry["value"]}
        if ref.kind != "UnionType":
            return None
        values: set[str] = set()
        for element in ref.entry["elements"]:
            inner = self.string_literals(ref.ref(element))
            if inner is None:
                return None
            values |= inner
        return values

    def check_object(
        self, file: BicepFile, node: Node, ref: TypeRef, where: str, *, partial: bool, top_level: bool, depth: int
    ) -> None:
        discriminator = ref.entry.get("discriminator")
        value = None
        if discriminator:
            found = [v for key, _, v in properties(node) if key == discriminator]
            value = string_value(found[0]) if found else None
            if value is not None and value not in ref.entry["elements"]:
                allowed = sorted(ref.entry["elements"])
                self.report(file, found[0], f"{where}: {discriminator} {value!r} is not one of {allowed}")
                return
        members, extra = object_members(ref, value)
        lowered = {name.lower(): name for name in members}
        for key, key_node, child in properties(node):
            if key is None or (top_level and key in BICEP_RESOURCE_KEYS):
                if key is None and extra is not None:
                    self.check_value(file, child, extra, f"{where}.*", depth=depth + 1)
                continue
            path = f"{where}.{key}" if not top_level else f"{where}: {key}"
            member = members.get(key)
            if member is None:
                if key.lower() in lowered:
                    self.report(file, key_node, f"{path}: wrong case, the property is {lowered[key.lower()]}")
                elif extra is not None:
                    self.check_value(file, child, extra, path, depth=depth + 1)
                else:
                    close = difflib.get_close_matches(key, members, n=1)
                    hint = f" (did you mean {close[0]}?)" if close else ""
                    self.report(file, key_node, f"{path}: no such property{hint}")
                continue
            if member["flags"] & READ_ONLY:
                self.report(file, key_node, f"{path}: read-only property")
                continue
            self.check_value(file, child, ref.ref(member["type"]), path, depth=depth + 1)
        if not partial:
            present = {key for key, _, _ in properties(node) if key is not None}
            self.check_required(file, node, ref, present, where, members=members)

    def check_required(
        self,
        file: BicepFile,
        node: Node,
        ref: TypeRef,
        present: set[str],
        where: str,
        members: dict[str, Any] | None = None,
    ) -> None:
        if members is None:
            if ref.kind == "DiscriminatedObjectType":
                return
            members, _ = object_members(ref)
        for name, member in members.items():
            if member["flags"] & REQUIRED and not member["flags"] & READ_ONLY and name not in present:
                self.report(file, node, f"{where}: required property {name} missing")

    # -- modules ----------------------------------------------------------------------------------------
    def module_file(self, file: BicepFile, module: Declaration) -> BicepFile | None:
        return self._resolved.get((file.path.parent / module.declared_type).resolve())

    def check_module(self, file: BicepFile, module: Declaration) -> None:
        where = f"module {module.name} ({module.declared_type})"
        target = self.module_file(file, module)
        if target is None:
            self.report(file, module.node, f"{where}: no such file")
            return
        body = module.value
        if body is None or unwrap(body).type != "object":
            self.report(file, module.node, f"{where}: the body is not an object")
            return
        for key, key_node, _ in properties(unwrap(body)):
            if key not in MODULE_KEYS:
                self.report(file, key_node, f"{where}: {key} is not a module property")
        declared = {param.name: param for param in target.declarations("param")}
        given = module.get("params")
        entries = list(properties(unwrap(given))) if given is not None and unwrap(given).type == "object" else []
        names = {key for key, _, _ in entries}
        for key, key_node, value in entries:
            param = declared.get(key or "")
            if param is None:
                close = difflib.get_close_matches(key or "", declared, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                self.report(file, key_node, f"{where}: {target.path.name} has no parameter {key}{hint}")
                continue
            self.check_argument(file, value, param, f"{where}: parameter {key}")
        for name, param in declared.items():
            if param.value is None and name not in names:
                self.report(file, module.node, f"{where}: parameter {name} (no default) is not given")

    def check_argument(self, file: BicepFile, value: Node, param: Declaration, where: str) -> None:
        value = unwrap(value)
        expected = param.declared_type
        actual = self.kind_of(file, value)
        if expected in TYPE_KINDS.values() and actual and actual != expected:
            self.report(file, value, f"{where}: {text(value)[:60]} is a {actual}, the parameter is a {expected}")
            return
        caller = file.symbol(text(value)) if value.type == "identifier" else None
        if caller is not None and caller.keyword == "param":
            if caller.has_decorator("secure") and not param.has_decorator("secure"):
                self.report(file, value, f"{where}: a @secure() value passed to a parameter that is not @secure()")
            allowed, theirs = param.decorator("allowed"), caller.decorator("allowed")
            if allowed is not None:
                wrong = sorted(set(theirs.value() if theirs else []) - set(allowed.value()))
                if theirs is None or wrong:
                    self.report(file, value, f"{where}: {caller.name} may be {wrong or 'anything'}, not in @allowed")
            return
        if caller is not None and caller.keyword == "var" and caller.value is not None:
            self.check_argument(file, caller.value, param, where)
            return
        if value.type == "ternary_expression":
            for field in ("consequence", "alternative"):
                branch = value.child_by_field_name(field)
                if branch is not None:
                    self.check_argument(file, branch, param, where)
            return
        try:
            given = literal(value)
        except NotLiteral:
            return
        allowed = param.decorator("allowed")
        if allowed is not None and given not in allowed.value():
            self.report(file, value, f"{where}: {given!r} is not one of {allowed.value()}")
        bounds = {name: param.decorator(name) for name in ("minLength", "maxLength", "minValue", "maxValue")}
        size = len(given) if isinstance(given, str | list) else given
        for name, decorator in bounds.items():
            if decorator is None or not isinstance(size, int):
                continue
            limit = decorator.value()
            if (name.startswith("min") and size < limit) or (name.startswith("max") and size > limit):
                self.report(file, value, f"{where}: {given!r} breaks @{name}({limit})")

    def check_output(self, file: BicepFile, output: Declaration) -> None:
        if output.value is None:
            return
        declared, actual = output.declared_type, self.kind_of(file, output.value)
        if declared in TYPE_KINDS.values() and actual and actual != declared:
            self.report(file, output.node, f"output {output.name}: the value is a {actual}, the output a {declared}")

    # -- reads of resource properties and module outputs -------------------------------------------------
    def check_member_reads(self, file: BicepFile) -> None:
        for node in references(file.root):
            symbol = file.symbol(text(node))
            if symbol is None or symbol.keyword not in ("resource", "module"):
                continue
            path, current = [], node
            while current.parent is not None:
                parent = current.parent
                if parent.type == "member_expression" and parent.child_by_field_name("object") == current:
                    path.append(text(parent.child_by_field_name("property") or parent.named_children[-1]))
                elif parent.type == "subscript_expression" and parent.child_by_field_name("object") == current:
                    path.append("[]")
                elif parent.type == "call_expression" and path:
                    path.pop()  # symbol.listKeys(): a resource function, not a property
                    break
                else:
                    break
                current = parent
            if symbol.keyword == "module":
                self.check_output_read(file, node, symbol, path)
            else:
                self.check_property_read(file, node, symbol, path)

    def check_output_read(self, file: BicepFile, node: Node, module: Declaration, path: list[str]) -> None:
        if module.loop is not None and path[:1] == ["[]"]:
            path = path[1:]
        if not path or path[0] == "name":
            return
        if path[0] != "outputs":
            self.report(file, node, f"module {module.name}: .{path[0]} is not readable (only name and outputs)")
            return
        target = self.module_file(file, module)
        if target is None or len(path) < 2:
            return
        outputs = {output.name for output in target.declarations("output")}
        if path[1] not in outputs:
            self.report(file, node, f"module {module.name}: {target.path.name} has no output {path[1]}")

    def check_property_read(self, file: BicepFile, node: Node, resource: Declaration, path: list[str]) -> None:
        self.property_type(resource, path, lambda message: self.report(file, node, message))

    def property_type(
        self, resource: Declaration, path: list[str], complain: Callable[[str], None] | None = None
    ) -> TypeRef | None:
        """The type of ``resource.a.b...``, walking the resource's type; None where it is not known."""
        if resource.loop is not None and path[:1] == ["[]"]:
            path = path[1:]
        ref = self.types.body(resource.declared_type)
        if ref is None or not path:
            return None
        name = resource.get("name")
        discriminator = string_value(name) if name is not None else None
        walked = [resource.name]
        for segment in path:
            if segment == "[]":
                if ref.kind != "ArrayType":
                    return None
                ref = ref.ref(ref.entry["itemType"])
                walked.append("[]")
                continue
            if ref.kind not in ("ObjectType", "DiscriminatedObjectType"):
                return None
            members, extra = object_members(ref, discriminator)
            discriminator = None
            member = members.get(segment)
            walked.append(segment)
            if member is None:
                lowered = {name.lower(): name for name in members}
                if segment.lower() in lowered:
                    if complain:
                        complain(f"{'.'.join(walked)}: wrong case, the property is {lowered[segment.lower()]}")
                    return None
                if extra is None:
                    if complain:
                        complain(f"{'.'.join(walked)}: no such property of {resource.declared_type}")
                    return None
                ref = extra
                continue
            if member["flags"] & WRITE_ONLY:
                if complain:
                    complain(f"{'.'.join(walked)}: write-only property, it cannot be read")
                return None
            ref = ref.ref(member["type"])
        return ref

    def read_kind(self, file: BicepFile, node: Node) -> str | None:
        """The kind of ``symbol.a.b``: a module's output by its declared type, a resource's property by its type."""
        path: list[str] = []
        current = node
        while current.type in ("member_expression", "subscript_expression"):
            if current.type == "member_expression":
                if any(child.type == ".?" for child in current.children):
                    return None
                path.insert(0, text(current.child_by_field_name("property") or current.named_children[-1]))
            else:
                path.insert(0, "[]")
            current = unwrap(current.child_by_field_name("object") or current.named_children[0])
        symbol = file.symbol(text(current)) if current.type == "identifier" else None
        if symbol is None:
            return None
        if symbol.keyword == "module":
            target = self.module_file(file, symbol)
            if symbol.loop is not None and path[:1] == ["[]"]:
                path = path[1:]
            if target is None or len(path) != 2 or path[0] != "outputs":
                return None
            output = next((o for o in target.declarations("output") if o.name == path[1]), None)
            declared = output.declared_type if output is not None else None
            return declared if declared in TYPE_KINDS.values() else None
        if symbol.keyword == "resource":
            ref = self.property_type(symbol, path)
            if ref is None:
                return None
            if ref.kind == "UnionType":
                strings = all(ref.ref(e).kind in ("StringLiteralType", "StringType") for e in ref.entry["elements"])
                return "string" if strings else None
            return TYPE_KINDS.get(ref.kind)
        return None

    @cached_property
    def used_types(self) -> set[str]:
        return {resource.declared_type for f in self.files.values() for resource in f.declarations("resource")}


def check(folder: Path, types: Types | None = None) -> list[str]:
    return Checker(folder, types).run()
