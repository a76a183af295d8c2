"""``oncegate targets set``, ``targets list`` and ``targets remove``: the targets Perform once may call (issue 34).

They work on the store the environment's settings name, as ``oncegate keys`` does, never over the API:
declaring a target is an operator's act, as deploying is. ``targets list`` shows a secret's name, never
the secret. :func:`oncegate.cli.targets_parser.add_parser` is the one call that puts the commands on the CLI.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from oncegate.cli import streams
from oncegate.cli.commands import interrupted, refused
from oncegate.cli.store_commands import _exit, _local_services
from oncegate.domain.target_declarations import (
    auth_text,
    written,
)
from oncegate.domain.targets import Target

WIDTH = 80
INDENT = "  "
# Each field of a declaration, as the API names it, and the option that sets it.
OPTIONS = {
    "name": "NAME",
    "baseUrl": "--base-url",
    "timeoutSeconds": "--timeout-seconds",
    "lookupPath": "--lookup-path",
    "auth": "--auth",
    "allowCidrs": "--allow-cidr",
    "successStatuses": "--success-status",
    "retryableStatuses": "--retryable-status",
    "recordPointer": "--record-pointer",
    "keptHeaders": "--keep-header",
    "keptPointers": "--keep-pointer",
}


def set_target(args: argparse.Namespace) -> int:
    """Declare the target on the settings' store; print what is now declared."""
    declaration = written(args)
    return _on_store("targets set", lambda services: services.targets.set(declaration, declared_by=_operator()))


def list_targets(args: argparse.Namespace) -> int:
    """Every declared target on the settings' store, as text or as ``GET /api/targets`` answers."""
    return _on_store("targets list", lambda services: services.targets.list(), as_json=args.json)


def remove_target(args: argparse.Namespace) -> int:
    """Remove the target; exit 1 when none was declared under that name."""
    return _on_store("targets remove", lambda services: (args.name, services.targets.remove(args.name)))


def _on_store(command: str, act: Any, *, as_json: bool = False) -> int:
    from oncegate.errors import InvalidRequest, OnceGateError

    opened = _local_services(command)
    if isinstance(opened, int):
        return opened
    services, settings = opened
    try:
        done = act(services)
    except InvalidRequest as exc:
        # The domain names the field as the API does (baseUrl); here it is the option the operator typed.
        option = OPTIONS.get(exc.target or "")
        return refused(command, option + exc.message.removeprefix(exc.target or "") if option else exc.message)
    except OnceGateError as exc:
        return refused(command, exc.message, _exit(exc))
    except KeyboardInterrupt:
        return interrupted(command, "`oncegate targets list` shows what is declared now.")
    finally:
        services.close()
    if isinstance(done, Target):
        _say(f"Target {done.name} is declared on {settings.store_text}:")
        print("\n".join(target_lines(done)))
        return 0
    if isinstance(done, tuple):
        name, removed = done
        if not removed:
            return refused(command, f"no target is declared as {name} on {settings.store_text}.", 1)
        _say(f"Target {name} is removed from {settings.store_text}: no Perform once reaches it from now on.")
        return 0
    if as_json:
        from oncegate.entrypoints.target_views import target_list

        streams.print_json(target_list(done).model_dump(mode="json", by_alias=True, exclude_none=True))
        return 0
    _say(f"{len(done)} target{'' if len(done) == 1 else 's'} on {settings.store_text}" + (":" if done else "."))
    for target in done:
        print()
        print("\n".join(target_lines(target)))
    return 0


def _say(line: str) -> None:
    print("\n".join(textwrap.wrap(line, WIDTH, subsequent_indent=INDENT, break_on_hyphens=False)))


def target_lines(target: Target) -> list[str]:
    """A target as lines of at most 80 columns: its name and base URL, then each setting that is not a default."""
    facts = [
        f"timeout {target.timeout_seconds} s",
        f"auth {auth_text(target)}",
        "honours Idempotency-Key" if target.honours_idempotency_key else "",
        f"look-up {target.lookup_path}" if target.lookup_path else "no look-up",
        f"allowed CIDRs {', '.join(target.allow_cidrs)}" if target.allow_cidrs else "",
        f"success {', '.join(map(str, target.success_statuses))}" if target.success_statuses else "",
        f"retryable {', '.join(map(str, target.retryable_statuses))}" if target.retryable_statuses else "",
        f"record id at {target.record_pointer}" if target.record_pointer else "",
        f"keeps headers {', '.join(target.kept_headers)}" if target.kept_headers else "",
        f"keeps {', '.join(target.kept_pointers)}" if target.kept_pointers else "",
    ]
    if target.declared_at is not None:
        by = f" by {target.declared_by}" if target.declared_by else ""
        facts.append(f"declared{by} at {target.declared_at.isoformat(timespec='seconds')}")
    lines = textwrap.wrap(f"{target.name}  {target.base_url}", WIDTH, subsequent_indent=INDENT * 2)
    for fact in filter(None, facts):
        lines += textwrap.wrap(fact, WIDTH, initial_indent=INDENT, subsequent_indent=INDENT * 2, break_on_hyphens=False)
    return lines


def _operator() -> str | None:
    """Who declares: the signed-in user of this machine, as the history of a target says it."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
