"""The commands that work on the store itself, as the app does, rather than over the API: ``purge``,
``keys``, ``store init``, ``store recount``, ``store export`` and ``store import``. Each reads the store
settings from the environment (``ONCEGATE_STORE``...) and names the store it works on.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oncegate.cli import streams
from oncegate.cli.client import SERVICE_EXIT, USAGE_EXIT
from oncegate.cli.commands import REFUSALS_AS_JSON, interrupted, progress, refused
from oncegate.cli.extra import on_first_use
from oncegate.cli.values import moment

if TYPE_CHECKING:
    from oncegate.cli import layout, store_rendering
    from oncegate.errors import OnceGateError
else:
    # rich comes with the cli extra (oncegate/cli/extra.py).
    layout = on_first_use("oncegate.cli.layout")
    store_rendering = on_first_use("oncegate.cli.store_rendering")


def on_the_store(args: argparse.Namespace) -> int:
    """Run a command on the store the settings name: the app's log only when asked (:func:`logs_when_asked`), and
    a Table Storage endpoint nobody is signed in to as one line, not the SDK's traceback."""
    from azure.core.exceptions import ClientAuthenticationError

    logs_when_asked()
    as_json = REFUSALS_AS_JSON.set(getattr(args, "json", False))
    try:
        code: int = args.handler(args)
    except ClientAuthenticationError as exc:
        return _not_signed_in(args.command, exc)
    finally:
        REFUSALS_AS_JSON.reset(as_json)
    return code


def _not_signed_in(command: str, exc: BaseException) -> int:
    """The one line for a Table Storage endpoint nobody is signed in to, from the SDK's error or the store's."""
    said = str(getattr(exc, "message", None) or exc).splitlines()[0]
    return refused(
        command,
        f"cannot sign in to Table Storage at {os.environ.get('ONCEGATE_TABLES_ENDPOINT')}: {said} Sign in with "
        "az login (or run where a managed identity is), as an identity with a data role on the tables.",
    )


def _not_opened(command: str, exc: OnceGateError, said: str) -> int:
    """A store that could not be opened: nobody signed in (exit 2, as a usage error), or it did not answer (3)."""
    from azure.core.exceptions import ClientAuthenticationError

    if isinstance(exc.__cause__, ClientAuthenticationError):  # the store's own answer to it: store_unavailable
        return _not_signed_in(command, exc.__cause__)
    return refused(command, said, SERVICE_EXIT)


def logs_when_asked() -> None:
    """Show OnceGate's log lines only when ``ONCEGATE_LOG_LEVEL`` asks for them, as ``oncegate serve`` writes them.

    They are the app's log: a store command says itself what it did. Where nothing configured logging,
    Python's last resort printed each warning and error bare, such as the SDK's error for a missing table
    twice over, with its request id and JSON body, above ``store init``'s "is now store".
    """
    from oncegate.entrypoints import logs

    if os.environ.get(logs.SETTING):
        logs.configure(handler=True)
        return
    logger = logging.getLogger("oncegate")
    if not any(isinstance(handler, logging.NullHandler) for handler in logger.handlers):
        logger.addHandler(logging.NullHandler())


def _exit(error: OnceGateError) -> int:
    """The exit status of a command the store or the service refused: as the API would answer it, 5xx or 4xx."""
    from oncegate.entrypoints import error_map

    return SERVICE_EXIT if error_map.status(error) >= 500 else USAGE_EXIT


def _code(error: OnceGateError) -> str:
    """The error code the API would answer ``error`` with, e.g. ``store_unavailable``."""
    from oncegate.entrypoints import error_map

    return error_map.code(error)


def _local_services(command: str) -> tuple[Any, Any] | int:
    """The services over the store of the environment's settings, and the settings; or the exit status of a refusal.

    A SQLite database that does not exist is refused: opening it would make an empty one (and a new key
    secret) here, and report on nothing. So is one used with a key secret that is not beside it (a database
    imported on another machine): a new secret there is never the one its claims were made with. One that
    ``store init`` alone made gets its secret here, as at the server's first request.
    """
    from oncegate.bootstrap import LOST_SECRET, build_services, lost_key_secret
    from oncegate.config import ConfigError, Settings, StoreKind
    from oncegate.errors import OnceGateError

    try:
        settings = Settings.from_environment()
        if settings.store is StoreKind.SQLITE and not settings.sqlite_path.exists():
            return refused(command, f"no database at {settings.store_location}: {_where_is_the_store(command)}")
        if lost_key_secret(settings) is not None:
            return refused(
                command, f"no key-secret file beside the database at {settings.store_location}: {LOST_SECRET}"
            )
        return build_services(settings), settings
    except ConfigError as exc:
        return refused(command, str(exc))
    except OnceGateError as exc:
        return _not_opened(command, exc, f"{settings.store_text}: {exc.message}")


