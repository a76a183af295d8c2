"""How the ``oncegate`` command shows what the service answered to people: fields and tables, in UTC.

Each ``*_text`` function renders one record as ``Label  value`` lines, each ``*_table`` a list as
columns; a field without a value is left out. They are drawn with :mod:`oncegate.cli.layout`'s
fields and fitted tables, and printed by its ``show``; ``--json`` bypasses all of this (see
``commands``). The reports of the commands on the store itself (purge, keys, store recount) are
:mod:`oncegate.cli.store_rendering`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.text import Text

from oncegate.cli.layout import (
    clipped,
    field_lines,
    fitted,
    folded,
    json_text,
    plural,
    spaced,
    time_text,
    titled,
    under,
    whole,
    yes_no,
)
from oncegate.domain.statuses import ConflictOrigin

if TYPE_CHECKING:
    # Named in annotations only: a command renders the answer it read, and imports no other command's models.
    from oncegate.cli.drill import Lookup, Report
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

# How a request was recognised is a sentence: narrower than this, it reads a word a line.
RECOGNISED_WIDTH = 30


def _flow(flow: FlowRef | None) -> str:
    return f"{flow.name} ({flow.environment})" if flow else ""


def _run(run_id: str | None, flow: FlowRef | None) -> str:
    return f"{run_id}, flow {_flow(flow)}" if flow else str(run_id)


def claim_text(claim: ClaimView) -> RenderableType:
    retryable = None if claim.retryable is None else yes_no(claim.retryable)
    fields = field_lines(
        [
            ("Claim", claim.claim_id),
            ("Scope", claim.scope),
            ("Source", claim.source),
            ("Reference", claim.reference),
            ("Status", f"{claim.status.value} (attempt {claim.attempt})"),
            ("Fingerprint", claim.fingerprint),
            ("Run", _run(claim.run_id, claim.flow)),
            ("First received", time_text(claim.first_received_at)),
            ("Last attempt", time_text(claim.last_attempt_at)),
            ("Lease expires", time_text(claim.lease_expires_at)),
            ("Target record", claim.target_record_id),
            ("Data", json_text(claim.data)),
            ("Completed", time_text(claim.completed_at)),
            ("Error", claim.error),
            ("Retryable", retryable),
            ("Reviewer", claim.reviewer),
            (
                "Purged",
                f"{time_text(claim.purged_at)}: a tombstone, kept for its scope's horizon" if claim.purged_at else None,
            ),
        ]
    )
    # An action's answer (a review) carries no history: say nothing of it rather than "History (0)".
    return fields if claim.history is None else spaced(fields, _history_table(claim.history))


def _history_table(history: list[HistoryEntry]) -> Group:
    rows = [
        [
            time_text(entry.at) or "",
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
        *(
            whole("AT"),
            whole("EVENT"),
            whole("OUTCOME"),
            whole("COUNT", 3),
            whole("ATTEMPT", 2),
            whole("RUN", 4),
        ),
        *(folded("FLOW", 5, 16), folded("RECOGNISED BY", 1, RECOGNISED_WIDTH)),
    ]
    table = fitted(columns, rows)
    return titled(f"History ({len(rows)})", table)


def _count(entry: HistoryEntry) -> str:
    """How many answers alike an entry counts, and until when (the run shown is the first's); blank for one event."""
    if entry.count is None:
        return ""
    return f"{entry.count}, last {time_text(entry.last_at)}" if entry.count > 1 else "1"


def attention_table(claims: list[ClaimNeedingAttention]) -> RenderableType:
    if not claims:
        return "No claims need attention."
    rows = [
        [
            *(time_text(item.since) or "", item.why.value, item.claim.source or "", item.claim.reference or ""),
            *(item.claim.scope, str(item.claim.attempt), item.claim.run_id),
            *(_flow(item.claim.flow), item.claim.claim_id),
        ]
        for item in claims
    ]
    # What a person looks the record up by in the source and target systems leaves last, as in claims_table.
    columns = [
        whole("SINCE", 3),
        whole("WHY"),
        whole("SOURCE", 2),
        whole("REFERENCE", 1),
        whole("SCOPE", 4),
    ]
    return fitted(
        [
            *columns,
            whole("ATTEMPT", 6),
            whole("RUN", 5),
            folded("FLOW", 7, 16),
            under("CLAIM"),
        ],
        rows,
    )


def claims_table(claims: list[ClaimView]) -> RenderableType:
    if not claims:
        return "No claims found."
    rows = [
        [
            time_text(claim.first_received_at) or "",
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
    columns = [
        whole("FIRST RECEIVED", 4),
        whole("SOURCE", 2),
        whole("REFERENCE", 1),
        whole("SCOPE", 5),
        whole("STATUS"),
    ]
    return fitted([*columns, whole("TARGET RECORD", 3), under("CLAIM")], rows)


def conflicts_table(conflicts: list[ConflictView], status: str) -> RenderableType:
    if not conflicts:
        return f"No {'' if status == 'all' else status + ' '}conflicts."
    rows = [
        [
            conflict.conflict_id,
            time_text(conflict.created_at) or "",
            conflict.status.value,
            conflict.scope,
            FOUND_BY[conflict.origin],
            conflict.run_id,
            clipped(conflict.reason),
        ]
        for conflict in conflicts
    ]
    columns = [
        whole("CONFLICT"),
        whole("CREATED", 3),
        whole("STATUS"),
        whole("SCOPE", 1),
        whole("FOUND BY", 4),
        whole("RUN", 5),
    ]
    return fitted([*columns, folded("REASON", 2, 20)], rows)


# Who noticed a conflict (its origin), in the words of the actions: "source" is the source system everywhere else.
FOUND_BY = {ConflictOrigin.CLAIM: "Check and claim", ConflictOrigin.REPORTED: "Report conflict"}


def conflict_text(conflict: ConflictView) -> RenderableType:
    resolution = conflict.resolution
    return field_lines(
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
            ("Details", json_text(conflict.details)),
            ("Run", _run(conflict.run_id, conflict.flow)),
            ("Created", time_text(conflict.created_at)),
            ("Decision", resolution and resolution.decision.value),
            ("Reviewer", resolution and resolution.reviewer),
            ("Note", resolution and resolution.note),
            ("Resolved", resolution and time_text(resolution.resolved_at)),
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
            yes_no(flow.registered),
            yes_no(flow.enabled),
            flow.owner or "",
            str(flow.claims),
            str(flow.duplicates),
            time_text(flow.last_seen_at) or "",
            clipped(flow.notes or ""),
        ]
        for flow in flows
    ]
    columns = [
        *(
            folded("FLOW", 0, 16),
            whole("ENVIRONMENT"),
            whole("REGISTERED", 4),
            whole("ENABLED", 1),
            folded("OWNER", 5, 12),
        ),
        *(
            whole("CLAIMS", 2),
            whole("DUPLICATES", 3),
            whole("LAST SEEN", 6),
            folded("NOTES", 7, 16),
        ),
    ]
    return fitted(columns, rows)


def flow_text(flow: FlowView) -> RenderableType:
    return field_lines(
        [
            ("Flow", flow.name),
            ("Environment", flow.environment),
            ("Registered", time_text(flow.registered_at) or "no"),
            ("Enabled", yes_no(flow.enabled)),
            ("Owner", flow.owner),
            ("Notes", flow.notes),
            ("First seen", time_text(flow.first_seen_at)),
            ("Last seen", time_text(flow.last_seen_at)),
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
            time_text(overlap.last_seen_at) or "",
            overlap.example_claim_id or "",
        ]
        for overlap in overlaps
    ]
    columns = [
        folded("FLOW", 0, 16),
        folded("OTHER FLOW", 0, 16),
        whole("COUNT"),
        whole("LAST SEEN", 2),
    ]
    return fitted([*columns, whole("EXAMPLE CLAIM", 1)], rows)


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
            time_text(scope.last_seen_at) or "",
            clipped(scope.key_pattern or ""),
            clipped(scope.description or ""),
        ]
        for scope in scopes
    ]
    columns = [
        *(
            whole("SCOPE"),
            folded("OWNER", 4, 12),
            whole("LEASE", 5),
            whole("RETENTION", 6),
            whole("HORIZON", 6),
        ),
        whole("CLAIMS"),
        whole("OPEN CONFLICTS", 2),
        folded("FINGERPRINT RULES", 1, 18),
        *(whole("LAST SEEN", 3), whole("KEY PATTERN", 8), folded("DESCRIPTION", 7, 16)),
    ]
    unmatched = [
        f"{scope.scope}: {', '.join(scope.fingerprint_unmatched)}" for scope in scopes if scope.fingerprint_unmatched
    ]
    if not unmatched:
        return fitted(columns, rows)
    # Under the table, not a column: a mistyped pointer is rare, and worth a line of its own (issue 33).
    note = "Fingerprint include pointers no payload has matched yet (mistyped?):\n  " + "\n  ".join(unmatched)
    return Group(fitted(columns, rows), Text(note))


