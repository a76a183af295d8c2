"""The shell blocks of the runbooks that sit in a list item, pasted into an interactive bash and zsh as they start.

tests/docs reads a fenced block only at the start of a line, so the blocks of a runbook's numbered steps, whose
fences are indented as the step's text is, were pasted by no test: ``VAULT=<keyVaultName>`` (deploy.md, *When the
key secret is lost*) reads the file ``keyVaultName`` and leaves ``VAULT`` empty for the commands after it,
``oncegate keys retire <its key id>`` is a syntax error (a redirect from ``its`` to nothing), and a comment
saying "the vault's lock" opened a quote in zsh, which waited for its end and took the lines after it. Each is
pasted here as tests/docs pastes the others: every program a command not found that succeeds silently, so what
remains is the shell's own reading.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.docs.markdown import REPO
from tests.docs.terminal import paste
from tests.docs.test_readme_blocks import files_in, shell
from tests.docs.test_shell_blocks_paste import HANDLERS, TIMEOUT_SECONDS

RUNBOOKS = [REPO / "docs" / "operations.md", REPO / "docs" / "deploy.md"]
INDENTED_BLOCK = re.compile(
    r"^(?P<indent> +)```(?:sh|bash|shell)\n(?P<code>.*?)^(?P=indent)```$", re.MULTILINE | re.DOTALL
)


def indented_blocks(document: Path) -> list[tuple[int, str]]:
    """Each indented shell block of ``document``: the line its fence is on, and its code as a reader copies it."""
    text = document.read_text(encoding="utf-8")
    return [
        (text[: found.start()].count("\n") + 1, textwrap.dedent(found["code"]))
        for found in INDENTED_BLOCK.finditer(text)
    ]


def test_the_runbooks_have_indented_blocks_to_paste() -> None:
    assert all(indented_blocks(document) for document in RUNBOOKS)


@pytest.mark.parametrize("name", list(HANDLERS))
@pytest.mark.parametrize("document", RUNBOOKS, ids=lambda path: path.name)
def test_each_indented_block_pastes_into_an_interactive_shell_as_it_starts(
    document: Path, name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    blocks = indented_blocks(document)
    workdir = tmp_path_factory.mktemp("repository")
    before = files_in(workdir)
    env = {
        "PATH": str(tmp_path_factory.mktemp("bin")),
        "HOME": str(tmp_path_factory.mktemp("home")),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
    }

    pasted = paste(
        shell(name), [code for _, code in blocks], cwd=workdir, env=env, timeout=TIMEOUT_SECONDS, setup=HANDLERS[name]
    )

    failed = {f"{document.name}:{line}": pasted.problems(index) for index, (line, _) in enumerate(blocks)}
    assert not {where: found for where, found in failed.items() if found}, pasted.transcript[-6000:]
    assert files_in(workdir) == before
