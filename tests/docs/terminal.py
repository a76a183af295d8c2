"""Pasting shell blocks into a real interactive shell in a terminal, as a reader does (issue 33).

``zsh -c`` or a sourced file reads ``#`` as a comment whatever the options; an interactive zsh does not
unless ``setopt interactive_comments``: there ``cmd # => "decision":"proceed"`` runs ``cmd`` with the
words ``#`` and ``=`` and writes its output into a file named ``decision:proceed``. So the blocks are
typed into ``bash -i`` and ``zsh -i`` started with no start-up files, on a pseudo-terminal (a line editor
reads them, as it reads a paste), and the transcript is read back.

Each block is framed by markers the shell prints (``::block N``, ``::exit N STATUS``) and every command
that fails prints ``::failed with status S`` through the shell's error trap. The markers are typed in a
form whose echo never matches them (``echo "::exit" N $?``), since the terminal echoes what is typed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import termios
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Each shell as a new terminal starts it, without the reader's start-up files; sh is dash, a POSIX sh (Debian's
# and Ubuntu's /bin/sh), which reads no start-up file unless ENV names one.
SHELLS = {"bash": ["bash", "--norc", "--noprofile", "-i"], "zsh": ["zsh", "-f", "-i"], "sh": ["dash", "-i"]}
# No prompts to tell apart from the output; a failing command's trap (typed split, so its echo never matches).
# A POSIX sh has no trap for a failing command: what one printed (curl's error, a traceback) is its complaint.
SETUP = {
    "bash": 'PS1=; PS2=; set -E; trap \'echo "::fail""ed with status $?: $BASH_COMMAND" >&2\' ERR\n',
    "zsh": 'PS1=; PS2=; trap \'echo "::fail""ed with status $?" >&2\' ZERR\n',
    "sh": "PS1=; PS2=\n",
}
MARK = re.compile(r"::(?P<what>block|exit) (?P<index>\d+)(?: (?P<status>\d+))?")
FAILED = re.compile(r"::failed with status \d+.*")
# What a shell says when a pasted line is not what it was meant to be.
COMPLAINTS = re.compile(
    r"command not found|parse error|syntax error|unmatched|no such file or directory|bad pattern|no matches found"
    r"|^Traceback |curl: \(\d+\)",
    re.IGNORECASE,
)
ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Z0-9]|[=>])")
ROWS, COLUMNS = 50, 200
CHUNK = 256


@dataclass(frozen=True)
class Pasted:
    """What the terminal showed: each block's exit status (None: it never ended) and text, and the whole."""

    statuses: dict[int, int | None]
    outputs: dict[int, str]
    transcript: str

    def problems(self, index: int) -> list[str]:
        """What went wrong in block ``index``: failed commands, the shell's complaints, its status."""
        output = self.outputs.get(index)
        if output is None:
            return ["never started"]
        found = [match.group(0) for match in FAILED.finditer(output)]
        found += [line.strip() for line in output.splitlines() if COMPLAINTS.search(line)]
        if self.statuses.get(index) != 0:
            found.append(f"ended with status {self.statuses.get(index)}")
        return found


def paste(
    shell: str, blocks: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float, setup: str = ""
) -> Pasted:
    """Type ``blocks`` into a new interactive ``shell`` in a terminal of its own, one after the other, then exit.

    ``setup`` is typed first, after the markers' own set-up: what the test needs of the shell.
    """
    program = shutil.which(SHELLS[shell][0])
    assert program is not None, f"{shell} is not installed"
    typed = SETUP[shell] + setup
    for index, code in enumerate(blocks):
        typed += f'echo "::block" {index}\n{code.rstrip(chr(10))}\necho "::exit" {index} $?\n'
    typed += "exit\n"
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the shell, in the folder the reader pastes in
        os.chdir(cwd)
        os.execve(program, SHELLS[shell], dict(env))
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    try:
        shown = _converse(terminal, typed.encode(), time.monotonic() + timeout)
    finally:
        _end(pid)
        os.close(terminal)
    return _read(ESCAPES.sub("", shown.decode(errors="replace")).replace("\r", ""))


def _converse(terminal: int, typed: bytes, deadline: float) -> bytes:
    """Write ``typed`` as the terminal takes it and read all it shows, until the shell exits or time is up."""
    shown = bytearray()
    while time.monotonic() < deadline:
        writing = [terminal] if typed else []
        readable, writable, _ = select.select([terminal], writing, [], 0.5)
        if readable:
            try:
                chunk = os.read(terminal, 65536)
            except OSError:  # EIO: the shell exited and the terminal closed
                return bytes(shown)
            if not chunk:
                return bytes(shown)
            shown += chunk
        if writable:
            typed = typed[os.write(terminal, typed[:CHUNK]) :]
    raise TimeoutError(f"the shell did not exit in time; it showed:\n{shown.decode(errors='replace')[-4000:]}")


def _end(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _read(transcript: str) -> Pasted:
    statuses: dict[int, int | None] = {}
    outputs: dict[int, str] = {}
    marks = list(MARK.finditer(transcript))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        index = int(mark["index"])
        end = following.start() if following else len(transcript)
        if mark["what"] == "block":
            statuses[index], outputs[index] = None, transcript[mark.end() : end]
        else:
            statuses[index] = int(mark["status"])
    return Pasted(statuses, outputs, transcript)
