"""The shell blocks of the README and the Power Automate recipe run as pasted against a served OnceGate.

A file's blocks run in order in one shell, bash, zsh (macOS's default) and a POSIX sh (dash, Debian's and
Ubuntu's /bin/sh), as a reader pastes them into one terminal. Twice over: sourced by ``bash -c``, ``zsh -f -c``
and ``dash -c``, where the output must show what
the block's output block (a ``text`` block right after it) says, in order, and then all of them again
(pasting twice must work too); and typed once into a real interactive shell on a pseudo-terminal
(``tests/docs/terminal.py``), started with no start-up files, where each block must end with status 0,
no command may fail or be misread and no file may appear. The blocks read ``ONCEGATE_URL``,
which the test points at its own server; a block preceded by ``<!-- not run by tests/docs: why -->``
(``make run`` itself) is left out.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.markdown import REPO, ShellBlock, shell_blocks
from tests.docs.terminal import paste

DOCUMENTS = [REPO / "README.md", REPO / "connector" / "samples" / "power-automate-recipe.md"]
# What the walk-throughs show between them: every decision a flow branches on, but blocked.
SHOWN = {"proceed", "in_progress", "duplicate", "reconcile", "conflict"}
TIMEOUT_SECONDS = 120
# Each failing command, as the shell's error trap reports it (bash: errtrace, in functions too; zsh's
# ZERR fires in functions as it is). A POSIX sh has no such trap: there a failed command shows by what it
# printed (``UNANSWERED``) and by what the block then fails to show.
PRELUDES = {
    "bash": "set -E\ntrap 'echo \"::failed with status $?: $BASH_COMMAND\" >&2' ERR\n",
    "zsh": "trap 'echo \"::failed with status $?\" >&2' ZERR\n",
    "sh": "",
}
# zsh without its start-up files: the reader's own .zshrc is not what is tested. sh is dash, the POSIX sh of
# Debian and Ubuntu, which has none of bash's and zsh's extras ($RANDOM is empty there).
COMMANDS = {"bash": ["bash", "-c"], "zsh": ["zsh", "-f", "-c"], "sh": ["dash", "-c"]}
# What a command that failed prints in any shell: curl's error, or a Python helper's traceback.
UNANSWERED = re.compile(r"^(curl: \(\d+\)|Traceback )", re.MULTILINE)
ZSH_MISSING = (
    "zsh is not installed: apt-get install zsh (Debian, Ubuntu; .ci/run does), dnf install zsh, or brew install "
    "zsh; macOS has it"
)
MARK = re.compile(r"^::(?P<what>block|exit) (?P<index>\d+)(?: (?P<status>\d+))?$", re.MULTILINE)


def shell(name: str) -> str:
    """``name`` when it is installed; the test is skipped, saying how to install it, when it is not."""
    program = COMMANDS[name][0]
    if shutil.which(program) is None:
        pytest.skip(ZSH_MISSING if name == "zsh" else f"{program} is not installed")
    return name


def run_in_one_shell(
    blocks: list[ShellBlock], url: str, workdir: Path, shell: str = "bash"
) -> dict[int, tuple[int | None, str]]:
    """Source each block in turn in one ``shell``; each block's exit status (None: it never ended) and output."""
    script = [PRELUDES[shell]]
    for index, block in enumerate(blocks):
        (workdir / f"block-{index}.sh").write_text(block.code, encoding="utf-8")
        script.append(f"echo '::block {index}'\n. ./block-{index}.sh\necho \"::exit {index} $?\"\n")
    # The reader's shell: none of their own OnceGate settings, the server the test started.
    env = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_") and name != "PORT"}
    env["ONCEGATE_URL"] = url
    done = subprocess.run(
        [*COMMANDS[shell], "".join(script)],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    results: dict[int, tuple[int | None, str]] = {}
    marks = list(MARK.finditer(done.stdout))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        index = int(mark["index"])
        end = following.start() if following else len(done.stdout)
        if mark["what"] == "block":
            results[index] = (None, done.stdout[mark.end() : end])
        else:
            results[index] = (int(mark["status"]), results[index][1])
    return results


def problems(block: ShellBlock, status: int | None, output: str) -> list[str]:
    found = [line for line in output.splitlines() if line.startswith("::failed")]
    found += [match.group(0) for match in UNANSWERED.finditer(output)]
    if status != 0:
        found.append(f"ended with status {status}")
    position = 0
    for expected in block.expectations:
        at = output.find(expected, position)
        if at < 0:
            found.append(f"does not show {expected!r} (after what it showed before)")
        else:
            position = at + len(expected)
    return found


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A folder as the repository root looks to the blocks: ``.venv`` is this interpreter's environment."""
    activate = Path(sys.prefix) / "bin" / "activate"
    assert activate.is_file(), f"the blocks activate .venv; run the tests from a virtual environment ({sys.prefix})"
    (tmp_path / ".venv").symlink_to(sys.prefix)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_the_shell_blocks_run_as_pasted(document: Path, name: str, served_url: str, workdir: Path) -> None:
    blocks = [block for block in shell_blocks(document) if block.not_run is None]
    assert blocks, f"{document} has no shell block to run"

    results = run_in_one_shell(blocks + blocks, served_url, workdir, shell(name))

    report = {
        f"{block} (pasted {'again' if index >= len(blocks) else 'first'})": problems(block, *results[index])
        for index, block in enumerate(blocks + blocks)
        if index in results
    }
    assert len(results) == 2 * len(blocks), f"{name} stopped early:\n{results}"
    failed = {where: found for where, found in report.items() if found}
    outputs = "\n".join(f"--- {where}\n{results[index][1]}" for index, where in enumerate(report))
    assert not failed, f"{failed}\n\n{outputs}"


def files_in(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if ".venv" not in path.parts}


@pytest.mark.parametrize("name", list(COMMANDS))
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_the_shell_blocks_paste_into_an_interactive_shell_as_it_starts(
    document: Path, name: str, served_url: str, workdir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 33: pasted into zsh without interactive_comments, a `# =>` comment wrote files into the repository.

    Pasted once: what an interactive shell reads differently (comments, history expansion, line editing) it
    reads the same way each time a line is typed, and what a second paste meets (the claims, functions and
    environment the first left) is the test above's second pass, in both shells. Pasted twice, the two
    documents in the two shells took 16.2 s of CPU, against 8.5 s pasted once."""
    blocks = [block for block in shell_blocks(document) if block.not_run is None]
    before = files_in(workdir)
    env = {name: value for name, value in os.environ.items() if not name.startswith("ONCEGATE_") and name != "PORT"}
    env |= {"ONCEGATE_URL": served_url, "HOME": str(tmp_path_factory.mktemp("home")), "TERM": "xterm-256color"}

    pasted = paste(shell(name), [block.code for block in blocks], cwd=workdir, env=env, timeout=TIMEOUT_SECONDS)

    failed = {str(block): pasted.problems(index) for index, block in enumerate(blocks)}
    assert not {where: found for where, found in failed.items() if found}, pasted.transcript[-6000:]
    assert files_in(workdir) == before


def test_the_walk_throughs_show_every_decision_but_blocked() -> None:
    expectations = " ".join(
        text for document in DOCUMENTS for block in shell_blocks(document) for text in block.expectations
    )
    shown = set(re.findall(r'"decision":"([a-z_]+)"', expectations))
    assert shown == SHOWN


def test_only_the_server_and_the_suite_are_left_out() -> None:
    left_out = [block for document in DOCUMENTS for block in shell_blocks(document) if block.not_run is not None]
    assert [block.path for block in left_out] == [REPO / "README.md"]
    assert {line.split()[0] for line in left_out[0].code.splitlines()} == {"make"}
