"""The Bicep under ``infra/``, read with the tree-sitter Bicep grammar (``tree-sitter-bicep``).

The Bicep CLI is not run here; this gives the tests a real syntax tree of each file: its
declarations (``param``, ``var``, ``resource``, ``module``, ``output``) with their decorators,
and the expressions inside them. ``tests/infra/typecheck.py`` checks that tree against
Microsoft's type definitions. A file the grammar cannot parse fails loudly instead of being
half-read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import tree_sitter_bicep
from tree_sitter import Language, Node, Parser

LANGUAGE = Language(tree_sitter_bicep.language())
KEYWORDS = {
    "parameter_declaration": "param",
    "variable_declaration": "var",
    "resource_declaration": "resource",
    "module_declaration": "module",
    "output_declaration": "output",
}
ESCAPES = {"\\'": "'", "\\\\": "\\", "\\n": "\n", "\\r": "\r", "\\t": "\t", "\\$": "$"}


class NotLiteral(ValueError):
    """The expression's value is known only at deployment (a parameter, a function, a reference)."""


def text(node: Node) -> str:
    return (node.text or b"").decode()


def line(node: Node) -> int:
    return node.start_point[0] + 1


def parse(source: str) -> Node:
    tree = Parser(LANGUAGE).parse(source.encode())
    return tree.root_node


def errors(root: Node) -> list[str]:
    """Where the grammar could not parse: ERROR and MISSING nodes."""
    found = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(f"line {line(node)}: cannot parse {text(node)[:60]!r}")
        elif node.has_error:
            stack.extend(node.children)
    return found


def unwrap(node: Node) -> Node:
    while node.type == "parenthesized_expression":
        node = node.named_children[0]
    return node


def string_parts(node: Node) -> list[Node | str]:
    """A string node's children, with the whitespace the grammar leaves out of them (``' '``) as text."""
    raw = node.text or b""
    quote = 3 if raw.startswith(b"'''") else 1
    start, offset = node.start_byte, node.start_byte + quote
    parts: list[Node | str] = []
    for child in node.named_children:
        if child.start_byte > offset:
            parts.append(raw[offset - start : child.start_byte - start].decode())
        parts.append(child)
        offset = child.end_byte
    if node.end_byte - quote > offset:
        parts.append(raw[offset - start : node.end_byte - quote - start].decode())
    return parts


def string_value(node: Node) -> str | None:
    """The value of a string literal without interpolation, else None."""
    node = unwrap(node)
    if node.type != "string":
        return None
    parts = []
    for child in string_parts(node):
        if isinstance(child, str):
            parts.append(child)
        elif child.type == "string_content":
            parts.append(text(child))
        elif child.type == "escape_sequence":
            parts.append(ESCAPES.get(text(child), text(child)))
        else:
            return None  # an interpolation
    return "".join(parts)


def literal(node: Node) -> Any:
    """The Python value of a literal expression; ``NotLiteral`` for anything decided at deployment."""
    node = unwrap(node)
    kind = node.type
    if kind == "string":
        value = string_value(node)
        if value is None:
            raise NotLiteral(text(node))
        return value
    if kind == "number":
        return int(text(node))
    if kind == "boolean":
        return text(node) == "true"
    if kind == "null":
        return None
    if kind == "unary_expression" and text(node.children[0]) == "-":
        return -literal(node.named_children[0])
    if kind == "array":
        return [literal(item) for item in node.named_children if item.type != "comment"]
    if kind == "object":
        return {key: literal(value) for key, _, value in properties(node)}
    raise NotLiteral(text(node))


def property_key(node: Node) -> str | None:
    """The key of an ``object_property``: an identifier or a plain string; None when interpolated."""
    key = node.named_children[0]
    return text(key) if key.type == "identifier" else string_value(key)


def properties(obj: Node) -> Iterator[tuple[str | None, Node, Node]]:
    """``(key, key node, value node)`` of each property of an object literal, in order."""
    for child in obj.named_children:
        if child.type == "object_property":
            key_node, value = [c for c in child.named_children if c.type != "comment"][:2]
            yield property_key(child), key_node, value


