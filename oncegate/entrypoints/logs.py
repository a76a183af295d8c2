"""How much the app logs: ``ONCEGATE_LOG_LEVEL`` (DEBUG, INFO, WARNING or ERROR; INFO when unset).

INFO says what an operator acts on: the start, conflicts resolved, reviews, purges, every warning.
Each request's line is DEBUG: at INFO it cost a claim a tenth of its CPU on the local server, and
Application Insights already has a record of every answer (``oncegate.telemetry``). The Azure SDK
logs each storage request with its headers at INFO (26 lines a claim): it logs at WARNING unless
the level is DEBUG. In Azure the host's ``logging.logLevel`` in host.json is a second gate: what it
filters out never reaches Application Insights whatever this level says.
"""

from __future__ import annotations

import logging
import os

SETTING = "ONCEGATE_LOG_LEVEL"
LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "ERROR": logging.ERROR}
# host.json spells the same levels the .NET way; either spelling is taken.
HOST_SPELLINGS = {"TRACE": "DEBUG", "INFORMATION": "INFO"}
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def level_from(value: str | None) -> int:
    """The level a setting names; raises ``ValueError`` naming the values it takes."""
    name = (value or "INFO").strip().upper()
    name = HOST_SPELLINGS.get(name, name)
    if name not in LEVELS:
        raise ValueError(f"{SETTING} must be one of {', '.join(LEVELS)}, not {value!r}.")
    return LEVELS[name]


def configure(*, handler: bool = False) -> int:
    """Set OnceGate's level and the SDK's from the environment; with ``handler``, log to stderr too.

    The Functions worker has its own handler (function_app.py leaves ``handler`` off); ``oncegate
    serve`` and its workers need one. An unreadable setting logs at INFO and says so, rather than
    keeping the app from starting.
    """
    try:
        level = level_from(os.environ.get(SETTING))
        problem = None
    except ValueError as exc:
        level, problem = logging.INFO, str(exc)
    if handler:
        logging.basicConfig(level=level, format=FORMAT)
    logging.getLogger("oncegate").setLevel(level)
    logging.getLogger("azure").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)
    if problem:
        logging.getLogger("oncegate").warning("%s Logging at INFO.", problem)
    return level
