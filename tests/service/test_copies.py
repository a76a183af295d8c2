"""The claim path's quick copy of a record is the copy ``dataclasses.replace`` makes, and a record made by
:func:`~oncegate.domain.copies.frozen` is the record ``@dataclass(frozen=True)`` makes, at a fraction of its cost
(issue 36)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import operator
import pkgutil
from dataclasses import KW_ONLY, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

import oncegate
from oncegate.domain import copies
from oncegate.domain.copies import frozen, mutable, replaced
from oncegate.domain.decisions import ClaimAnswer, Identity, Intent
from oncegate.domain.keys import Fingerprint, KeyHasher
from oncegate.domain.records import Claim, Flow, HistoryEvent
from oncegate.domain.statuses import AnswerStatus, Decision
from oncegate.service.claims import Waited
from oncegate.service.inventory import Tally
from tests.support.records import event, full_claim

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


def _intent() -> Intent:
    return Intent(
        run_id="run-1",
        flow=Flow("Create ERP order", "Default-contoso"),
        fingerprint=None,
        now=NOW,
        scope="erp.create-order",
        lease=timedelta(seconds=300),
        warnings=("no-flow",),
    )


def test_a_copy_equals_what_replace_makes_and_leaves_the_original_alone() -> None:
    intent = _intent()
    later = NOW + timedelta(seconds=1)
    copy = replaced(intent, decided_at=later, run_id="run-2")
    assert copy == dataclasses.replace(intent, decided_at=later, run_id="run-2")
    assert type(copy) is Intent
    assert (intent.decided_at, intent.run_id) == (None, "run-1")


def test_a_name_that_is_no_field_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field"):
        replaced(_intent(), decision="proceed")


def _made_by_frozen() -> list[type]:
    """Every class of OnceGate that :func:`frozen` or :func:`mutable` made: its ``__eq__`` is the one they make."""
    made_eq = copies._compare(object, "__eq__", lambda value: (), operator.eq).__code__
    found: dict[str, type] = {}
    for module in pkgutil.walk_packages(oncegate.__path__, "oncegate."):
        if module.name.endswith("__main__"):
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and getattr(vars(value).get("__eq__"), "__code__", None) is made_eq:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


MADE = _made_by_frozen()


def _twin(kind: type) -> type:
    """``kind``'s fields, made into a class by ``@dataclass(frozen=True)``: what ``frozen`` must make alike."""
    namespace: dict[str, Any] = {"__annotations__": {}, "__qualname__": kind.__qualname__, "__doc__": kind.__doc__}
    for one in dataclasses.fields(kind):
        namespace["__annotations__"][one.name] = one.type
        namespace[one.name] = dataclasses.field(
            default=one.default,
            default_factory=one.default_factory,
            repr=one.repr,
            hash=one.hash,
            compare=one.compare,
            kw_only=one.kw_only,
        )
    params = kind.__dataclass_params__  # type: ignore[attr-defined]
    twin: type = dataclasses.dataclass(frozen=params.frozen, order=params.order)(type(kind.__name__, (), namespace))
    return twin


def test_every_record_of_the_claim_path_is_made_by_frozen_or_mutable() -> None:
    assert {Claim, HistoryEvent, Intent, ClaimAnswer, Identity, Fingerprint, Flow, Tally, Waited} <= set(MADE)
    assert len(MADE) > 40


@pytest.mark.parametrize("kind", MADE, ids=lambda kind: kind.__qualname__)
def test_a_frozen_record_has_the_fields_and_parameters_dataclasses_gives(kind: type) -> None:
    twin = _twin(kind)
    assert dataclasses.is_dataclass(kind)
    assert [(one.name, one.default, one.default_factory, one.kw_only) for one in dataclasses.fields(kind)] == [
        (one.name, one.default, one.default_factory, one.kw_only) for one in dataclasses.fields(twin)
    ]
    assert kind.__match_args__ == twin.__match_args__  # type: ignore[attr-defined]
    assert repr(kind.__dataclass_params__) == repr(twin.__dataclass_params__)  # type: ignore[attr-defined]
    quick = inspect.signature(copies._init(kind, list(dataclasses.fields(kind))))  # what its first call compiles
    written = inspect.signature(vars(twin)["__init__"])
    assert [(p.name, p.kind) for p in quick.parameters.values()] == [
        (p.name, p.kind) for p in written.parameters.values()
    ]
    for name, parameter in written.parameters.items():
        field = next((one for one in dataclasses.fields(kind) if one.name == name), None)
        if field is not None and field.default_factory is not dataclasses.MISSING:
            continue  # the factory's marker: checked by what it makes below
        assert quick.parameters[name].default is parameter.default, name


