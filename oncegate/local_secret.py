"""The embedded store's key secret, when ONCEGATE_KEY_SECRET is unset: a file beside the database.

It is made once, whole, readable by its owner only, and never made again while it is there: a new
secret would orphan every claim the database holds. A file that cannot serve is a ``ConfigError``
naming ONCEGATE_KEY_SECRET and the file, as the setting it stands in for would be; one that cannot be
made names ONCEGATE_SQLITE_PATH, whose folder it is made in.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from pathlib import Path

from oncegate.config import ConfigError
from oncegate.domain.keys import MIN_SECRET_LENGTH

SECRET_FILE_NAME = "key-secret"


def local_key_secret(sqlite_path: Path) -> str:
    """The embedded store's secret: made once, kept beside the database, readable by its owner only."""
    path = sqlite_path.parent / SECRET_FILE_NAME
    if not os.path.lexists(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _publish_new_secret(path)
        except OSError as exc:
            # Answered 503 naming the setting, as a bad setting is, rather than a 500 on every request.
            raise ConfigError(
                "ONCEGATE_SQLITE_PATH",
                f"cannot make the key-secret file {path} beside the database: {exc.strerror or exc}. Name a database "
                "in a folder this process may write, or set ONCEGATE_KEY_SECRET.",
            ) from exc
    secret = read_local_secret(path)
    _make_private(path)
    return secret


def check_local_secret(sqlite_path: Path) -> None:
    """Refuse the secret file beside ``sqlite_path`` if it is there and cannot serve; make none."""
    path = sqlite_path.parent / SECRET_FILE_NAME
    if os.path.lexists(path):
        read_local_secret(path)


def _make_private(path: Path) -> None:
    """Files made by earlier releases (or copied in) may be readable by others: the secret is nobody else's."""
    with contextlib.suppress(OSError):
        # Windows has no group and other bits to clear: its st_mode says 0o666 of every writable file.
        if os.name == "posix" and path.stat().st_mode & 0o077:
            logging.getLogger(__name__).warning("Making %s readable by its owner only", path)
            path.chmod(0o600)


def _publish_new_secret(path: Path) -> None:
    """Write a fresh secret whole under a private name, then link it into place unless one is already there.

    A link never replaces an existing name, so of processes starting together on a new folder the
    first to link wins and the others read its file; nobody can see the name before it is complete.
    """
    temporary = path.with_name(f".{SECRET_FILE_NAME}.{secrets.token_hex(8)}.tmp")
    # O_EXCL with 0600: the secret is never readable by others, not even for a moment.
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_urlsafe(48))
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process published first: its secret stands
            os.link(temporary, path)
    finally:
        temporary.unlink()
    _fsync_directory(path.parent)


def _fsync_directory(directory: Path) -> None:
    """Make the new name durable: after a power cut, a lost name would mean a new secret and orphaned claims."""
    if os.name != "posix":
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_local_secret(path: Path) -> str:
    """The stored secret, or a ConfigError naming the file: never a new one, which would orphan every claim."""
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _unusable_secret_file(path, f"cannot be read ({type(exc).__name__})") from exc
    if not secret:
        raise _unusable_secret_file(path, "is empty")
    if len(secret) < MIN_SECRET_LENGTH:
        raise _unusable_secret_file(path, f"is shorter than {MIN_SECRET_LENGTH} characters")
    return secret


def _unusable_secret_file(path: Path, problem: str) -> ConfigError:
    return ConfigError(
        "ONCEGATE_KEY_SECRET",
        f"unset, and the local secret file {path} {problem}; restore it from the backup that goes with the database, "
        "or set ONCEGATE_KEY_SECRET to the secret it held. Delete it only if the database holds no claims: "
        "a new secret orphans every claim.",
    )
