"""A frozen record with some fields changed, as :func:`dataclasses.replace` makes it, at a fraction of its cost.

``replace`` calls the class's ``__init__`` with every field read back one by one: five of them on the way of
one Check and claim were a tenth of its Python (issue 36). The records of the claim path have no
``__post_init__`` and no slots, so a copy of the instance's dictionary with the changes laid over it is the
same value; a name that is not a field is refused as ``replace`` refuses it.

The records a claim makes new (its claim, history line, intent and answer) are made by an ``__init__``
that sets their fields in one update of the instance's dictionary (:func:`quick_init`) instead of the one
``dataclasses`` writes for a frozen class, which sets each field through ``object.__setattr__``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, TypeVar

T = TypeVar("T")

_FIELDS: dict[type, frozenset[str]] = {}


def replaced(value: T, **changes: Any) -> T:
    """``value`` with ``changes`` laid over its fields; the same as ``dataclasses.replace(value, **changes)``."""
    kind = type(value)
    names = _FIELDS.get(kind)
    if names is None:
        assert not hasattr(kind, "__post_init__"), f"{kind} checks its fields"
        assert not hasattr(kind, "__slots__"), f"{kind} keeps no dictionary"
        names = _FIELDS[kind] = frozenset(field.name for field in fields(kind))  # type: ignore[arg-type]
    if not names.issuperset(changes):
        raise TypeError(f"{kind.__name__} has no field {', '.join(sorted(set(changes) - names))}")
    made: T = object.__new__(kind)
    made.__dict__.update(value.__dict__, **changes)
    return made


# A default made by a factory, as ``dataclasses`` marks it in the ``__init__`` it writes.
_MADE_BY_FACTORY: Any = object()
# Each quick class's ``__init__`` as ``dataclasses`` wrote it: what ``tests/domain/test_copies.py`` compares with.
WRITTEN_BY_DATACLASSES: dict[type, Callable[..., None]] = {}


def quick_init(kind: type[T]) -> type[T]:
    """``kind`` (a frozen dataclass) with an ``__init__`` that sets its fields in one update of its dictionary.

    The one ``dataclasses`` writes for a frozen class sets each field through ``object.__setattr__``: a claim of 32
    fields took 3.3 µs to make, and Check and claim makes a claim, a history line, an intent and an answer
    (issue 36). The same parameters (names, order, defaults, factories, keyword-only), the same value made.
    """
    assert not hasattr(kind, "__post_init__"), f"{kind} checks its fields"
    assert not hasattr(kind, "__slots__"), f"{kind} keeps no dictionary"
    scope: dict[str, Any] = {"_MADE_BY_FACTORY": _MADE_BY_FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    values: list[str] = []
    for one in fields(kind):  # type: ignore[arg-type]
        assert one.init, f"{kind}.{one.name} is not set by __init__"
        name = one.name
        if one.default is not MISSING:
            scope[f"_default_{name}"] = one.default
            parameter = f"{name}=_default_{name}"
            values.append(f"{name!r}: {name}")
        elif one.default_factory is not MISSING:
            scope[f"_factory_{name}"] = one.default_factory
            parameter = f"{name}=_MADE_BY_FACTORY"
            values.append(f"{name!r}: _factory_{name}() if {name} is _MADE_BY_FACTORY else {name}")
        else:
            parameter = name
            values.append(f"{name!r}: {name}")
        (keyword if one.kw_only else positional).append(parameter)
    parameters = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    exec(f"def __init__({parameters}):\n    self.__dict__.update({{{', '.join(values)}}})\n", scope)
    made: Any = scope["__init__"]
    made.__qualname__ = f"{kind.__qualname__}.__init__"
    WRITTEN_BY_DATACLASSES[kind] = kind.__dict__["__init__"]
    setattr(kind, "__init__", made)  # noqa: B010 (mypy refuses assigning a method)
    return kind