def get(obj: Node | None, *path: str) -> Node | None:
    """The value at ``path`` in nested object literals, or None."""
    node = obj
    for key in path:
        if node is None or unwrap(node).type != "object":
            return None
        node = next((value for name, _, value in properties(unwrap(node)) if name == key), None)
    return node


def walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def find_values(node: Node, key: str) -> list[Node]:
    """Values of every ``key: value`` property anywhere under ``node``, in source order."""
    return [value for n in walk(node) if n.type == "object" for name, _, value in properties(n) if name == key]


def references(node: Node) -> Iterator[Node]:
    """Identifiers used as values under ``node`` (not property keys, names of members or functions)."""
    for n in walk(node):
        if n.type != "identifier" or n.parent is None:
            continue
        parent = n.parent
        if parent.type == "object_property" and parent.named_children[0] == n:
            continue
        if parent.type == "call_expression" and parent.child_by_field_name("function") == n:
            continue
        if parent.type == "member_expression" and parent.child_by_field_name("property") == n:
            continue
        if parent.type in ("lambda_expression", "for_loop_parameters", "decorator"):
            continue
        if parent.type == "for_statement" and parent.child_by_field_name("initializer") == n:
            continue  # [for item in items: ...] declares item
        if parent.type in KEYWORDS and parent.named_children[0] == n:
            continue  # the name a declaration declares
        yield n


def loop_variables(root: Node) -> set[str]:
    """Names declared by ``for`` loops and lambdas anywhere under ``root``."""
    names = set()
    for n in walk(root):
        if n.type in ("loop_variable", "loop_enumerator"):
            names.add(text(n))
        elif n.type == "for_statement":
            initializer = n.child_by_field_name("initializer")
            if initializer is not None and initializer.type == "identifier":
                names.add(text(initializer))
        elif n.type == "lambda_expression":
            names.update(text(c) for c in n.named_children[:-1] if c.type == "identifier")
    return names


def call_name(node: Node) -> str | None:
    """``union`` for ``union(...)`` and ``sys.union(...)``; None when ``node`` is not a call."""
    node = unwrap(node)
    if node.type != "call_expression":
        return None
    function = node.child_by_field_name("function") or node.named_children[0]
    if function.type == "member_expression":
        return text(function.child_by_field_name("property") or function.named_children[-1])
    return text(function)


def arguments(node: Node) -> list[Node]:
    args = node.child_by_field_name("arguments") or next(c for c in node.named_children if c.type == "arguments")
    return [c for c in args.named_children if c.type != "comment"]


@dataclass(frozen=True)
class Decorator:
    name: str
    arguments: tuple[Node, ...]

    def value(self) -> Any:
        (argument,) = self.arguments
        return literal(argument)


