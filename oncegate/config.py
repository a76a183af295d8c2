"""Settings, read once from the environment and checked before the first request.

A missing or contradictory setting raises ``ConfigError`` naming it, so the host logs one
clear line at start-up instead of a stack trace on the first request; the app still loads, and
health and every action answer ``503 not_configured`` naming the setting (``function_app.py``).
The embedded store's key-secret file, which stands in for ONCEGATE_KEY_SECRET when it is unset, is
:mod:`oncegate.local_secret`'s.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit
from uuid import UUID

from oncegate.domain.copies import frozen
from oncegate.domain.keys import MIN_SECRET_LENGTH
from oncegate.domain.sensitive import SensitivePolicy

DEFAULT_SQLITE_PATH = ".oncegate/oncegate.db"
DEFAULT_TABLE_PREFIX = "OnceGate"
DEFAULT_UNKNOWN_ALERT_MINUTES = 15
MAX_UNKNOWN_ALERT_MINUTES = 7 * 24 * 60
# Threads per instance that apply the items of bulk calls on Table Storage (issue 24); see oncegate.service.bulk.
DEFAULT_BULK_CONCURRENCY = 8
MAX_BULK_CONCURRENCY = 64
# Table names are 3-63 letters and digits starting with a letter; the longest suffix is "Conflicts". Every start
# checks the prefix (_is_table_prefix), with string methods rather than this pattern: compiling it was a new process's.
TABLE_PREFIX_PATTERN = r"[A-Za-z][A-Za-z0-9]{0,49}"
# The shapes below are compiled (re's cache) where a setting holding one is first read: a store id is set beside some
# stores only, a tenant in Entra ID mode alone, and a new process compiles no pattern its first claim never matches.
STORE_ID_PATTERN = r"[A-Za-z0-9-]{1,64}"


class StoreKind(StrEnum):
    SQLITE = "sqlite"
    TABLES = "tables"


class AuthMode(StrEnum):
    """How callers prove who they are: function keys, or a Microsoft Entra ID access token the app validates."""

    KEY = "key"
    ENTRA = "entra"


class ConfigError(ValueError):
    """A setting is missing, malformed or contradicts another; ``setting`` names it."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting


DEFAULT_ENTRA_AUTHORITY = "https://login.microsoftonline.com"
# Tenant-independent sign-in names: their tokens' issuer is any tenant, so they cannot pin one.
MULTI_TENANT_NAMES = frozenset({"common", "organizations", "consumers"})
TENANT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@frozen
class EntraApi:
    """Entra mode: whose access tokens the app accepts (``oncegate.entrypoints.bearer`` validates them)."""

    tenant_id: str
    client_id: str
    authority: str = DEFAULT_ENTRA_AUTHORITY
    extra_audiences: tuple[str, ...] = ()

    @property
    def audiences(self) -> tuple[str, ...]:
        """A v2 token's ``aud`` is the client id; a v1 token's is the App ID URI the caller asked for."""
        return (self.client_id, f"api://{self.client_id}", *self.extra_audiences)