def test_a_record_s_defaults_are_its_init_s_as_dataclasses_writes_them() -> None:
    # The compiled __init__ keeps its defaults on the function (__defaults__, __kwdefaults__), not in its text.
    @frozen
    class Spaced:
        """Positional and keyword fields with defaults and a factory."""

        first: int
        second: str = "two"
        third: list[int] = field(default_factory=list)
        _: KW_ONLY
        fourth: int
        fifth: str = "five"

    made = Spaced(1, fourth=4)
    assert (made.first, made.second, made.third, made.fourth, made.fifth) == (1, "two", [], 4, "five")
    assert Spaced(1, fourth=4).third is not made.third
    init = vars(Spaced)["__init__"]
    assert init.__defaults__[0] == "two"
    assert init.__kwdefaults__ == {"fifth": "five"}
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'fourth'"):
        Spaced(1)  # type: ignore[call-arg]


def test_a_field_without_a_default_after_one_with_a_default_is_refused_as_dataclasses_refuses_it() -> None:
    # When the class is made, as dataclasses refuses it: not at its first call, which a record no test makes
    # would meet first in production.
    with pytest.raises(TypeError, match="non-default argument 'required' follows default argument"):

        @frozen
        class Misordered:  # mypy: dataclass_transform refuses it too
            """A required field after an optional one."""

            optional: int = 0
            required: int  # type: ignore[misc]

    @frozen
    class Base:
        """An optional field."""

        optional: int = 0

    with pytest.raises(TypeError, match="non-default argument 'required' follows default argument"):

        @frozen
        class Below(Base):
            """A required field after its base's optional one."""

            required: int  # type: ignore[misc]


def test_a_factory_s_marker_and_a_field_s_name_are_as_dataclasses_has_them() -> None:
    # The factory's marker reads <factory> in a signature and a docstring-less class's name, as dataclasses
    # shows it (not an object's address, which differs from run to run); and a field may bear any name the
    # compiled __init__ uses for its own values without taking their place.
    def made(decorator: Any) -> type:
        @decorator
        class Odd:
            self: int = -1
            _MADE_BY_FACTORY: int = 0
            _factory_listed: int = 1
            listed: list[int] = field(default_factory=list)

        return Odd

    quick, written = made(frozen), made(dataclasses.dataclass(frozen=True))
    assert quick.__doc__ == written.__doc__
    assert "listed: 'list[int]' = <factory>" in str(quick.__doc__)
    assert str(inspect.signature(quick)) == str(inspect.signature(written))
    assert repr(quick()) == repr(written()).replace(written.__qualname__, quick.__qualname__)
    assert quick().listed == []
    assert quick(4, 5, 6, [7]).listed == [7]
    assert quick(self=4).self == 4


def test_a_record_s_init_is_compiled_when_it_is_first_called() -> None:
    @frozen(kw_only=True)
    class Late:
        """Made later."""

        value: int
        noted: str = ""

    waiting = vars(Late)["__init__"]
    assert Late(value=1) == Late(value=1, noted="")
    compiled = vars(Late)["__init__"]
    assert compiled is not waiting
    assert str(inspect.signature(Late)) == "(*, value: 'int', noted: 'str' = '') -> None"
    assert Late(value=2).value == 2
    assert vars(Late)["__init__"] is compiled  # once
    with pytest.raises(TypeError):
        Late(1)  # type: ignore[call-arg]


def _hashed(record: object) -> int | str:
    try:
        return hash(record)
    except TypeError as exc:
        return str(exc)


def _made_both_ways(kind: type, /, *args: object, **kwargs: object) -> tuple[object, object]:
    return kind(*args, **kwargs), _twin(kind)(*args, **kwargs)