@dataclass(frozen=True)
class Declaration:
    """One top-level declaration and the decorators written above it."""

    keyword: str
    node: Node
    decorators: tuple[Decorator, ...]

    @property
    def name(self) -> str:
        return text(self._parts[0])

    @property
    def line(self) -> int:
        return line(self.node)

    @property
    def code(self) -> str:
        return text(self.node)

    @cached_property
    def _parts(self) -> list[Node]:
        return [c for c in self.node.named_children if c.type not in ("comment", "diagnostic_comment")]

    @property
    def declared_type(self) -> str:
        """``string``, ``int``, ... of a param or output; ``Type@version`` of a resource; the path of a module."""
        part = self._parts[1]
        return string_value(part) or "" if part.type == "string" else text(part)

    @property
    def existing(self) -> bool:
        return any(c.type == "existing" for c in self.node.children)

    @cached_property
    def _expression(self) -> Node | None:
        """The expression after ``=``: a default value, a variable's value, a resource's body."""
        after = False
        for child in self.node.children:
            if after and child.is_named and child.type not in ("comment", "diagnostic_comment"):
                return child
            after = after or child.type == "="
        return None

    @property
    def value(self) -> Node | None:
        """A param's default, a var's or output's value, or the body object of a resource or module."""
        node = self._expression
        if node is None or self.keyword not in ("resource", "module"):
            return node
        while node.type in ("if_statement", "for_statement"):
            node = [c for c in node.named_children if c.type != "comment"][-1]
        return node

    @property
    def condition(self) -> Node | None:
        """The ``if (...)`` condition of a conditional resource or module."""
        node = self._expression
        while node is not None and node.type in ("if_statement", "for_statement"):
            if node.type == "if_statement":
                return unwrap(node.named_children[0])
            node = [c for c in node.named_children if c.type != "comment"][-1]
        return None

    @property
    def loop(self) -> Node | None:
        node = self._expression
        return node if node is not None and node.type == "for_statement" else None

    def decorator(self, name: str) -> Decorator | None:
        return next((d for d in self.decorators if d.name in (name, f"sys.{name}")), None)

    def has_decorator(self, name: str) -> bool:
        return self.decorator(name) is not None

    def get(self, *path: str) -> Node | None:
        """The value at ``path`` in this declaration's object (a resource or module body, an object var)."""
        return get(self.value, *path)

    def values(self, key: str) -> list[Node]:
        """Values of ``key: ...`` anywhere in this declaration's value."""
        return find_values(self.value, key) if self.value is not None else []

    def texts(self, key: str) -> list[str]:
        return [text(node) for node in self.values(key)]


def _decorators(node: Node) -> tuple[Decorator, ...]:
    found = []
    for decorator in node.named_children:
        if decorator.type != "decorator":
            continue
        call = decorator.named_children[0]
        if call.type == "call_expression":
            found.append(Decorator(call_name(call) or "", tuple(arguments(call))))
        else:
            found.append(Decorator(text(call), ()))
    return tuple(found)


class BicepFile:
    """One ``.bicep`` file."""

    def __init__(self, path: Path, source: str | None = None) -> None:
        self.path = path
        self.text = path.read_text(encoding="utf-8") if source is None else source
        self.root = parse(self.text)
        problems = errors(self.root)
        if problems:
            raise ValueError(f"{path}: {'; '.join(problems)}")

    @cached_property
    def statements(self) -> list[Declaration]:
        found: list[Declaration] = []
        pending: tuple[Decorator, ...] = ()
        for child in self.root.named_children:
            if child.type == "decorators":
                pending = _decorators(child)
            elif child.type in KEYWORDS:
                found.append(Declaration(KEYWORDS[child.type], child, pending))
                pending = ()
            elif child.type not in ("comment", "diagnostic_comment"):
                pending = ()
        return found

    def declarations(self, keyword: str) -> list[Declaration]:
        return [statement for statement in self.statements if statement.keyword == keyword]

    def declaration(self, keyword: str, name: str) -> Declaration:
        (found,) = [statement for statement in self.declarations(keyword) if statement.name == name]
        return found

    def symbol(self, name: str) -> Declaration | None:
        """The param, var, resource or module named ``name`` (outputs are not referable)."""
        return next((s for s in self.statements if s.name == name and s.keyword != "output"), None)

    @property
    def target_scope(self) -> str:
        for child in self.root.named_children:
            if child.type == "target_scope_assignment":
                return string_value(child.named_children[-1]) or text(child.named_children[-1])
        return "resourceGroup"

    def resources(self) -> dict[str, tuple[str, str, bool]]:
        """Symbol -> (type, API version, existing) of every resource declaration."""
        found = {}
        for resource in self.declarations("resource"):
            kind, _, version = resource.declared_type.partition("@")
            found[resource.name] = (kind, version, resource.existing)
        return found

    def modules(self) -> dict[str, str]:
        """Symbol -> path of every module declaration."""
        return {module.name: module.declared_type for module in self.declarations("module")}

    def resolve(self, node: Node) -> Node:
        """Follow a variable reference (and parentheses) to the expression it names."""
        seen: set[str] = set()
        node = unwrap(node)
        while node.type == "identifier" and text(node) not in seen:
            seen.add(text(node))
            symbol = self.symbol(text(node))
            if symbol is None or symbol.keyword != "var" or symbol.value is None:
                break
            node = unwrap(symbol.value)
        return node

    def object_keys(self, node: Node) -> set[str]:
        """Every key an object expression may have: through variables, ``union()`` and both sides of ``?:``."""
        node = self.resolve(node)
        if node.type == "object":
            return {key for key, _, _ in properties(node) if key is not None}
        if node.type == "ternary_expression":
            consequence = node.child_by_field_name("consequence")
            alternative = node.child_by_field_name("alternative")
            return {key for branch in (consequence, alternative) if branch for key in self.object_keys(branch)}
        if call_name(node) == "union":
            return {key for argument in arguments(node) for key in self.object_keys(argument)}
        return set()

    def object_values(self, node: Node, key: str) -> list[Node]:
        """The values ``key`` may take in an object expression, read as ``object_keys`` reads it."""
        node = self.resolve(node)
        if node.type == "object":
            return [value for name, _, value in properties(node) if name == key]
        if node.type == "ternary_expression":
            branches = [node.child_by_field_name("consequence"), node.child_by_field_name("alternative")]
            return [value for branch in branches if branch for value in self.object_values(branch, key)]
        if call_name(node) == "union":
            return [value for argument in arguments(node) for value in self.object_values(argument, key)]
        return []


