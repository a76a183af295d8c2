"""Every other shell block of the README, docs/ and connector/ pastes into an interactive bash and zsh as they
start (issue 33).

These blocks call Azure, the Power Platform or a deployment, which a test cannot; what it can check is what
the shell makes of them as pasted. Every program they call is answered by the shell's handler for a command
not found, which says nothing and succeeds, so what remains is the shell's own reading: a comment that an
interactive zsh reads as words and redirects (``# => "storeId"`` is a command ``#`` writing a file), a
placeholder that is a redirect (``<functionAppName>``), a synopsis whose ``|`` is a pipe. Each block must
end with status 0, no command may be misread, and no file may appear but those the block writes on purpose
(a ``> file`` of its own).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import REPO, ShellBlock, markdown_files, shell_blocks
from tests.docs.terminal import paste
from tests.docs.test_readme_blocks import DOCUMENTS, files_in, shell

TIMEOUT_SECONDS = 120
# Every program is missing (PATH is an empty folder) and its call succeeds silently; a word starting with '#'
# (a comment the shell did not read as one) is reported as the shell itself would report it. A POSIX sh has no
# handler for a command not found, so these blocks are pasted into bash and zsh only.
HANDLERS = {
    "bash": 'command_not_found_handle() { case $1 in \'#\'*) echo "command not"" found: $1"; return 127;; esac; }\n',
    "zsh": 'command_not_found_handler() { case $1 in \'#\'*) echo "command not"" found: $1"; return 127;; esac; }\n',
}
WRITTEN = re.compile(r">\s*(?P<name>[\w.-]+)")


def _pasted_documents() -> list[Path]:
    """The Markdown of the README, docs/ and connector/ with shell blocks that the tests cannot run for real."""
    wanted = [
        REPO / "README.md",
        *(path for path in markdown_files() if path.parts[len(REPO.parts)] in ("docs", "connector")),
    ]
    return [path for path in wanted if path not in DOCUMENTS and shell_blocks(path)]


PASTED = _pasted_documents()


def _written(block: ShellBlock) -> set[str]:
    return {match["name"] for match in WRITTEN.finditer(block.code)}


def test_the_documents_with_blocks_to_paste_are_found() -> None:
    assert {str(path.relative_to(REPO)) for path in PASTED} >= {
        "docs/deploy.md",
        "docs/operations.md",
        "connector/README.md",
    }


@pytest.mark.parametrize("name", list(HANDLERS))
@pytest.mark.parametrize("document", PASTED, ids=lambda path: str(path.relative_to(REPO)))
def test_each_block_pastes_into_an_interactive_shell_as_it_starts(
    document: Path, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    blocks = shell_blocks(document)
    workdir = tmp_path_factory.mktemp("repository")
    for folder in ("connector", "docs", "infra"):  # the folders a block may cd into, as at the repository root
        (workdir / folder).mkdir()
    empty = tmp_path_factory.mktemp("bin")
    before = files_in(workdir)
    env = {
        "PATH": str(empty),
        "HOME": str(tmp_path_factory.mktemp("home")),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
    }

    pasted = paste(
        shell(name),
        [block.code for block in blocks],
        cwd=workdir,
        env=env,
        timeout=TIMEOUT_SECONDS,
        setup=HANDLERS[name],
    )

    failed = {str(block): pasted.problems(index) for index, block in enumerate(blocks)}
    assert not {where: found for where, found in failed.items() if found}, pasted.transcript[-6000:]
    assert files_in(workdir) - before <= set().union(*(_written(block) for block in blocks))
