"""The contract's table of warnings and the code's list are the same (issue 23: every warning in one place)."""

from __future__ import annotations

import re
from pathlib import Path

from oncegate.domain import warnings

ROOT = Path(__file__).resolve().parents[2]


def test_the_contract_lists_every_warning_the_code_gives_and_no_other() -> None:
    contract = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    table = contract[contract.index("| warning | on | meaning |") :].split("\n\n")[0]

    listed = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)

    assert sorted(listed) == sorted(warnings.WARNINGS)


def test_no_other_module_spells_a_warning_code_itself() -> None:
    spelled = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "oncegate").rglob("*.py")
        if path.name != "warnings.py"
        for code in warnings.WARNINGS
        if re.search(rf'^[A-Z_]+ = "{code}"$', path.read_text(encoding="utf-8"), flags=re.M)
    }

    assert spelled == set()
