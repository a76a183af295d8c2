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
from collections.abc import Callable
from typing import Any

from oncegate import __version__
from oncegate.cli import commands
from oncegate.cli.client import DEFAULT_URL
from oncegate.cli.drill import DEFAULT_CONCURRENCY, DEFAULT_SCOPE
from oncegate.cli.signin import AppFactory, msal_app
from oncegate.domain.statuses import ConflictStatus, Resolution
from oncegate.service.retention import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

LOCAL_COMMANDS = ("serve", "purge")
MIN_CONCURRENCY = 2
MAX_CONCURRENCY = 128


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


def _command(subparsers: Any, name: str, command: commands.Command, help: str) -> argparse.ArgumentParser:
    # --json after the command too; SUPPRESS keeps the global --json when it is not repeated here.
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=help)
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the JSON answer")
    parser.set_defaults(handler=command)
    return parser


def _add_claims(subparsers: Any) -> None:
    claims = subparsers.add_parser("claims", help="look at claims").add_subparsers(dest="action", required=True)
    show = _command(claims, "show", commands.claims_show, "a claim and its history, by claim id")
    show.add_argument("claim_id", metavar="CLAIM_ID")
    find = _command(claims, "find", commands.claims_find, "a claim and its history, by scope and business key")
    find.add_argument("--scope", required=True, help="the claim's scope, e.g. erp.create-order")
    find.add_argument("--key", dest="business_key", required=True, metavar="KEY", help="the business key, in clear")
    attention = _command(
        claims,
        "attention",
        commands.claims_attention,
        "claims that need a person, oldest first: leases run out, outcomes unknown too long, failures nobody reviewed",
    )
    attention.add_argument("--scope", help="only this scope")
    _add_paging(attention, "claims")
    review = _command(
        claims, "review", commands.claims_review, "acknowledge a failure that is not retryable (the key stays blocked)"
    )
    review.add_argument("claim_id", metavar="CLAIM_ID")
    review.add_argument("--reviewer", help="who reviewed, e.g. an e-mail address (with --entra: who signed in)")
    review.add_argument("--note", help="what you found or did")


def _add_conflicts(subparsers: Any) -> None:
    conflicts = subparsers.add_parser("conflicts", help="list and resolve conflicts").add_subparsers(
        dest="action", required=True
    )
    listing = _command(conflicts, "list", commands.conflicts_list, "conflicts, oldest first")
    statuses = [status.value for status in ConflictStatus]
    listing.add_argument("--status", choices=[*statuses, "all"], default=ConflictStatus.OPEN.value)
    listing.add_argument("--scope", help="only this scope")
    _add_paging(listing, "conflicts")
    show = _command(conflicts, "show", commands.conflicts_show, "one conflict")
    show.add_argument("conflict_id", metavar="CONFLICT_ID")
    resolve = _command(conflicts, "resolve", commands.conflicts_resolve, "close a conflict with a reviewer's decision")
    resolve.add_argument("conflict_id", metavar="CONFLICT_ID")
    resolve.add_argument("--decision", required=True, choices=[decision.value for decision in Resolution])
    resolve.add_argument("--reviewer", help="who decided, e.g. an e-mail address (with --entra: who signed in)")
    resolve.add_argument("--note", help="why")


def _add_paging(parser: argparse.ArgumentParser, noun: str) -> None:
    parser.add_argument("--top", type=int, help=f"{noun} per page (the service's default when absent)")
    parser.add_argument("--all-pages", action="store_true", help="follow nextLink to the last page")


def _add_flows(subparsers: Any) -> None:
    flows = subparsers.add_parser("flows", help="the flow inventory").add_subparsers(dest="action", required=True)
    _add_paging(_command(flows, "list", commands.flows_list, "every flow seen or registered, with its counts"), "flows")
    overlaps = _command(flows, "overlaps", commands.flows_overlaps, "pairs of flows that met each other's claims")
    _add_paging(overlaps, "pairs")
    register = _command(
        flows,
        "register",
        commands.flows_register,
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


def _add_scopes(subparsers: Any) -> None:
    scopes = subparsers.add_parser("scopes", help="the side-effect catalogue").add_subparsers(
        dest="action", required=True
    )
    _add_paging(_command(scopes, "list", commands.scopes_list, "every scope, with its claims by status"), "scopes")
    setting = _command(
        scopes, "set", commands.scopes_set, "set a scope's settings: an option left out gets the service's default"
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


def _add_purge(subparsers: Any) -> None:
    description = (
        "delete the finished claims whose scope's retention is over, with their history, on the store the "
        "environment's settings name (as serve does): what the app's daily timer does"
    )
    parser = subparsers.add_parser("purge", help=description, description=description)
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
    parser.set_defaults(handler=commands.purge)


_concurrency = _whole_number(MIN_CONCURRENCY, MAX_CONCURRENCY)


def _add_drill(subparsers: Any) -> None:
    runner = _command(
        subparsers,
        "drill",
        commands.drill,
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
    subparsers = parser.add_subparsers(dest="command", required=True)
    serve_parser = subparsers.add_parser("serve", help="serve the Functions app locally, as Core Tools would")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=7071)
    serve_parser.add_argument("--app-dir", default=".", help="the folder holding function_app.py")
    serve_parser.set_defaults(handler=commands.serve)
    _add_purge(subparsers)
    _add_claims(subparsers)
    _add_conflicts(subparsers)
    _add_flows(subparsers)
    _add_scopes(subparsers)
    _add_drill(subparsers)
    _command(subparsers, "health", commands.health, "whether the service and its store answer")
    return parser


def main(argv: list[str] | None = None, *, app_factory: AppFactory = msal_app) -> int:
    """Run the command; ``app_factory`` makes the MSAL application for ``--entra`` (tests pass a fake)."""
    args = build_parser().parse_args(argv)
    if args.command in LOCAL_COMMANDS:
        code: int = args.handler(args)
        return code
    return commands.run_remote(args.handler, args, app_factory)
