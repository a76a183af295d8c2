"""Every table of the Markdown renders as a table: rows starting with ``|`` open with a header and a delimiter row
of as many cells (GitHub Flavored Markdown), else they show as lines of pipes, as the recipe's Wait and Max Wait
Seconds rows did, cut from the table above them by a blank line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.markdown import FENCE, REPO, markdown_files

DELIMITER_CELL = re.compile(r"\s*:?-+:?\s*")


def cells(row: str) -> list[str]:
    """The cells of a table row, its outer pipes left off (only a pipe escaped as ``\\|`` is in a cell, in code too)."""
    inner = row.strip().removeprefix("|").removesuffix("|")
    return re.split(r"(?<!\\)\|", inner)


def broken_tables(text: str) -> list[str]:
    """The first row of each run of table rows that is no table, with its line number."""
    lines = FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text).split("\n")
    broken, start = [], 0
    while start < len(lines):
        if not lines[start].lstrip().startswith("|"):
            start += 1
            continue
        end = start
        while end < len(lines) and lines[end].lstrip().startswith("|"):
            end += 1
        header, delimiter = lines[start], lines[start + 1] if end - start > 1 else ""
        if not delimiter or not all(DELIMITER_CELL.fullmatch(cell) for cell in cells(delimiter)):
            broken.append(f"{start + 1}: {header.strip()}")
        elif len(cells(delimiter)) != len(cells(header)):
            broken.append(f"{start + 1}: {header.strip()} (a delimiter of {len(cells(delimiter))} cells)")
        start = end
    return broken


@pytest.mark.parametrize("path", markdown_files(), ids=lambda path: str(path.relative_to(REPO)))
def test_every_table_has_its_header_and_delimiter(path: Path) -> None:
    assert broken_tables(path.read_text(encoding="utf-8")) == []


def test_rows_cut_from_their_table_are_found() -> None:
    # Guards the test above: a blank line ends a table, and a run of rows without a delimiter is text.
    page = (
        "| a | b |\n| --- | --- |\n| 1 | 2 |\n\n| 3 | 4 |\n\n| x | `a\\|b` |\n| :-- | --: |\n\n| c |\n| --- | --- |\n"
    )
    assert broken_tables(page) == ["5: | 3 | 4 |", "10: | c | (a delimiter of 2 cells)"]
