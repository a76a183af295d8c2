"""How the commands on the store itself (purge, keys, store recount) show their reports to people, in UTC.

Drawn as :mod:`oncegate.cli.rendering` draws the service's answers, with :mod:`oncegate.cli.layout`;
``keys --json`` prints :func:`key_secrets_json` instead.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from oncegate.cli.layout import fitted, plural, spaced, time_text, whole
from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import KeySecretRecord, ScopeRecord
from oncegate.domain.safeguard import SecretUsage
from oncegate.service.retention import PurgeReport


def progress_line(report: PurgeReport) -> str:
    verb = "would delete" if report.dry_run else "deleted"
    tombstones = sum(report.tombstones_deleted.values())
    past = f", {tombstones} tombstones past the horizon {verb}" if tombstones else ""
    return f"page {report.pages}: {report.examined} examined, {report.deleted_total} {verb}{past}"


def purge_text(report: PurgeReport, store: str) -> RenderableType:
    verb = "Would delete" if report.dry_run else "Deleted"
    rows = [[scope, status.value, str(count)] for (scope, status), count in sorted(report.deleted.items())]
    columns = [whole("SCOPE"), whole("STATUS"), whole(verb.upper())]
    table: RenderableType = fitted(columns, rows) if rows else f"{verb} no claim."
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
    disputed = sum(report.tombstones_kept.values())
    if disputed:
        past += f" Kept past it, for an open conflict on each: {disputed}."
    return spaced(Text(f"Store: {store}"), table, Group(Text(f"Kept: {kept}"), Text(examined), Text(past)))


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
                "addedAt": time_text(record.added_at),
                "inUseFrom": time_text(record.in_use_from),
                "retiredAt": time_text(record.retired_at),
                **_usage_json(usage.get(record.key_id)),
            }
            for record in _by_use(marks)
        ],
    }


def _usage_json(usage: SecretUsage | None) -> dict[str, Any]:
    """The rows found only through a secret; null for one not counted (announced, or retired)."""
    if usage is None:
        return {
            "claims": None,
            "tombstones": None,
            "held": None,
            "retryableFailures": None,
            "openConflicts": None,
            "lastHorizon": None,
            "orphan": None,
        }
    return {
        "claims": usage.claims,
        "tombstones": usage.tombstones,
        "held": usage.held,
        "retryableFailures": usage.retryable,
        "openConflicts": usage.disputed,
        "lastHorizon": time_text(usage.last_horizon),
        # What `keys retire --orphan` takes to retire the secret all the same (None: nothing to orphan).
        "orphan": usage.confirmation if usage.rows else None,
    }


def key_secrets_text(marks: StoreMarks, usage: dict[str, SecretUsage], store: str) -> RenderableType:
    newest = _newest_secret(marks)
    rows = [
        [
            record.key_id,
            _secret_state(record, newest),
            time_text(record.in_use_from) or "",
            time_text(record.retired_at) or "",
            *_usage_cells(usage.get(record.key_id)),
        ]
        for record in _by_use(marks)
    ]
    header = Text(f"Store: {store}, store id {marks.store_id or '(none yet)'}")
    columns = [
        whole("KEY ID"),
        whole("STATE"),
        whole("IN USE FROM", 2),
        whole("RETIRED", 3),
        whole("CLAIMS", 1),
        whole("TOMBSTONES", 1),
        whole("LAST HORIZON", 1),
    ]
    table = fitted(columns, rows) if rows else "No key secret yet."
    return spaced(header, table)


def _usage_cells(usage: SecretUsage | None) -> list[str]:
    if usage is None:
        return ["", "", ""]
    # A claim retention never deletes by itself (in progress, unknown, a failure not reviewed) has no horizon: said
    # apart; and the retryable failures, which no attention list shows, named.
    held = f"{usage.held} held" if usage.held else ""
    retryable = f"{usage.retryable} retryable failed" if usage.retryable else ""
    # A row an open conflict keeps has no horizon either, whatever its scope's says: it goes once resolved.
    disputed = f"{usage.disputed} in conflict" if usage.disputed else ""
    # While some rows are unsettled, --orphan takes the rows' number with a code of which (SecretUsage.confirmation).
    confirm = f"--orphan {usage.confirmation}" if usage.coded else ""
    horizon = ", ".join(part for part in (time_text(usage.last_horizon), held, disputed, retryable, confirm) if part)
    return [str(usage.claims), str(usage.tombstones), horizon]


def recount_text(scopes: list[ScopeRecord], store: str) -> RenderableType:
    """The scopes' claims by status as ``store recount`` counted them again from the store's claims (issue 33)."""
    header = Text(f"Store: {store}; each scope's claims counted again from the store")
    rows = [
        [record.scope, "\n".join(f"{status} {count}" for status, count in record.claims_by_status.items()) or "none"]
        for record in scopes
    ]
    return spaced(header, fitted([whole("SCOPE"), whole("CLAIMS")], rows) if rows else "No scopes.")


def _by_use(marks: StoreMarks) -> list[KeySecretRecord]:
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(marks.secrets, key=lambda record: (record.in_use_from or far, record.added_at))


def _newest_secret(marks: StoreMarks) -> str | None:
    live = [record for record in _by_use(marks) if record.live]
    return live[-1].key_id if live else None
