"""The parser of ``oncegate targets`` and its three commands, whose work is in :mod:`oncegate.cli.targets_commands`
(imported when one runs)."""

from __future__ import annotations

from typing import Any

from oncegate.cli.arguments import Later
from oncegate.domain.target_declarations import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    SECRET_PREFIX,
)


def add_parser(subparsers: Any) -> None:
    """``targets`` and its three commands, on the CLI's subcommands."""
    description = (
        "the targets Perform once may call, declared by operators only, on the store the environment's settings "
        "name (as keys does); a flow names a target and a path under its base URL, never a URL"
    )
    targets = subparsers.add_parser("targets", help=description, description=description)
    targets.set_defaults(handler=None, group_parser=targets, local=True)
    actions = targets.add_subparsers(dest="action", metavar="{set,list,remove}")
    _add_set(actions)
    listing = actions.add_parser("list", help="every declared target, by name: a secret's name, never the secret")
    listing.add_argument("--json", action="store_true", help="print them as GET /api/targets answers them")
    listing.set_defaults(command_parser=listing, handler=_in_targets_commands("list_targets"))
    remove = actions.add_parser(
        "remove", help="remove a target: no Perform once reaches it from now on (claims made for it stay)"
    )
    remove.add_argument("name", metavar="NAME", help="the target to remove, as targets list shows it")
    remove.set_defaults(command_parser=remove, handler=_in_targets_commands("remove_target"))


def _add_set(actions: Any) -> None:
    declare = actions.add_parser(
        "set",
        help="declare a target, or declare it anew (a declaration is whole: an option left out takes its default)",
    )
    declare.add_argument("name", metavar="NAME", help="lower-case letters, digits and hyphens, such as erp")
    declare.add_argument(
        "--base-url",
        required=True,
        metavar="URL",
        help="https://host[:port][/path]; plain http only on loopback with ONCEGATE_TARGETS_ALLOW_LOOPBACK=true",
    )
    declare.add_argument(
        "--timeout-seconds",
        type=int,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="N",
        help=f"the whole call's bound, {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS} "
        f"(default {DEFAULT_TIMEOUT_SECONDS}); past it the outcome is unknown",
    )
    declare.add_argument(
        "--lookup-path",
        metavar="TEMPLATE",
        help="how to find a record after an unknown outcome: /orders?reference={reference} or "
        "/orders/by-key/{idempotencyKey}",
    )
    declare.add_argument(
        "--auth",
        default="none",
        metavar="AUTH",
        help=f"none (default), identity:AUDIENCE (the app's managed identity) or secret:HEADER=SECRET-NAME, the "
        f"name of a Key Vault secret starting {SECRET_PREFIX} (never the secret itself)",
    )
    declare.add_argument(
        "--allow-cidr",
        action="append",
        default=[],
        dest="allow_cidrs",
        metavar="CIDR",
        help="a private range the target's name may resolve to (a private endpoint, a VNet); repeat for more",
    )
    declare.add_argument(
        "--honours-idempotency-key",
        action="store_true",
        help="the target makes one record per Idempotency-Key: after an unknown outcome a look-up that finds "
        "nothing sends the call again under the same key",
    )
    declare.add_argument(
        "--success-status", action="append", type=int, default=[], dest="success_statuses", metavar="STATUS",
        help="a 2xx status that means the call succeeded (default: every 2xx); repeat for more",
    )  # fmt: skip
    declare.add_argument(
        "--retryable-status", action="append", type=int, default=[], dest="retryable_statuses", metavar="STATUS",
        help="a 4xx status after which the call may be tried again (default: none); repeat for more",
    )  # fmt: skip
    declare.add_argument(
        "--record-pointer", metavar="POINTER", help="the JSON pointer to the record's id in the answer, such as /id"
    )
    declare.add_argument(
        "--keep-header", action="append", default=[], dest="kept_headers", metavar="HEADER",
        help="a header of the answer kept with the claim (within the data limit); repeat for more",
    )  # fmt: skip
    declare.add_argument(
        "--keep-pointer", action="append", default=[], dest="kept_pointers", metavar="POINTER",
        help="a part of the answer's JSON body kept with the claim, such as /status; repeat for more",
    )  # fmt: skip
    declare.set_defaults(command_parser=declare, handler=_in_targets_commands("set_target"))


def _in_targets_commands(name: str) -> Later:
    return Later("oncegate.cli.targets_commands", name)
