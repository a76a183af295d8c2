"""The one place that wires settings to a store and the services over it.

:func:`wire` builds every service over one store, once; the entry points are given the bundle
(:class:`Services`) and each action calls the one service it needs. The services a Check and claim does
not use (results, retention, attention, key secrets, the bulk calls' own, Perform once, targets) are built, and their
modules imported, when first asked for: a new process answers its first claim without them (issue 36's cold start).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from oncegate.config import DEFAULT_BULK_CONCURRENCY, ConfigError, Settings, StoreKind
from oncegate.cursors import CursorSeal
from oncegate.domain.copies import frozen
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.sensitive import SensitivePolicy
from oncegate.entrypoints.parse import SensitiveDataGuard
from oncegate.errors import StoreUnavailable
from oncegate.service.claims import Claims
from oncegate.service.conflicts import Conflicts
from oncegate.service.core import ClaimsCore, utc_now
from oncegate.service.inventory import FLUSH_INTERVAL, REGISTRY_TTL, Inventory
from oncegate.service.safeguard import CHECK_INTERVAL, PinnedFile, PinnedSetting, Safeguard, StoreIdPin
from oncegate.service.waits import Waits
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore

if TYPE_CHECKING:
    from oncegate.domain.targets import Target, TargetCall, TargetCalls, TargetReply
    from oncegate.service.attention import Attention
    from oncegate.service.bulk import Bulk
    from oncegate.service.key_secrets import KeySecrets
    from oncegate.service.new_claims import NewClaims
    from oncegate.service.perform import Perform
    from oncegate.service.results import Results
    from oncegate.service.retention import Retention
    from oncegate.service.targets import Targets

_lock = threading.Lock()
# The process's settings once read and its services once built (None before: :func:`get_settings` and
# :func:`get_services` read and build them): what the HTTP pipeline takes on every later request without
# calling in here, as the wiring is done once a process.
settings_read: Settings | None = None
services_built: Services | None = None
# Beside a SQLite database ``oncegate.db``: ``oncegate.store-id``, a name that ``rm oncegate.db*`` (the
# database and its -wal and -shm files) leaves in place.
STORE_ID_SUFFIX = ".store-id"


def build_store(settings: Settings, *, read_only: bool = False) -> ClaimStore:
    """The store the settings name; ``read_only`` opens Table Storage without making a table or repairing a row
    (what an export needs: Storage Table Data Reader alone may not make even a table that exists)."""
    if settings.store is StoreKind.SQLITE:
        return SqliteStore(settings.sqlite_path)
    # Imported here so the embedded default runs without touching the Azure SDK.
    from oncegate.stores.tables.store import TableStore

    if settings.tables_connection_string:
        return TableStore.from_connection_string(
            settings.tables_connection_string, prefix=settings.table_prefix, read_only=read_only
        )
    from azure.identity import DefaultAzureCredential

    assert settings.tables_endpoint is not None
    return TableStore.from_endpoint(
        settings.tables_endpoint, DefaultAzureCredential(), prefix=settings.table_prefix, read_only=read_only
    )


def key_secret(settings: Settings) -> str:
    """The secret business keys are hashed with, and the cursor seal's key is derived from."""
    if settings.key_secret:
        return settings.key_secret
    # The key-secret file stands in for the setting on SQLite alone: a store whose secret is set never reads it.
    from oncegate.local_secret import local_key_secret

    lost = lost_key_secret(settings)
    if lost is not None:
        raise ConfigError(
            "ONCEGATE_KEY_SECRET", f"no key-secret file {lost.resolve()} beside the database: {LOST_SECRET}"
        )
    return local_key_secret(settings.sqlite_path)


LOST_SECRET = (
    "the secret its claims were made with is kept there. After a restore or a move to another machine, put back the "
    "key-secret file that was beside it (or set ONCEGATE_KEY_SECRET to its content)."
)


