"""How the ``oncegate`` command shows what the service answered to people: fields and tables, in UTC.

Each ``*_text`` function renders one record as ``Label  value`` lines, each ``*_table`` a list as
columns; a field without a value is left out. :func:`show` prints them with rich: styled and fitted
to a terminal, plain and never wrapped in a pipe or a file. ``--json`` bypasses all of this (see
``commands``).

Fitted to a terminal, a table never breaks an id, an enum value, a time or a number: a person copies
them whole. Free text (a reason, a note, how a request was recognised) folds over lines, no narrower
than it reads. Each table ranks its columns, and as the terminal narrows it leaves out the least
important first, saying which, until the rest fits (an 80-column terminal keeps a claim id's 52
characters whole).

The module runs past 400 lines on purpose: one renderer per kind of record the command shows, sharing
the cell and table helpers at the top.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.table import Table
from rich.text import Text

from oncegate.cli.drill import Lookup, Report
from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import KeySecretRecord, ScopeRecord
from oncegate.domain.safeguard import SecretUsage
from oncegate.domain.statuses import ConflictOrigin
from oncegate.domain.times import said
from oncegate.models import (
    ClaimCounts,
    ClaimNeedingAttention,
    ClaimView,
    ConflictView,
    FlowRef,
    FlowView,
    Health,
    HistoryEntry,
    OverlapView,
    ScopeView,
)
from oncegate.service.retention import PurgeReport

REASON_CHARS = 60
# How a request was recognised is a sentence: narrower than this, it reads a word a line.
RECOGNISED_WIDTH = 30
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


def _when(value: datetime | None, timespec: str = "seconds") -> str | None:
    return None if value is None else said(value, timespec)


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _flow(flow: FlowRef | None) -> str:
    return f"{flow.name} ({flow.environment})" if flow else ""


def _run(run_id: str | None, flow: FlowRef | None) -> str:
    return f"{run_id}, flow {_flow(flow)}" if flow else str(run_id)


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _cell(value: object) -> Text:
    # Text, never markup: a reason or a note may hold square brackets.
    text = str(value)
    return Text(text, style=STYLES.get(text, ""))


def _fields(rows: Iterable[tuple[str, object]]) -> Table:
    """``Label  value`` lines, aligned; a field without a value is left out."""
    grid = Table(box=None, show_header=False, pad_edge=False)
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        if value is not None and value != "":
            grid.add_row(Text(label), _cell(value))
    return grid


# Between two columns of a table: a cell's padding on either side.
GUTTER = 2


@dataclass(frozen=True)
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


def _id(header: str, leaves: int = 0) -> Column:
    return Column(header, leaves)


def _free(header: str, leaves: int, width: int) -> Column:
    return Column(header, leaves, text=True, width=width)


def _under(header: str) -> Column:
    return Column(header, under=True)


class _Fitted:
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
            table.add_row(*(_cell(cells[index]) for index in kept))
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


def _table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> _Fitted:
    return _Fitted(columns, rows)


def _titled(title: str, body: RenderableType) -> Group:
    return Group(Text(title, style="bold"), body)


def _spaced(*sections: RenderableType) -> Group:
    """The sections one under the other, an empty line between two."""
    return Group(*(part for index, section in enumerate(sections) for part in ([""] if index else []) + [section]))


def _clip(text: str, limit: int = REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def claim_text(claim: ClaimView) -> RenderableType:
    retryable = None if claim.retryable is None else _yes(claim.retryable)
    fields = _fields(
        [
            ("Claim", claim.claim_id),
            ("Scope", claim.scope),
            ("Source", claim.source),
            ("Reference", claim.reference),
            ("Status", f"{claim.status.value} (attempt {claim.attempt})"),
            ("Fingerprint", claim.fingerprint),
            ("Run", _run(claim.run_id, claim.flow)),
            ("First received", _when(claim.first_received_at)),
            ("Last attempt", _when(claim.last_attempt_at)),
            ("Lease expires", _when(claim.lease_expires_at)),
            ("Target record", claim.target_record_id),
            ("Data", _json_text(claim.data)),
            ("Completed", _when(claim.completed_at)),
            ("Error", claim.error),
            ("Retryable", retryable),
            ("Reviewer", claim.reviewer),
            (
                "Purged",
                f"{_when(claim.purged_at)}: a tombstone, kept for its scope's horizon" if claim.purged_at else None,
            ),
        ]
    )
    # An action's answer (a review) carries no history: say nothing of it rather than "History (0)".
    return fields if claim.history is None else _spaced(fields, _history_table(claim.history))


def _history_table(history: list[HistoryEntry]) -> Group:
    rows = [
        [
            _when(entry.at) or "",
            entry.kind.value,
            entry.outcome,
            _count(entry),
            str(entry.attempt),
            entry.run_id or "",
            _flow(entry.flow),
            entry.recognised_by,
        ]
        for entry in history
    ]
    columns = [
        *(_id("AT"), _id("EVENT"), _id("OUTCOME"), _id("COUNT", 3), _id("ATTEMPT", 2), _id("RUN", 4)),
        *(_free("FLOW", 5, 16), _free("RECOGNISED BY", 1, RECOGNISED_WIDTH)),
    ]
    table = _table(columns, rows)
    return _titled(f"History ({len(rows)})", table)


def _count(entry: HistoryEntry) -> str:
    """How many answers alike an entry counts, and until when (the run shown is the first's); blank for one event."""
    if entry.count is None:
        return ""
    return f"{entry.count}, last {_when(entry.last_at)}" if entry.count > 1 else "1"


def attention_table(claims: list[ClaimNeedingAttention]) -> RenderableType:
    if not claims:
        return "No claims need attention."
    rows = [
        [
            *(_when(item.since) or "", item.why.value, item.claim.source or "", item.claim.reference or ""),
            *(item.claim.scope, str(item.claim.attempt), item.claim.run_id),
            *(_flow(item.claim.flow), item.claim.claim_id),
        ]
        for item in claims
    ]
    # What a person looks the record up by in the source and target systems leaves last, as in claims_table.
    columns = [_id("SINCE", 3), _id("WHY"), _id("SOURCE", 2), _id("REFERENCE", 1), _id("SCOPE", 4)]
    return _table([*columns, _id("ATTEMPT", 6), _id("RUN", 5), _free("FLOW", 7, 16), _under("CLAIM")], rows)


def claims_table(claims: list[ClaimView]) -> RenderableType:
    if not claims:
        return "No claims found."
    rows = [
        [
            _when(claim.first_received_at) or "",
            claim.source or "",
            claim.reference or "",
            claim.scope,
            f"{claim.status.value} ({claim.attempt})",
            claim.target_record_id or "",
            claim.claim_id,
        ]
        for claim in claims
    ]
    # What a person looks a claim up by (its source system, reference, target system's record) leaves last.
    columns = [_id("FIRST RECEIVED", 4), _id("SOURCE", 2), _id("REFERENCE", 1), _id("SCOPE", 5), _id("STATUS")]
    return _table([*columns, _id("TARGET RECORD", 3), _under("CLAIM")], rows)


def conflicts_table(conflicts: list[ConflictView], status: str) -> RenderableType:
    if not conflicts:
        return f"No {'' if status == 'all' else status + ' '}conflicts."
    rows = [
        [
            conflict.conflict_id,
            _when(conflict.created_at) or "",
            conflict.status.value,
            conflict.scope,
            FOUND_BY[conflict.origin],
            conflict.run_id,
            _clip(conflict.reason),
        ]
        for conflict in conflicts
    ]
    columns = [_id("CONFLICT"), _id("CREATED", 3), _id("STATUS"), _id("SCOPE", 1), _id("FOUND BY", 4), _id("RUN", 5)]
    return _table([*columns, _free("REASON", 2, 20)], rows)


# Who noticed a conflict (its origin), in the words of the actions: "source" is the source system everywhere else.
FOUND_BY = {ConflictOrigin.CLAIM: "Check and claim", ConflictOrigin.REPORTED: "Report conflict"}


def conflict_text(conflict: ConflictView) -> RenderableType:
    resolution = conflict.resolution
    return _fields(
        [
            ("Conflict", conflict.conflict_id),
            ("Status", conflict.status.value),
            ("Claim", conflict.claim_id),
            ("Scope", conflict.scope),
            ("Found by", FOUND_BY[conflict.origin]),
            ("Fingerprint", conflict.fingerprint),
            ("Claim fingerprint", conflict.claim_fingerprint),
            ("Reason", conflict.reason),
            ("Changed parts", _changed_parts(conflict)),
            ("Details", _json_text(conflict.details)),
            ("Run", _run(conflict.run_id, conflict.flow)),
            ("Created", _when(conflict.created_at)),
            ("Decision", resolution and resolution.decision.value),
            ("Reviewer", resolution and resolution.reviewer),
            ("Note", resolution and resolution.note),
            ("Resolved", resolution and _when(resolution.resolved_at)),
        ]
    )


def _changed_parts(conflict: ConflictView) -> str | None:
    """Where the data changed, as JSON Pointers (issue 33); None for a conflict not compared part by part."""
    if not conflict.changed_parts:
        return None
    more = conflict.more_changed_parts
    return ", ".join(conflict.changed_parts) + (f" and {more} more" if more else "")


def flows_table(flows: list[FlowView]) -> RenderableType:
    if not flows:
        return "No flows."
    rows = [
        [
            flow.name,
            flow.environment,
            _yes(flow.registered),
            _yes(flow.enabled),
            flow.owner or "",
            str(flow.claims),
            str(flow.duplicates),
            _when(flow.last_seen_at) or "",
            _clip(flow.notes or ""),
        ]
        for flow in flows
    ]
    columns = [
        *(_free("FLOW", 0, 16), _id("ENVIRONMENT"), _id("REGISTERED", 4), _id("ENABLED", 1), _free("OWNER", 5, 12)),
        *(_id("CLAIMS", 2), _id("DUPLICATES", 3), _id("LAST SEEN", 6), _free("NOTES", 7, 16)),
    ]
    return _table(columns, rows)


def flow_text(flow: FlowView) -> RenderableType:
    return _fields(
        [
            ("Flow", flow.name),
            ("Environment", flow.environment),
            ("Registered", _when(flow.registered_at) or "no"),
            ("Enabled", _yes(flow.enabled)),
            ("Owner", flow.owner),
            ("Notes", flow.notes),
            ("First seen", _when(flow.first_seen_at)),
            ("Last seen", _when(flow.last_seen_at)),
            ("Claims", flow.claims),
            ("Duplicates", flow.duplicates),
        ]
    )


def overlaps_table(overlaps: list[OverlapView]) -> RenderableType:
    if not overlaps:
        return "No overlapping flows."
    rows = [
        [
            _flow(overlap.flow),
            _flow(overlap.other_flow),
            str(overlap.count),
            _when(overlap.last_seen_at) or "",
            overlap.example_claim_id or "",
        ]
        for overlap in overlaps
    ]
    columns = [_free("FLOW", 0, 16), _free("OTHER FLOW", 0, 16), _id("COUNT"), _id("LAST SEEN", 2)]
    return _table([*columns, _id("EXAMPLE CLAIM", 1)], rows)


def _claim_counts(counts: ClaimCounts, between: str = ", ") -> str:
    return between.join(f"{status} {count}" for status, count in counts.model_dump().items() if count) or "none"


def scopes_table(scopes: list[ScopeView]) -> RenderableType:
    if not scopes:
        return "No scopes."
    rows = [
        [
            scope.scope,
            scope.owner or "",
            f"{scope.lease_seconds} s",
            f"{scope.retention_days} d",
            f"{scope.horizon_days} d",
            # In a terminal, one status a line: a count never wraps away from its status.
            _claim_counts(scope.claims, "\n"),
            str(scope.open_conflicts),
            _rules_said(scope),
            _when(scope.last_seen_at) or "",
            _clip(scope.key_pattern or ""),
            _clip(scope.description or ""),
        ]
        for scope in scopes
    ]
    columns = [
        *(_id("SCOPE"), _free("OWNER", 4, 12), _id("LEASE", 5), _id("RETENTION", 6), _id("HORIZON", 6)),
        _id("CLAIMS"),
        _id("OPEN CONFLICTS", 2),
        _free("FINGERPRINT RULES", 1, 18),
        *(_id("LAST SEEN", 3), _id("KEY PATTERN", 8), _free("DESCRIPTION", 7, 16)),
    ]
    unmatched = [
        f"{scope.scope}: {', '.join(scope.fingerprint_unmatched)}" for scope in scopes if scope.fingerprint_unmatched
    ]
    if not unmatched:
        return _table(columns, rows)
    # Under the table, not a column: a mistyped pointer is rare, and worth a line of its own (issue 33).
    note = "Fingerprint include pointers no payload has matched yet (mistyped?):\n  " + "\n  ".join(unmatched)
    return Group(_table(columns, rows), Text(note))


def scope_text(scope: ScopeView) -> RenderableType:
    return _fields(
        [
            ("Scope", scope.scope),
            ("Owner", scope.owner),
            ("Description", scope.description),
            ("Default lease", f"{scope.lease_seconds} s"),
            ("Retention", plural(scope.retention_days, "day")),
            ("Horizon", plural(scope.horizon_days, "day")),
            ("Key pattern", scope.key_pattern),
            *_fingerprint_rules(scope),
            ("Registered", _when(scope.registered_at) or "no"),
            ("First seen", _when(scope.first_seen_at)),
            ("Last seen", _when(scope.last_seen_at)),
            ("Claims", _claim_counts(scope.claims)),
            ("Open conflicts", scope.open_conflicts),
        ]
    )


def _rules_said(scope: ScopeView) -> str:
    """The scope's fingerprint rules in a cell: its preset and pointers, or the whole payload (issue 33)."""
    if scope.fingerprint_rules_version is None:
        return "whole payload"
    parts = [f"preset {scope.fingerprint_preset}"] if scope.fingerprint_preset else []
    parts += [f"include {pointer}" for pointer in scope.fingerprint_include or []]
    parts += [f"ignore {pointer}" for pointer in scope.fingerprint_ignore or []]
    # In a terminal, one part a line, as the claims per status: a pointer never wraps away from its verb.
    return "\n".join([f"version {scope.fingerprint_rules_version}", *(parts or ["whole payload"])])


def _fingerprint_rules(scope: ScopeView) -> list[tuple[str, Any]]:
    """The scope's fingerprint rules, for a scope that has any (issue 25)."""
    if scope.fingerprint_rules_version is None:
        return []
    return [
        ("Fingerprint rules", f"version {scope.fingerprint_rules_version}"),
        ("Fingerprint include", ", ".join(scope.fingerprint_include or []) or "the whole payload"),
        ("Fingerprint ignore", ", ".join(scope.fingerprint_ignore or [])),
        ("Fingerprint preset", scope.fingerprint_preset),
        ("Never matched", ", ".join(scope.fingerprint_unmatched or [])),
    ]


def drill_text(report: Report, *, verbose: bool = False) -> RenderableType:
    """The drill's report: what it checked and its verdict; every call and each key's history with ``verbose``.

    At 32 runs a burst the calls alone are over a hundred lines: a person reads the checks, and
    turns to the calls (``--verbose``, or ``--json`` for a script) when one failed.
    """
    keys = list(report.keys.items())
    if report.batch:
        # 20 records: the first and last key name them all (they differ only in their last part).
        (first, first_key), (last, last_key) = keys[0], keys[-1]
        shown = [("Records", f"{len(keys)} keys, {first} {first_key} to {last} {last_key}")]
        runs = f"{report.concurrency} racers at once, in batches and single calls"
    else:
        shown = [(f"Key {label}", key) for label, key in keys]
        runs = f"{report.concurrency} runs at once"
    header = _fields(
        [
            ("Drill", f"{report.url}, scope {report.scope}, {runs}"),
            ("Source", report.source),
            ("Store", report.store),
            ("Flow", _flow(report.flow)),
            *shown,
        ]
    )
    calls = [
        [
            call.step,
            call.key,
            call.action,
            call.run_id or "",
            call.answer if call.refused is None else f"{call.answer} ({call.refused})",
            "" if call.attempt is None else str(call.attempt),
            call.target_record_id or call.conflict_id or "",
            f"{call.ms:.0f}",
        ]
        for call in report.calls
    ]
    columns = [
        *(_id("STEP"), _id("KEY", 1), _id("CALL"), _id("RUN", 3), _id("ANSWER"), _id("ATTEMPT", 4)),
        *(_id("TARGET RECORD / CONFLICT", 2), _id("MS", 5)),
    ]
    calls_table = _titled(f"Calls ({len(calls)})", _table(columns, calls))
    details: list[RenderableType] = [calls_table, *(_drill_history(lookup) for lookup in report.lookups)]
    if not verbose:
        details = [Text(f"{len(calls)} calls and each key's history: add --verbose (or --json).", style="dim")]
    if report.blocked is not None:
        # Nothing else was tried: the reason and the command that lets the drill's flow claim are all that matter.
        return _spaced(header, *details[:1], Group(Text(report.blocked.reason or ""), Text(report.fix or "")))
    checks = [
        Text.assemble("  ", ("ok  " if check.passed else "FAIL", "green" if check.passed else "bold red"), "  ")
        + Text(check.name)
        for check in report.checks
    ]
    if report.passed:
        verdict = Text("Passed: each business result happened once, and every repeat was recognised.", style="green")
    else:
        lines = [f"FAILED: {len(report.deviations)} deviation(s)", *(f"  - {item}" for item in report.deviations)]
        verdict = Text("\n".join(lines), style="red")
    return _spaced(
        header,
        *details,
        _titled("Checks", Group(*checks)),
        *(Text(f"Note: {note}") for note in report.notes),
        verdict,
    )


def _drill_history(lookup: Lookup) -> RenderableType:
    if lookup.claim is None:
        return Text(f"History of key {lookup.key}: not available ({lookup.error})")
    history = lookup.claim.history or []
    rows = [
        [
            _when(entry.at, "milliseconds") or "",
            entry.kind.value,
            entry.outcome,
            _count(entry),
            entry.run_id or "",
            entry.recognised_by,
        ]
        for entry in history
    ]
    title = f"History of key {lookup.key}, claim {lookup.claim.claim_id} ({len(rows)})"
    columns = [_id("TIME"), _id("EVENT"), _id("OUTCOME"), _id("COUNT", 3), _id("RUN", 2)]
    return _titled(title, _table([*columns, _free("RECOGNISED BY", 1, RECOGNISED_WIDTH)], rows))


def health_text(answer: Health) -> RenderableType:
    return _fields(
        [
            ("Status", answer.status),
            ("Store", answer.store),
            ("Store location", answer.store_location),
            ("Version", answer.version),
            ("Restored", answer.restored.message if answer.restored else None),
        ]
    )


def progress_line(report: PurgeReport) -> str:
    verb = "would delete" if report.dry_run else "deleted"
    tombstones = sum(report.tombstones_deleted.values())
    past = f", {tombstones} tombstones past the horizon {verb}" if tombstones else ""
    return f"page {report.pages}: {report.examined} examined, {report.deleted_total} {verb}{past}"


def purge_text(report: PurgeReport, store: str) -> RenderableType:
    verb = "Would delete" if report.dry_run else "Deleted"
    rows = [[scope, status.value, str(count)] for (scope, status), count in sorted(report.deleted.items())]
    columns = [_id("SCOPE"), _id("STATUS"), _id(verb.upper())]
    table: RenderableType = _table(columns, rows) if rows else f"{verb} no claim."
    kept = ", ".join(f"{reason.value} {count}" for reason, count in sorted(report.kept.items())) or "none"
    examined = (
        f"{plural(report.examined, 'claim')} examined in {plural(report.pages, 'page')}; "
        f"{verb.lower()} {report.deleted_total}, each succeeded one down to its tombstone."
    )
    tombstones = sum(report.tombstones_deleted.values())
    past = f"Tombstones past their scope's horizon: {verb.lower()} {tombstones}" + (
        f" ({', '.join(f'{scope} {count}' for scope, count in sorted(report.tombstones_deleted.items()))})."
        if tombstones
        else "."
    )
    return _spaced(Text(f"Store: {store}"), table, Group(Text(f"Kept: {kept}"), Text(examined), Text(past)))


def _secret_state(record: KeySecretRecord, newest: str | None) -> str:
    if record.retired_at is not None:
        return "retired"
    if record.in_use_from is None:
        return "announced"
    return "current" if record.key_id == newest else "previous"


def key_secrets_json(marks: StoreMarks, usage: dict[str, SecretUsage]) -> dict[str, Any]:
    newest = _newest_secret(marks)
    return {
        "storeId": marks.store_id,
        "keySecrets": [
            {
                "keyId": record.key_id,
                "state": _secret_state(record, newest),
                "addedAt": _when(record.added_at),
                "inUseFrom": _when(record.in_use_from),
                "retiredAt": _when(record.retired_at),
                **_usage_json(usage.get(record.key_id)),
            }
            for record in _by_use(marks)
        ],
    }


def _usage_json(usage: SecretUsage | None) -> dict[str, Any]:
    """The rows found only through a secret; null for one not counted (announced, or retired)."""
    if usage is None:
        return {"claims": None, "tombstones": None, "held": None, "lastHorizon": None}
    return {
        "claims": usage.claims,
        "tombstones": usage.tombstones,
        "held": usage.held,
        "lastHorizon": _when(usage.last_horizon),
    }


def key_secrets_text(marks: StoreMarks, usage: dict[str, SecretUsage], store: str) -> RenderableType:
    newest = _newest_secret(marks)
    rows = [
        [
            record.key_id,
            _secret_state(record, newest),
            _when(record.in_use_from) or "",
            _when(record.retired_at) or "",
            *_usage_cells(usage.get(record.key_id)),
        ]
        for record in _by_use(marks)
    ]
    header = Text(f"Store: {store}, store id {marks.store_id or '(none yet)'}")
    columns = [
        _id("KEY ID"),
        _id("STATE"),
        _id("IN USE FROM", 2),
        _id("RETIRED", 3),
        _id("CLAIMS", 1),
        _id("TOMBSTONES", 1),
        _id("LAST HORIZON", 1),
    ]
    table = _table(columns, rows) if rows else "No key secret yet."
    return _spaced(header, table)


def _usage_cells(usage: SecretUsage | None) -> list[str]:
    if usage is None:
        return ["", "", ""]
    # A claim retention never deletes by itself (in progress, unknown, a failure kept) has no horizon: said apart.
    held = f"{usage.held} held" if usage.held else ""
    horizon = ", ".join(part for part in (_when(usage.last_horizon), held) if part)
    return [str(usage.claims), str(usage.tombstones), horizon]


def recount_text(scopes: list[ScopeRecord], store: str) -> RenderableType:
    """The scopes' claims by status as ``store recount`` counted them again from the store's claims (issue 33)."""
    header = Text(f"Store: {store}; each scope's claims counted again from the store")
    rows = [
        [record.scope, "\n".join(f"{status} {count}" for status, count in record.claims_by_status.items()) or "none"]
        for record in scopes
    ]
    return _spaced(header, _table([_id("SCOPE"), _id("CLAIMS")], rows) if rows else "No scopes.")


def _by_use(marks: StoreMarks) -> list[KeySecretRecord]:
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(marks.secrets, key=lambda record: (record.in_use_from or far, record.added_at))


def _newest_secret(marks: StoreMarks) -> str | None:
    live = [record for record in _by_use(marks) if record.live]
    return live[-1].key_id if live else None
