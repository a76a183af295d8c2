"""A record's ``__init__`` is read compiled from :mod:`oncegate.domain.record_inits` rather than compiled at its first
call (issue 36's cold start), and is the very code that compiling its text makes."""

from __future__ import annotations

from typing import Any

import pytest

from oncegate.domain import copies, record_inits
from oncegate.domain.copies import frozen
from oncegate.domain.records import Flow
from tools import records


def test_the_written_inits_are_those_of_every_record_as_it_is_now() -> None:
    # A record added or changed since the module was written would be compiled again in every new process.
    assert records.main(["--check"]) == 0, "run python -m tools.records"
    assert {copies.init_shape(kind) for kind in records.records()} == set(record_inits.INITS)


@pytest.mark.parametrize("shape", sorted(record_inits.INITS))
def test_each_written_init_is_the_code_its_shape_s_text_compiles_to(shape: copies.Shape) -> None:
    scope: dict[str, Any] = {}
    exec(copies.init_source(shape), scope)
    assert copies._compiled(shape) == scope["__init__"].__code__  # filename, lines and columns included


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiled: list[str] = []

    def spy(source: str, scope: dict[str, Any]) -> None:
        compiled.append(source)
        exec(source, scope)

    monkeypatch.setattr(copies, "exec", spy, raising=False)  # copies' own name for the builtin it calls
    return compiled


def test_a_record_whose_init_is_written_out_compiles_nothing_at_its_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _spied(monkeypatch)

    @frozen
    class Named:
        """A record of the same fields as Flow: the same text, read compiled."""

        name: str
        environment: str

    assert Named("Create order", "Default").environment == "Default"
    assert compiled == []
    Flow("Create order", "Default")
    assert vars(Named)["__init__"].__code__ == vars(Flow)["__init__"].__code__
    assert vars(Named)["__init__"].__code__.co_filename == "<string>"


def test_a_record_whose_init_is_not_written_out_is_compiled_at_its_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _spied(monkeypatch)

    @frozen
    class Unlisted:
        """A record no module of the package declares."""

        first_of_its_kind: int
        second_of_its_kind: str = "two"

    assert Unlisted(1).second_of_its_kind == "two"
    assert compiled == [copies.init_source(copies.init_shape(Unlisted))]
    with pytest.raises(TypeError, match="first_of_its_kind"):
        Unlisted()  # type: ignore[call-arg]