def lost_key_secret(settings: Settings) -> Path | None:
    """The key-secret file a SQLite database's claims were made with, when it is not beside it; else None.

    The database holds the check values of the secrets it was used with (an import brings them too): a new
    secret made beside it would be none of them, and the app would refuse every claim with a wrong file to find
    and replace. A database made by ``store init`` alone holds none, and gets its secret at its first request.
    """
    if settings.store is not StoreKind.SQLITE or settings.key_secret is not None:
        return None
    from oncegate.local_secret import SECRET_FILE_NAME

    path = settings.sqlite_path.parent / SECRET_FILE_NAME
    if os.path.lexists(path) or not settings.sqlite_path.is_file():
        return None
    store = SqliteStore(settings.sqlite_path)
    try:
        used = store.read_marks().secrets
    finally:
        store.close()
    return path if used else None


def key_ring(settings: Settings, secret: str) -> KeyRing:
    """The current secret, and the other one while a rotation is under way."""
    previous, next_ = settings.key_secret_previous, settings.key_secret_next
    return KeyRing(
        KeyHasher(secret),
        previous=KeyHasher(previous) if previous else None,
        next_=KeyHasher(next_) if next_ else None,
    )


class _Later:
    """The services a Check and claim does not use, each built (its module imported) when first asked for, once."""

    def __init__(self, builds: Mapping[str, Callable[[], Any]]) -> None:
        self._builds = builds
        self._built: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Any:
        built = self._built.get(name)
        if built is None:
            with self._lock:
                built = self._built.get(name)
                if built is None:
                    built = self._built[name] = self._builds[name]()
        return built

    def built(self, name: str) -> Any:
        """The service if it was built, else None."""
        return self._built.get(name)


@frozen
class Services:
    """Every service over one store, built once by :func:`wire`; an entry point calls the one it needs.

    Those a Check and claim does not use are properties, each built at its first use (:class:`_Later`).
    """

    claims: Claims
    waits: Waits
    conflicts: Conflicts
    inventory: Inventory
    store: ClaimStore
    # What a request stores besides its key, checked at the edge before the service is called.
    sensitive_data: SensitiveDataGuard
    # The seal on the cursors, poll addresses and trigger states the HTTP edge hands out, from the key secrets.
    cursor_seal: CursorSeal
    _later: _Later = field(repr=False, compare=False)
    # Where the store is (settings.store_location), for health; None for services wired by hand.
    store_location: str | None = None

    @property
    def results(self) -> Results:
        """What the run holding a claim reports (Record result, Release, Heartbeat) and a reviewer's review."""
        return cast("Results", self._later.get("results"))

    @property
    def attention(self) -> Attention:
        """Governance: the claims that need a person."""
        return cast("Attention", self._later.get("attention"))

    @property
    def retention(self) -> Retention:
        """The deletion of finished claims after their retention (the claims that need a person: ``attention``)."""
        return cast("Retention", self._later.get("retention"))

    @property
    def key_secrets(self) -> KeySecrets:
        return cast("KeySecrets", self._later.get("key_secrets"))

    @property
    def bulk(self) -> Bulk:
        """Bulk calls (issue 24): the items of one request, applied through claims and results."""
        return cast("Bulk", self._later.get("bulk"))

    @property
    def new_claims(self) -> NewClaims:
        """Check and claim many's new keys, claimed together where the store writes one at a time (issue 36)."""
        return cast("NewClaims", self._later.get("new_claims"))

    @property
    def perform(self) -> Perform:
        """Perform once (issue 34): the call OnceGate makes itself, over claims and waits."""
        return cast("Perform", self._later.get("perform"))

    @property
    def targets(self) -> Targets:
        """The targets operators declared for Perform once (issue 34)."""
        return cast("Targets", self._later.get("targets"))

    def close(self) -> None:
        """Let the bulk calls under way finish, flush the inventory's counts, then close the store."""
        bulk = self._later.built("bulk")
        if bulk is not None:
            bulk.close()
        self.inventory.close()
        self.store.close()


