"""The pieces the command's parser is built of: the deployment's options, a command, a group of commands.

:mod:`oncegate.cli.parser` builds the whole tree from these; a module declaring a group of its own
commands (``oncegate claims``, ``oncegate store``...) builds it from them too, and the parser adds it
with one call.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from oncegate.cli.values import DEFAULT_PORT, whole_number

# The service's bounds on a list page (the top query parameter of every list).
MAX_TOP = 200


class NotStarted(KeyboardInterrupt):
    """Ctrl+C or SIGTERM while the command was still loading what it runs (:func:`loading`): it did nothing yet."""


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """A command's modules being imported, before it does anything: a stop meanwhile is :class:`NotStarted`."""
    try:
        yield
    except NotStarted:
        raise
    except KeyboardInterrupt as stopped:
        raise NotStarted from stopped


class Later:
    """A command's function named by its module and name, imported when the command runs: building the parser
    (``oncegate --help``, any command's start) loads no command's implementation, only the one chosen."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, *args: Any) -> Any:
        with loading():
            function = getattr(importlib.import_module(self.module), self.name)
        return function(*args)

    def __repr__(self) -> str:
        return f"{self.module}.{self.name}"


def connection_options(*, top: bool) -> argparse.ArgumentParser:
    """The options naming the deployment and the output: before the command (``top``) or after it.

    After the command they default to SUPPRESS, so that one given before it is not overwritten.
    """
    parser = argparse.ArgumentParser(add_help=False)
    unset: dict[str, Any] = {} if top else {"default": argparse.SUPPRESS}
    group = parser.add_argument_group("deployment (every command but serve, purge, keys, store and targets)")
    group.add_argument(
        "--url",
        **unset,
        help="the function app's address, such as https://contoso-oncegate.azurewebsites.net (env ONCEGATE_URL; "
        f"default http://127.0.0.1:PORT, which is {DEFAULT_PORT} when PORT is unset, where oncegate serve listens)",
    )
    credentials = group.add_mutually_exclusive_group()
    credentials.add_argument(
        "--key",
        "--function-key",
        dest="function_key",
        metavar="KEY",
        **unset,
        help="a function key of the app, sent as x-functions-key (env ONCEGATE_FUNCTION_KEY, which keeps it off the "
        "command line); oncegate serve checks none",
    )
    credentials.add_argument(
        "--entra",
        action="store_true",
        help="sign in to Microsoft Entra ID and send a bearer token instead of a key",
        **unset,
    )
    group.add_argument(
        "--tenant", help="with --entra: the Entra ID tenant, its id or domain (env ONCEGATE_TENANT_ID)", **unset
    )
    group.add_argument(
        "--client-id",
        **unset,
        help="with --entra: the application id of the CLI's app registration, confidential when "
        "ONCEGATE_CLIENT_SECRET is set (env ONCEGATE_CLIENT_ID)",
    )
    group.add_argument(
        "--api-scope",
        help="with --entra: the API's scope, such as api://<API client id>/user_impersonation (env ONCEGATE_API_SCOPE)",
        **unset,
    )
    group.add_argument(
        "--json", action="store_true", help="print the service's JSON answer as it came, for scripts", **unset
    )
    return parser


def command(
    subparsers: Any, name: str, handler: Later, help: str, *, aliases: tuple[str, ...] = ()
) -> argparse.ArgumentParser:
    # The deployment's options after the command too, a copy for each: "resolve" changes the parent's options in
    # place, where claims lookup's --key is the business key and leaves the function key --function-key.
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=help,
        aliases=aliases,
        parents=[connection_options(top=False)],
        conflict_handler="resolve",
    )
    parser.set_defaults(handler=handler, command_parser=parser)
    return parser


def command_group(subparsers: Any, name: str, help: str) -> tuple[argparse.ArgumentParser, Any]:
    """A group of commands (claims, conflicts...): alone, it shows its help, or lists (see :func:`lists`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=help, parents=[connection_options(top=False)]
    )
    parser.set_defaults(handler=None, group_parser=parser)
    return parser, parser.add_subparsers(dest="action", metavar="ACTION")


def lists(group: argparse.ArgumentParser, listing: argparse.ArgumentParser) -> None:
    """``group`` alone runs ``listing`` with its defaults: ``oncegate scopes`` is ``oncegate scopes list``."""
    group.set_defaults(**vars(listing.parse_args([])), action="list")


def paging(parser: argparse.ArgumentParser, noun: str) -> None:
    parser.add_argument(
        "--top",
        type=whole_number(1, MAX_TOP),
        metavar="N",
        help=f"{noun} per page, 1 to {MAX_TOP} (the service's 50 when absent)",
    )
    parser.add_argument(
        "--all-pages", action="store_true", help="follow each page's next link to the last page (progress on stderr)"
    )


def whole_history(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all-pages",
        action="store_true",
        help="the whole history: the first 50 entries come with the claim, this follows its next link for the rest",
    )


def options_by_field(parser: argparse.ArgumentParser) -> dict[str, str]:
    """The option of ``parser`` that sends each field of the request, by the field's name on the wire:
    ``keyPattern`` is ``--key-pattern``, ``claimId`` is ``CLAIM_ID``."""
    named: dict[str, str] = {}
    for action in parser._actions:
        for option in action.option_strings or [str(action.metavar or action.dest)]:
            words = option.lstrip("-").replace("_", "-").lower().split("-")
            named.setdefault(words[0] + "".join(word.title() for word in words[1:]), option)
    return named