@frozen
class Settings:
    """Everything the service reads from its environment."""

    store: StoreKind
    sqlite_path: Path
    tables_connection_string: str | None
    tables_endpoint: str | None
    table_prefix: str
    key_secret: str | None
    auth: AuthMode = AuthMode.KEY
    # A rotation (docs/operations.md): the secret being replaced, or the one about to replace it.
    key_secret_previous: str | None = None
    key_secret_next: str | None = None
    sensitive_keys: SensitivePolicy = SensitivePolicy.REJECT
    sensitive_data: SensitivePolicy = SensitivePolicy.REJECT
    require_registered_flows: bool = False
    unknown_alert_minutes: int = DEFAULT_UNKNOWN_ALERT_MINUTES
    bulk_concurrency: int = DEFAULT_BULK_CONCURRENCY
    # The id of the store this app serves, kept outside it: a wiped or replaced store is refused (issue 22).
    store_id: str | None = None
    entra: EntraApi | None = None
    # Plain http and loopback targets (issue 34): local development and tests only, never in Azure.
    targets_allow_loopback: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, *, hashes_keys: bool = True) -> Settings:
        """The settings the environment gives; ``hashes_keys`` False for a command that reads no claim (``store
        init``), which needs no key secret on Table Storage."""
        env = os.environ if environ is None else environ

        def read(name: str) -> str | None:
            value = env.get(name, "").strip()
            return value or None

        settings = cls(
            store=_store_kind(read("ONCEGATE_STORE")),
            sqlite_path=Path(read("ONCEGATE_SQLITE_PATH") or DEFAULT_SQLITE_PATH),
            tables_connection_string=read("ONCEGATE_TABLES_CONNECTION_STRING"),
            tables_endpoint=read("ONCEGATE_TABLES_ENDPOINT"),
            table_prefix=read("ONCEGATE_TABLE_PREFIX") or DEFAULT_TABLE_PREFIX,
            key_secret=read("ONCEGATE_KEY_SECRET"),
            key_secret_previous=read("ONCEGATE_KEY_SECRET_PREVIOUS"),
            key_secret_next=read("ONCEGATE_KEY_SECRET_NEXT"),
            auth=_auth_mode(read("ONCEGATE_AUTH")),
            sensitive_keys=_sensitive_policy("ONCEGATE_SENSITIVE_KEYS", read("ONCEGATE_SENSITIVE_KEYS")),
            # What is stored follows the key's policy unless it has its own (docs/operations.md, Settings).
            sensitive_data=_sensitive_policy(
                "ONCEGATE_SENSITIVE_DATA", read("ONCEGATE_SENSITIVE_DATA") or read("ONCEGATE_SENSITIVE_KEYS")
            ),
            require_registered_flows=_flag(
                "ONCEGATE_REQUIRE_REGISTERED_FLOWS", read("ONCEGATE_REQUIRE_REGISTERED_FLOWS")
            ),
            unknown_alert_minutes=_unknown_alert_minutes(read("ONCEGATE_UNKNOWN_ALERT_MINUTES")),
            bulk_concurrency=_bulk_concurrency(read("ONCEGATE_BULK_CONCURRENCY")),
            store_id=_store_id(read("ONCEGATE_STORE_ID")),
            targets_allow_loopback=_flag("ONCEGATE_TARGETS_ALLOW_LOOPBACK", read("ONCEGATE_TARGETS_ALLOW_LOOPBACK")),
        )
        settings._validate(hashes_keys=hashes_keys)
        if settings.auth is AuthMode.ENTRA:
            # Read in Entra mode only: key mode ignores them, as the Bicep deploys them empty there.
            settings = replace(settings, entra=_entra_api(read))
        return settings

    @property
    def store_location(self) -> str:
        """Where the store is: the SQLite file's absolute path, or the Table Storage endpoint; never a secret."""
        if self.store is StoreKind.SQLITE:
            return str(self.sqlite_path.resolve())
        return self.tables_endpoint or _account_url(self.tables_connection_string or "")

    @property
    def store_text(self) -> str:
        """The store for people, e.g. ``sqlite at /srv/oncegate/.oncegate/oncegate.db``."""
        prefix = f", tables {self.table_prefix}*" if self.store is StoreKind.TABLES else ""
        return f"{self.store.value} at {self.store_location}{prefix}"

    def _validate(self, *, hashes_keys: bool) -> None:
        secrets_given = {
            "ONCEGATE_KEY_SECRET": self.key_secret,
            "ONCEGATE_KEY_SECRET_PREVIOUS": self.key_secret_previous,
            "ONCEGATE_KEY_SECRET_NEXT": self.key_secret_next,
        }
        for setting, secret in secrets_given.items():
            _check_secret(setting, secret)
        self._validate_rotation()
        if not _is_table_prefix(self.table_prefix):
            raise ConfigError("ONCEGATE_TABLE_PREFIX", "must be 1-50 letters and digits, starting with a letter.")
        if self.store is StoreKind.TABLES:
            self._validate_tables(hashes_keys=hashes_keys)
            return
        _check_sqlite_folder(self.sqlite_path)
        if self.key_secret is None:
            # Imported here: the file's module raises this module's ConfigError.
            from oncegate.local_secret import check_local_secret

            # Refused at start with one line, not as a 500 on the first request that builds the service.
            check_local_secret(self.sqlite_path)

    def _validate_rotation(self) -> None:
        if (self.key_secret_previous or self.key_secret_next) and self.key_secret is None:
            # On SQLite the key-secret file stands in for the setting, but a rotation names each of its secrets.
            from oncegate.local_secret import SECRET_FILE_NAME

            beside = self.sqlite_path.parent / SECRET_FILE_NAME
            where = f" (on SQLite, the file's content: {beside})" if self.store is StoreKind.SQLITE else ""
            raise ConfigError("ONCEGATE_KEY_SECRET", f"a rotation needs the current secret set as well{where}.")
        if self.key_secret_previous and self.key_secret_next:
            raise ConfigError(
                "ONCEGATE_KEY_SECRET_NEXT", "set either it or ONCEGATE_KEY_SECRET_PREVIOUS: a rotation has two secrets."
            )
        other = self.key_secret_previous or self.key_secret_next
        if other is not None and other == self.key_secret:
            setting = "ONCEGATE_KEY_SECRET_PREVIOUS" if self.key_secret_previous else "ONCEGATE_KEY_SECRET_NEXT"
            raise ConfigError(setting, "is the same as ONCEGATE_KEY_SECRET.")

    def _validate_tables(self, *, hashes_keys: bool) -> None:
        if self.tables_connection_string and self.tables_endpoint:
            raise ConfigError(
                "ONCEGATE_TABLES_ENDPOINT", "set either it or ONCEGATE_TABLES_CONNECTION_STRING, not both."
            )
        if not (self.tables_connection_string or self.tables_endpoint):
            raise ConfigError(
                "ONCEGATE_TABLES_ENDPOINT",
                "ONCEGATE_STORE=tables needs ONCEGATE_TABLES_ENDPOINT (managed identity) "
                "or ONCEGATE_TABLES_CONNECTION_STRING.",
            )
        if self.tables_endpoint and not self.tables_endpoint.startswith("https://"):
            raise ConfigError("ONCEGATE_TABLES_ENDPOINT", "must be an https:// URL.")
        if self.tables_connection_string:
            # Refused here, at start, not as a 500 on every request that would build the store with it.
            _account_url(self.tables_connection_string)
        if self.key_secret is None and hashes_keys:
            raise ConfigError(
                "ONCEGATE_KEY_SECRET",
                "is required with ONCEGATE_STORE=tables: every instance must hash keys with the same secret.",
            )