def wire(
    store: ClaimStore,
    keys: KeyHasher | KeyRing,
    *,
    clock: Callable[[], datetime] = utc_now,
    sensitive_keys: SensitivePolicy = SensitivePolicy.REJECT,
    sensitive_data: SensitivePolicy | None = None,
    require_registered_flows: bool = False,
    registry_ttl: timedelta = REGISTRY_TTL,
    flush_interval: timedelta = FLUSH_INTERVAL,
    unknown_alert: timedelta | None = None,
    store_location: str | None = None,
    pin: StoreIdPin | None = None,
    wall_clock: Callable[[], datetime] | None = None,
    check_interval: timedelta = CHECK_INTERVAL,
    bulk_concurrency: int = DEFAULT_BULK_CONCURRENCY,
    targets_allow_loopback: bool = False,
    target_calls: TargetCalls | None = None,
) -> Services:
    """The services over ``store``, sharing one inventory and one core (keys, clock, sensitive-data policies)."""
    # Everything else a request stores (oncegate.entrypoints.parse): the key's policy unless it has its own.
    data_policy = sensitive_keys if sensitive_data is None else sensitive_data
    data_guard = SensitiveDataGuard(data_policy)
    # The flow inventory and scope catalogue: registrations cached for ``registry_ttl``, counts
    # flushed every ``flush_interval`` (see oncegate.service.inventory).
    inventory = Inventory(
        store,
        clock=clock,
        ttl=registry_ttl,
        flush_interval=flush_interval,
        require_registered=require_registered_flows,
    )
    ring = keys if isinstance(keys, KeyRing) else KeyRing(keys)
    # The key secrets, the store's id and its clock, checked every ``check_interval`` (oncegate.service.safeguard).
    safeguard = Safeguard(
        store,
        ring,
        clock=clock,
        wall_clock=wall_clock,
        pin=pin,
        interval=check_interval,
    )
    core = ClaimsCore(
        store,
        safeguard,
        clock=clock,
        inventory=inventory,
        sensitive_keys=sensitive_keys,
        sensitive_data=data_policy,
    )
    conflicts = Conflicts(core, store)
    claims = Claims(core, conflicts, store)
    waits = Waits(core, claims)

    def results() -> Results:
        from oncegate.service.results import Results

        return Results(core, store)

    def attention() -> Attention:
        from oncegate.service.attention import UNKNOWN_ALERT, Attention

        return Attention(store, clock=clock, unknown_alert=unknown_alert or UNKNOWN_ALERT)

    def key_secrets() -> KeySecrets:
        from oncegate.service.key_secrets import KeySecrets

        return KeySecrets(store, clock=clock, pin=pin)

    def bulk() -> Bulk:
        from oncegate.service.bulk import Bulk

        return Bulk(store, ready=core.require_safe_store, concurrency=bulk_concurrency)

    def new_claims() -> NewClaims:
        from oncegate.service.new_claims import NewClaims

        return NewClaims(core, store)

    def perform() -> Perform:
        from oncegate.entrypoints.parse import value_findings
        from oncegate.service.perform import Perform

        calls = target_calls or _loopback_calls(targets_allow_loopback)
        return Perform(
            core, claims, waits, store, targets=store, calls=calls, data_check=value_findings, data_policy=data_policy
        )

    def retention() -> Retention:
        from oncegate.service.retention import Retention

        return Retention(store, inventory, clock=clock)

    def targets() -> Targets:
        from oncegate.service.targets import Targets

        return Targets(store, clock=clock, allow_loopback=targets_allow_loopback)

    return Services(
        claims=claims,
        waits=waits,
        conflicts=conflicts,
        inventory=inventory,
        store=store,
        sensitive_data=data_guard,
        cursor_seal=CursorSeal.of(ring),
        _later=_Later(
            {
                "results": results,
                "attention": attention,
                "retention": retention,
                "key_secrets": key_secrets,
                "bulk": bulk,
                "new_claims": new_claims,
                "perform": perform,
                "targets": targets,
            }
        ),
        store_location=store_location,
    )


def _loopback_calls(allow_loopback: bool) -> TargetCalls:
    """The adapter for services wired by hand (tests, tools): no secrets, no identity."""
    from oncegate.outbound.targets_http import HttpTargets

    return HttpTargets(allow_loopback=allow_loopback)