def purge(args: argparse.Namespace) -> int:
    """Retention's purge on the store of the environment's settings, a progress line per page on stderr."""
    from oncegate.errors import OnceGateError

    opened = _local_services("purge")
    if isinstance(opened, int):
        return opened
    services, settings = opened
    progress(f"Purging on {settings.store_text}")
    try:
        report = services.retention.purge(
            dry_run=args.dry_run,
            page_size=args.page_size,
            on_progress=lambda report: progress(store_rendering.progress_line(report)),
            resume_cursor=args.resume,
            max_pages=args.max_pages,
        )
    except OnceGateError as exc:
        return refused("purge", exc.message, _exit(exc))
    except KeyboardInterrupt:
        return interrupted("purge", "what it deleted stays deleted, its counts kept: run it again to go on.")
    finally:
        services.close()
    if args.json:
        store = {"kind": settings.store.value, "location": settings.store_location}
        streams.print_json({"store": store, **report.as_json()})
    else:
        layout.show(store_rendering.purge_text(report, settings.store_text), sys.stdout)
    if report.error is not None:
        print(f"The store failed ({report.error}): resume with --resume {report.cursor or '(none)'}.", file=sys.stderr)
        return SERVICE_EXIT
    if report.stopped_early:
        pages = layout.plural(report.pages, "page")
        print(f"Stopped after {pages}: resume with --resume {report.cursor}.", file=sys.stderr)
    return 0


def keys(args: argparse.Namespace) -> int:
    """The store's id and key secrets (``keys``), or retire one (``keys retire``), on the settings' store."""
    from oncegate.errors import OnceGateError

    command = "keys retire" if args.action == "retire" else "keys"
    opened = _local_services(command)
    if isinstance(opened, int):
        return opened
    services, settings = opened
    try:
        if args.action == "retire":
            record, rows = services.key_secrets.retire(args.key_id, orphan=args.orphan)
            orphaned = f": {layout.plural(rows, 'row')} made with it orphaned" if rows else ""
            print(f"Key secret {record.key_id} is retired on {settings.store_text}{orphaned}.")
            return 0
        marks = services.key_secrets.marks()
        usage = services.key_secrets.usage([record for record in marks.secrets if record.live])
        restoring = services.claims.restore()
    except OnceGateError as exc:
        return refused(command, exc.message, _exit(exc))
    except KeyboardInterrupt:
        left = (
            "the secret is retired or not, never half: `oncegate keys` shows which."
            if args.action == "retire"
            else ("it changed nothing: run it again.")
        )
        return interrupted(command, left)
    finally:
        services.close()
    if args.json:
        streams.print_json(store_rendering.key_secrets_json(marks, usage))
    else:
        layout.show(store_rendering.key_secrets_text(marks, usage, settings.store_text), sys.stdout)
    if restoring is not None and restoring.completed_at is None:
        # The restore runbook's check (docs/operations.md): a store half imported is no store the app serves.
        return refused(
            "keys",
            f"{settings.store_text} is half restored: an import of store {restoring.restored_from}'s export taken at "
            f"{_text(restoring.exported_at)} is under way or was cut short after record {restoring.records_done}. "
            "The app refuses the store until it ends: run the same import again.",
            SERVICE_EXIT,
        )
    return 0