def _check_sqlite_folder(path: Path) -> None:
    """The database's folder is a folder, or can be made one: not a path under a file (a 500 on the first request).

    Nor the folder itself (``.oncegate`` for ``.oncegate/oncegate.db``): the store took it for its database file,
    answered as if it were down, and made it readable by its owner only, mode 0600, a folder nobody could enter.
    """
    if path.is_dir():
        raise ConfigError(
            "ONCEGATE_SQLITE_PATH",
            f"is the folder {path.resolve()}: name the database file in it, such as {path / 'oncegate.db'}.",
        )
    for folder in path.resolve().parents:
        if folder.exists():
            if not folder.is_dir():
                raise ConfigError("ONCEGATE_SQLITE_PATH", f"is under {folder}, which is a file, not a folder.")
            return


def _is_table_prefix(value: str) -> bool:
    """Whether ``value`` is TABLE_PREFIX_PATTERN entire: 1-50 ASCII letters and digits, a letter first."""
    return 0 < len(value) <= 50 and value.isascii() and value.isalnum() and value[0].isalpha()


def _store_id(value: str | None) -> str | None:
    if value is not None and not re.fullmatch(STORE_ID_PATTERN, value):
        raise ConfigError(
            "ONCEGATE_STORE_ID",
            "must be 1-64 letters, digits and dashes: the store id `oncegate store init` printed (`oncegate keys` "
            "shows it too).",
        )
    return value


def _check_secret(setting: str, secret: str | None) -> None:
    if secret is None:
        return
    if secret.startswith("@Microsoft.KeyVault("):
        # The platform hands the reference over verbatim when it cannot read the vault; hashing keys with
        # that text would orphan every claim made until the reference resolves.
        raise ConfigError(setting, "the Key Vault reference did not resolve; check the app's access.")
    if len(secret) < MIN_SECRET_LENGTH:
        raise ConfigError(setting, f"must be at least {MIN_SECRET_LENGTH} characters.")


def _account_url(connection_string: str) -> str:
    """The Table Storage endpoint a connection string names, without its query (a SAS would be there)."""
    # Only with ONCEGATE_STORE=tables: the embedded default runs without loading the Azure SDK.
    from azure.data.tables import TableServiceClient

    try:
        url = TableServiceClient.from_connection_string(connection_string).url
    except ValueError as exc:
        # Never the value, nor the SDK's words about it: the string holds the account key.
        raise ConfigError(
            "ONCEGATE_TABLES_CONNECTION_STRING",
            "is not a storage account connection string: give the account's "
            "(DefaultEndpointsProtocol=https;AccountName=...;AccountKey=...;EndpointSuffix=core.windows.net), "
            "UseDevelopmentStorage=true for Azurite, or set ONCEGATE_TABLES_ENDPOINT instead.",
        ) from exc
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def _store_kind(value: str | None) -> StoreKind:
    try:
        return StoreKind((value or StoreKind.SQLITE.value).lower())
    except ValueError as exc:
        raise ConfigError("ONCEGATE_STORE", f"must be 'sqlite' or 'tables', not {value!r}.") from exc


