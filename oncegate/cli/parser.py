"""The oncegate command: serve the Functions app locally, or look at and act on a deployment.

  oncegate serve [--host H] [--port P] [--app-dir D] [--workers N] [--threads N]
  oncegate purge [--dry-run] [--page-size N] [--max-pages N] [--resume CURSOR] [--json]
  oncegate keys [--json]
  oncegate keys retire KEY_ID [--orphan N]
  oncegate store init [--new-only]
  oncegate store recount
  oncegate store export FILE [--json]
  oncegate store import FILE --forget-after TIME
  oncegate targets set NAME --base-url URL [--timeout-seconds N] [--lookup-path TEMPLATE] [--auth AUTH]
                   [--allow-cidr CIDR]... [--honours-idempotency-key] [--success-status S]...
                   [--retryable-status S]... [--record-pointer PTR] [--keep-header H]... [--keep-pointer PTR]...
  oncegate targets list [--json]
  oncegate targets remove NAME
  oncegate [--url URL] [--key KEY | --entra ...] [--json] COMMAND, where COMMAND is one of
    claims, conflicts, flows, scopes   (alone: conflicts, flows and scopes list; claims shows its help)
    claims show CLAIM_ID [--all-pages]
    claims lookup --scope SCOPE --key KEY [--all-pages]   (its first name, find, still works)
    claims attention [--scope SCOPE] [--top N] [--all-pages]
    claims list [--source S] [--reference R] [--status STATUS] [--since TIME] [--scope SCOPE] [--top N] [--all-pages]
    claims review CLAIM_ID --reviewer R [--note N] [--outcome succeeded|failed --attempt N]
                   [--target-record-id ID] [--data JSON]
    conflicts list [--status open|resolved|all] [--scope SCOPE] [--top N] [--all-pages]
    conflicts show CONFLICT_ID
    conflicts resolve CONFLICT_ID --decision accept_new|keep_original|dismiss --reviewer R [--note N]
    flows list [--top N] [--all-pages]
    flows overlaps [--top N] [--all-pages]
    flows register --name NAME --environment ENV [--owner O] [--enabled | --disabled] [--notes T]
    scopes list [--top N] [--all-pages]
    scopes set SCOPE [--owner O] [--lease-seconds S] [--retention-days D] [--horizon-days H] [--description T]
                     [--key-pattern P] [--fingerprint-include PTR]... [--fingerprint-ignore PTR]...
                     [--fingerprint-preset sharepoint|dataverse]
    drill [--scope SCOPE] [--source SOURCE] [--concurrency N] [--batch] [--verbose]
    health
  The options of the deployment (--url, --key, --entra, --json...) go before COMMAND or after it.
  --reviewer may be left out with --entra: the service records who signed in, whatever it says.
  An option of scopes set or flows register left out keeps its setting; given '' it resets the setting to its default.

serve, purge, keys, store and targets work on the store the environment's settings name (ONCEGATE_STORE...),
as the app does, and say which store that is; every other command talks to a deployment over its HTTP API.
Tables are for people; --json prints the service's answer for scripts, and on a failure its error,
{"error": {"code", "message", "details"}}, whoever refused (the command: invalid_usage, unreachable or
signin_failed; a command on the store: invalid_usage or store_failed; any command stopped by Ctrl+C or SIGTERM:
interrupted, saying what it left). Progress goes to stderr.

Exit status: 0 done; 1 the drill found the service deviating from the contract; 2 bad usage, a
bad setting, a failed sign-in, a request the service refused (4xx) or a drill blocked by the flow
inventory; 3 the service or its store failed (5xx), was busy (429) or could not be reached (a command
that only reads asks again after the Retry-After of a 429 or 503, three times in all); 130 interrupted
(Ctrl+C, or SIGTERM: what the command opened is closed as it ends); 141 the reader of the output went away
(a closed pipe, as `| head` closes it). Neither shows a traceback.

The synopsis above is what ``oncegate --help`` prints, read side by side with the parsers below; the
pieces they are built of are in :mod:`oncegate.cli.arguments`. A group of commands declared in a
module of its own is added to the tree by one call in :func:`build_parser`.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from oncegate import __version__
from oncegate.cli import streams, targets_parser
from oncegate.cli.arguments import Later, command, command_group, connection_options, lists, paging, whole_history
from oncegate.cli.helptext import FittedDescription
from oncegate.cli.streams import REFUSALS_AS_JSON
from oncegate.cli.values import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PORT,
    DEFAULT_SCOPE,
    MAX_PORT,
    MAX_THREADS,
    moment,
    or_reset,
    orphan_confirmation,
    scope,
    source,
    whole_number,
)
from oncegate.domain.fingerprint_rules import FingerprintPreset
from oncegate.domain.limits import (
    DEFAULT_HORIZON_DAYS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_PAGE_SIZE,
    DEFAULT_RETENTION_DAYS,
    MAX_HORIZON_DAYS,
    MAX_LEASE_SECONDS,
    MAX_PAGE_SIZE,
    MAX_RETENTION_DAYS,
    MIN_LEASE_SECONDS,
    MIN_RETENTION_DAYS,
)
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Resolution, SettledOutcome
from oncegate.entrypoints.handler_pool import DEFAULT_THREADS

# What `oncegate --help` prints: the docstring but its last paragraph, which is for who reads the code.
HELP = (__doc__ or "").rsplit("\n\n", 1)[0] + "\n"
MIN_CONCURRENCY = 2
MAX_CONCURRENCY = 128
MAX_WORKERS = 16


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of the arguments is JSON on stdout too when they ask for --json.

    Every command's parser is one: argparse makes each subcommand's parser of its parent's class.
    """

    def error(self, message: str) -> NoReturn:
        if REFUSALS_AS_JSON.get():
            refusal = {"code": "invalid_usage", "message": f"{self.prog}: error: {message}", "details": []}
            streams.print_json({"error": refusal})
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The whole tree: each group of commands is one call below.

    A command with ``local`` set works on the store the environment's settings name (serve, purge,
    keys, store); every other one talks to a deployment over its HTTP API, with the deployment's options.
    """
    parser = Parser(
        prog="oncegate",
        description=HELP,
        formatter_class=FittedDescription,
        parents=[connection_options(top=True)],
    )
    parser.add_argument("--version", action="version", version=f"oncegate {__version__}")
    # The old spelling of --api-scope, caught so that it is never read as a claim scope (oncegate.cli refuses it
    # with MISPLACED_SCOPE).
    parser.add_argument("--scope", dest="misplaced_scope", help=argparse.SUPPRESS)
    parser.set_defaults(handler=None, group_parser=parser, local=False)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(subparsers)
    _add_purge(subparsers)
    _add_keys(subparsers)
    targets_parser.add_parser(subparsers)
    _add_claims(subparsers)
    _add_conflicts(subparsers)
    _add_flows(subparsers)
    _add_scopes(subparsers)
    _add_drill(subparsers)
    command(subparsers, "health", _in_commands("health"), "whether the service and its store answer, and which store")
    return parser


def _add_claims(subparsers: Any) -> None:
    _, claims = command_group(subparsers, "claims", "look at claims")
    show = command(claims, "show", _in_commands("claims_show"), "a claim and its history, by claim id")
    show.add_argument("claim_id", metavar="CLAIM_ID", help="the claim's id, from Check and claim")
    whole_history(show)
    # Lookup, as the API's action (POST /api/claims/lookup); "find", its first name, still works.
    by_key = "a claim and its history, by scope and business key"
    find = command(claims, "lookup", _in_commands("claims_lookup"), by_key, aliases=("find",))
    find.add_argument("--scope", required=True, type=scope, help="the claim's scope, such as erp.create-order")
    find.add_argument(
        "--key",
        dest="business_key",
        required=True,
        metavar="KEY",
        help="the business key, in clear; it travels in the request body, never in the address",
    )
    whole_history(find)
    needing = (
        "claims that need a person, oldest first: leases run out, outcomes unknown too long, failures nobody reviewed"
    )
    attention = command(claims, "attention", _in_commands("claims_attention"), needing)
    attention.add_argument("--scope", type=scope, help="only the claims of this scope")
    paging(attention, "claims")
    by_source = "claims by the source system they came from, their reference, status or first received (one at least)"
    listed = command(claims, "list", _in_commands("claims_list"), by_source)
    listed.add_argument("--source", type=source, help="the source system, such as shop-eu or sharepoint:expenses")
    listed.add_argument("--reference", help="the reference the flow gave, such as SO-1001")
    listed.add_argument("--status", choices=[status.value for status in ClaimStatus], help="the claims' status")
    listed.add_argument(
        "--since", metavar="TIME", type=moment, help="first received at or after, such as 2026-12-01T00:00:00Z"
    )
    listed.add_argument("--scope", type=scope, help="only the claims of this scope")
    paging(listed, "claims")
    review = command(
        claims,
        "review",
        _in_commands("claims_review"),
        "acknowledge a failure that is not retryable (the key stays blocked), or, with --outcome and --attempt, "
        "settle an attempt in doubt (lease expired, or unknown) with what the target system holds",
    )
    review.add_argument("claim_id", metavar="CLAIM_ID", help="the claim's id")
    review.add_argument(
        "--reviewer", help="who reviewed, such as ana@contoso.com: required, but with --entra, where who signed in is"
    )
    review.add_argument("--note", help="what you found or did, kept in the claim's history")
    review.add_argument(
        "--outcome",
        choices=[outcome.value for outcome in SettledOutcome],
        help="settle an attempt in doubt: succeeded when the target system holds the record (give "
        "--target-record-id), failed when it holds nothing, so that the next run does the side effect",
    )
    review.add_argument(
        "--attempt",
        type=whole_number(1, 10**9),
        metavar="N",
        help="with --outcome: the claim's attempt you looked up (claims show); refused if a run took it over since",
    )
    review.add_argument("--target-record-id", metavar="ID", help="with --outcome succeeded: the record's id")
    review.add_argument("--data", metavar="JSON", help="with --outcome succeeded: the result data later runs get back")


def _add_conflicts(subparsers: Any) -> None:
    group, conflicts = command_group(subparsers, "conflicts", "list and resolve conflicts")
    listing = command(conflicts, "list", _in_commands("conflicts_list"), "conflicts, oldest first")
    statuses = [status.value for status in ConflictStatus]
    listing.add_argument(
        "--status",
        choices=[*statuses, "all"],
        default=ConflictStatus.OPEN.value,
        help="open: waiting for their owner (default); resolved: closed with a decision; all: both",
    )
    listing.add_argument("--scope", type=scope, help="only the conflicts of this scope")
    paging(listing, "conflicts")
    lists(group, listing)
    show = command(conflicts, "show", _in_commands("conflicts_show"), "one conflict")
    show.add_argument("conflict_id", metavar="CONFLICT_ID", help="the conflict's id: 24 letters and digits")
    resolving = "close a conflict with a reviewer's decision"
    resolve = command(conflicts, "resolve", _in_commands("conflicts_resolve"), resolving)
    resolve.add_argument("conflict_id", metavar="CONFLICT_ID", help="the open conflict's id")
    resolve.add_argument(
        "--decision",
        required=True,
        choices=[decision.value for decision in Resolution],
        help="accept_new: the new data becomes the claim's, and its next claim may proceed; keep_original: the new "
        "data counts as the same business intent, answered duplicate; dismiss: close it, and the next change opens "
        "a new conflict",
    )
    resolve.add_argument(
        "--reviewer", help="who decided, such as ana@contoso.com: required, but with --entra, where who signed in is"
    )
    resolve.add_argument("--note", help="why, kept with the decision")


def _add_flows(subparsers: Any) -> None:
    group, flows = command_group(subparsers, "flows", "the flow inventory")
    listing = command(flows, "list", _in_commands("flows_list"), "every flow seen or registered, with its counts")
    paging(listing, "flows")
    lists(group, listing)
    overlaps = command(flows, "overlaps", _in_commands("flows_overlaps"), "pairs of flows that met each other's claims")
    paging(overlaps, "pairs")
    register = command(
        flows,
        "register",
        _in_commands("flows_register"),
        "register a flow, or change its registration: only the options given change, the others stay; an option "
        "given '' clears it",
    )
    register.add_argument("--name", required=True, help="the flow's display name, such as 'Create ERP order'")
    register.add_argument("--environment", required=True, help="the environment it runs in, such as Default-contoso")
    register.add_argument("--owner", help="who answers for the flow ('' clears it)")
    enabled = register.add_mutually_exclusive_group()
    enabled.add_argument(
        "--enabled", dest="enabled", action="store_true", default=None, help="may claim (a new flow is enabled)"
    )
    enabled.add_argument(
        "--disabled", dest="enabled", action="store_false", help="answered blocked, before any claim is made"
    )
    register.add_argument(
        "--notes", help="why, such as 'replaced by the v2 flow'; shown in the blocked reason ('' clears them)"
    )


def _add_scopes(subparsers: Any) -> None:
    group, scopes = command_group(subparsers, "scopes", "the side-effect catalogue")
    listing = command(scopes, "list", _in_commands("scopes_list"), "every scope, with its claims by status")
    paging(listing, "scopes")
    lists(group, listing)
    setting = command(
        scopes,
        "set",
        _in_commands("scopes_set"),
        "change a scope's settings: only the options given change, the others stay; an option given '' resets "
        "its setting to the default",
    )
    setting.add_argument("scope_name", metavar="SCOPE", type=scope, help="the scope, such as erp.create-order")
    setting.add_argument("--owner", help="who answers for the side effect and its conflicts ('' clears it)")
    setting.add_argument(
        "--lease-seconds",
        type=or_reset(whole_number(MIN_LEASE_SECONDS, MAX_LEASE_SECONDS)),
        metavar="S",
        help=f"the lease of a claim that asks for none, {MIN_LEASE_SECONDS} to {MAX_LEASE_SECONDS} seconds "
        f"({DEFAULT_LEASE_SECONDS} until set; '' resets it)",
    )
    setting.add_argument(
        "--retention-days",
        type=or_reset(whole_number(MIN_RETENTION_DAYS, MAX_RETENTION_DAYS)),
        metavar="D",
        help=f"how long finished claims are kept, {MIN_RETENTION_DAYS} to {MAX_RETENTION_DAYS} days "
        f"({DEFAULT_RETENTION_DAYS} until set; '' resets it)",
    )
    setting.add_argument(
        "--horizon-days",
        type=or_reset(whole_number(MIN_RETENTION_DAYS, MAX_HORIZON_DAYS)),
        metavar="H",
        help=f"how long after its last change a succeeded claim's key is still answered duplicate, at least the "
        f"retention, up to {MAX_HORIZON_DAYS} days ({DEFAULT_HORIZON_DAYS} until set, never shorter than the "
        "retention; '' resets it): past the retention, by its tombstone",
    )
    setting.add_argument("--description", help="what the side effect does ('' clears it)")
    setting.add_argument(
        "--key-pattern",
        metavar="P",
        help="a regular expression the scope's keys match whole, such as '[0-9]{16}': such keys are never refused "
        "as personal data ('' clears it)",
    )
    for which, what in (
        ("include", "a part of the payload that makes up the business data"),
        ("ignore", "a part of the payload left out of the fingerprint"),
    ):
        setting.add_argument(
            f"--fingerprint-{which}",
            action="append",
            metavar="PTR",
            help=f"{what}, as a JSON Pointer such as /Modified or /lines/*/amount; repeat for more, '' clears them",
        )
    setting.add_argument(
        "--fingerprint-preset",
        choices=[*(preset.value for preset in FingerprintPreset), ""],
        metavar="|".join(preset.value for preset in FingerprintPreset),
        help="ignore the system fields of a SharePoint item or Dataverse row trigger body ('' clears it)",
    )


def _add_serve(subparsers: Any) -> None:
    description = (
        "serve the Functions app locally, as Core Tools would, on the store the environment's settings name; "
        "a setting that cannot work, or a port that is taken, stops it with one line"
    )
    parser = subparsers.add_parser("serve", help=description, description=description)
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1: this machine only)")
    parser.add_argument(
        "--port",
        type=whole_number(0, MAX_PORT),
        # Absent: PORT, read when serving, so that a bad one is refused naming PORT.
        metavar="P",
        help=f"the port, 0 to {MAX_PORT} (0: any free port); default PORT from the environment, else {DEFAULT_PORT}",
    )
    parser.add_argument("--app-dir", default=".", help="the folder holding function_app.py (default: this folder)")
    parser.add_argument(
        "--workers",
        type=whole_number(1, MAX_WORKERS),
        default="1",
        metavar="N",
        help=f"processes serving requests, 1 to {MAX_WORKERS}; one runs Python on one core at a time, so on "
        "SQLite a second one nearly doubles the claims answered per second on two cores (default 1)",
    )
    parser.add_argument(
        "--threads",
        type=whole_number(0, MAX_THREADS),
        metavar="N",
        # Absent: ONCEGATE_SERVE_THREADS, read when serving, so that a bad one is refused naming it.
        help=f"handler threads per worker, 0 to {MAX_THREADS}, answering the requests of every connection (0: a "
        "thread per connection, as before); on SQLite two do as well as more, which take turns at one interpreter "
        "lock, while on Table Storage over a network more overlap its waits. Default ONCEGATE_SERVE_THREADS from "
        f"the environment, else {DEFAULT_THREADS}, measured by make bench",
    )
    parser.set_defaults(command_parser=parser, handler=_in_commands("serve"), local=True)


def _add_purge(subparsers: Any) -> None:
    description = (
        "delete the finished claims whose scope's retention is over, with their history, on the store the "
        "environment's settings name (as serve does): what the app's daily timer does. It names the store, "
        "and refuses a SQLite database that does not exist"
    )
    parser = subparsers.add_parser("purge", help=description, description=description)
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the report as JSON")
    parser.add_argument("--dry-run", action="store_true", help="delete nothing; count what would be deleted")
    parser.add_argument(
        "--page-size",
        type=whole_number(1, MAX_PAGE_SIZE),
        default=DEFAULT_PAGE_SIZE,
        metavar="N",
        help=f"claims read per page, 1 to {MAX_PAGE_SIZE} (default {DEFAULT_PAGE_SIZE})",
    )
    parser.add_argument(
        "--max-pages",
        type=whole_number(1, 10**9),
        metavar="N",
        help="stop after N pages, 1 or more; the report says where to resume (default: no limit)",
    )
    parser.add_argument(
        "--resume", metavar="CURSOR", help="go on where a purge that stopped early left off (the cursor it printed)"
    )
    parser.set_defaults(command_parser=parser, handler=_in_store_commands("purge"), local=True)


def _add_drill(subparsers: Any) -> None:
    runner = command(
        subparsers,
        "drill",
        _in_commands("drill"),
        "act as flows would on two fresh test keys (triggered twice, in bursts, with a changed payload) and check "
        "that each business result happens once; exit 1 on any deviation, 2 when the flow inventory blocks it",
    )
    runner.add_argument(
        "--scope",
        dest="drill_scope",
        metavar="SCOPE",
        type=scope,
        default=DEFAULT_SCOPE,
        help=f"the scope the drill claims in: 1 to 64 letters, digits, dots, underscores or hyphens "
        f"(default {DEFAULT_SCOPE})",
    )
    runner.add_argument(
        "--source",
        dest="drill_source",
        metavar="SOURCE",
        type=source,
        help="the source system the drill's claims name, such as drill or shop-eu-test (default: none)",
    )
    runner.add_argument(
        "--concurrency",
        type=whole_number(MIN_CONCURRENCY, MAX_CONCURRENCY),
        metavar="N",
        default=DEFAULT_CONCURRENCY,
        help=f"runs fired at once in each burst, {MIN_CONCURRENCY} to {MAX_CONCURRENCY} "
        f"(default {DEFAULT_CONCURRENCY})",
    )
    runner.add_argument(
        "--batch",
        action="store_true",
        help="fire 20 fresh records in bulk calls (Check and claim many, Record results) racing single calls, "
        "then once more in one batch, and check one result per record",
    )
    runner.add_argument(
        "--verbose", action="store_true", help="every call the drill made and each key's history, not only the checks"
    )


def _add_keys(subparsers: Any) -> None:
    description = (
        "the store's id and the key secrets its claims were made with (check values, never secrets), with the "
        "claims and tombstones made with each and when retention deletes the last, on the store the environment's "
        "settings name (as serve does)"
    )
    keys = subparsers.add_parser("keys", help=description, description=description)
    keys.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print them as JSON")
    keys.set_defaults(command_parser=keys, handler=_in_store_commands("keys"), action="list", local=True)
    retire = keys.add_subparsers(dest="action").add_parser(
        "retire",
        help="retire a key secret no row needs any more (the runbook's third step); refused while claims or "
        "tombstones made with it remain, unless --orphan confirms them as `oncegate keys` shows them: their keys "
        "would be answered proceed again",
    )
    retire.set_defaults(command_parser=retire)
    retire.add_argument("key_id", metavar="KEY_ID", help="the secret's check value, as `oncegate keys` lists it")
    retire.add_argument(
        "--orphan",
        type=orphan_confirmation,
        metavar="N[.CODE]",
        help="retire it although N claims and tombstones made with it remain; while some are released or failed "
        "retryable (their keys proceed anyway, and may succeed before the retire), with the code `oncegate keys` "
        "shows after N, which changes when one does",
    )
    group = subparsers.add_parser("store", help="the store itself")
    group.set_defaults(handler=None, group_parser=group, local=True)
    store = group.add_subparsers(dest="action", metavar="ACTION")
    init = store.add_parser(
        "init",
        help="mark a store (new, wiped, restored empty, or a table of it that lost its mark) as the one this app "
        "serves, with its own id, else the id ONCEGATE_STORE_ID (or the SQLite store-id file) names, else a new "
        "one, and print it: the explicit step that accepts that every claim lost before is forgotten",
    )
    init.add_argument(
        "--new-only",
        action="store_true",
        help="mark only a new store (or one of an earlier release); a whole store's id is printed and a store that "
        "lost a mark is refused: what a deployment runs on every deploy",
    )
    init.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help='print {"storeId": ...}')
    init.set_defaults(command_parser=init, handler=_in_store_commands("store_init"))
    exporting = store.add_parser(
        "export",
        help="write everything the promise needs (claims with their history, tombstones, conflicts, fingerprint "
        "records, key-secret records, scopes, flows, overlaps, the store's id; digests, never keys) to FILE, "
        "gzip when it ends in .gz; safe while the app serves",
    )
    exporting.add_argument("file", metavar="FILE", help="the file to write (named .partial until it is whole)")
    exporting.add_argument("--json", action="store_true", default=False, help="print the export's summary as JSON")
    exporting.set_defaults(command_parser=exporting, handler=_in_store_commands("store_export"))
    importing = store.add_parser(
        "import",
        help="fill an empty store from an export; run again, an import cut short goes on where it stopped",
    )
    importing.add_argument("file", metavar="FILE", help="an export written by oncegate store export")
    importing.add_argument(
        "--forget-after",
        required=True,
        metavar="TIME",
        help="the export's time, as the export printed it: accepts that keys done after it are forgotten "
        "(answered proceed again) until their horizon has passed",
    )
    importing.set_defaults(command_parser=importing, handler=_in_store_commands("store_import"))
    recount = store.add_parser(
        "recount",
        help="count each scope's claims by status again from the store: an instance stopped without closing "
        "(kill -9, a crash) loses the counts of its last minute, which `oncegate scopes` then shows",
    )
    recount.set_defaults(command_parser=recount, handler=_in_store_commands("store_recount"))


def _in_commands(name: str) -> Later:
    """A function of :mod:`oncegate.cli.commands` (the deployment's commands, serve, drill), imported when it runs."""
    return Later("oncegate.cli.commands", name)


def _in_store_commands(name: str) -> Later:
    """A function of :mod:`oncegate.cli.store_commands` (the commands on the settings' store), imported when it
    runs."""
    return Later("oncegate.cli.store_commands", name)
