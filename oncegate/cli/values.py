"""The values the ``oncegate`` command takes, checked before it does anything, in words a person reads.

Each argument type says what it accepts and gives an example, instead of the service's validation
wording (a pydantic message about patterns) after a request, or a drill, has already started. The
settings the command reads from the environment (``PORT``) are checked the same way, and name the
setting.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Mapping
from datetime import datetime

from oncegate.entrypoints.handler_pool import DEFAULT_THREADS

DEFAULT_PORT = 7071
# oncegate drill's scope and how many claims it sends at once, unless told (oncegate.cli.drill).
DEFAULT_SCOPE = "drill.check"
DEFAULT_CONCURRENCY = 32
MAX_PORT = 65_535
MAX_THREADS = 64
# The service's shapes (oncegate/models/base.py): a scope, and a source, which may also hold ':'.
SCOPE = re.compile(r"[A-Za-z0-9._-]{1,64}")
SOURCE = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class BadSetting(ValueError):
    """A setting of the environment the command cannot use; the message names it."""


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` to ``high``."""

    def parse(value: str) -> int:
        number = int(value) if value.isascii() and value.isdigit() else -1
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"give a whole number from {low} to {high}, not {value!r}")
        return number

    return parse


def orphan_confirmation(value: str) -> str:
    """An argument type: what ``oncegate keys`` shows to retire a secret all the same, ``N`` or ``N.CODE``."""
    if not re.fullmatch(r"[0-9]{1,13}(\.[0-9a-f]{6})?", value, flags=re.ASCII):
        raise argparse.ArgumentTypeError(
            f"give the number of rows, or the number and code `oncegate keys` shows (such as 12.3f9a0c), not {value!r}"
        )
    number, _, code = value.partition(".")
    return f"{int(number)}.{code}" if code else str(int(number))


def or_reset(parse: Callable[[str], int]) -> Callable[[str], int | str]:
    """An argument type: what ``parse`` takes, or '' to reset the setting to its default."""

    def read(value: str) -> int | str:
        return "" if value == "" else parse(value)

    return read


def scope(value: str) -> str:
    """An argument type: a claim scope, as the service accepts it."""
    if not SCOPE.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"give 1 to 64 letters, digits, dots, underscores or hyphens, such as erp.create-order; not {value!r}"
        )
    return value


def source(value: str) -> str:
    """An argument type: a source system, as the service accepts it."""
    if not SOURCE.fullmatch(value):
        raise argparse.ArgumentTypeError(
            "give 1 to 64 letters, digits, dots, colons, underscores or hyphens, such as shop-eu or "
            f"sharepoint:expenses; not {value!r}"
        )
    return value


def moment(value: str) -> str:
    """An argument type: a time with its zone, such as 2026-12-01T00:00:00Z; sent as written."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"give a date and time with its zone, such as 2026-12-01T00:00:00Z or 2026-12-01T09:30:00+01:00; "
            f"not {value!r}"
        )
    return value


def threads_setting(environ: Mapping[str, str]) -> int:
    """The handler threads ONCEGATE_SERVE_THREADS names, else the default; :class:`BadSetting` naming it."""
    text = environ.get("ONCEGATE_SERVE_THREADS", "").strip()
    if not text:
        return DEFAULT_THREADS
    if not (text.isascii() and text.isdigit() and int(text) <= MAX_THREADS):
        raise BadSetting(
            f"ONCEGATE_SERVE_THREADS is {text!r} in the environment: give the handler threads per worker of "
            f"oncegate serve, a whole number from 0 to {MAX_THREADS}, such as ONCEGATE_SERVE_THREADS=4 (or unset "
            f"it for {DEFAULT_THREADS})."
        )
    return int(text)


def port_setting(environ: Mapping[str, str], *, low: int = 1) -> int:
    """The port ``PORT`` names, else the default; :class:`BadSetting` naming ``PORT`` when it is not a port.

    ``low`` is 0 for ``oncegate serve``, where port 0 asks for any free port.
    """
    text = environ.get("PORT", "").strip()
    if not text:
        return DEFAULT_PORT
    if not (text.isascii() and text.isdigit() and low <= int(text) <= MAX_PORT):
        raise BadSetting(
            f"PORT is {text!r} in the environment: give the port oncegate serve listens on, a whole number from "
            f"{low} to {MAX_PORT}, such as PORT=8080 (or unset it for {DEFAULT_PORT})."
        )
    return int(text)
