"""Records made, and copied with some fields changed, at a fraction of what :mod:`dataclasses` costs.

:func:`frozen` makes a class what ``@dataclass(frozen=True)`` makes it, and :func:`mutable` what ``@dataclass``
makes it (for the few records whose fields change in place). ``dataclasses`` compiles five or six methods for
each class and reads each field's annotation again: a new process made some forty records before its first
answer, and that was 20 ms of its cold start (issue 36). Here equality, order, hash, ``repr`` and a frozen
record's refusals of a change are functions made for the class from its fields, and only ``__init__`` is
written as text, made when the class is first called: its code read from what ``python -m tools.records`` wrote
out and the package's bytecode holds (:mod:`oncegate.domain.record_inits`), or compiled then for a record not
written out. It sets the fields in one update of the instance's dictionary instead of through
``object.__setattr__`` one by one (a claim of 32 fields took 3.3 µs to make that way).

:func:`replaced` is what :func:`dataclasses.replace` makes, at a fraction of its cost: ``replace`` calls the
class's ``__init__`` with every field read back one by one, and five of them on the way of one Check and claim
were a tenth of its Python (issue 36). The records have no ``__post_init__`` and no slots, so a copy of the
instance's dictionary with the changes laid over it is the same value; a name that is not a field is refused as
``replace`` refuses it.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
import operator
import re
from _thread import get_ident
from collections.abc import Callable
from dataclasses import KW_ONLY, MISSING, Field, FrozenInstanceError, InitVar, field, fields
from operator import attrgetter
from types import CodeType, FunctionType
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_FIELDS: dict[type, frozenset[str]] = {}
_FIELD = dataclasses._FIELD  # type: ignore[attr-defined]  # the kind of field dataclasses.fields() lists
# What field() passes for the parameters Field takes after Python 3.11's eight, when not given: None (3.14's doc).
_FIELD_REST = (None,) * (Field.__init__.__code__.co_argcount - 9)
# An annotation that declares no field, as dataclasses reads one written as text; compiled (re's cache) for the first
# annotation holding one of its words, which no record has.
_NO_FIELD = r"\s*(?:\w+\s*\.\s*)?(?:ClassVar|InitVar)\b"


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
def frozen(*, kw_only: bool = False, order: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, dataclasses.Field))
def frozen(kind: type[T] | None = None, /, *, kw_only: bool = False, order: bool = False) -> Any:
    """``@dataclass(frozen=True)`` (with ``kw_only`` and ``order`` as it takes them), made at a fraction of its cost.

    The same fields (:func:`dataclasses.fields`, ``replace`` and ``asdict`` read them), the same ``__init__``
    parameters (names, order, defaults, factories, keyword-only; ``_: KW_ONLY`` too), and the same equality, order,
    hash, ``repr`` and refusals of a change. The ``__init__`` is made when the class is first called: a record
    no request makes costs a new process nothing more (until then ``inspect.signature`` of the class reads
    ``(*args, **kwargs)``; a class without a docstring, which ``dataclasses`` names by its signature, gets it
    at once). A record that checks its fields (``__post_init__``), keeps
    no dictionary (``__slots__``) or declares a ``ClassVar`` or ``InitVar`` is refused: every annotation is a field
    its ``__init__`` sets in the dictionary.
    """
    if kind is None:
        return lambda later: _made(later, kw_only, order, frozen=True)
    return _made(kind, kw_only, order, frozen=True)


@dataclass_transform(field_specifiers=(field, dataclasses.Field))
def mutable(kind: type[T], /) -> type[T]:
    """``@dataclass``, made as :func:`frozen` makes a record: a record whose fields change in place (a tally)."""
    return _made(kind, False, False, frozen=False)


def _made(kind: type[T], kw_only: bool, order: bool, *, frozen: bool) -> type[T]:
    assert not hasattr(kind, "__post_init__"), f"{kind} checks its fields"
    assert "__slots__" not in vars(kind), f"{kind} keeps no dictionary"
    own_hash = vars(kind).get("__hash__", MISSING)
    explicit_hash = not (own_hash is MISSING or (own_hash is None and "__eq__" in vars(kind)))
    made = _fields(kind, kw_only, frozen)
    _ordered(made)
    assert frozen or kind.__setattr__ is object.__setattr__, f"{kind} sets its fields itself"
    kind.__dataclass_fields__ = {one.name: one for one in made}  # type: ignore[attr-defined]
    kind.__dataclass_params__ = _params(order, kw_only, frozen)  # type: ignore[attr-defined]
    if "__match_args__" not in vars(kind):
        setattr(kind, "__match_args__", tuple(one.name for one in made if not one.kw_only))  # noqa: B010
    _set(kind, "__init__", _init_when_called(kind, made))
    _set(kind, "__repr__", _repr(kind, [one.name for one in made if one.repr]))
    compared = _values([one.name for one in made if one.compare])
    _set(kind, "__eq__", _compare(kind, "__eq__", compared, operator.eq))
    if order:
        for name, how in (
            ("__lt__", operator.lt),
            ("__le__", operator.le),
            ("__gt__", operator.gt),
            ("__ge__", operator.ge),
        ):
            _set(kind, name, _compare(kind, name, compared, how), refuse=True)
    if frozen and not explicit_hash:
        hashed = [one.name for one in made if (one.compare if one.hash is None else one.hash)]
        _set(kind, "__hash__", _hash(kind, _values(hashed)), replace=True)
    elif not explicit_hash:  # equal by value and changing: unhashable, as dataclasses has it
        kind.__hash__ = None  # type: ignore[assignment]
    if frozen:
        _set(kind, "__setattr__", _setattr(kind, frozenset(one.name for one in made)), refuse=True)
        _set(kind, "__delattr__", _delattr(kind, frozenset(one.name for one in made)), refuse=True)
    if not kind.__doc__:  # as dataclasses names a class without a docstring, from its __init__
        setattr(kind, "__init__", _init(kind, made))  # noqa: B010 (mypy refuses assigning a method)
        kind.__doc__ = kind.__name__ + str(inspect.signature(kind)).replace(" -> None", "")
    abc.update_abstractmethods(kind)
    return kind


def _fields(kind: type, kw_only: bool, frozen: bool) -> list[dataclasses.Field[Any]]:
    """``kind``'s fields, its dataclass bases' first, as ``dataclasses`` collects them."""
    found: dict[str, dataclasses.Field[Any]] = {}
    for base in kind.__mro__[-1:0:-1]:
        below: dict[str, dataclasses.Field[Any]] | None = vars(base).get("__dataclass_fields__")
        if below is not None:
            if vars(base)["__dataclass_params__"].frozen != frozen:
                raise TypeError(
                    "cannot inherit frozen dataclass from a non-frozen one"
                    if frozen
                    else "cannot inherit non-frozen dataclass from a frozen one"
                )
            found.update(below)
    for name, annotation in vars(kind).get("__annotations__", {}).items():
        if annotation is KW_ONLY or annotation in ("KW_ONLY", "dataclasses.KW_ONLY"):
            kw_only = True
            continue
        spelt = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
        # The pattern only where its words are: a text without them is no ClassVar or InitVar (400 fields at a start).
        named = "ClassVar" in spelt or "InitVar" in spelt
        if (named and re.match(_NO_FIELD, spelt)) or isinstance(annotation, InitVar):
            raise TypeError(f"{kind.__name__}.{name} is no field: a record declares only fields")
        default: Any = getattr(kind, name, MISSING)
        declared = isinstance(default, Field)
        if declared:
            one: Field[Any] = default
        else:
            # What field(default=default) makes, without the checks of arguments it is not given (400 fields a start);
            # MISSING and None are what field() passes for a factory and metadata not given, as typeshed does not say.
            one = Field(default, MISSING, True, True, None, True, None, kw_only, *_FIELD_REST)  # type: ignore[arg-type]
        one.name, one.type = name, annotation
        one._field_type = _FIELD  # type: ignore[attr-defined]  # what dataclasses.fields() lists
        if one.kw_only is MISSING:
            one.kw_only = kw_only
        if not one.init:
            raise TypeError(f"{kind.__name__}.{name} is not set by __init__: a record's __init__ sets every field")
        if one.default.__class__.__hash__ is None:  # a list, a dict, a set: every record would share it
            raise ValueError(
                f"mutable default {type(one.default)} for field {name} is not allowed: use default_factory"
            )
        if declared:
            if one.default is MISSING:
                delattr(kind, name)
            else:
                setattr(kind, name, one.default)
        found[name] = one
    return list(found.values())


def _ordered(made: list[dataclasses.Field[Any]]) -> None:
    """Refuses a positional field without a default after one with a default, as dataclasses does when it makes
    the class (the ``__init__`` is compiled later, at the first call)."""
    defaulted = False
    for one in made:
        if one.kw_only:
            continue
        if one.default is not MISSING or one.default_factory is not MISSING:
            defaulted = True
        elif defaulted:
            raise TypeError(f"non-default argument {one.name!r} follows default argument")


def _params(order: bool, kw_only: bool, frozen: bool) -> Any:
    """What ``dataclasses`` keeps of how it made a class (``__dataclass_params__``), for these options."""
    made = object.__new__(dataclasses._DataclassParams)  # type: ignore[attr-defined]
    given = {"init": True, "repr": True, "eq": True, "order": order, "frozen": frozen, "match_args": True}
    for name in type(made).__slots__:  # its names differ between Python versions; the others are off
        setattr(made, name, given.get(name, kw_only if name == "kw_only" else False))
    return made


def _set(kind: type, name: str, method: Callable[..., Any], *, replace: bool = False, refuse: bool = False) -> None:
    """``method`` as ``kind``'s ``name``, unless the class wrote its own (which dataclasses keeps, or refuses)."""
    if name in vars(kind) and not replace:
        if refuse:
            raise TypeError(f"Cannot overwrite attribute {name} in class {kind.__name__}")
        return
    method.__qualname__ = f"{kind.__qualname__}.{name}"
    setattr(kind, name, method)


