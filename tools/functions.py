"""``python -m tools.functions [--check]``: write, or check, the app's list of functions from the operation table.

``function_app.py`` declares one Azure function per entry of the operation table from this list (its name,
route, method, whether it is anonymous, and the module of the table that holds the entry) instead of
importing every entry: a new process then imports only the entries of the actions it is asked for (issue
36's cold start). ``--check`` writes nothing and exits 1 when the list differs from the table, as the tests
do, so it cannot drift from the entries.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from oncegate.entrypoints import operations
from oncegate.entrypoints.operations import OPERATIONS, Operation, functions
from oncegate.entrypoints.operations.table import held

COMMAND = "python -m tools.functions"
PACKAGE = operations.__name__
LISTED = Path(functions.__file__)

HEAD = '''"""The app's functions, one per entry of the operation table: written by ``{command}`` from the table.

``function_app.py`` declares each from its line here and imports the entry's module (``aggregate``) when
the function is first called, so a new process loads only the entries it serves (issue 36's cold start).
Do not edit: change the entry, then run ``{command}`` (the tests fail until it is run).
"""

from typing import NamedTuple


class Listed(NamedTuple):
    """One function: the entry's name, route and method, whether it takes no key, and the module that holds it."""

    name: str
    route: str
    method: str
    anonymous: bool
    aggregate: str


FUNCTIONS = (
'''


def written() -> str:
    """The list's text, from the entries of the table in their order."""
    lines = [HEAD.format(command=COMMAND)]
    for operation in OPERATIONS:
        fields = (operation.name, operation.route, operation.method, operation.role is None, _aggregate(operation))
        spelled = ", ".join(json.dumps(field) if isinstance(field, str) else str(field) for field in fields)
        lines.append(f"    Listed({spelled}),\n")
    lines.append(")\n")
    return "".join(lines)


def _aggregate(operation: Operation) -> str:
    """The module of the table whose ``OPERATIONS`` (or ``SINGLE``) holds the entry: ``claims``."""
    for name, module in sorted(sys.modules.items()):
        if name.startswith(f"{PACKAGE}.") and hasattr(module, "OPERATIONS") and operation in held(module):
            return name.removeprefix(f"{PACKAGE}.")
    raise LookupError(f"no module of {PACKAGE} holds {operation.name}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write or check the app's list of functions.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the list is out of date")
    args = parser.parse_args(argv)
    text = written()
    if LISTED.read_text(encoding="utf-8") == text:
        return 0
    if args.check:
        print(f"{LISTED} is out of date: run {COMMAND}", file=sys.stderr)
        return 1
    LISTED.write_text(text, encoding="utf-8")
    print(f"{LISTED} written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