def scope_text(scope: ScopeView) -> RenderableType:
    return field_lines(
        [
            ("Scope", scope.scope),
            ("Owner", scope.owner),
            ("Description", scope.description),
            ("Default lease", f"{scope.lease_seconds} s"),
            ("Retention", plural(scope.retention_days, "day")),
            ("Horizon", plural(scope.horizon_days, "day")),
            ("Key pattern", scope.key_pattern),
            *_fingerprint_rules(scope),
            ("Registered", time_text(scope.registered_at) or "no"),
            ("First seen", time_text(scope.first_seen_at)),
            ("Last seen", time_text(scope.last_seen_at)),
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
    header = field_lines(
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
        *(
            whole("STEP"),
            whole("KEY", 1),
            whole("CALL"),
            whole("RUN", 3),
            whole("ANSWER"),
            whole("ATTEMPT", 4),
        ),
        *(whole("TARGET RECORD / CONFLICT", 2), whole("MS", 5)),
    ]
    calls_table = titled(f"Calls ({len(calls)})", fitted(columns, calls))
    details: list[RenderableType] = [calls_table, *(_drill_history(lookup) for lookup in report.lookups)]
    if not verbose:
        details = [Text(f"{len(calls)} calls and each key's history: add --verbose (or --json).", style="dim")]
    if report.blocked is not None:
        # Nothing else was tried: the reason and the command that lets the drill's flow claim are all that matter.
        return spaced(header, *details[:1], Group(Text(report.blocked.reason or ""), Text(report.fix or "")))
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
    return spaced(
        header,
        *details,
        titled("Checks", Group(*checks)),
        *(Text(f"Note: {note}") for note in report.notes),
        verdict,
    )


def _drill_history(lookup: Lookup) -> RenderableType:
    if lookup.claim is None:
        return Text(f"History of key {lookup.key}: not available ({lookup.error})")
    history = lookup.claim.history or []
    rows = [
        [
            time_text(entry.at, "milliseconds") or "",
            entry.kind.value,
            entry.outcome,
            _count(entry),
            entry.run_id or "",
            entry.recognised_by,
        ]
        for entry in history
    ]
    title = f"History of key {lookup.key}, claim {lookup.claim.claim_id} ({len(rows)})"
    columns = [
        whole("TIME"),
        whole("EVENT"),
        whole("OUTCOME"),
        whole("COUNT", 3),
        whole("RUN", 2),
    ]
    return titled(title, fitted([*columns, folded("RECOGNISED BY", 1, RECOGNISED_WIDTH)], rows))


def health_text(answer: Health) -> RenderableType:
    return field_lines(
        [
            ("Status", answer.status),
            ("Store", answer.store),
            ("Store location", answer.store_location),
            ("Version", answer.version),
            ("Restored", answer.restored.message if answer.restored else None),
        ]
    )
