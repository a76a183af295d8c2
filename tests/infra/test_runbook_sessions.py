"""The key secret rotation's blocks pasted a horizon after its first ones name what they act on themselves.

docs/deploy.md, *Rotating the key secret*: steps 1 and 2 follow the first block within minutes, in its shell;
step 4 and the removal of the old secret's role come a horizon later (365 days by default), in another shell.
Measured on main deee47c: those two blocks used ``RG``, ``APP``, ``VAULT``, ``VAULT_ID`` and ``APP_IDENTITY`` set
by the first block only, so pasted as written a year later in a new shell every command named nothing: an
empty resource group, app, vault and assignee (az refuses an empty assignee since 2.13; az is not run here).
"""

from __future__ import annotations

import re

from tests.docs.markdown import REPO

DEPLOY = REPO / "docs" / "deploy.md"
BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
USED = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
ASSIGNED = re.compile(r"(?:^|[\s;(])([A-Za-z_][A-Za-z0-9_]*)=")


def later_blocks() -> list[str]:
    """The shell blocks of the rotation from step 3 on: run a horizon after the switch."""
    section = DEPLOY.read_text(encoding="utf-8").split("### Rotating the key secret", 1)[1].split("\n### ", 1)[0]
    return BLOCK.findall(section.split("Step 3,", 1)[1])


def test_the_blocks_a_horizon_later_assign_every_variable_they_use() -> None:
    blocks = later_blocks()
    unset = {index: sorted(set(USED.findall(code)) - set(ASSIGNED.findall(code))) for index, code in enumerate(blocks)}

    assert len(blocks) == 3  # step 3's oncegate commands, step 4, and the old secret's role
    assert {index: names for index, names in unset.items() if names} == {}