def read_all(folder: Path) -> list[BicepFile]:
    return [BicepFile(path) for path in sorted(folder.rglob("*.bicep"))]


class Fail(Exception):
    """The deployment stops with this message: ``fail('...')`` was evaluated, or a module refused a value."""


def deploy_module(file: BicepFile, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters ``file``'s module ``name`` deploys with, checked as ARM checks them; None when not deployed.

    ARM checks a nested deployment's parameters against their ``@minLength``, ``@maxLength`` and
    ``@allowed`` before the module deploys anything: a value that does not fit stops it (``Fail``).
    """
    module = file.declaration("module", name)
    evaluate = Evaluator(file, params)
    if module.condition is not None and not evaluate(module.condition):
        return None
    target = BicepFile(file.path.parent / module.declared_type)
    given = module.get("params")
    deployment = module_name(module, evaluate)
    evaluate.partly = True  # a value known only at deployment is passed on unchecked
    values = (
        {}
        if given is None
        else {str(key): evaluate.property_value(node, 0) for key, _, node in properties(unwrap(given))}
    )
    for key, value in values.items():
        if isinstance(value, str) and value.startswith("<deployment: "):
            continue
        declared = target.declaration("param", str(key))
        shortest, longest, allowed = (declared.decorator(d) for d in ("minLength", "maxLength", "allowed"))
        if shortest is not None and len(value) < shortest.value():
            raise Fail(f"{deployment}: {key} is shorter than {shortest.value()}")
        if longest is not None and len(value) > longest.value():
            raise Fail(f"{deployment}: {key} is longer than {longest.value()}")
        if allowed is not None and value not in allowed.value():
            raise Fail(f"{deployment}: {key} is not one of {allowed.value()}")
    return values


def module_name(module: Declaration, evaluate: Evaluator | None = None) -> str:
    """The deployment name a module declares (ARM's error names it): evaluated where it can be, else as written."""
    name = module.get("name")
    if name is None:
        return module.name
    if evaluate is not None:
        try:
            return str(evaluate(name))
        except NotLiteral:
            pass
    return string_value(name) or text(name)


class Evaluator:
    """Evaluates the expressions of one file for given parameter values, as ARM would at deployment.

    Enough of the language for the decisions the templates make from their parameters: literals and
    interpolation, parameters (given or their defaults) and variables (a variable given by name stands
    for its value, like a parameter), ``?:`` (only the chosen branch is evaluated, as ARM's ``if()``),
    ``&&``/``||`` (short-circuit), comparisons, ``!``, ``??``, ``.`` and ``.?`` on objects, and the
    functions ``empty``, ``length``, ``union``, ``concat``, ``contains``, ``toLower``, ``toUpper``, ``replace``,
    ``endsWith``, ``startsWith``, ``max``, ``min``, ``substring``, ``take``, ``join``, ``json``, ``fail``,
    ``filter`` and ``toObject`` with their lambdas and ``[for x in items: ...]`` (one variable each);
    ``object[key]``. Anything else (a reference to a deployed resource, a module's output) raises ``NotLiteral``.
    """

    def __init__(self, file: BicepFile, params: dict[str, Any] | None = None) -> None:
        self.file = file
        self.params = dict(params or {})
        self.partly = False

    def __call__(self, node: Node) -> Any:
        return self.evaluate(node, 0)

    def evaluate_partly(self, node: Node) -> Any:
        """As a call, but a property known only at deployment stands as ``<deployment: its expression>``."""
        self.partly = True
        try:
            return self.evaluate(node, 0)
        finally:
            self.partly = False

    def symbol(self, name: str, depth: int) -> Any:
        if name in self.params:
            return self.params[name]
        declaration = self.file.symbol(name)
        if declaration is None or declaration.keyword not in ("param", "var") or declaration.value is None:
            raise NotLiteral(name)
        return self.evaluate(declaration.value, depth + 1)

    def evaluate(self, node: Node, depth: int) -> Any:
        if depth > 50:
            raise NotLiteral("too deep")
        node = unwrap(node)
        kind = node.type
        if kind == "string":
            parts = []
            for child in string_parts(node):
                if isinstance(child, str):
                    parts.append(child)
                elif child.type == "interpolation":
                    parts.append(self.text_of(self.evaluate(child.named_children[0], depth + 1)))
                elif child.type == "escape_sequence":
                    parts.append(ESCAPES.get(text(child), text(child)))
                else:
                    parts.append(text(child))
            return "".join(parts)
        if kind in ("number", "boolean", "null"):
            return literal(node)
        if kind == "array":
            return [self.evaluate(item, depth + 1) for item in node.named_children if item.type != "comment"]
        if kind == "for_statement" and len(node.named_children) == 3:  # [for x in items: body]
            return [self.bound(node, item, depth) for item in self.evaluate(node.named_children[1], depth + 1)]
        if kind == "object":
            return {key: self.property_value(value, depth + 1) for key, _, value in properties(node)}
        if kind == "identifier":
            return self.symbol(text(node), depth)
        if kind == "ternary_expression":
            condition = self.evaluate(node.child_by_field_name("condition") or node.named_children[0], depth + 1)
            branch = node.child_by_field_name("consequence" if condition else "alternative")
            assert branch is not None
            return self.property_value(branch, depth + 1)
        if kind == "unary_expression":
            operator = text(node.children[0])
            value = self.evaluate(node.named_children[-1], depth + 1)
            return (not value) if operator == "!" else -value
        if kind == "binary_expression":
            return self.binary(node, depth)
        if kind == "member_expression":
            obj = self.evaluate(node.child_by_field_name("object") or node.named_children[0], depth + 1)
            name = text(node.child_by_field_name("property") or node.named_children[-1])
            if any(child.type == ".?" for child in node.children):  # safe dereference: null when missing
                return obj.get(name) if isinstance(obj, dict) else None
            if isinstance(obj, dict) and name in obj:
                return obj[name]
            raise NotLiteral(text(node))
        if kind == "call_expression":
            return self.call(node, depth)
        if kind == "subscript_expression":
            obj = self.evaluate(node.child_by_field_name("object") or node.named_children[0], depth + 1)
            key = self.evaluate(node.child_by_field_name("index") or node.named_children[-1], depth + 1)
            if isinstance(obj, dict | list):
                return obj[key]
            raise NotLiteral(text(node))
        raise NotLiteral(text(node))

    def property_value(self, node: Node, depth: int) -> Any:
        try:
            return self.evaluate(node, depth)
        except NotLiteral:
            if not self.partly:
                raise
            return f"<deployment: {text(node)}>"

    def binary(self, node: Node, depth: int) -> Any:
        left_node, right_node = node.child_by_field_name("left"), node.child_by_field_name("right")
        assert left_node is not None
        assert right_node is not None
        operator = text(node.child_by_field_name("operator") or node.children[1])
        left = self.evaluate(left_node, depth + 1)
        if operator == "&&":
            return bool(left) and bool(self.evaluate(right_node, depth + 1))
        if operator == "||":
            return bool(left) or bool(self.evaluate(right_node, depth + 1))
        if operator == "??":
            return left if left is not None else self.evaluate(right_node, depth + 1)
        right = self.evaluate(right_node, depth + 1)
        operations: dict[str, Callable[[], Any]] = {
            "==": lambda: left == right,
            "!=": lambda: left != right,
            "=~": lambda: str(left).lower() == str(right).lower(),
            "!~": lambda: str(left).lower() != str(right).lower(),
            "<": lambda: left < right,
            "<=": lambda: left <= right,
            ">": lambda: left > right,
            ">=": lambda: left >= right,
            "+": lambda: left + right,
            "-": lambda: left - right,
        }
        if operator not in operations:
            raise NotLiteral(text(node))
        return operations[operator]()

    def call(self, node: Node, depth: int) -> Any:
        name = call_name(node)
        if name in ("filter", "toObject"):
            return self.with_lambdas(name, arguments(node), depth)
        values = [self.evaluate(argument, depth + 1) for argument in arguments(node)]
        if name == "fail":
            raise Fail(values[0])
        if name == "empty":
            return values[0] is None or len(values[0]) == 0
        if name == "length":
            return len(values[0])
        if name in ("max", "min"):
            flat = [item for value in values for item in (value if isinstance(value, list) else [value])]
            return max(flat) if name == "max" else min(flat)
        if name == "union":
            if all(isinstance(value, dict) for value in values):
                return {key: value for part in values for key, value in part.items()}
            return list(dict.fromkeys(item for part in values for item in part))
        if name == "concat":
            return "".join(values) if all(isinstance(v, str) for v in values) else [i for v in values for i in v]
        if name == "contains":
            return values[1] in values[0]
        if name == "toLower":
            return str(values[0]).lower()
        if name == "toUpper":
            return str(values[0]).upper()
        if name == "replace":
            return str(values[0]).replace(values[1], values[2])
        if name == "join":
            return str(values[1]).join(values[0])
        if name == "json":
            return json.loads(values[0])
        if name == "startsWith":
            return str(values[0]).lower().startswith(str(values[1]).lower())
        if name == "endsWith":
            return str(values[0]).lower().endswith(str(values[1]).lower())
        if name == "split":
            return str(values[0]).split(values[1])
        if name == "take":
            return values[0][: values[1]]
        if name == "substring":
            start = values[1]
            return str(values[0])[start : start + values[2]] if len(values) > 2 else str(values[0])[start:]
        raise NotLiteral(text(node))

    def with_lambdas(self, name: str, given: list[Node], depth: int) -> Any:
        """``filter(items, x => ...)`` and ``toObject(items, x => key, x => value)``: each lambda applied per item."""
        items = self.evaluate(given[0], depth + 1)
        if name == "filter":
            return [item for item in items if self.bound(given[1], item, depth)]
        return {self.bound(given[1], item, depth): self.bound(given[2], item, depth) for item in items}

    def bound(self, node: Node, item: Any, depth: int) -> Any:
        """A lambda's body, or a ``for`` loop's, with its one variable bound to ``item``."""
        node = unwrap(node)
        if node.type not in ("lambda_expression", "for_statement"):
            raise NotLiteral(text(node))
        variable, body = node.named_children[0], node.named_children[-1]
        outer = dict(self.params)
        self.params[text(variable)] = item
        try:
            return self.evaluate(body, depth + 1)
        finally:
            self.params = outer

    @staticmethod
    def text_of(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