def _init_when_called(kind: type, made: list[dataclasses.Field[Any]]) -> Callable[..., None]:
    """An ``__init__`` that compiles ``kind``'s own (:func:`_init`) when first called, and hands over to it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _init(kind, made)
        init.__qualname__ = f"{kind.__qualname__}.__init__"
        setattr(kind, "__init__", init)  # noqa: B010 (mypy refuses assigning a method)
        init(self, *args, **kwargs)

    return __init__


class _Factory:
    """A default made by a factory, as ``dataclasses`` marks it in the ``__init__`` it writes (and shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_MADE_BY_FACTORY: Any = _Factory()


def _init(kind: type, made: list[dataclasses.Field[Any]]) -> Callable[..., None]:
    """The ``__init__`` dataclasses writes for ``kind``, setting the fields in one update of the dictionary.

    Its defaults are the function's ``__defaults__`` and ``__kwdefaults__``, where ``def f(a=default)`` puts them,
    rather than names in its text, and the fields go to ``update`` as keywords: a third less text to compile, and a
    quicker call. Its code is read from :mod:`oncegate.domain.record_inits` where ``python -m tools.records`` wrote
    it out (:func:`_compiled`).
    """
    shape, scope, defaults, keyword_defaults = _shaped(kind, made)
    init: Callable[..., None] = FunctionType(_compiled(shape), scope)
    init.__defaults__ = tuple(defaults) or None
    init.__kwdefaults__ = keyword_defaults or None
    init.__annotations__ = {one.name: one.type for one in made} | {"return": None}  # what its signature shows
    return init


# What an __init__'s text is made from: the fields in their order, those among them that are keyword-only, and those
# whose default a factory makes.
Shape = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def init_shape(kind: type) -> Shape:
    """What the text of a record's ``__init__`` is made from (``tools.records`` writes its code out by it)."""
    return _shaped(kind, list(kind.__dataclass_fields__.values()))[0]  # type: ignore[attr-defined]


def _shaped(kind: type, made: list[dataclasses.Field[Any]]) -> tuple[Shape, dict[str, Any], list[Any], dict[str, Any]]:
    """The shape of ``kind``'s ``__init__``, the names it reads besides its parameters, and its defaults."""
    # Its own names are dunder names, as dataclasses' are: a field of the same name would stand in their place.
    scope: dict[str, Any] = {"__made_by_factory__": _MADE_BY_FACTORY}
    names: list[str] = []
    keyword: list[str] = []
    factories: list[str] = []
    defaults: list[Any] = []
    keyword_defaults: dict[str, Any] = {}
    for one in made:
        assert one.init, f"{kind}.{one.name} is not set by __init__"
        name = one.name
        names.append(name)
        if one.default is not MISSING:
            default = one.default
        elif one.default_factory is not MISSING:
            scope[f"__factory_{name}__"] = one.default_factory
            factories.append(name)
            default = _MADE_BY_FACTORY
        else:
            default = MISSING
        if one.kw_only:
            keyword.append(name)
            if default is not MISSING:
                keyword_defaults[name] = default
        elif default is not MISSING:
            defaults.append(default)
        else:
            assert not defaults, f"{kind}.{name} follows a default (refused when the class is made)"
    return (tuple(names), tuple(keyword), tuple(factories)), scope, defaults, keyword_defaults


def init_source(shape: Shape) -> str:
    """The text of an ``__init__`` of this shape: what a record's first call compiles, unless it was written out."""
    names, keyword, factories = shape
    own = "__dataclass_self__" if "self" in names else "self"  # as dataclasses names it
    positional = [name for name in names if name not in keyword]
    parameters = ", ".join([own, *positional, *(["*", *keyword] if keyword else [])])
    values = ", ".join(
        f"{name}=__factory_{name}__() if {name} is __made_by_factory__ else {name}"
        if name in factories
        else f"{name}={name}"
        for name in names
    )
    return f"def __init__({parameters}):\n    {own}.__dict__.update({values})\n"


# The records' __init__ as tools.records wrote them out, by their shape, read at the first record's first call.
_read: dict[Shape, CodeType] | None = None


def _compiled(shape: Shape) -> CodeType:
    """The code of the ``__init__`` of this shape, as ``exec(init_source(shape))`` makes it.

    Read from :mod:`oncegate.domain.record_inits`, compiled from the same text with the package's bytecode, where the
    shape is there: compiling each record's at its first call was two thirds of a first claim's own Python (26
    records, about 8 million instructions: issue 36's cold start). Only a shape not written out there (a record added
    or changed since ``python -m tools.records`` ran; tests/service/test_record_inits.py fails until it is run) is
    compiled here.
    """
    global _read
    if _read is None:
        from oncegate.domain.record_inits import INITS

        _read = INITS
    written = _read.get(shape)
    if written is not None:
        # As exec names what it compiles: a traceback through the __init__ reads as the compiled one's.
        return written.replace(co_filename="<string>", co_firstlineno=1)
    scope: dict[str, Any] = {}
    exec(init_source(shape), scope)
    code: CodeType = scope["__init__"].__code__
    return code


def _values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of the named fields of a record: what dataclasses' methods compare and hash."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        [name] = names
        return lambda value: (getattr(value, name),)
    return lambda value: ()


def _compare(
    kind: type, name: str, compared: Callable[[Any], tuple[Any, ...]], how: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], Any]:
    """``__eq__`` (or ``__lt__``...): the fields compared as tuples, between records of the same class only."""

    def compare(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return how(compared(self), compared(other))
        return NotImplemented

    compare.__name__ = name
    return compare


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
