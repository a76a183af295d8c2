"""What each ``oncegate`` command does: ``serve`` and ``purge`` locally, every other over the API.

A remote command is a function ``(client, args) -> Output``; :func:`run_remote` makes the client,
runs the command and turns what it expects to go wrong into a message and an exit status.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oncegate import __version__
from oncegate.cli import rendering
from oncegate.cli.client import DEFAULT_URL, SERVICE_EXIT, USAGE_EXIT, Answer, Client, ClientError, Model, Page
from oncegate.cli.drill import run_drill
from oncegate.cli.signin import AppFactory, EntraSettings, access_token
from oncegate.service.retention import PurgeReport

DEVIATION_EXIT = 1
INTERRUPTED_EXIT = 130


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
    from oncegate.bootstrap import build_services
    from oncegate.config import ConfigError, Settings
    from oncegate.errors import OnceGateError

    def progress(report: PurgeReport) -> None:
        print(rendering.progress_line(report), file=sys.stderr, flush=True)

    try:
        services = build_services(Settings.from_environment())
    except ConfigError as exc:
        print(f"oncegate purge: {exc}", file=sys.stderr)
        return USAGE_EXIT
    try:
        report = services.retention.purge(
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
        services.close()
    print(json.dumps(report.as_json(), indent=2) if args.json else rendering.purge_text(report))
    if report.error is not None:
        print(f"The store failed ({report.error}): resume with --resume {report.cursor or '(none)'}.", file=sys.stderr)
        return SERVICE_EXIT
    if report.stopped_early:
        print(f"Stopped after {report.pages} pages: resume with --resume {report.cursor}.", file=sys.stderr)
    return 0


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
    return _shown(client.get_claim(args.claim_id), rendering.claim_text)


def claims_find(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.lookup_claim(args.scope, args.business_key), rendering.claim_text)


def claims_attention(client: Client, args: argparse.Namespace) -> Output:
    pages = client.attention_pages(scope=args.scope, top=args.top)
    return _listed(pages, args.all_pages, "claims needing attention", rendering.attention_table)


def claims_review(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.review_claim(args.claim_id, reviewer=args.reviewer, note=args.note), rendering.claim_text)


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
    return _listed(
        pages, args.all_pages, "conflicts", lambda conflicts: rendering.conflicts_table(conflicts, args.status)
    )


def conflicts_show(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.get_conflict(args.conflict_id), rendering.conflict_text)


def conflicts_resolve(client: Client, args: argparse.Namespace) -> Output:
    answer = client.resolve_conflict(args.conflict_id, decision=args.decision, reviewer=args.reviewer, note=args.note)
    return _shown(answer, rendering.conflict_text)


def flows_list(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.flow_pages(top=args.top), args.all_pages, "flows", rendering.flows_table)


def flows_overlaps(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.overlap_pages(top=args.top), args.all_pages, "overlapping flows", rendering.overlaps_table)


def flows_register(client: Client, args: argparse.Namespace) -> Output:
    answer = client.register_flow(
        name=args.name, environment=args.environment, owner=args.owner, enabled=args.enabled, notes=args.notes
    )
    return _shown(answer, rendering.flow_text)


def scopes_list(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.scope_pages(top=args.top), args.all_pages, "scopes", rendering.scopes_table)


def scopes_set(client: Client, args: argparse.Namespace) -> Output:
    answer = client.set_scope(
        args.scope_name,
        owner=args.owner,
        lease_seconds=args.lease_seconds,
        retention_days=args.retention_days,
        description=args.description,
    )
    return _shown(answer, rendering.scope_text)


def drill(client: Client, args: argparse.Namespace) -> Output:
    report = run_drill(client, scope=args.drill_scope, concurrency=args.concurrency)
    if report.passed:
        return Output(report.as_json(), rendering.drill_text(report))
    note = f"The drill found {len(report.deviations)} deviation(s) from the contract."
    return Output(report.as_json(), rendering.drill_text(report), note, DEVIATION_EXIT)


def health(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.health(), rendering.health_text)


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