@pytest.mark.parametrize(
    "record",
    [full_claim(), full_claim(flow=None, fingerprint=None), event("c" * 52), _intent()],
    ids=["claim", "bare claim", "history line", "intent"],
)
def test_a_record_made_by_frozen_is_the_record_dataclasses_makes(record: object) -> None:
    kind = type(record)
    values = {one.name: getattr(record, one.name) for one in dataclasses.fields(kind)}  # type: ignore[arg-type]
    quick, written = _made_both_ways(kind, **values)
    assert quick == record
    assert vars(quick) == vars(written)
    assert list(vars(quick)) == list(vars(written))
    assert repr(quick) == repr(written)
    assert _hashed(quick) == _hashed(written)  # a record holding a dictionary is refused alike
    first = next(iter(values))
    assert (quick == replaced(quick, **{first: "other"})) is False
    assert quick.__eq__(written) is NotImplemented  # another class, as the dataclass answers
    assert kind.__ne__(quick, replaced(quick, **{first: "other"})) is True


def test_defaults_and_factories_are_what_dataclasses_gives() -> None:
    quick, written = _made_both_ways(
        ClaimAnswer,
        decision=Decision.PROCEED,
        recognised_by="new",
        claim_id="c",
        status=AnswerStatus.IN_PROGRESS,
        attempt=1,
        reason="r",
    )
    assert vars(quick) == vars(written)
    assert quick.warnings == []  # type: ignore[attr-defined]
    assert quick.warnings is not ClaimAnswer(Decision.PROCEED, "new", "c").warnings  # type: ignore[attr-defined]
    quick_intent, written_intent = _made_both_ways(Intent, run_id="r", flow=None, fingerprint=None, now=NOW, scope="s")
    assert vars(quick_intent) == vars(written_intent)
    quick_decided, written_decided = _made_both_ways(ClaimAnswer, Decision.DUPLICATE, "seen", "done")
    assert vars(quick_decided) == vars(written_decided)
    fingerprint = Fingerprint("fp1:keyed", "sha256:plain")
    assert vars(fingerprint) == vars(_made_both_ways(Fingerprint, "fp1:keyed", plain="sha256:plain")[1])
    hasher = KeyHasher("s" * 32)
    quick_identity, written_identity = _made_both_ways(Identity, hasher, "c" * 52, fingerprint)
    assert vars(quick_identity) == vars(written_identity)
    assert (vars(quick_identity)["members"], vars(quick_identity)["granted_to"]) == (None, None)
    quick_full, written_full = _made_both_ways(Identity, hasher, "c", None, members={"": "o:1"}, granted_to="fp1:who")
    assert vars(quick_full) == vars(written_full)


def test_fields_left_out_of_equality_hash_and_repr_are_left_out_as_dataclasses_leaves_them() -> None:
    @frozen(kw_only=True)
    class Reading:
        value: int
        noted: str = dataclasses.field(default="", compare=False, repr=False)
        seen: int = dataclasses.field(default=0, hash=False)

    quick, written = _made_both_ways(Reading, value=1, noted="a", seen=2)
    assert (
        repr(quick) == repr(written) == "test_fields_left_out_of_equality_hash_and_repr_are_left_out_as_"
        "dataclasses_leaves_them.<locals>.Reading(value=1, seen=2)"
    )
    assert quick == Reading(value=1, noted="b", seen=2)
    assert quick != Reading(value=1, noted="a", seen=3)
    assert hash(quick) == hash(written) == hash(Reading(value=1, seen=3))


