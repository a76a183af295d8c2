"""What the command writes to stdout and stderr, whatever encoding they have.

Python writes to a file or a pipe in the locale's encoding: cp1252 on Windows when the output is
redirected (``oncegate --json ... > out.json``), Latin-1 under a Latin-1 locale. A Chinese order number
or a flow's name in another script cannot be written there, and the command stopped with a traceback
half-way through its output. Here a character the stream cannot hold is written as its escape
(``\\u8ba2``): JSON escapes it itself, so that it stays valid JSON that reads back the same.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import shlex
import subprocess
import sys
from contextvars import ContextVar
from typing import Any, TextIO

# Set once the command has written its JSON document on stdout (:func:`print_json`): a script reads one document
# there, so a stop landing afterwards (SIGTERM as the command closes) says so on stderr, not in a second document.
JSON_WRITTEN: ContextVar[bool] = ContextVar("json_written", default=False)
# Set while a command runs with --json (oncegate.cli.main, oncegate.cli.store_commands.on_the_store): a refusal is
# JSON on stdout too, in the shape of a deployment command's, its code by the exit status (the parser's own included).
REFUSALS_AS_JSON: ContextVar[bool] = ContextVar("refusals_as_json", default=False)


def tolerant() -> None:
    """Make stdout and stderr write a character their encoding lacks as its escape, not fail on it."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not holds_unicode(stream):
            stream.reconfigure(errors="backslashreplace")


def holds_unicode(stream: TextIO) -> bool:
    """Whether ``stream`` can hold any character: its encoding is one of Unicode's."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        return codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


def print_json(value: Any, *, indent: int | None = 2) -> None:
    """``value`` as JSON on stdout, the command's one document (:data:`JSON_WRITTEN`): characters as they are where
    stdout holds them, else as JSON's escapes."""
    text = json.dumps(value, indent=indent, ensure_ascii=not holds_unicode(sys.stdout))
    # Marked before it is written: a stop landing while it is written must not add a second document to the first.
    JSON_WRITTEN.set(True)
    print(text)


def command_line(*words: str) -> str:
    """A command to copy into a shell, each word quoted where it must be (a path with a space, or Chinese)."""
    if os.name == "nt":
        return subprocess.list2cmdline(words)  # cmd and PowerShell both read double quotes
    return shlex.join(words)
