"""The oncegate command: serve the Functions app locally, or look at and act on a deployment.

  oncegate serve [--host H] [--port P] [--app-dir D]
  oncegate [--url URL] [--key KEY | --entra ...] [--json] COMMAND, where COMMAND is one of
    claims show CLAIM_ID
    claims find --scope SCOPE --key KEY
    conflicts list [--status open|resolved|all] [--scope SCOPE] [--top N] [--all-pages]
    conflicts show CONFLICT_ID
    conflicts resolve CONFLICT_ID --decision accept_new|keep_original|dismiss [--reviewer R] [--note N]
    health

Exit status: 0 done; 2 bad usage, a failed sign-in or a request the service refused (4xx);
3 the service failed (5xx) or could not be reached.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oncegate import __version__
from oncegate.domain.statuses import ConflictStatus, Resolution
from oncegate.entrypoints.client import DEFAULT_URL, Answer, Client, ClientError, Model
from oncegate.entrypoints.signin import AppFactory, EntraSettings, access_token, msal_app
from oncegate.models import ClaimView, ConflictView, FlowRef, Health, HistoryEntry

INTERRUPTED_EXIT = 130
REASON_CHARS = 60


def _load_app(app_dir: Path) -> object:
    # function_app.py sits at the project root (where Core Tools expects it), not in the package.
    sys.path.insert(0, str(app_dir.resolve()))
    return importlib.import_module("function_app").app


def serve(args: argparse.Namespace) -> int:
    from oncegate.config import ConfigError
    from oncegate.entrypoints.server import make_server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        app = _load_app(Path(args.app_dir))
    except ConfigError:
        return 2
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


# -- talking to a deployment -----------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """What a command prints: ``raw`` with ``--json``, else ``text``; ``note`` goes to stderr either way."""

    raw: Any
    text: str
    note: str | None = None


Command = Callable[[Client, argparse.Namespace], Output]


def _shown(answer: Answer[Model], render: Callable[[Model], str]) -> Output:
    return Output(answer.raw, render(answer.model))


def claims_show(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.get_claim(args.claim_id), _claim_text)


def claims_find(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.lookup_claim(args.scope, args.business_key), _claim_text)


def conflicts_list(client: Client, args: argparse.Namespace) -> Output:
    pages = client.conflict_pages(status=args.status, scope=args.scope, top=args.top)
    taken = list(pages) if args.all_pages else [next(pages)]
    conflicts = [conflict for page in taken for conflict in page.model.value]
    raw = {"value": [item for page in taken for item in page.raw["value"]]} if args.all_pages else taken[0].raw
    more = taken[-1].model.next_link is not None
    note = "More conflicts than shown: add --all-pages, or a larger --top." if more else None
    return Output(raw, _conflicts_table(conflicts, args.status), note)


def conflicts_show(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.get_conflict(args.conflict_id), _conflict_text)


def conflicts_resolve(client: Client, args: argparse.Namespace) -> Output:
    answer = client.resolve_conflict(args.conflict_id, decision=args.decision, reviewer=args.reviewer, note=args.note)
    return _shown(answer, _conflict_text)


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
    return 0


# -- text output --------------------------------------------------------------------------------


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


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
    retryable = None if claim.retryable is None else ("yes" if claim.retryable else "no")
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
    return f"{fields}\n\n{_history_table(claim.history or [])}"


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


def _add_conflicts(commands: Any) -> None:
    conflicts = commands.add_parser("conflicts", help="list and resolve conflicts").add_subparsers(
        dest="action", required=True
    )
    listing = _command(conflicts, "list", conflicts_list, "conflicts, oldest first")
    statuses = [status.value for status in ConflictStatus]
    listing.add_argument("--status", choices=[*statuses, "all"], default=ConflictStatus.OPEN.value)
    listing.add_argument("--scope", help="only this scope")
    listing.add_argument("--top", type=int, help="conflicts per page (the service's default when absent)")
    listing.add_argument("--all-pages", action="store_true", help="follow nextLink to the last page")
    show = _command(conflicts, "show", conflicts_show, "one conflict")
    show.add_argument("conflict_id", metavar="CONFLICT_ID")
    resolve = _command(conflicts, "resolve", conflicts_resolve, "close a conflict with a reviewer's decision")
    resolve.add_argument("conflict_id", metavar="CONFLICT_ID")
    resolve.add_argument("--decision", required=True, choices=[decision.value for decision in Resolution])
    resolve.add_argument("--reviewer", help="who decided, e.g. an e-mail address (with --entra: who signed in)")
    resolve.add_argument("--note", help="why")


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
    _add_claims(commands)
    _add_conflicts(commands)
    _command(commands, "health", health, "whether the service and its store answer")
    return parser


def main(argv: list[str] | None = None, *, app_factory: AppFactory = msal_app) -> int:
    """Run the command; ``app_factory`` makes the MSAL application for ``--entra`` (tests pass a fake)."""
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return run_remote(args.handler, args, app_factory)


if __name__ == "__main__":
    sys.exit(main())
