"""The oncegate command: serve the Functions app locally, or look at and act on a deployment.

  oncegate serve [--host H] [--port P] [--app-dir D]
  oncegate purge [--dry-run] [--page-size N] [--max-pages N] [--resume CURSOR] [--json]
  oncegate [--url URL] [--key KEY | --entra ...] [--json] COMMAND, where COMMAND is one of
    claims show CLAIM_ID
    claims find --scope SCOPE --key KEY
    claims attention [--scope SCOPE] [--top N] [--all-pages]
    claims review CLAIM_ID [--reviewer R] [--note N]
    conflicts list [--status open|resolved|all] [--scope SCOPE] [--top N] [--all-pages]
    conflicts show CONFLICT_ID
    conflicts resolve CONFLICT_ID --decision accept_new|keep_original|dismiss [--reviewer R] [--note N]
    flows list [--top N] [--all-pages]
    flows overlaps [--top N] [--all-pages]
    flows register --name NAME --environment ENV [--owner O] [--enabled | --disabled] [--notes T]
    scopes list [--top N] [--all-pages]
    scopes set SCOPE [--owner O] [--lease-seconds S] [--retention-days D] [--description T]
    drill [--scope SCOPE] [--concurrency N]
    health

``serve`` and ``purge`` work on the store the environment's settings name (ONCEGATE_STORE...), as the
app does; every other command talks to a deployment over its HTTP API.

Exit status: 0 done; 1 the drill found the service deviating from the contract; 2 bad usage, a
failed sign-in or a request the service refused (4xx); 3 the service or its store failed (5xx) or
could not be reached.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oncegate import __version__
from oncegate.domain.statuses import ConflictStatus, Resolution
from oncegate.entrypoints.client import (
    DEFAULT_URL,
    SERVICE_EXIT,
    USAGE_EXIT,
    Answer,
    Client,
    ClientError,
    Model,
    Page,
)
from oncegate.entrypoints.drill import DEFAULT_CONCURRENCY, DEFAULT_SCOPE, Lookup, Report, run_drill
from oncegate.entrypoints.signin import AppFactory, EntraSettings, access_token, msal_app
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
from oncegate.service.retention import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, PurgeReport

DEVIATION_EXIT = 1
INTERRUPTED_EXIT = 130
LOCAL_COMMANDS = ("serve", "purge")
REASON_CHARS = 60
MIN_CONCURRENCY = 2
MAX_CONCURRENCY = 128


def _load_app(app_dir: Path) -> object:
    # function_app.py sits at the project root (where Core Tools expects it), not in the package.
    sys.path.insert(0, str(app_dir.resolve()))
    return importlib.import_module("function_app").app


def serve(args: argparse.Namespace) -> int:
    from oncegate.entrypoints.server import make_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # A bad setting does not stop the app: it logs one CRITICAL line naming it, and health and every
    # action answer 503 not_configured until it is fixed, as in Azure.
    app = _load_app(Path(args.app_dir))
    server = make_server(app, args.host, args.port)  # type: ignore[arg-type]
    host, port = server.server_address[:2]
    print(f"OnceGate {__version__} serving on http://{host!s}:{port}/api (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def purge(args: argparse.Namespace) -> int:
    """Retention's purge on the store of the environment's settings, a progress line per page on stderr."""
    from oncegate.bootstrap import build_service
    from oncegate.config import ConfigError, Settings
    from oncegate.errors import OnceGateError

    def progress(report: PurgeReport) -> None:
        print(_progress_line(report), file=sys.stderr, flush=True)

    try:
        service = build_service(Settings.from_environment())
    except ConfigError as exc:
        print(f"oncegate purge: {exc}", file=sys.stderr)
        return USAGE_EXIT
    try:
        report = service.retention.purge(
            dry_run=args.dry_run,
            page_size=args.page_size,
            on_progress=progress,
            resume_cursor=args.resume,
            max_pages=args.max_pages,
        )
    except OnceGateError as exc:
        print(f"oncegate purge: {exc.message}", file=sys.stderr)
        return SERVICE_EXIT if exc.status >= 500 else USAGE_EXIT
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    finally:
        service.close()
    print(json.dumps(report.as_json(), indent=2) if args.json else _purge_text(report))
    if report.error is not None:
        print(f"The store failed ({report.error}): resume with --resume {report.cursor or '(none)'}.", file=sys.stderr)
        return SERVICE_EXIT
    if report.stopped_early:
        print(f"Stopped after {report.pages} pages: resume with --resume {report.cursor}.", file=sys.stderr)
    return 0


def _progress_line(report: PurgeReport) -> str:
    verb = "would delete" if report.dry_run else "deleted"
    return f"page {report.pages}: {report.examined} examined, {report.deleted_total} {verb}"


def _purge_text(report: PurgeReport) -> str:
    verb = "Would delete" if report.dry_run else "Deleted"
    rows = [[scope, status.value, str(count)] for (scope, status), count in sorted(report.deleted.items())]
    table = _table(["SCOPE", "STATUS", verb.upper()], rows) if rows else f"{verb} no claim."
    kept = ", ".join(f"{reason.value} {count}" for reason, count in sorted(report.kept.items())) or "none"
    examined = f"{report.examined} claims examined in {report.pages} pages; {verb.lower()} {report.deleted_total}."
    return f"{table}\n\nKept: {kept}\n{examined}"


# -- talking to a deployment -----------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """What a command prints: ``raw`` with ``--json``, else ``text``; ``note`` goes to stderr either way."""

    raw: Any
    text: str
    note: str | None = None
    exit_code: int = 0


Command = Callable[[Client, argparse.Namespace], Output]


def _shown(answer: Answer[Model], render: Callable[[Model], str]) -> Output:
    return Output(answer.raw, render(answer.model))


def claims_show(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.get_claim(args.claim_id), _claim_text)


def claims_find(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.lookup_claim(args.scope, args.business_key), _claim_text)


def claims_attention(client: Client, args: argparse.Namespace) -> Output:
    pages = client.attention_pages(scope=args.scope, top=args.top)
    return _listed(pages, args.all_pages, "claims needing attention", _attention_table)


def claims_review(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.review_claim(args.claim_id, reviewer=args.reviewer, note=args.note), _claim_text)


def _listed(pages: Iterator[Answer[Page]], all_pages: bool, noun: str, render: Callable[[list[Any]], str]) -> Output:
    """The first page of a list, or every page with ``--all-pages``; a note says when more pages were left."""
    taken = list(pages) if all_pages else [next(pages)]
    items = [item for page in taken for item in page.model.value]
    raw = {"value": [item for page in taken for item in page.raw["value"]]} if all_pages else taken[0].raw
    more = taken[-1].model.next_link is not None
    note = f"More {noun} than shown: add --all-pages, or a larger --top." if more else None
    return Output(raw, render(items), note)


def conflicts_list(client: Client, args: argparse.Namespace) -> Output:
    pages = client.conflict_pages(status=args.status, scope=args.scope, top=args.top)
    return _listed(pages, args.all_pages, "conflicts", lambda conflicts: _conflicts_table(conflicts, args.status))


def conflicts_show(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.get_conflict(args.conflict_id), _conflict_text)


def conflicts_resolve(client: Client, args: argparse.Namespace) -> Output:
    answer = client.resolve_conflict(args.conflict_id, decision=args.decision, reviewer=args.reviewer, note=args.note)
    return _shown(answer, _conflict_text)


def flows_list(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.flow_pages(top=args.top), args.all_pages, "flows", _flows_table)


def flows_overlaps(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.overlap_pages(top=args.top), args.all_pages, "overlapping flows", _overlaps_table)


def flows_register(client: Client, args: argparse.Namespace) -> Output:
    answer = client.register_flow(
        name=args.name, environment=args.environment, owner=args.owner, enabled=args.enabled, notes=args.notes
    )
    return _shown(answer, _flow_text)


def scopes_list(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.scope_pages(top=args.top), args.all_pages, "scopes", _scopes_table)


def scopes_set(client: Client, args: argparse.Namespace) -> Output:
    answer = client.set_scope(
        args.scope_name,
        owner=args.owner,
        lease_seconds=args.lease_seconds,
        retention_days=args.retention_days,
        description=args.description,
    )
    return _shown(answer, _scope_text)


def drill(client: Client, args: argparse.Namespace) -> Output:
    report = run_drill(client, scope=args.drill_scope, concurrency=args.concurrency)
    if report.passed:
        return Output(report.as_json(), _drill_text(report))
    note = f"The drill found {len(report.deviations)} deviation(s) from the contract."
    return Output(report.as_json(), _drill_text(report), note, DEVIATION_EXIT)


def health(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.health(), _health_text)


def entra_token(args: argparse.Namespace, app_factory: AppFactory) -> Callable[[], str] | None:
    """With ``--entra``, how to get a token; its settings are checked now, the sign-in waits for the first request."""
    if not args.entra:
        return None
    settings = EntraSettings.resolve(
        tenant=args.tenant, client_id=args.client_id, scope=args.api_scope, environ=os.environ
    )
    return lambda: access_token(settings, app_factory)


def run_remote(command: Command, args: argparse.Namespace, app_factory: AppFactory) -> int:
    """Run one command against the deployment; expected failures become a message on stderr and the exit status.

    With ``--entra`` only the token is sent: an Entra ID deployment's functions are anonymous, so a
    function key from the environment would travel for nothing.
    """
    try:
        client = Client(
            args.url or os.environ.get("ONCEGATE_URL") or DEFAULT_URL,
            function_key=None if args.entra else args.function_key or os.environ.get("ONCEGATE_FUNCTION_KEY"),
            token=entra_token(args, app_factory),
        )
        output = command(client, args)
    except ClientError as exc:
        print(exc.report(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    print(json.dumps(output.raw, indent=2, ensure_ascii=False) if args.json else output.text)
    if output.note:
        print(output.note, file=sys.stderr)
    return output.exit_code


# -- text output --------------------------------------------------------------------------------


def _when(value: datetime | None, timespec: str = "seconds") -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _flow(flow: FlowRef | None) -> str:
    return f"{flow.name} ({flow.environment})" if flow else ""


def _run(run_id: str | None, flow: FlowRef | None) -> str:
    return f"{run_id}, flow {_flow(flow)}" if flow else str(run_id)


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _fields(rows: Iterable[tuple[str, object]]) -> str:
    """``Label  value`` lines, aligned; a field without a value is left out."""
    present = [(label, str(value)) for label, value in rows if value is not None and value != ""]
    width = max(len(label) for label, _ in present)
    return "\n".join(f"{label.ljust(width)}  {value}" for label, value in present)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _clip(text: str, limit: int = REASON_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _claim_text(claim: ClaimView) -> str:
    retryable = None if claim.retryable is None else _yes(claim.retryable)
    fields = _fields(
        [
            ("Claim", claim.claim_id),
            ("Scope", claim.scope),
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
        ]
    )
    # An action's answer (a review) carries no history: say nothing of it rather than "History (0)".
    return fields if claim.history is None else f"{fields}\n\n{_history_table(claim.history)}"


def _history_table(history: list[HistoryEntry]) -> str:
    rows = [
        [
            _when(entry.at) or "",
            entry.event.value,
            entry.outcome,
            str(entry.attempt),
            entry.run_id or "",
            _flow(entry.flow),
            entry.recognised_by,
        ]
        for entry in history
    ]
    return f"History ({len(rows)})\n" + _table(
        ["AT", "EVENT", "OUTCOME", "ATTEMPT", "RUN", "FLOW", "RECOGNISED BY"], rows
    )


def _attention_table(claims: list[ClaimNeedingAttention]) -> str:
    if not claims:
        return "No claims need attention."
    rows = [
        [
            _when(item.since) or "",
            item.why.value,
            item.claim.scope,
            str(item.claim.attempt),
            item.claim.run_id,
            _flow(item.claim.flow),
            item.claim.claim_id,
        ]
        for item in claims
    ]
    return _table(["SINCE", "WHY", "SCOPE", "ATTEMPT", "RUN", "FLOW", "CLAIM"], rows)


def _conflicts_table(conflicts: list[ConflictView], status: str) -> str:
    if not conflicts:
        return f"No {'' if status == 'all' else status + ' '}conflicts."
    rows = [
        [
            conflict.conflict_id,
            _when(conflict.created_at) or "",
            conflict.status.value,
            conflict.scope,
            conflict.source.value,
            conflict.run_id,
            _clip(conflict.reason),
        ]
        for conflict in conflicts
    ]
    return _table(["CONFLICT", "CREATED", "STATUS", "SCOPE", "SOURCE", "RUN", "REASON"], rows)


def _conflict_text(conflict: ConflictView) -> str:
    resolution = conflict.resolution
    return _fields(
        [
            ("Conflict", conflict.conflict_id),
            ("Status", conflict.status.value),
            ("Claim", conflict.claim_id),
            ("Scope", conflict.scope),
            ("Source", conflict.source.value),
            ("Fingerprint", conflict.fingerprint),
            ("Claim fingerprint", conflict.claim_fingerprint),
            ("Reason", conflict.reason),
            ("Details", _json_text(conflict.details)),
            ("Run", _run(conflict.run_id, conflict.flow)),
            ("Created", _when(conflict.created_at)),
            ("Decision", resolution and resolution.decision.value),
            ("Reviewer", resolution and resolution.reviewer),
            ("Note", resolution and resolution.note),
            ("Resolved", resolution and _when(resolution.resolved_at)),
        ]
    )


def _flows_table(flows: list[FlowView]) -> str:
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
    headers = ["FLOW", "ENVIRONMENT", "REGISTERED", "ENABLED", "OWNER", "CLAIMS", "DUPLICATES", "LAST SEEN", "NOTES"]
    return _table(headers, rows)


def _flow_text(flow: FlowView) -> str:
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


def _overlaps_table(overlaps: list[OverlapView]) -> str:
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
    return _table(["FLOW", "OTHER FLOW", "COUNT", "LAST SEEN", "EXAMPLE CLAIM"], rows)


def _claim_counts(counts: ClaimCounts) -> str:
    return ", ".join(f"{status} {count}" for status, count in counts.model_dump().items() if count) or "none"


def _scopes_table(scopes: list[ScopeView]) -> str:
    if not scopes:
        return "No scopes."
    rows = [
        [
            scope.scope,
            scope.owner or "",
            f"{scope.lease_seconds} s",
            f"{scope.retention_days} d",
            _claim_counts(scope.claims),
            str(scope.open_conflicts),
            _when(scope.last_seen_at) or "",
            _clip(scope.description or ""),
        ]
        for scope in scopes
    ]
    headers = ["SCOPE", "OWNER", "LEASE", "RETENTION", "CLAIMS", "OPEN CONFLICTS", "LAST SEEN", "DESCRIPTION"]
    return _table(headers, rows)


def _scope_text(scope: ScopeView) -> str:
    return _fields(
        [
            ("Scope", scope.scope),
            ("Owner", scope.owner),
            ("Description", scope.description),
            ("Default lease", f"{scope.lease_seconds} s"),
            ("Retention", f"{scope.retention_days} days"),
            ("Registered", _when(scope.registered_at) or "no"),
            ("First seen", _when(scope.first_seen_at)),
            ("Last seen", _when(scope.last_seen_at)),
            ("Claims", _claim_counts(scope.claims)),
            ("Open conflicts", scope.open_conflicts),
        ]
    )


def _drill_text(report: Report) -> str:
    header = _fields(
        [
            ("Drill", f"{report.url}, scope {report.scope}, {report.concurrency} runs at once"),
            ("Flow", _flow(report.flow)),
            *((f"Key {label}", key) for label, key in report.keys.items()),
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
    headers = ["STEP", "KEY", "CALL", "RUN", "ANSWER", "ATTEMPT", "TARGET RECORD / CONFLICT", "MS"]
    checks = [f"  {'ok  ' if check.passed else 'FAIL'}  {check.name}" for check in report.checks]
    if report.passed:
        verdict = "Passed: each business result happened once, and every repeat was recognised."
    else:
        verdict = f"FAILED: {len(report.deviations)} deviation(s)\n" + "\n".join(
            f"  - {deviation}" for deviation in report.deviations
        )
    sections = [
        header,
        f"Calls ({len(calls)})\n" + _table(headers, calls),
        *(_drill_history(lookup) for lookup in report.lookups),
        "Checks\n" + "\n".join(checks),
        *(f"Note: {note}" for note in report.notes),
        verdict,
    ]
    return "\n\n".join(sections)


def _drill_history(lookup: Lookup) -> str:
    if lookup.claim is None:
        return f"History of key {lookup.key}: not available ({lookup.error})"
    history = lookup.claim.history or []
    rows = [
        [
            _when(entry.at, "milliseconds") or "",
            entry.event.value,
            entry.outcome,
            entry.run_id or "",
            entry.recognised_by,
        ]
        for entry in history
    ]
    title = f"History of key {lookup.key}, claim {lookup.claim.claim_id} ({len(rows)})"
    return f"{title}\n" + _table(["TIME", "EVENT", "OUTCOME", "RUN", "RECOGNISED BY"], rows)


def _health_text(answer: Health) -> str:
    return _fields([("Status", answer.status), ("Store", answer.store), ("Version", answer.version)])


# -- arguments ----------------------------------------------------------------------------------


def _add_connection_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("deployment (all commands but serve)")
    group.add_argument("--url", help=f"the function app, e.g. https://<host> (env ONCEGATE_URL; default {DEFAULT_URL})")
    credentials = group.add_mutually_exclusive_group()
    credentials.add_argument(
        "--key",
        "--function-key",
        dest="function_key",
        metavar="KEY",
        help="a function key, sent as x-functions-key (env ONCEGATE_FUNCTION_KEY, which keeps it off the command line)",
    )
    credentials.add_argument(
        "--entra", action="store_true", help="sign in to Microsoft Entra ID and send a bearer token instead of a key"
    )
    group.add_argument("--tenant", help="Entra ID tenant id (env ONCEGATE_TENANT_ID)")
    group.add_argument(
        "--client-id",
        help="the CLI's app registration, confidential if ONCEGATE_CLIENT_SECRET is set (env ONCEGATE_CLIENT_ID)",
    )
    group.add_argument(
        "--scope",
        "--api-scope",
        dest="api_scope",
        help="the API's scope, e.g. api://<API client id>/user_impersonation (env ONCEGATE_API_SCOPE)",
    )
    group.add_argument("--json", action="store_true", help="print the service's JSON answer as it came")


def _command(commands: Any, name: str, command: Command, help: str) -> argparse.ArgumentParser:
    # --json after the command too; SUPPRESS keeps the global --json when it is not repeated here.
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, description=help)
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the JSON answer")
    parser.set_defaults(handler=command)
    return parser


def _add_claims(commands: Any) -> None:
    claims = commands.add_parser("claims", help="look at claims").add_subparsers(dest="action", required=True)
    show = _command(claims, "show", claims_show, "a claim and its history, by claim id")
    show.add_argument("claim_id", metavar="CLAIM_ID")
    find = _command(claims, "find", claims_find, "a claim and its history, by scope and business key")
    find.add_argument("--scope", required=True, help="the claim's scope, e.g. erp.create-order")
    find.add_argument("--key", dest="business_key", required=True, metavar="KEY", help="the business key, in clear")
    attention = _command(
        claims,
        "attention",
        claims_attention,
        "claims that need a person, oldest first: leases run out, outcomes unknown too long, failures nobody reviewed",
    )
    attention.add_argument("--scope", help="only this scope")
    _add_paging(attention, "claims")
    review = _command(
        claims, "review", claims_review, "acknowledge a failure that is not retryable (the key stays blocked)"
    )
    review.add_argument("claim_id", metavar="CLAIM_ID")
    review.add_argument("--reviewer", help="who reviewed, e.g. an e-mail address (with --entra: who signed in)")
    review.add_argument("--note", help="what you found or did")


def _add_conflicts(commands: Any) -> None:
    conflicts = commands.add_parser("conflicts", help="list and resolve conflicts").add_subparsers(
        dest="action", required=True
    )
    listing = _command(conflicts, "list", conflicts_list, "conflicts, oldest first")
    statuses = [status.value for status in ConflictStatus]
    listing.add_argument("--status", choices=[*statuses, "all"], default=ConflictStatus.OPEN.value)
    listing.add_argument("--scope", help="only this scope")
    _add_paging(listing, "conflicts")
    show = _command(conflicts, "show", conflicts_show, "one conflict")
    show.add_argument("conflict_id", metavar="CONFLICT_ID")
    resolve = _command(conflicts, "resolve", conflicts_resolve, "close a conflict with a reviewer's decision")
    resolve.add_argument("conflict_id", metavar="CONFLICT_ID")
    resolve.add_argument("--decision", required=True, choices=[decision.value for decision in Resolution])
    resolve.add_argument("--reviewer", help="who decided, e.g. an e-mail address (with --entra: who signed in)")
    resolve.add_argument("--note", help="why")


def _add_paging(parser: argparse.ArgumentParser, noun: str) -> None:
    parser.add_argument("--top", type=int, help=f"{noun} per page (the service's default when absent)")
    parser.add_argument("--all-pages", action="store_true", help="follow nextLink to the last page")


def _add_flows(commands: Any) -> None:
    flows = commands.add_parser("flows", help="the flow inventory").add_subparsers(dest="action", required=True)
    _add_paging(_command(flows, "list", flows_list, "every flow seen or registered, with its counts"), "flows")
    overlaps = _command(flows, "overlaps", flows_overlaps, "pairs of flows that met each other's claims")
    _add_paging(overlaps, "pairs")
    register = _command(
        flows,
        "register",
        flows_register,
        "register a flow, or replace its registration: an option left out is cleared (the flow is enabled)",
    )
    register.add_argument("--name", required=True, help="the flow's display name, e.g. 'Create ERP order'")
    register.add_argument("--environment", required=True, help="its environment, e.g. Default-contoso")
    register.add_argument("--owner", help="who answers for the flow")
    enabled = register.add_mutually_exclusive_group()
    enabled.add_argument("--enabled", dest="enabled", action="store_true", default=True, help="may claim (default)")
    enabled.add_argument(
        "--disabled", dest="enabled", action="store_false", help="answered blocked, before any claim is made"
    )
    register.add_argument("--notes", help="why, e.g. 'replaced by the v2 flow'; shown in the blocked reason")


def _add_scopes(commands: Any) -> None:
    scopes = commands.add_parser("scopes", help="the side-effect catalogue").add_subparsers(
        dest="action", required=True
    )
    _add_paging(_command(scopes, "list", scopes_list, "every scope, with its claims by status"), "scopes")
    setting = _command(
        scopes, "set", scopes_set, "set a scope's settings: an option left out gets the service's default"
    )
    setting.add_argument("scope_name", metavar="SCOPE", help="the scope, e.g. erp.create-order")
    setting.add_argument("--owner", help="who answers for the side effect")
    setting.add_argument("--lease-seconds", type=int, help="the lease of a claim that asks for none (default 300)")
    setting.add_argument("--retention-days", type=int, help="how long its claims are kept (default 90)")
    setting.add_argument("--description", help="what the side effect is")


def _whole_number(low: int, high: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value) if value.isdigit() else 0
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"give a whole number from {low} to {high}")
        return number

    return parse


def _add_purge(commands: Any) -> None:
    description = (
        "delete the finished claims whose scope's retention is over, with their history, on the store the "
        "environment's settings name (as serve does): what the app's daily timer does"
    )
    parser = commands.add_parser("purge", help=description, description=description)
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the report as JSON")
    parser.add_argument("--dry-run", action="store_true", help="delete nothing; count what would be deleted")
    parser.add_argument(
        "--page-size",
        type=_whole_number(1, MAX_PAGE_SIZE),
        default=DEFAULT_PAGE_SIZE,
        metavar="N",
        help=f"claims read per page ({DEFAULT_PAGE_SIZE})",
    )
    parser.add_argument(
        "--max-pages", type=_whole_number(1, 10**9), metavar="N", help="stop after N pages (the report says where)"
    )
    parser.add_argument("--resume", metavar="CURSOR", help="go on where a purge that stopped early left off")
    parser.set_defaults(handler=purge)


_concurrency = _whole_number(MIN_CONCURRENCY, MAX_CONCURRENCY)


def _add_drill(commands: Any) -> None:
    runner = _command(
        commands,
        "drill",
        drill,
        "act as flows would on two fresh test keys (triggered twice, in bursts, with a changed payload) and check "
        "that each business result happens once; exit 1 on any deviation",
    )
    runner.add_argument(
        "--scope",
        dest="drill_scope",
        metavar="SCOPE",
        default=DEFAULT_SCOPE,
        help=f"the scope the drill claims in ({DEFAULT_SCOPE})",
    )
    runner.add_argument(
        "--concurrency",
        type=_concurrency,
        metavar="N",
        default=DEFAULT_CONCURRENCY,
        help=f"runs fired at once in each burst ({DEFAULT_CONCURRENCY})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oncegate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"oncegate {__version__}")
    _add_connection_options(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="serve the Functions app locally, as Core Tools would")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=7071)
    serve_parser.add_argument("--app-dir", default=".", help="the folder holding function_app.py")
    serve_parser.set_defaults(handler=serve)
    _add_purge(commands)
    _add_claims(commands)
    _add_conflicts(commands)
    _add_flows(commands)
    _add_scopes(commands)
    _add_drill(commands)
    _command(commands, "health", health, "whether the service and its store answer")
    return parser


def main(argv: list[str] | None = None, *, app_factory: AppFactory = msal_app) -> int:
    """Run the command; ``app_factory`` makes the MSAL application for ``--entra`` (tests pass a fake)."""
    args = build_parser().parse_args(argv)
    if args.command in LOCAL_COMMANDS:
        code: int = args.handler(args)
        return code
    return run_remote(args.handler, args, app_factory)


if __name__ == "__main__":
    sys.exit(main())