def test_a_record_below_a_frozen_one_and_a_dataclass_below_a_record_are_frozen_as_dataclasses_has_them() -> None:
    @frozen
    class Base:
        one: int

    @frozen(kw_only=True)
    class Below(Base):
        two: int = 2

    @dataclasses.dataclass(frozen=True)
    class Written(Base):
        three: int = 3

    assert repr(Below(1)) == f"{Below.__qualname__}(one=1, two=2)"
    assert Below(1) == Below(1, two=2) != Base(1)
    assert hash(Below(1)) == hash((1, 2))
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclasses.dataclass
        class Thawed(Base):  # type: ignore[misc]
            four: int = 4

    for record in (Base(1), Below(1), Written(1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.one = 2  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del record.one


def test_a_record_keeps_the_methods_it_writes_and_is_named_by_its_parameters_without_a_docstring() -> None:
    @frozen
    class Shown:
        value: int

        def __repr__(self) -> str:
            return "shown"

    @dataclasses.dataclass(frozen=True)
    class Written:
        value: int

    assert repr(Shown(1)) == "shown"
    assert Shown.__doc__ == Written.__doc__.replace("Written", "Shown") == "Shown(value: 'int')"  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="__setattr__"):

        @frozen
        class Settable:
            value: int

            def __setattr__(self, name: str, value: object) -> None:
                object.__setattr__(self, name, value)


def test_ordered_records_sort_as_dataclasses_sorts_them() -> None:
    flows = [Flow("b", "x"), Flow("a", "z"), Flow("a", "y")]
    twin = _twin(Flow)
    assert [(one.name, one.environment) for one in sorted(flows)] == [
        (one.name, one.environment) for one in sorted(twin(one.name, one.environment) for one in flows)
    ]
    assert Flow("a", "y") <= Flow("a", "y") < Flow("a", "z")
    assert Flow("a", "z") >= Flow("a", "y")
    assert Flow.__lt__(Flow("a", "y"), ("a", "y")) is NotImplemented


def test_what_a_record_cannot_hold_is_refused_when_its_class_is_made() -> None:
    with pytest.raises(TypeError, match="no field"):

        @frozen
        class Counted:
            count: ClassVar[int] = 0

    with pytest.raises(ValueError, match="mutable default"):

        @frozen
        class Shared:
            items: list[int] = []  # noqa: RUF012

    @dataclasses.dataclass
    class Thawed:
        value: int

    with pytest.raises(TypeError, match="non-frozen"):

        @frozen
        class Frozen(Thawed):  # type: ignore[misc]
            other: int


def test_a_mutable_record_is_the_record_dataclass_makes() -> None:
    quick, written = _made_both_ways(Tally, example_claim_id="c1")
    assert vars(quick) == vars(written)
    assert repr(quick) == repr(written)
    assert quick.counts is not Tally().counts  # type: ignore[attr-defined]  # a new Counter each time
    quick.counts["claims"] += 1  # type: ignore[attr-defined]
    quick.example_claim_id = "c2"  # type: ignore[attr-defined]
    assert quick != written
    assert Tally.__hash__ is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(quick)
    with pytest.raises(TypeError, match="non-frozen"):

        @mutable
        class Thawed(Flow):  # type: ignore[misc]
            more: int = 0


def test_a_record_holding_itself_is_shown_as_dataclasses_shows_it() -> None:
    @frozen
    class Holder:
        held: list[object]

    holder = Holder([])
    holder.held.append(holder)
    assert repr(holder) == f"{Holder.__qualname__}(held=[...])"


def test_a_frozen_record_stays_frozen_and_refuses_what_its_init_refuses() -> None:
    claim = full_claim()
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.attempt = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        HistoryEvent("c")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Intent("r")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Claim(**{one.name: getattr(claim, one.name) for one in dataclasses.fields(Claim)}, extra=1)  # type: ignore[call-arg]


# Python 3.14's Field, as its dataclasses module declares it: one parameter more than 3.11's (a field's doc), which
# field() passes as None when it is not given.
_FIELD_OF_PYTHON_3_14 = '''
import dataclasses

class Field(dataclasses.Field):
    __slots__ = ("doc",)

    def __init__(self, default, default_factory, init, repr, hash, compare, metadata, kw_only, doc):
        super().__init__(default, default_factory, init, repr, hash, compare, metadata, kw_only)
        self.doc = doc


def field(*, default=dataclasses.MISSING, default_factory=dataclasses.MISSING, init=True, repr=True, hash=None,
          compare=True, metadata=None, kw_only=dataclasses.MISSING, doc=None):
    return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only, doc)

dataclasses.Field, dataclasses.field = Field, field
from oncegate.domain import records
from oncegate.domain.copies import frozen

@frozen
class Named:
    """A record of a field with a default and one without."""

    name: str
    environment: str = "Default"

assert records.Flow("Create order", "Default").environment == "Default"
assert Named("Create order").environment == "Default"
assert [(one.name, one.default, one.doc) for one in dataclasses.fields(Named)] == [
    ("name", dataclasses.MISSING, None),
    ("environment", "Default", None),
]
'''


def test_a_record_s_fields_are_made_on_an_interpreter_whose_field_takes_a_doc() -> None:
    # copies makes each field's Field without field()'s checks: the package imports on Python 3.14 as on 3.11.
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _FIELD_OF_PYTHON_3_14], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
