"""Target secrets and tokens, read by the app's own identity and never stored (issue 34).

A target's declaration names its secret (``secret:HEADER=oncegate-target-NAME``), never holds it. The app
reads it as it reads the key secret: in Azure, from the app setting
:func:`~oncegate.domain.target_declarations.secret_setting` names, a Key Vault reference the platform resolves
with the app's identity (the template grants that identity read access to each target secret, one by one);
locally, from a file of the secret's name in ``target-secrets/`` beside the SQLite database, readable by
its owner only. An ``identity:AUDIENCE`` target gets a token for ``AUDIENCE`` from the app's credential.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oncegate.domain.target_declarations import secret_setting
from oncegate.outbound.targets_http import Unavailable

LOCAL_FOLDER = "target-secrets"
KEY_VAULT_REFERENCE = "@Microsoft.KeyVault("


def secret_reader(*, environ: Mapping[str, str] = os.environ, folder: Path | None = None) -> Callable[[str], str]:
    """A function that reads a target secret by name, or raises ``Unavailable`` saying where to put it.

    ``folder`` is the local secrets folder (``target-secrets`` beside the SQLite database), None on Table Storage.
    """

    def read(name: str) -> str:
        setting = secret_setting(name)
        value = environ.get(setting, "").strip()
        if value.startswith(KEY_VAULT_REFERENCE):
            raise Unavailable(
                f"{setting} is a Key Vault reference the platform did not resolve: grant the app read access"
            )
        if value:
            return value
        where = f"the setting {setting}"
        if folder is not None:
            path = folder / name
            where += f" or the file {path}"
            try:
                # Windows has no group and other bits to clear: its st_mode says 0o666 of every writable file.
                if os.name == "posix" and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                    raise Unavailable(f"{path} is readable by others: chmod 600 it")
                text = path.read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                text = ""
            except OSError as exc:
                raise Unavailable(f"{path} could not be read: {exc.strerror}") from None
            if text:
                return text
        raise Unavailable(f"the secret {name} is not set: put it in {where}")

    return read


def identity_tokens(credential: Any = None) -> Callable[[str], str]:
    """A function that gets an access token for an audience from ``credential``, by default the app's own identity
    (``DefaultAzureCredential``, made on first use); raises ``Unavailable`` when none can be had."""
    made: list[Any] = [credential] if credential is not None else []

    def token(audience: str) -> str:
        scope = audience.rstrip("/") + "/.default"
        try:
            if not made:
                from azure.identity import DefaultAzureCredential

                made.append(DefaultAzureCredential())
            return str(made[0].get_token(scope).token)
        except Exception as exc:  # the credential's own errors, whichever library made them
            raise Unavailable(f"no token for {audience}: {type(exc).__name__}") from None

    return token
