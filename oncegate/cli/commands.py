"""What each ``oncegate`` command does: ``serve`` and ``purge`` locally, every other over the API.

A remote command is a function ``(client, args) -> Output``; :func:`run_remote` makes the client,
runs the command and turns what it expects to go wrong into a message and an exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import importlib.machinery
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oncegate import __version__
from oncegate.cli import streams
from oncegate.cli.arguments import options_by_field
from oncegate.cli.client import (
    SERVICE_EXIT,
    USAGE_EXIT,
    Answer,
    ApiError,
    Client,
    ClientError,
    Interrupted,
    Model,
    Page,
    default_url,
)
from oncegate.cli.extra import on_first_use
from oncegate.cli.signin import AppFactory, EntraSettings, access_token, msal_app
from oncegate.cli.streams import REFUSALS_AS_JSON
from oncegate.cli.values import BadSetting, port_setting, threads_setting
from oncegate.domain.copies import frozen

if TYPE_CHECKING:
    import azure.functions as func
    from rich.console import RenderableType

    from oncegate.cli import layout, rendering
    from oncegate.models import ClaimView
else:
    # rich comes with the cli extra: serve runs without it (oncegate/cli/extra.py).
    layout = on_first_use("oncegate.cli.layout")
    rendering = on_first_use("oncegate.cli.rendering")

DEVIATION_EXIT = 1
INTERRUPTED_EXIT = 130


def _load_app(app_dir: Path) -> object:
    # function_app.py sits at the project root (where Core Tools expects it), not in the package.
    sys.path.insert(0, str(app_dir.resolve()))
    return importlib.import_module("function_app").app


def interrupted(command: str, left: str) -> int:
    """One line on stderr saying that Ctrl+C or SIGTERM stopped ``command`` and what it ``left``; exit 130.

    With --json, the same as JSON on stdout too, as every other failure of the command is, unless the command wrote
    its answer there already."""
    said = f"oncegate {command}: interrupted; {left}"
    print(said, file=sys.stderr)
    if REFUSALS_AS_JSON.get() and not streams.JSON_WRITTEN.get():
        interrupted_as_json(said)
    return INTERRUPTED_EXIT


def interrupted_as_json(said: str) -> None:
    """``{"error": {"code": "interrupted", ...}}`` on stdout, saying ``said``: what stopped and what it left."""
    streams.print_json({"error": {"code": "interrupted", "message": said, "details": []}})


def interrupted_unsaid(command: str, stopped: KeyboardInterrupt) -> str:
    """What a command that let Ctrl+C or SIGTERM through (``stopped``) left, as :func:`interrupted` says it."""
    if isinstance(stopped, Interrupted):
        return _interrupted_line(stopped)
    return (
        f"{command}: interrupted before it finished; a change it sent may have been made: look before sending it again."
    )


REFUSAL_CODES = {USAGE_EXIT: "invalid_usage", SERVICE_EXIT: "store_failed"}


def refused(command: str, message: str, code: int = USAGE_EXIT) -> int:
    """One line on stderr saying why ``command`` cannot go on, and its exit status; with --json, unless the command
    wrote its answer on stdout already, the same as JSON there."""
    said = f"oncegate {command}: {message}"
    print(said, file=sys.stderr)
    if REFUSALS_AS_JSON.get() and not streams.JSON_WRITTEN.get():
        streams.print_json({"error": {"code": REFUSAL_CODES.get(code, "refused"), "message": said, "details": []}})
    return code


def serve(args: argparse.Namespace) -> int:
    """Serve the app on the store the environment names; a bad setting or a taken port is one line and exit 2."""
    from oncegate.config import ConfigError, Settings
    from oncegate.entrypoints import logs
    from oncegate.entrypoints.server import WorkerFailed, listening, serve_in_workers

    # Azure loads the app whatever the settings and answers 503 not_configured (function_app.py); here a
    # person is watching, so a setting that cannot work stops the server before it says it serves.
    try:
        settings = Settings.from_environment()
        port = args.port if args.port is not None else port_setting(os.environ, low=0)
        threads = args.threads if args.threads is not None else threads_setting(os.environ)
    except (ConfigError, BadSetting) as exc:
        return refused("serve", f"{exc} Fix the setting, then start again.")
    missing = _no_app_in(Path(args.app_dir))
    if missing:
        return refused("serve", missing)
    logs.configure(handler=True)
    try:
        listener = listening(args.host, port)
    except OSError as exc:
        return refused("serve", _unbound(args.host, port, exc))
    host, port = listener.getsockname()[:2]
    answering = f"{threads} handler threads" if threads else "a thread per connection"
    workers = f", {args.workers} worker processes of {answering}" if args.workers > 1 else f", {answering}"

    def serving() -> None:
        # Said once every worker serves: a script that waits for this line may send requests and signals.
        print(f"OnceGate {__version__} serving on http://{host!s}:{port}/api{workers} (Ctrl+C to stop)", flush=True)
        print(f"Store: {settings.store_text}", flush=True)

    try:
        serve_in_workers(load_app, args.app_dir, listener, workers=args.workers, threads=threads, on_ready=serving)
    except KeyboardInterrupt:
        pass
    except WorkerFailed as exc:
        return refused("serve", f"{exc}, so every worker was stopped; its error is above.", SERVICE_EXIT)
    finally:
        listener.close()
    return 0


def _no_app_in(app_dir: Path) -> str | None:
    """Why ``app_dir`` holds no app to serve, or None.

    Checked before any worker starts: each worker imports the app on its own, and one that cannot
    only dies with a traceback of its own, once per worker.
    """
    if importlib.machinery.PathFinder.find_spec("function_app", [str(app_dir)]) is not None:
        return None
    return (
        f"no function_app.py in {app_dir.resolve()}: pass --app-dir with the folder that holds it "
        "(the project's root), or run oncegate serve from that folder."
    )


def load_app(app_dir: str) -> func.FunctionApp:
    """The ``app`` of function_app.py in ``app_dir``: what each worker process serves."""
    # Imported here, by the one command that serves the app: every other command starts ~60 ms sooner without it.
    import azure.functions as func

    app = _load_app(Path(app_dir))
    assert isinstance(app, func.FunctionApp), "function_app.py defines app as a FunctionApp"
    return app


def _unbound(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is taken, by another oncegate serve or another program. "
            "Choose another with --port N or PORT=N (the other commands follow PORT too)."
        )
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}. Choose another --host or --port."


# -- talking to a deployment -----------------------------------------------------------------


@frozen
class Output:
    """What a command prints: ``raw`` with ``--json``, else ``text``; ``note`` goes to stderr either way."""

    raw: Any
    text: RenderableType
    note: str | None = None
    exit_code: int = 0


Command = Callable[[Client, argparse.Namespace], Output]


def progress(line: str) -> None:
    """A line on stderr while long work goes on, so that stdout keeps only the answer."""
    print(line, file=sys.stderr, flush=True)


def _shown(answer: Answer[Model], render: Callable[[Model], RenderableType]) -> Output:
    return Output(answer.raw, render(answer.model))


@contextlib.contextmanager
def _as_typed(record: str, typed: str) -> Iterator[None]:
    """A record not found is said one way, with its id as typed (not as the service read it from the path)."""
    try:
        yield
    except ApiError as exc:
        if exc.code != "not_found":
            raise
        raise ApiError(exc.status, exc.code, f"No {record} has the id {typed!r}.") from exc


def claims_show(client: Client, args: argparse.Namespace) -> Output:
    with _as_typed("claim", args.claim_id):
        answer = client.get_claim(args.claim_id)
    return _with_history(client, answer, args.all_pages)


def claims_lookup(client: Client, args: argparse.Namespace) -> Output:
    return _with_history(client, client.lookup_claim(args.scope, args.business_key), args.all_pages)


def _with_history(client: Client, answer: Answer[ClaimView], all_pages: bool) -> Output:
    """The claim with its history's first page, or the whole of it with ``--all-pages``; a note says when more
    was left."""
    if all_pages:
        answer = client.with_whole_history(answer)
    more = answer.model.history_next_link is not None
    note = "More history than shown: add --all-pages." if more else None
    return Output(answer.raw, rendering.claim_text(answer.model), note)


def claims_attention(client: Client, args: argparse.Namespace) -> Output:
    pages = client.attention_pages(scope=args.scope, top=args.top)
    return _listed(pages, args.all_pages, "claims needing attention", rendering.attention_table)


def claims_list(client: Client, args: argparse.Namespace) -> Output:
    filters = {"source": args.source, "reference": args.reference, "status": args.status, "since": args.since}
    if not any(filters.values()):
        # Without one the service would read the request as the attention list's, and refuse it.
        raise ClientError(
            "claims list: give --source, --reference, --status or --since (a list of every claim is not offered)"
        )
    pages = client.claim_pages(filters={**filters, "scope": args.scope}, top=args.top)
    return _listed(pages, args.all_pages, "claims", rendering.claims_table)


def claims_review(client: Client, args: argparse.Namespace) -> Output:
    settlement = {
        "outcome": args.outcome,
        "attempt": args.attempt,
        "targetRecordId": args.target_record_id,
        "data": _json_option(args.data, "--data") if args.data is not None else None,
    }
    with _as_typed("claim", args.claim_id):
        answer = client.review_claim(
            args.claim_id,
            reviewer=args.reviewer,
            note=args.note,
            settlement={k: v for k, v in settlement.items() if v is not None},
        )
    return _shown(answer, rendering.claim_text)


def _json_option(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientError(
            f"{option} is not JSON ({exc.msg} at character {exc.pos}): quote it, such as '{{\"n\": 1}}'"
        ) from exc


def _listed(
    pages: Iterator[Answer[Page]], all_pages: bool, noun: str, render: Callable[[list[Any]], RenderableType]
) -> Output:
    """The first page of a list, or every page with ``--all-pages``; a note says when more pages were left."""
    taken = _every_page(pages, noun) if all_pages else [next(pages)]
    items = [item for page in taken for item in page.model.value]
    raw = {"value": [item for page in taken for item in page.raw["value"]]} if all_pages else taken[0].raw
    more = taken[-1].model.next_link is not None
    note = f"More {noun} than shown: add --all-pages, or a larger --top." if more else None
    return Output(raw, render(items), note)


def _every_page(pages: Iterator[Answer[Page]], noun: str) -> list[Answer[Page]]:
    """Every page, a progress line on stderr before each next one is read."""
    taken: list[Answer[Page]] = []
    for page in pages:
        taken.append(page)
        if page.model.next_link:
            listed = sum(len(earlier.model.value) for earlier in taken)
            progress(f"page {len(taken)}: {listed} {noun} so far, reading the next page")
    return taken


def conflicts_list(client: Client, args: argparse.Namespace) -> Output:
    pages = client.conflict_pages(status=args.status, scope=args.scope, top=args.top)
    return _listed(
        pages, args.all_pages, "conflicts", lambda conflicts: rendering.conflicts_table(conflicts, args.status)
    )


def conflicts_show(client: Client, args: argparse.Namespace) -> Output:
    with _as_typed("conflict", args.conflict_id):
        answer = client.get_conflict(args.conflict_id)
    return _shown(answer, rendering.conflict_text)


def conflicts_resolve(client: Client, args: argparse.Namespace) -> Output:
    with _as_typed("conflict", args.conflict_id):
        answer = client.resolve_conflict(
            args.conflict_id, decision=args.decision, reviewer=args.reviewer, note=args.note
        )
    return _shown(answer, rendering.conflict_text)


def flows_list(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.flow_pages(top=args.top), args.all_pages, "flows", rendering.flows_table)


def flows_overlaps(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.overlap_pages(top=args.top), args.all_pages, "overlapping flows", rendering.overlaps_table)


# The settings of ``flows register``, each an option (``--owner``) and a field of Register flow.
FLOW_SETTINGS = ("owner", "enabled", "notes")


def flows_register(client: Client, args: argparse.Namespace) -> Output:
    """Change the settings given, each given empty ('') back to its default; the service keeps the others."""
    given = {name: getattr(args, name) for name in FLOW_SETTINGS}
    return _shown(client.register_flow(args.name, args.environment, _named(given)), rendering.flow_text)


def scopes_list(client: Client, args: argparse.Namespace) -> Output:
    return _listed(client.scope_pages(top=args.top), args.all_pages, "scopes", rendering.scopes_table)


def scopes_set(client: Client, args: argparse.Namespace) -> Output:
    """Change the settings given, each given empty ('') back to its default; the service keeps the others."""
    from oncegate.models import SetScopeRequest

    # Each field of Set scope is an option (``lease_seconds``: ``--lease-seconds``).
    given = {name: getattr(args, name) for name in SetScopeRequest.model_fields if name != "scope"}
    for pointers in ("fingerprint_include", "fingerprint_ignore"):
        given[pointers] = _pointers(given[pointers])
    return _shown(client.set_scope(args.scope_name, _named(given)), rendering.scope_text)


def _named(given: dict[str, Any]) -> dict[str, Any]:
    """The settings whose option was given (not None), one given empty ('') as None: reset to its default."""
    return {name: None if value == "" else value for name, value in given.items() if value is not None}


def _pointers(given: list[str] | None) -> list[str] | str | None:
    """The pointers of a repeated option; "" (clear them) when it was given once, empty."""
    if given is None:
        return None
    return "" if given == [""] else given


def drill(client: Client, args: argparse.Namespace) -> Output:
    # The drill's modules are loaded by the drill alone: every other command starts without them.
    from oncegate.cli.batch_drill import run_batch_drill
    from oncegate.cli.drill import run_drill

    drilling = run_batch_drill if args.batch else run_drill
    try:
        report = drilling(
            client, scope=args.drill_scope, source=args.drill_source, concurrency=args.concurrency, on_step=progress
        )
    except Interrupted as stopped:
        progress(_interrupted_line(stopped))
        if stopped.unanswered is not None:
            progress(stopped.unanswered)
        raise
    if report.blocked is not None:
        return Output(report.as_json(), rendering.drill_text(report, verbose=args.verbose), exit_code=USAGE_EXIT)
    if report.passed:
        return Output(report.as_json(), rendering.drill_text(report, verbose=args.verbose))
    note = f"The drill found {len(report.deviations)} deviation(s) from the contract."
    return Output(report.as_json(), rendering.drill_text(report, verbose=args.verbose), note, DEVIATION_EXIT)


def _left_by(client: Client | None) -> str:
    """What a command to the deployment stopped before it ended left: nothing, unless it sent a change, which may have
    been done whatever it saw of the answer."""
    if client is None or not client.sent_change:
        return "it changed nothing: run it again."
    return (
        "what it sent may have been done, answered or not: look (oncegate claims show, oncegate conflicts show) "
        "before running it again."
    )


def _interrupted_line(stopped: Interrupted) -> str:
    released = f"released {layout.plural(stopped.released, 'claim')} it held"
    if not stopped.kept:
        return f"oncegate drill: interrupted; {released}."
    return (
        f"oncegate drill: interrupted; {released}, and could not release {', '.join(stopped.kept)}: settle each with "
        "oncegate claims review CLAIM_ID --outcome failed --attempt N (the drill made no record anywhere)."
    )


def health(client: Client, args: argparse.Namespace) -> Output:
    return _shown(client.health(), rendering.health_text)


def entra_token(args: argparse.Namespace, app_factory: AppFactory | None) -> Callable[[], str] | None:
    """With ``--entra``, how to get a token; its settings are checked now, the sign-in waits for the first request."""
    if not args.entra:
        return None
    settings = EntraSettings.resolve(
        tenant=args.tenant, client_id=args.client_id, scope=args.api_scope, environ=os.environ
    )
    return lambda: access_token(settings, app_factory or msal_app)


def run_remote(command: Command, args: argparse.Namespace, app_factory: AppFactory | None) -> int:
    """Run one command against the deployment; expected failures become a message on stderr and the exit status.

    With ``--entra`` only the token is sent: an Entra ID deployment's functions are anonymous, so a
    function key from the environment would travel for nothing.
    """
    client: Client | None = None
    try:
        client = Client(
            args.url or os.environ.get("ONCEGATE_URL") or default_url(os.environ),
            named="--url" if args.url else "ONCEGATE_URL",
            function_key=None if args.entra else args.function_key or os.environ.get("ONCEGATE_FUNCTION_KEY"),
            token=entra_token(args, app_factory),
            notify=progress,
        )
        output = command(client, args)
    except ClientError as exc:
        print(exc.report(options_by_field(args.command_parser)), file=sys.stderr)
        if args.json:
            # A script reads .error.code whoever refused: the service's body, or the command's in its shape.
            streams.print_json(exc.as_json())
        return exc.exit_code
    except Interrupted:
        raise  # the drill said what it released and left
    except KeyboardInterrupt:
        return interrupted(args.command_parser.prog.removeprefix("oncegate "), _left_by(client))
    if args.json:
        streams.print_json(output.raw)
    else:
        layout.show(output.text, sys.stdout)
    if output.note:
        print(output.note, file=sys.stderr)
    return output.exit_code
