"""Frozen records made, and copied with some fields changed, at a fraction of what :mod:`dataclasses` costs.

:func:`frozen` makes a class what ``@dataclass(frozen=True)`` makes it, without compiling five methods for each
class: a new process made some forty records before its first answer, and ``dataclasses`` took 20 ms of its
cold start compiling them (issue 36). Its ``__init__`` is compiled, as ``dataclasses`` compiles it, but sets the
fields in one update of the instance's dictionary instead of through ``object.__setattr__`` one by one (a claim
of 32 fields took 3.3 µs to make); ``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__`` and ``__delattr__``
are functions made for the class from its fields, doing what those ``dataclasses`` writes do.

:func:`replaced` is what :func:`dataclasses.replace` makes, at a fraction of its cost: ``replace`` calls the
class's ``__init__`` with every field read back one by one, and five of them on the way of one Check and claim
were a tenth of its Python (issue 36). The records have no ``__post_init__`` and no slots, so a copy of the
instance's dictionary with the changes laid over it is the same value; a name that is not a field is refused as
``replace`` refuses it.
"""

from __future__ import annotations

import dataclasses
import inspect
from _thread import get_ident
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

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


@overload
def frozen(kind: type[T], /) -> type[T]: ...


@overload
def frozen(*, kw_only: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, dataclasses.Field))
def frozen(kind: type[T] | None = None, /, *, kw_only: bool = False) -> Any:
    """``@dataclass(frozen=True)`` (or ``@dataclass(frozen=True, kw_only=True)``), made at a fraction of its cost.

    The same fields (:func:`dataclasses.fields`, ``replace`` and ``asdict`` read them), the same ``__init__``
    parameters (names, order, defaults, factories, keyword-only), and the same equality, hash, ``repr`` and
    refusals of a change. A record that checks its fields (``__post_init__``) or keeps no dictionary
    (``__slots__``) is refused: its ``__init__`` sets the dictionary.
    """
    if kind is None:
        return lambda later: _made_frozen(later, kw_only)
    return _made_frozen(kind, kw_only)


def _made_frozen(kind: type[T], kw_only: bool) -> type[T]:
    assert not hasattr(kind, "__post_init__"), f"{kind} checks its fields"
    assert "__slots__" not in vars(kind), f"{kind} keeps no dictionary"
    undocumented = not kind.__doc__
    # A record below a frozen one is frozen too: dataclasses refuses it otherwise, and writes its refusals itself.
    below_frozen = any(getattr(vars(base).get("__dataclass_params__"), "frozen", False) for base in kind.__mro__[1:])
    own_hash = vars(kind).get("__hash__", MISSING)
    explicit_hash = not (own_hash is MISSING or (own_hash is None and "__eq__" in vars(kind)))
    dataclass(init=False, repr=False, eq=False, frozen=below_frozen, kw_only=kw_only)(kind)
    made = list(fields(kind))  # type: ignore[arg-type]
    _set(kind, "__init__", _init(kind, made))
    _set(kind, "__repr__", _repr(kind, [one.name for one in made if one.repr]))
    compared = _values([one.name for one in made if one.compare])
    _set(kind, "__eq__", _eq(kind, compared))
    if not explicit_hash:
        hashed = [one.name for one in made if (one.compare if one.hash is None else one.hash)]
        _set(kind, "__hash__", _hash(kind, _values(hashed)), replace=True)
    if not below_frozen:
        _set(kind, "__setattr__", _setattr(kind, frozenset(one.name for one in made)), refuse=True)
        _set(kind, "__delattr__", _delattr(kind, frozenset(one.name for one in made)), refuse=True)
    # What a class so made is, as dataclasses says of its own (a frozen dataclass below it checks it).
    params = vars(kind)["__dataclass_params__"]
    params.init = params.repr = params.eq = params.frozen = True
    if undocumented:  # as dataclasses names a class without a docstring, from its __init__
        kind.__doc__ = kind.__name__ + str(inspect.signature(kind)).replace(" -> None", "")
    return kind


def _set(kind: type, name: str, method: Callable[..., Any], *, replace: bool = False, refuse: bool = False) -> None:
    """``method`` as ``kind``'s ``name``, unless the class wrote its own (which dataclasses keeps, or refuses)."""
    if name in vars(kind) and not replace:
        if refuse:
            raise TypeError(f"Cannot overwrite attribute {name} in class {kind.__name__}")
        return
    method.__qualname__ = f"{kind.__qualname__}.{method.__name__}"
    setattr(kind, name, method)


# A default made by a factory, as ``dataclasses`` marks it in the ``__init__`` it writes.
_MADE_BY_FACTORY: Any = object()


def _init(kind: type, made: list[dataclasses.Field[Any]]) -> Callable[..., None]:
    """The ``__init__`` dataclasses writes for ``kind``, setting the fields in one update of the dictionary."""
    scope: dict[str, Any] = {"_MADE_BY_FACTORY": _MADE_BY_FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    values: list[str] = []
    for one in made:
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
    init: Callable[..., None] = scope["__init__"]
    init.__annotations__ = {one.name: one.type for one in made} | {"return": None}  # what its signature shows
    return init


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of the named fields of a record: what dataclasses' methods compare and hash."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        [name] = names
        return lambda value: (getattr(value, name),)
    return lambda value: ()


def _eq(kind: type, compared: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    return __eq__


def _hash(kind: type, hashed: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    return __hash__


def _repr(kind: type, shown: list[str]) -> Callable[[Any], str]:
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in running:  # a record holding itself, as dataclasses shows it
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _setattr(kind: type[Any], names: frozenset[str]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is kind or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(kind, self).__setattr__(name, value)

    return __setattr__


def _delattr(kind: type[Any], names: frozenset[str]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is kind or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(kind, self).__delattr__(name)

    return __delattr__