def _auth_mode(value: str | None) -> AuthMode:
    try:
        return AuthMode((value or AuthMode.KEY.value).lower())
    except ValueError as exc:
        raise ConfigError("ONCEGATE_AUTH", f"must be 'key' or 'entra', not {value!r}.") from exc


def _sensitive_policy(setting: str, value: str | None) -> SensitivePolicy:
    try:
        return SensitivePolicy((value or SensitivePolicy.REJECT.value).lower())
    except ValueError as exc:
        raise ConfigError(setting, f"must be 'reject', 'warn' or 'off', not {value!r}.") from exc


def _flag(setting: str, value: str | None) -> bool:
    """A true/false setting, false when unset."""
    text = (value or "false").lower()
    if text not in ("true", "false"):
        raise ConfigError(setting, f"must be 'true' or 'false', not {value!r}.")
    return text == "true"


def _bulk_concurrency(value: str | None) -> int:
    """How many items of bulk calls an instance applies at once on Table Storage: 1 to 64, 8 when unset."""
    if value is None:
        return DEFAULT_BULK_CONCURRENCY
    if not value.isdigit() or not 1 <= int(value) <= MAX_BULK_CONCURRENCY:
        raise ConfigError(
            "ONCEGATE_BULK_CONCURRENCY", f"must be a whole number from 1 to {MAX_BULK_CONCURRENCY}, not {value!r}."
        )
    return int(value)


def _unknown_alert_minutes(value: str | None) -> int:
    """After how many minutes an unknown outcome needs attention: 1 to a week, 15 when unset."""
    if value is None:
        return DEFAULT_UNKNOWN_ALERT_MINUTES
    if not value.isdigit() or not 1 <= int(value) <= MAX_UNKNOWN_ALERT_MINUTES:
        raise ConfigError(
            "ONCEGATE_UNKNOWN_ALERT_MINUTES",
            f"must be a whole number of minutes from 1 to {MAX_UNKNOWN_ALERT_MINUTES}, not {value!r}.",
        )
    return int(value)


def read_auth_mode(environ: Mapping[str, str] | None = None) -> AuthMode | None:
    """ONCEGATE_AUTH read on its own, None when it is unreadable: the gate of an app whose other settings are not."""
    value = (os.environ if environ is None else environ).get("ONCEGATE_AUTH", "").strip()
    try:
        return _auth_mode(value or None)
    except ConfigError:
        return None


def _entra_api(read: Callable[[str], str | None]) -> EntraApi:
    """The Entra mode settings: the tenant and API whose tokens are accepted, and where its keys are published."""
    tenant = read("ONCEGATE_ENTRA_TENANT_ID")
    if tenant is None or not re.fullmatch(TENANT_PATTERN, tenant) or tenant.lower() in MULTI_TENANT_NAMES:
        raise ConfigError(
            "ONCEGATE_ENTRA_TENANT_ID",
            f"ONCEGATE_AUTH=entra needs the tenant id (a GUID) or domain, not {tenant!r}: only its tokens pass.",
        )
    client_id = read("ONCEGATE_ENTRA_CLIENT_ID")
    if client_id is None or not _is_guid(client_id):
        raise ConfigError(
            "ONCEGATE_ENTRA_CLIENT_ID",
            f"ONCEGATE_AUTH=entra needs the application (client) id of the API's app registration, not {client_id!r}.",
        )
    authority = (read("ONCEGATE_ENTRA_AUTHORITY") or DEFAULT_ENTRA_AUTHORITY).rstrip("/")
    parts = urlsplit(authority)
    # Plain http only on this machine (a test's or a developer's key server): elsewhere it would let anyone
    # on the path swap the keys tokens are checked with.
    secure = parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)
    if not (secure and parts.hostname and not parts.path and not parts.query and not parts.fragment):
        raise ConfigError(
            "ONCEGATE_ENTRA_AUTHORITY",
            f"must be the https:// sign-in host, such as {DEFAULT_ENTRA_AUTHORITY}, not {authority!r}.",
        )
    audiences = tuple(item.strip() for item in (read("ONCEGATE_ENTRA_AUDIENCES") or "").split(",") if item.strip())
    return EntraApi(tenant_id=tenant, client_id=client_id, authority=authority, extra_audiences=audiences)


def _is_guid(value: str) -> bool:
    try:
        UUID(value)
    except ValueError:
        return False
    return True