def store_init(args: argparse.Namespace) -> int:
    """Mark the store of the environment's settings as the one this app serves (``--new-only``: a new one only).

    It needs the store settings and nothing else: marking reads no claim, so no key secret is asked for
    (a deployment runs it on the deployer's machine, which holds none).
    """
    from oncegate.bootstrap import build_store, store_pin
    from oncegate.config import ConfigError, Settings, StoreKind
    from oncegate.errors import OnceGateError
    from oncegate.service.core import utc_now
    from oncegate.service.key_secrets import KeySecrets

    try:
        settings = Settings.from_environment(hashes_keys=False)
    except ConfigError as exc:
        return refused("store init", str(exc))
    # Each refusal as the service's error.code: message, so that a deployment can tell a store that does not
    # answer yet (store_unavailable: its role is still being applied) from one refused (not_configured).
    try:
        store = build_store(settings)
    except OnceGateError as exc:
        return _not_opened("store init", exc, f"{_code(exc)}: {settings.store_text}: {exc.message}")
    try:
        before = store.read_marks().store_id
        pin = store_pin(settings)
        pinned_before = pin.pinned() if pin else None
        store_id = KeySecrets(store, clock=utc_now, pin=pin).start_store(new_only=args.new_only)
    except OnceGateError as exc:
        return refused("store init", f"{_code(exc)}: {exc.message}", _exit(exc))
    finally:
        store.close()
    if getattr(args, "json", False):
        streams.print_json({"storeId": store_id}, indent=None)
        return 0
    if args.new_only and before == store_id:
        print(f"{settings.store_text} is store {store_id}.")
    elif args.new_only:
        print(f"{settings.store_text} is marked as a new store, {store_id}: set ONCEGATE_STORE_ID to it.")
    elif before is None and pinned_before is None:
        # No id in the store and none pinned: a new store, or one wiped whole; nothing here tells which.
        print(f"{settings.store_text} is now store {store_id} (it had no id: a new store, or one wiped whole).")
    else:
        print(f"{settings.store_text} is now store {store_id}; claims made before it was wiped are forgotten.")
    if settings.store is not StoreKind.SQLITE and settings.store_id is None and not args.new_only:
        # Table Storage keeps no id outside the store by itself: the app's setting does (SQLite's file is written).
        print(
            f"Set ONCEGATE_STORE_ID={store_id} on the app, so that it recognises a wiped or replaced store after a "
            "restart (docs/operations.md, 'A store that lost its claims')."
        )
    return 0


def store_recount(args: argparse.Namespace) -> int:
    """Count each scope's claims by status again from the store, putting right what stopped instances lost."""
    from oncegate.errors import OnceGateError

    opened = _local_services("store recount")
    if isinstance(opened, int):
        return opened
    services, settings = opened
    progress(f"Counting the claims on {settings.store_text}")
    try:
        scopes = services.inventory.recount_scopes()
    except OnceGateError as exc:
        return refused("store recount", exc.message, _exit(exc))
    except KeyboardInterrupt:
        return interrupted("store recount", "the counts stay as they were: run it again.")
    finally:
        services.close()
    layout.show(store_rendering.recount_text(scopes, settings.store_text), sys.stdout)
    return 0


def _bare_store(command: str, *, create: bool, read_only: bool = False) -> tuple[Any, Any] | int:
    """The store of the environment's settings with no service over it, and the settings; or a refusal's status.

    An export or an import must not be the store's first use: services over an empty store would mark it
    as a new store, which an import must not find. Neither reads a key, so no key secret is asked for (as
    ``store init``): the export carries the key secrets' records, digests of nothing.
    """
    from oncegate.bootstrap import build_store
    from oncegate.config import ConfigError, Settings, StoreKind
    from oncegate.errors import OnceGateError

    try:
        settings = Settings.from_environment(hashes_keys=False)
        if settings.store is StoreKind.SQLITE and not settings.sqlite_path.exists() and not create:
            return refused(command, f"no database at {settings.store_location}: {_where_is_the_store(command)}")
        return build_store(settings, read_only=read_only), settings
    except ConfigError as exc:
        return refused(command, str(exc))
    except OnceGateError as exc:
        return _not_opened(command, exc, f"{settings.store_text}: {exc.message}")


