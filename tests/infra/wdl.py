"""A Logic Apps run, on paper: enough of the Workflow Definition Language to run the sample workflow.

No tenant runs ``connector/samples/workflow.json`` here, so this does, against the app in this
process: a run starts from a trigger body, takes its actions in ``runAfter`` order (an action whose
``runAfter`` statuses are not met is ``Skipped``, as are those after it), evaluates the expressions of
their inputs, sends each OnceGate connector action to the function its method and path name, and keeps
what the ``Response`` action answers. Action types: ``ApiConnection``, ``Compose``, ``Switch``, ``If``,
``Terminate``, ``Response``; for the bulk import, ``Foreach`` (one iteration after another, each
action's status and outputs those of its last iteration), ``Until`` (its actions again until its
expression holds after them, at most ``limit.count`` times; its status is its last iteration's),
``Wait``, ``Select``, ``Query`` (Filter array) and the variable actions. Expressions: ``@expr`` and
``@{expr}``, string and number literals, ``?['x']`` and ``['x']`` reads, and the functions in
``Run.functions``. Anything else fails loudly: a sample that outgrows this must grow it too.

The engine's side, when a test asks for it (issue 31): ``retries=4`` is the default retry policy of
a connector or HTTP action (up to 4 retries at exponential intervals, on 408, 429, 5xx and a
connection that failed, ``ConnectionError`` here), its waits and ``Wait`` actions passed to
``sleep``. A ``target`` plays the target system: a ``Compose`` whose inputs say what it
``standsFor`` (its ``method``, ``uri``, ``headers`` and body, which the sample's maker replaces with
that HTTP action) is sent to it as that call, and its outputs are the call's, ``statusCode`` and
``body``. :class:`Killed` raised by a call or the target ends the run where it is, as a run whose
host was lost or that someone cancelled: nothing after it runs.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

# A connector action: (method, path, body) -> (status, JSON body).
Call = Callable[[str, str, Any], tuple[int, Any]]
# The target system's side of a stand-in: the Compose's evaluated inputs -> (status, JSON body).
Target = Callable[[dict[str, Any]], tuple[int, Any]]
# What the default retry policy retries, besides a connection that failed (status 0 here) and 5xx.
RETRIED = {0, 408, 429}
# The default policy's intervals: exponential, scaled by 7.5 s, between 5 and 45 s.
RETRY_SCALE_SECONDS, RETRY_MIN_SECONDS, RETRY_MAX_SECONDS = 7.5, 5.0, 45.0
UNIT_SECONDS = {"Second": 1, "Minute": 60, "Hour": 3600}
TOKEN = re.compile(
    r"\s*(?:(?P<string>'(?:[^']|'')*')|(?P<number>-?\d+(?:\.\d+)?)|(?P<name>[A-Za-z_]\w*)|(?P<punct>\?\[|[()\[\],]))"
)
FAILED = {"Failed", "TimedOut"}


class Terminated(Exception):
    """A ``Terminate`` action ended the run."""


class Killed(BaseException):
    """The run ends where it is (its host was lost, or it was cancelled): raised through every action to the test."""


class Expression:
    """One expression, read token by token and evaluated as it is read."""

    def __init__(self, source: str, functions: dict[str, Callable[..., Any]]) -> None:
        self.tokens = tokens(source)
        self.functions = functions
        self.index = 0

    def value(self) -> Any:
        result = self.evaluate()
        if self.index != len(self.tokens):
            raise ValueError(f"left over: {self.tokens[self.index :]}")
        return result

    def take(self, expected: str | None = None) -> str:
        kind, text = self.tokens[self.index]
        if expected is not None and text != expected:
            raise ValueError(f"expected {expected!r}, found {text!r}")
        self.index += 1
        return text if kind != "string" else text[1:-1].replace("''", "'")

    def peek(self) -> str | None:
        return self.tokens[self.index][1] if self.index < len(self.tokens) else None

    def evaluate(self) -> Any:
        kind = self.tokens[self.index][0]
        text = self.take()
        if kind == "number":
            result: Any = float(text) if "." in text else int(text)
        elif kind == "string":
            result = text
        elif text in ("true", "false", "null"):
            result = {"true": True, "false": False, "null": None}[text]
        else:
            self.take("(")
            arguments = []
            while self.peek() != ")":
                arguments.append(self.evaluate())
                if self.peek() == ",":
                    self.take(",")
            self.take(")")
            if text not in self.functions:
                raise KeyError(f"{text}() is not a function this runner knows")
            result = self.functions[text](*arguments)
        while self.peek() in ("[", "?["):
            safe = self.take() == "?["
            key = self.evaluate()
            self.take("]")
            if result is None and safe:
                continue
            result = result[key] if isinstance(result, list) or not safe else result.get(key)
        return result


@functools.cache
def tokens(source: str) -> tuple[tuple[str, str], ...]:
    """The tokens of an expression, read once per text: a loop evaluates the same few expressions thousands of times."""
    read = []
    position = 0
    while source[position:].strip():
        found = TOKEN.match(source, position)
        if found is None or found.lastgroup is None:
            raise ValueError(f"cannot read {source[position:]!r}")
        read.append((found.lastgroup, found.group(found.lastgroup)))
        position = found.end()
    return tuple(read)


def interpolations(text: str) -> list[tuple[int, int]]:
    """Where each ``@{...}`` of a string starts and ends, braces inside quotes left alone."""
    spans, start = [], text.find("@{")
    while start != -1:
        depth, quoted, end = 0, False, start + 1
        for end in range(start + 1, len(text)):
            char = text[end]
            quoted = quoted != (char == "'")
            if not quoted and char in "{}":
                depth += 1 if char == "{" else -1
                if depth == 0:
                    break
        spans.append((start, end + 1))
        start = text.find("@{", end + 1)
    return spans


def nested(action: dict[str, Any]) -> list[str]:
    """The names of every action inside ``action``: each iteration of a loop runs them afresh."""
    branches = [action, action.get("else", {}), action.get("default", {}), *action.get("cases", {}).values()]
    names = []
    for branch in branches:
        for name, inner in branch.get("actions", {}).items():
            names += [name, *nested(inner)]
    return names


@dataclass
class Run:
    """One run of a workflow definition."""

    definition: dict[str, Any]
    trigger_body: Any
    call: Call
    parameters: dict[str, Any] = field(default_factory=dict)
    name: str = "08584000000000000000000000000CU00"
    workflow_name: str = "logic-oncegate-sample"
    statuses: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    response: Any = None
    variables: dict[str, Any] = field(default_factory=dict)
    # The connector actions sent, as (method, path), each retry too: what a run costs in connector calls.
    sent: list[tuple[str, str]] = field(default_factory=list)
    # The engine's retry policy (4: the default one), what a stand-in's call reaches, and how the engine waits.
    retries: int = 0
    target: Target | None = None
    sleep: Callable[[float], object] = lambda seconds: None
    # The element a Select or a Filter array is at (``item()``), and each loop's (``items('loop')``).
    _item: list[Any] = field(default_factory=list)
    _loops: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def functions(self) -> dict[str, Callable[..., Any]]:
        """Each function an expression may call; made once per run, since each looks up what it reads when called."""
        declared = {name: p.get("defaultValue") for name, p in self.definition.get("parameters", {}).items()}
        return {
            "triggerBody": lambda: self.trigger_body,
            "workflow": lambda: {"name": self.workflow_name, "run": {"name": self.name}},
            "parameters": lambda name: {**declared, **self.parameters}[name],
            "outputs": self.output,
            "body": lambda name: self.output(name)["body"],
            "encodeURIComponent": lambda text: quote(str(text), safe=""),
            "empty": lambda value: value is None or len(value) == 0,
            "equals": lambda left, right: left == right,
            "greater": lambda left, right: left > right,
            "not": lambda value: not value,
            "json": json.loads,
            "coalesce": lambda *values: next((value for value in values if value is not None), None),
            "first": lambda values: values[0] if values else None,
            "max": lambda *values: max(values[0] if len(values) == 1 else values),
            "range": lambda start, count: list(range(start, start + count)),
            "removeProperty": lambda value, name: {key: kept for key, kept in value.items() if key != name},
            "length": len,
            "chunk": lambda values, size: [values[start : start + size] for start in range(0, len(values), size)],
            "item": lambda: self._item[-1],
            "items": lambda loop: self._loops[loop],
            "variables": lambda name: self.variables[name],
        }

    def output(self, name: str) -> Any:
        if self.statuses.get(name) not in ("Succeeded", "Failed"):
            raise LookupError(f"{name} has not run (it is {self.statuses.get(name, 'not started')})")
        return self.outputs[name]

    def start(self) -> Run:
        with contextlib.suppress(Terminated):
            self.run_all(self.definition["actions"])
        return self

    def evaluate(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self.evaluate(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.evaluate(item) for item in value]
        if not isinstance(value, str) or "@" not in value:
            return value
        if value.startswith("@@"):
            return value[1:]
        if value.startswith("@") and not value.startswith("@{"):
            return Expression(value[1:], self.functions).value()
        parts, last = [], 0
        for start, end in interpolations(value):
            found = Expression(value[start + 2 : end - 1], self.functions).value()
            parts += [
                value[last:start],
                "" if found is None else found if isinstance(found, str) else json.dumps(found),
            ]
            last = end
        return "".join([*parts, value[last:]])

    def run_all(self, actions: dict[str, Any]) -> str:
        """Runs sibling actions; the status of the set: Failed when one failed."""
        pending = dict(actions)
        while pending:
            ready = [name for name, a in pending.items() if set(a.get("runAfter", {})) <= set(self.statuses)]
            if not ready:
                raise ValueError(f"runAfter never met: {sorted(pending)}")
            for name in ready:
                action = pending.pop(name)
                met = all(self.statuses[before] in wanted for before, wanted in action.get("runAfter", {}).items())
                self.statuses[name] = self.execute(name, action) if met else "Skipped"
        return "Failed" if any(self.statuses[name] in FAILED for name in actions) else "Succeeded"

    def execute(self, name: str, action: dict[str, Any]) -> str:
        kind = action["type"]
        if kind == "Compose" and self.target is not None and "standsFor" in action["inputs"]:
            inputs, target = self.evaluate(action["inputs"]), self.target
            status, body = self.with_retries(lambda: target(inputs))
            self.outputs[name] = {"statusCode": status, "body": body}
            return "Succeeded" if 0 < status < 300 else "Failed"
        if kind == "Compose":
            self.outputs[name] = self.evaluate(action["inputs"])
            return "Succeeded"
        if kind == "ApiConnection":
            inputs = self.evaluate(action["inputs"])

            def send() -> tuple[int, Any]:
                self.sent.append((inputs["method"], inputs["path"]))
                return self.call(inputs["method"], inputs["path"], inputs.get("body"))

            status, body = self.with_retries(send)
            self.outputs[name] = {"statusCode": status, "body": body}
            return "Succeeded" if 0 < status < 300 else "Failed"
        if kind == "Switch":
            value = self.evaluate(action["expression"])
            chosen = [case for case in action["cases"].values() if case["case"] == value]
            return self.run_all((chosen[0] if chosen else action.get("default", {})).get("actions", {}))
        if kind == "If":
            branch = action if self.condition(action["expression"]) else action.get("else", {})
            return self.run_all(branch.get("actions", {}))
        if kind == "Response":
            self.response = self.evaluate(action["inputs"])
            return "Succeeded"
        if kind in ("Select", "Query"):
            self.outputs[name] = {"body": self.each_item(action["inputs"], kind)}
            return "Succeeded"
        if kind == "Foreach":
            statuses = []
            for value in self.evaluate(action["foreach"]):
                self._loops[name] = value
                for inner in nested(action):
                    self.statuses.pop(inner, None)
                statuses.append(self.run_all(action["actions"]))
            self._loops.pop(name, None)
            return "Failed" if "Failed" in statuses else "Succeeded"
        if kind == "Until":
            # An iteration that failed does not end the loop; the loop's status is its last iteration's.
            status = "Succeeded"
            for _ in range(action.get("limit", {}).get("count", 60)):
                for inner in nested(action):
                    self.statuses.pop(inner, None)
                status = self.run_all(action["actions"])
                if self.evaluate(action["expression"]):
                    break
            return status
        if kind == "Wait":
            interval = self.evaluate(action["inputs"]["interval"])
            self.sleep(interval["count"] * UNIT_SECONDS[interval["unit"]])
            return "Succeeded"
        if kind in ("InitializeVariable", "SetVariable", "AppendToArrayVariable", "IncrementVariable"):
            self.set_variable(kind, self.evaluate(action["inputs"]))
            return "Succeeded"
        if kind == "Terminate":
            self.statuses[name] = action["inputs"]["runStatus"]
            raise Terminated(name)
        raise ValueError(f"{name}: action type {kind} is not one this runner knows")

    def with_retries(self, send: Callable[[], tuple[int, Any]]) -> tuple[int, Any]:
        """The answer to an action's request under the retry policy; status 0 when no answer came at all."""
        for retry in range(self.retries + 1):
            if retry:
                scaled = RETRY_SCALE_SECONDS * 2 ** (retry - 1)
                self.sleep(min(RETRY_MAX_SECONDS, max(RETRY_MIN_SECONDS, scaled)))
            try:
                status, body = send()
            except ConnectionError:
                status, body = 0, None
            if status not in RETRIED and status < 500:
                break
        return status, body

    def each_item(self, inputs: dict[str, Any], kind: str) -> list[Any]:
        """A Select's mapped elements, or a Filter array's kept ones, ``item()`` being each element in turn."""
        found = []
        for element in self.evaluate(inputs["from"]):
            self._item.append(element)
            try:
                if kind == "Select":
                    found.append(self.evaluate(inputs["select"]))
                elif self.evaluate(inputs["where"]):
                    found.append(element)
            finally:
                self._item.pop()
        return found

    def set_variable(self, kind: str, inputs: dict[str, Any]) -> None:
        if kind == "InitializeVariable":
            for variable in inputs["variables"]:
                self.variables[variable["name"]] = variable.get("value")
        elif kind == "SetVariable":
            self.variables[inputs["name"]] = inputs["value"]
        elif kind == "AppendToArrayVariable":
            self.variables[inputs["name"]].append(inputs["value"])
        else:
            self.variables[inputs["name"]] += inputs.get("value", 1)

    def condition(self, expression: dict[str, Any]) -> bool:
        ((operator, operands),) = expression.items()
        if operator == "and":
            return all(self.condition(operand) for operand in operands)
        if operator == "or":
            return any(self.condition(operand) for operand in operands)
        if operator == "not":
            return not self.condition(operands)
        if operator in ("equals", "greater"):
            left, right = (self.evaluate(operand) for operand in operands)
            return bool(left == right if operator == "equals" else left > right)
        raise ValueError(f"condition {operator} is not one this runner knows")
