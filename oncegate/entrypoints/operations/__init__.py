"""The operation table: every action of the contract declared once, in one entry, and read by everything else.

Start reading here. An entry (:class:`~oncegate.entrypoints.operations.table.Operation`) holds an
action's route and method, the app role it needs, its telemetry event, its body, query and
response models, the connector's designer text, and its three steps: ``parse`` the wire's request
into the service's command (:mod:`oncegate.service.commands`; Check and claim's is its
:class:`~oncegate.domain.decisions.Intent`), ``serve`` it with one service method,
``render`` the result as the response model (or, where no model need be made per request, as the JSON members
it declares: Check and claim's). Who reads the table:

- ``function_app.py`` declares one Azure function per entry, under the entry's name (function keys
  and telemetry are per function), and ``oncegate serve`` serves that same app;
- :mod:`oncegate.entrypoints.http` is the one pipeline every function runs: the caller and its role,
  the query, the route's ids and the strict JSON body read as the entry declares them, then
  :func:`~oncegate.entrypoints.http.perform` (parse, the sensitive-data check,
  serve, render), the error body for any refusal, and the entry's telemetry event;
- the connector generator (``tools/connector``) writes each entry's path, parameters and designer text;
- the command's client (``oncegate.cli.client``) and the tests' ``Gate`` call the actions by entry.

The entries live by aggregate: :mod:`.claims` (Check and claim, its wait), :mod:`.claim_records` (a claim once
made: its result, lease, review and look-ups), :mod:`.bulk` (Check and claim many, Record results),
:mod:`.conflicts`, :mod:`.inventory`, :mod:`.perform` (Perform once), :mod:`.targets` (the operators' own,
which the connector leaves out: ``in_connector``); :data:`OPERATIONS` is their union, in the connector's order.

Adding an action:

1. its request and response models in ``oncegate/models/`` (with designer text on each field), and
   the fields it stores as sent in ``entrypoints/parse.py``'s ``STORED_FIELDS`` if it stores free text;
2. its command in ``oncegate/service/commands/`` (the module named for its service) and its service method
   (``oncegate/service/``);
3. one ``Operation`` in the module of its aggregate here, added to that module's ``OPERATIONS``:
   ``name`` (the Azure function's; never rename one that shipped), ``route``, ``method``, ``role``,
   ``body``/``query``/``response`` (the model, or its name in ``oncegate.models`` where the module need not import
   it: an answer written as its members; readers take ``response_model``), ``event`` if operators count its
   answers, ``parse``/``serve``/``render``, ``stores`` if the request stores free text, and a ``Designer`` (a new
   ``operation_id``);
4. docs: ``docs/contract.md`` (the action, its errors), the README's list if it is one flows use, and
   ``CHANGELOG.md``. Then ``python -m tools.connector`` writes the connector's definition again
   (``tests/connector`` checks it against this table: it fails until the definition is written again),
   and ``python -m tools.functions`` the app's list of functions (:mod:`.functions`, checked alike).

Nothing else names the action: the app, the local server, the connector, the client and the tests'
``Gate`` find it here. The app declares its functions from the list written from it (:mod:`.functions`)
and imports an entry's module when its function is first called, so a new process loads the entries of
the actions it serves (issue 36's cold start); every other reader imports the whole table with
:data:`OPERATIONS` or :data:`BY_NAME`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from oncegate.entrypoints.operations.table import Call, Designer, Operation, Reply, held

if TYPE_CHECKING:
    from oncegate.entrypoints.operations.functions import Listed

    OPERATIONS: tuple[Operation, ...]
    BY_NAME: dict[str, Operation]


def _table() -> dict[str, Any]:
    from oncegate.entrypoints.operations import bulk, claim_records, claims, conflicts, inventory, perform, targets

    operations = (
        *claims.OPERATIONS,
        *claim_records.SINGLE,
        *bulk.OPERATIONS,
        *claim_records.OPERATIONS,
        *perform.OPERATIONS,
        *conflicts.OPERATIONS,
        *inventory.OPERATIONS,
        *targets.OPERATIONS,
    )
    return {"OPERATIONS": operations, "BY_NAME": {operation.name: operation for operation in operations}}


def named(name: str) -> Operation:
    """The entry ``name``, importing its module alone (found by the app's list of functions, :mod:`.functions`): the
    command's client calls one action, and loads neither the other entries' modules nor the app's pipeline."""
    from oncegate.entrypoints.operations.functions import FUNCTIONS

    return listed_entry(next(listed for listed in FUNCTIONS if listed.name == name))


def listed_entry(listed: Listed) -> Operation:
    """The entry a listed function serves, its aggregate's module imported alone (the app's first call of it,
    ``http.entry``; the command's client, :func:`named`)."""
    module = importlib.import_module(f"{__name__}.{listed.aggregate}")
    return next(operation for operation in held(module) if operation.name == listed.name)


def __getattr__(name: str) -> Any:
    """The whole table, its modules imported when it is first asked for: the app imports an entry's module
    when its function is first called (``functions``, issue 36's cold start), every other reader the table."""
    if name not in ("OPERATIONS", "BY_NAME"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    table = _table()
    globals().update(table)
    return table[name]


__all__ = ["BY_NAME", "OPERATIONS", "Call", "Designer", "Operation", "Reply", "listed_entry", "named"]
