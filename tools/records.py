"""``python -m tools.records [--check]``: write, or check, the ``__init__`` of every record, compiled with the package.

A record (:func:`oncegate.domain.copies.frozen`) gets its ``__init__`` at its first call, from a text made from its
fields. Compiling that text was two thirds of a first claim's own Python in a new process (issue 36's cold start):
each record's text is written out as code, so that it is compiled once with the package's bytecode and read with it,
by the shape the text is made from (``copies._compiled``), in :mod:`oncegate.domain.record_inits`. ``--check``
writes nothing and exits 1 when the module differs from the records, as the tests do: a record added or changed since
it was written is still made right, compiled at its first call, but costs a new process that again.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import oncegate
from oncegate.domain import copies

COMMAND = "python -m tools.records"
ROOT = Path(__file__).resolve().parents[1]
WRITTEN = Path(copies.__file__).with_name("record_inits.py")

HEAD = '''"""The ``__init__`` of every record, written by ``{command}`` from the records' fields: do not edit.

A record's ``__init__`` is made at its first call from a text (``oncegate.domain.copies``); the text of each is
here as code, by the shape it is made from, compiled with the package's bytecode, so that a new process reads it
rather than compiling it (issue 36's cold start). A shape missing here is compiled at the record's first call.
"""

# ruff: noqa
# mypy: ignore-errors
# fmt: off
# As copies compiles a text: its flags are its caller's, which names this.
from __future__ import annotations

from types import CodeType

INITS: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]], CodeType] = {{}}
'''


def records() -> Iterator[type]:
    """Every record of the package made by ``copies``, each module imported."""
    waiting = copies._init_when_called(object, []).__code__
    for module in pkgutil.walk_packages(oncegate.__path__, f"{oncegate.__name__}."):
        if module.name.endswith(".__main__"):  # a command run as it is imported
            continue
        found = importlib.import_module(module.name)
        for value in vars(found).values():
            if isinstance(value, type) and value.__module__ == module.name and "__dataclass_fields__" in vars(value):
                init = vars(value)["__init__"]
                # Its own: waiting for its first call, or made by copies (whose names are in its scope).
                if init.__code__ is waiting or "__made_by_factory__" in init.__globals__:
                    yield value


def written() -> dict[Path, str]:
    """The module's text: the ``__init__`` of each shape of the records once, by its shape, in the shapes' order."""
    shapes = {copies.init_shape(kind) for kind in records()}
    parts = [HEAD.format(command=COMMAND)]
    parts.extend(f"\n{copies.init_source(shape)}INITS[{shape!r}] = __init__.__code__\n" for shape in sorted(shapes))
    return {WRITTEN: "".join(parts)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write or check the records' compiled __init__.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a module is out of date")
    args = parser.parse_args(argv)
    stale = {
        path: text for path, text in written().items() if not path.exists() or path.read_text(encoding="utf-8") != text
    }
    for path, text in stale.items():
        if args.check:
            print(f"{path} is out of date: run {COMMAND}", file=sys.stderr)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{path} written", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
