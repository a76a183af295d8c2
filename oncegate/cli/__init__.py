"""The oncegate command: :func:`main` parses the arguments and runs the command they name.

The parser and the synopsis ``oncegate --help`` prints are in :mod:`oncegate.cli.parser`; the commands
that talk to a deployment are in :mod:`oncegate.cli.commands`, those on the store the environment's
settings name in :mod:`oncegate.cli.store_commands`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from oncegate.cli import extra, streams
from oncegate.cli.arguments import NotStarted, loading
from oncegate.cli.parser import build_parser

if TYPE_CHECKING:
    from oncegate.cli.signin import AppFactory

# What runs on the service's dependencies alone, without the cli extra (make run installs no extra).
WITHOUT_EXTRA = ("serve",)
# What stops on SIGTERM by itself, each worker finishing what it answers (oncegate.entrypoints.server).
STOPS_ITSELF = ("serve",)
# What a shell reports for a command that SIGPIPE ended: 128 + 13.
CLOSED_PIPE_EXIT = 141
MISPLACED_SCOPE = (
    "--scope before the command is gone: it was the Entra ID API scope, now --api-scope. "
    "To choose a claim scope, put --scope after the command, e.g. oncegate conflicts list --scope erp.create-order."
)


def main(argv: list[str] | None = None, *, app_factory: AppFactory | None = None) -> int:
    """Run the command; ``app_factory`` makes the MSAL application for ``--entra`` (tests pass a fake; by default
    :func:`oncegate.cli.signin.msal_app`).

    The parser names each command's function by its module (:class:`oncegate.cli.arguments.Later`): a command
    imports what it runs, and ``--help`` none of them.

    Ctrl+C, SIGTERM and a closed pipe end any command, wherever they come (rendering included), with their
    exit status and no traceback. A command that draws tables without the cli extra installed (rich)
    says which extra to install, exit 2; ``serve`` needs none. A character stdout's encoding lacks is
    written as its escape (:mod:`oncegate.cli.streams`).
    """
    streams.tolerant()
    as_json = "--json" in (sys.argv[1:] if argv is None else argv)
    try:
        return _run(argv, app_factory, as_json=as_json)
    except ModuleNotFoundError as exc:
        if not extra.is_missing(exc):
            raise
        print(extra.MISSING, file=sys.stderr)
        if as_json:
            streams.print_json({"error": {"code": "invalid_usage", "message": extra.MISSING, "details": []}})
        return extra.MISSING_EXIT
    except KeyboardInterrupt:
        from oncegate.cli.commands import INTERRUPTED_EXIT

        return INTERRUPTED_EXIT
    except BrokenPipeError:
        # Python flushes stdout again on its way out, and would report that write failing too.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CLOSED_PIPE_EXIT


def _run(argv: list[str] | None, app_factory: AppFactory | None, *, as_json: bool) -> int:
    parser = build_parser()
    # Arguments refused before they are read whole are JSON on stdout too when they ask for it (parser.Parser).
    refusals = streams.REFUSALS_AS_JSON.set(as_json)
    written = streams.JSON_WRITTEN.set(False)
    try:
        args = parser.parse_args(argv)
        if args.command in STOPS_ITSELF:
            return _command(parser, args, app_factory)
        with _stopped_as_by_ctrl_c():
            try:
                return _command(parser, args, app_factory)
            except NotStarted:
                # Stopped while it loaded what it runs: nothing sent, nothing changed, as the command says it.
                from oncegate.cli import commands

                name = getattr(args, "command_parser", parser).prog.removeprefix("oncegate ")
                return commands.interrupted(name, "it changed nothing: run it again.")
            except KeyboardInterrupt as stopped:
                # A command that says nothing of it itself: with --json, stdout says it, as for any other failure,
                # unless the stop landed after the command wrote its answer there (one document, which a script reads).
                if as_json and not streams.JSON_WRITTEN.get():
                    command = getattr(args, "command_parser", parser).prog
                    from oncegate.cli import commands

                    commands.interrupted_as_json(commands.interrupted_unsaid(command, stopped))
                raise
    finally:
        streams.JSON_WRITTEN.reset(written)
        streams.REFUSALS_AS_JSON.reset(refusals)


@contextlib.contextmanager
def _stopped_as_by_ctrl_c() -> Iterator[None]:
    """SIGTERM (kill, timeout, a job stopped) interrupts the command as Ctrl+C does, so that it closes what it
    opened: killed where it stood, a purge lost the scope counts of the claims it had deleted."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a signal's handler (a test may run the command in another)
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace, app_factory: AppFactory | None) -> int:
    if args.misplaced_scope is not None:
        parser.error(MISPLACED_SCOPE)
    if args.handler is None:
        # A group of commands alone (oncegate claims), or nothing at all: what there is to run.
        args.group_parser.print_help()
        return 0
    if args.command not in WITHOUT_EXTRA:
        with loading():
            extra.require()
    if args.local and args.command in WITHOUT_EXTRA:
        code: int = args.handler(args)
        return code
    if args.local:
        with loading():
            from oncegate.cli import store_commands

        return store_commands.on_the_store(args)
    if args.entra and args.function_key:
        args.command_parser.error("give --key or --entra, not both")
    if "reviewer" in args and args.reviewer is None and not args.entra:
        args.command_parser.error(
            "--reviewer is required: who decided, such as --reviewer ana@contoso.com (with --entra it may be left "
            "out: the service records who signed in)"
        )
    with loading():
        from oncegate.cli import commands

    return commands.run_remote(args.handler, args, app_factory)
