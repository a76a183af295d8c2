"""How the ``oncegate`` command lays out what it shows to people: ``Label  value`` fields and tables, in UTC.

:func:`show` prints them with rich: styled and fitted to a terminal, plain and never wrapped in a
pipe or a file. Fitted to a terminal, a table never breaks an id, an enum value, a time or a number:
a person copies them whole. Free text (a reason, a note, how a request was recognised) folds over
lines, no narrower than it reads. Each table ranks its columns, and as the terminal narrows it leaves
out the least important first, saying which, until the rest fits (an 80-column terminal keeps a claim
id's 52 characters whole).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, TextIO

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.table import Table
from rich.text import Text

from oncegate.domain.copies import frozen
from oncegate.domain.times import said

REASON_CHARS = 60
# Wide enough that no line is ever wrapped when the output goes to a pipe or a file.
UNWRAPPED = 100_000
# Colours for the values a person looks for first; a value not listed is plain.
STYLES = {
    "ok": "green",
    "succeeded": "green",
    "duplicate": "green",
    "proceed": "green",
    "resolved": "green",
    "in_progress": "cyan",
    "open": "yellow",
    "unknown": "yellow",
    "reconcile": "yellow",
    "conflict": "yellow",
    "failed": "red",
    "blocked": "red",
    "FAIL": "bold red",
}


def show(renderable: RenderableType, stream: TextIO) -> None:
    """Print for people: styled to the terminal's width there, else plain, unwrapped, no trailing spaces."""
    if stream.isatty():
        Console(file=stream, highlight=False).print(renderable)
        return
    buffer = io.StringIO()
    Console(file=buffer, width=UNWRAPPED, highlight=False).print(renderable)
    stream.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def plural(count: int, noun: str) -> str:
    """``1 page``, ``2 pages``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def time_text(value: datetime | None, timespec: str = "seconds") -> str | None:
    return None if value is None else said(value, timespec)


def yes_no(value: bool) -> str:
    return "yes" if value else "no"


def json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def cell_text(value: object) -> Text:
    # Text, never markup: a reason or a note may hold square brackets.
    text = str(value)
    return Text(text, style=STYLES.get(text, ""))


def field_lines(rows: Iterable[tuple[str, object]]) -> Table:
    """``Label  value`` lines, aligned; a field without a value is left out."""
    grid = Table(box=None, show_header=False, pad_edge=False)
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        if value is not None and value != "":
            grid.add_row(Text(label), cell_text(value))
    return grid


# Between two columns of a table: a cell's padding on either side.
GUTTER = 2


@frozen
class Column:
    """A table's column: ``leaves`` 0 is always shown, others leave a narrow terminal highest first.

    ``text`` folds over lines, no narrower than ``width``; any other column is never broken. An ``under``
    column (a long id) goes on a line of its own under each row when the row is too narrow for it, before any
    column leaves: a person reads a row by the others and copies the id whole.
    """

    header: str
    leaves: int = 0
    text: bool = False
    width: int = 0
    under: bool = False

    def least(self, cells: Iterable[str]) -> int:
        """The narrowest this column is shown: its text's ``width``, else its widest cell whole."""
        words = [cell_len(word) for word in self.header.split()]
        if self.text:
            return max([self.width, *words])
        return max([cell_len(self.header), *(cell_len(line) for cell in cells for line in cell.splitlines())])


def whole(header: str, leaves: int = 0) -> Column:
    return Column(header, leaves)


def folded(header: str, leaves: int, width: int) -> Column:
    return Column(header, leaves, text=True, width=width)


def under(header: str) -> Column:
    return Column(header, under=True)


class FittedTable:
    """A table that leaves out its least important columns, and says so, until it fits the width it gets."""

    def __init__(self, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
        self.columns = columns
        self.rows = rows

    def least(self) -> list[int]:
        return [column.least(row[index] for row in self.rows) for index, column in enumerate(self.columns)]

    def shown(self, width: int) -> list[int]:
        """The columns kept in the row at ``width``, in their order (an ``under`` column left out goes beneath)."""
        kept = list(range(len(self.columns)))
        least = self.least()
        if sum(least) + GUTTER * (len(kept) - 1) > width:
            kept = [index for index in kept if not self.columns[index].under]
        while sum(least[index] for index in kept) + GUTTER * (len(kept) - 1) > width:
            leaving = [index for index in kept if self.columns[index].leaves]
            if not leaving:
                break  # narrower than an id: the terminal wraps the line, the id stays whole
            kept.remove(max(leaving, key=lambda index: (self.columns[index].leaves, index)))
        return kept

    def table(
        self, kept: Sequence[int], width: int, rows: Sequence[Sequence[str]], widths: Sequence[int] | None = None
    ) -> Table:
        table = Table(box=None, pad_edge=False, header_style="bold", show_header=bool(widths is None or not rows))
        for place, index in enumerate(kept):
            column = self.columns[index]
            fixed = widths[place] if widths else None
            if column.text:
                table.add_column(column.header, overflow="fold", min_width=column.least([]), width=fixed)
            else:
                table.add_column(column.header, no_wrap=True, overflow="ignore", width=fixed)
        for row in rows:
            # A cell of several lines (a count per status) is one line in a pipe, where lines are records.
            cells = row if width < UNWRAPPED else [cell.replace("\n", ", ") for cell in row]
            table.add_row(*(cell_text(cells[index]) for index in kept))
        return table

    def _widths(self, kept: Sequence[int], width: int) -> list[int]:
        """Each kept column's width: an id's widest cell, the text columns sharing what is left."""
        least = self.least()
        widest = [
            max([cell_len(cell) for row in self.rows for cell in row[index].splitlines()] + [0]) for index in kept
        ]
        widths = [least[index] for index in kept]
        spare = width - sum(widths) - GUTTER * (len(kept) - 1)
        for place, index in enumerate(kept):
            if self.columns[index].text and spare > 0:
                grown = min(spare, max(0, widest[place] - widths[place]))
                widths[place] += grown
                spare -= grown
        return widths

    def _beneath(self, kept: Sequence[int], width: int) -> Iterator[RenderableType]:
        """The header, then each row with its ``under`` columns on lines of their own beneath it."""
        widths = self._widths(kept, width)
        yield self.table(kept, width, [], widths)
        under = [index for index, column in enumerate(self.columns) if column.under and index not in kept]
        for row in self.rows:
            yield self.table(kept, width, [row], widths)
            for index in under:
                yield Text(f"  {self.columns[index].header.lower()} {row[index]}", style="dim", no_wrap=True)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        kept = self.shown(options.max_width)
        if any(column.under and index not in kept for index, column in enumerate(self.columns)):
            yield from self._beneath(kept, options.max_width)
        else:
            yield self.table(kept, options.max_width, self.rows)
        left_out = [
            column.header for index, column in enumerate(self.columns) if index not in kept and not column.under
        ]
        if left_out:
            yield Text(
                f"Left out at {options.max_width} columns: {', '.join(left_out)} (a wider terminal shows them).",
                style="dim",
            )


def fitted(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> FittedTable:
    return FittedTable(columns, rows)


def titled(title: str, body: RenderableType) -> Group:
    return Group(Text(title, style="bold"), body)


def spaced(*sections: RenderableType) -> Group:
    """The sections one under the other, an empty line between two."""
    return Group(*(part for index, section in enumerate(sections) for part in ([""] if index else []) + [section]))


def clipped(text: str, limit: int = REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