def build_services(settings: Settings, *, secret: str | None = None) -> Services:
    """The services over the store the settings name."""
    return wire(
        build_store(settings),
        key_ring(settings, secret or key_secret(settings)),
        sensitive_keys=settings.sensitive_keys,
        sensitive_data=settings.sensitive_data,
        require_registered_flows=settings.require_registered_flows,
        unknown_alert=timedelta(minutes=settings.unknown_alert_minutes),
        store_location=settings.store_location,
        pin=store_pin(settings),
        bulk_concurrency=settings.bulk_concurrency,
        targets_allow_loopback=settings.targets_allow_loopback,
        target_calls=target_calls(settings),
    )


def target_calls(settings: Settings) -> TargetCalls:
    """The one adapter that reaches the declared targets (issue 34): secrets read by the app's identity through their
    settings, or on SQLite from ``target-secrets/`` beside the database; tokens from the app's managed identity.

    Built at its first call: a process that never performs once imports neither the adapter nor the Azure
    credential, and its first Check and claim does not pay for them (issue 36's cold start).
    """
    return _BuiltOnFirstCall(lambda: _http_targets(settings))


class _BuiltOnFirstCall:
    """A :class:`TargetCalls` that builds the adapter it stands for when it is first called, once."""

    def __init__(self, build: Callable[[], TargetCalls]) -> None:
        self._build = build
        self._built: TargetCalls | None = None
        self._lock = threading.Lock()

    def call(self, target: Target, request: TargetCall) -> TargetReply:
        if self._built is None:
            with self._lock:
                if self._built is None:
                    self._built = self._build()
        return self._built.call(target, request)


def _http_targets(settings: Settings) -> TargetCalls:
    from oncegate.outbound.target_secrets import LOCAL_FOLDER, identity_tokens, secret_reader
    from oncegate.outbound.targets_http import HttpTargets

    folder = settings.sqlite_path.parent / LOCAL_FOLDER if settings.store is StoreKind.SQLITE else None
    return HttpTargets(
        allow_loopback=settings.targets_allow_loopback, secrets=secret_reader(folder=folder), tokens=identity_tokens()
    )


def store_pin(settings: Settings) -> StoreIdPin:
    """Where the store's id is kept outside the store: the setting, else (SQLite) a file beside the database."""
    if settings.store_id is None and settings.store is StoreKind.SQLITE:
        return PinnedFile(settings.sqlite_path.with_name(settings.sqlite_path.stem + STORE_ID_SUFFIX))
    return PinnedSetting(settings.store_id)


def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use (then :data:`settings_read`)."""
    global settings_read
    settings = settings_read
    if settings is not None:
        return settings
    with _lock:
        if settings_read is None:
            settings_read = Settings.from_environment()
        return settings_read


def get_services() -> Services:
    """The process-wide services, built from the settings on first use (then :data:`services_built`)."""
    global services_built
    services = services_built
    if services is not None:
        return services
    settings = get_settings()
    with _lock:
        if services_built is None:
            secret = key_secret(settings)
            try:
                services_built = build_services(settings, secret=secret)
            except StoreUnavailable as exc:
                # Table Storage is reached while the store is built: say which store did not answer.
                where = " Check ONCEGATE_SQLITE_PATH." if settings.store is StoreKind.SQLITE else ""
                said = exc.message if exc.message.endswith(".") else f"{exc.message}."
                raise StoreUnavailable(f"The store ({settings.store_text}) does not answer: {said}{where}") from exc
            # The inventory's counts of the last interval reach the store when the worker shuts down.
            atexit.register(services_built.close)
        return services_built


def get_cursor_seal() -> CursorSeal:
    """The seal of the cursors the HTTP layer hands out, keyed from the services' secrets."""
    return get_services().cursor_seal


def use_services(services: Services | None, *, settings: Settings | None = None) -> None:
    """Serve these services (and these settings) from now on; None rebuilds from the environment."""
    global services_built, settings_read
    with _lock:
        services_built = services
        settings_read = settings