def store_export(args: argparse.Namespace) -> int:
    """Export the store of the environment's settings to FILE, rows by kind on stderr as they go."""
    from oncegate.errors import OnceGateError
    from oncegate.service import backups
    from oncegate.service.core import utc_now

    # Read only: an export needs Storage Table Data Reader alone (docs/operations.md, *Taking an export*).
    opened = _bare_store("store export", create=False, read_only=True)
    if isinstance(opened, int):
        return opened
    store, settings = opened
    path = Path(args.file)
    progress(f"Exporting {settings.store_text} to {path}")
    try:
        report = backups.export(
            store, path, now=utc_now, on_progress=lambda kind, n: progress(f"  {kind}: {layout.plural(n, 'row')}")
        )
    except OnceGateError as exc:
        return refused("store export", exc.message, _exit(exc))
    except OSError as exc:
        return refused("store export", f"cannot write {path}: {exc.strerror}")
    except KeyboardInterrupt:
        partial = path.with_name(f"{path.stem}.partial{path.suffix}").name
        return interrupted(
            "store export", f"nothing was written to {path} ({partial}, if left, is no export): take it again."
        )
    finally:
        store.close()
    end = report.end_record()
    if args.json:
        # Every time of the summary as the commands print them (with Z), as --forget-after takes startedAt: the end
        # record's own times are the export file's form.
        times = {"finishedAt": _text(report.finished_at), "expiresAt": _text(report.expires_at)}
        summary = {"file": str(path), "storeId": report.store_id, "startedAt": _text(report.started_at), **end, **times}
        streams.print_json(summary, indent=None)
        return 0
    changed = report.changed_after_read
    print(f"Exported store {report.store_id} to {path} as it was at {_text(report.started_at)}.")
    print(f"Records: {', '.join(f'{n} {kind}' for kind, n in sorted(report.counts.items()))}.")
    print(f"Key secrets its claims need: {', '.join(report.key_secret_ids) or 'none'} (keep those versions).")
    print(f"Expires at {_text(report.expires_at)}: delete it then, with the claims retention would have purged.")
    if changed:
        print(f"Changed after they were read ({len(changed)}; the file holds them as before): {', '.join(changed)}")
    restore = streams.command_line("oncegate", "store", "import", str(path), "--forget-after", _text(report.started_at))
    print(f"Restore with: {restore}")
    return 0


def store_import(args: argparse.Namespace) -> int:
    """Fill the empty store of the environment's settings from FILE, or go on with an import of it cut short."""
    from oncegate.bootstrap import store_pin
    from oncegate.errors import OnceGateError
    from oncegate.service import backups
    from oncegate.service.core import utc_now

    path = Path(args.file)
    try:
        forget_after = datetime.fromisoformat(moment(args.forget_after))
    except argparse.ArgumentTypeError as exc:
        return refused("store import", f"--forget-after: {exc}")
    try:
        export_file = backups.read_export(path)
        backups.check_forget_after(export_file, forget_after)  # before the store is opened: a refusal makes nothing
    except OnceGateError as exc:
        return refused("store import", exc.message)
    opened = _bare_store("store import", create=True)
    if isinstance(opened, int):
        return opened
    store, settings = opened
    pin = store_pin(settings)
    progress(f"Importing {path} ({export_file.records} records) into {settings.store_text}")
    try:
        report = backups.import_export(
            store,
            export_file,
            forget_after=forget_after,
            now=utc_now,
            on_progress=lambda kind, n: progress(f"  {n} records written ({kind})"),
            pinned=pin.pinned(),
        )
        # As `store init` does: beside a SQLite database, the store-id file that recognises it if it is lost again.
        pin.keep(report.restore.restored_from)
    except OnceGateError as exc:
        return refused("store import", exc.message, _exit(exc))
    except KeyboardInterrupt:
        return interrupted(
            "store import",
            "the app refuses the store until it ends: run the same import again, which goes on where this one stopped.",
        )
    finally:
        store.close()
    restore = report.restore
    if report.already_done:
        print(f"{settings.store_text} was restored from {path} already, at {_text(restore.completed_at)}.")
        return 0
    resumed = f", going on after record {report.resumed_after}" if report.resumed_after else ""
    print(f"{settings.store_text} is store {restore.restored_from} again, restored from {path}{resumed}.")
    print(
        f"Keys done after {_text(restore.exported_at)} are forgotten until {_text(restore.forgotten_until)}: "
        "they are answered proceed again."
    )
    return 0


def _text(moment: datetime | None) -> str:
    from oncegate.service.backups import moment_text

    return moment_text(moment) if moment else "(never)"


def _where_is_the_store(command: str) -> str:
    return (
        f"{command} works on the store oncegate serve uses, which makes its database at its first request: on a new "
        "store, ask it once (oncegate health) first. Else run it in the folder where oncegate serve runs, or set "
        "ONCEGATE_SQLITE_PATH (or ONCEGATE_STORE=tables and its settings) as the app has them."
    )
