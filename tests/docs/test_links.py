"""Every relative link in the Markdown reaches a file (and heading); the README's layout map is the tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import REPO, broken_links, markdown_files


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_documents_a_newcomer_reads_are_checked() -> None:
    checked = {str(path.relative_to(REPO)) for path in markdown_files()}
    assert {"README.md", "docs/contract.md", "docs/operations.md", "connector/README.md"} <= checked


def test_a_missing_file_or_anchor_is_found(tmp_path: Path) -> None:
    # Guards the test above: links in code are not links, and an anchor must match a heading as GitHub makes it.
    (tmp_path / "other.md").write_text("# Other\n\n## The `oncegate` command: its options\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#the-oncegate-command-its-options) [web](https://example.com/x) [top](#page)\n"
        "[gone](missing.md) [no anchor](other.md#nowhere) `[code](missing.md)`\n\n"
        "```sh\n[block](missing.md)\n```\n\n# Page\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["missing.md: no such file", "other.md#nowhere: no heading has the anchor #nowhere"]


def test_the_readme_layout_map_names_every_module_and_only_those() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Where things are") :]
    layout = section[section.index("```\n") : section.index("\n```", section.index("```\n") + 4)]
    modules = {
        path.name
        for path in [REPO / "function_app.py", *(REPO / "oncegate").rglob("*.py")]
        if path.stem not in ("__init__", "__main__")
    }
    folders = {path.name for path in (REPO / "oncegate").iterdir() if (path / "__init__.py").is_file()}
    named = set(re.findall(r"(?<![/\w])(\w+\.py)\b", layout))  # tests/stores/contract.py is not a module
    assert sorted(modules - named) == [], "modules the layout map leaves out"
    assert sorted(named - modules - {"__init__.py"}) == [], "the layout map names modules that are not there"
    assert sorted(folder for folder in folders if f"{folder}/" not in layout) == []
