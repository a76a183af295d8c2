"""The one place that wires settings to a store and the claim service."""

from __future__ import annotations

import atexit
import secrets
import threading
from datetime import timedelta

from oncegate.config import Settings, StoreKind, local_key_secret
from oncegate.cursors import CursorSeal
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.service.claims import ClaimService
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore

_lock = threading.Lock()
_service: ClaimService | None = None
_settings: Settings | None = None
_cursor_seal: CursorSeal | None = None


def build_store(settings: Settings) -> ClaimStore:
    if settings.store is StoreKind.SQLITE:
        return SqliteStore(settings.sqlite_path)
    # Imported here so the embedded default runs without touching the Azure SDK.
    from oncegate.stores.tables import TableStore

    if settings.tables_connection_string:
        return TableStore.from_connection_string(settings.tables_connection_string, prefix=settings.table_prefix)
    from azure.identity import DefaultAzureCredential

    assert settings.tables_endpoint is not None
    return TableStore.from_endpoint(settings.tables_endpoint, DefaultAzureCredential(), prefix=settings.table_prefix)


def key_secret(settings: Settings) -> str:
    """The secret business keys are hashed with, and the cursor seal's key is derived from."""
    return settings.key_secret or local_key_secret(settings.sqlite_path)


def key_ring(settings: Settings, secret: str) -> KeyRing:
    """The current secret, and the other one while a rotation is under way."""
    previous, next_ = settings.key_secret_previous, settings.key_secret_next
    return KeyRing(
        KeyHasher(secret),
        previous=KeyHasher(previous) if previous else None,
        next_=KeyHasher(next_) if next_ else None,
    )


def build_service(settings: Settings, *, secret: str | None = None) -> ClaimService:
    return ClaimService(
        build_store(settings),
        key_ring(settings, secret or key_secret(settings)),
        sensitive_keys=settings.sensitive_keys,
        sensitive_data=settings.sensitive_data,
        require_registered_flows=settings.require_registered_flows,
        unknown_alert=timedelta(minutes=settings.unknown_alert_minutes),
    )


def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    global _settings
    with _lock:
        if _settings is None:
            _settings = Settings.from_environment()
        return _settings


def get_service() -> ClaimService:
    """The process-wide service, built from the settings on first use."""
    global _service, _cursor_seal
    settings = get_settings()
    with _lock:
        if _service is None:
            secret = key_secret(settings)
            _service = build_service(settings, secret=secret)
            _cursor_seal = CursorSeal.from_secret(secret)
            # The inventory's counts of the last interval reach the store when the worker shuts down.
            atexit.register(_service.close)
        return _service


def get_cursor_seal() -> CursorSeal:
    """The seal of the cursors the HTTP layer hands out, keyed from the service's secret."""
    global _cursor_seal
    get_service()
    with _lock:
        if _cursor_seal is None:
            # A service wired in by hand (tests, the drill) came without its secret: cursors are then
            # good in this process only, which is all such a service serves.
            _cursor_seal = CursorSeal(secrets.token_bytes(32))
        return _cursor_seal


def use_service(service: ClaimService | None, *, settings: Settings | None = None) -> None:
    """Serve this service (and these settings) from now on; None rebuilds from the environment."""
    global _service, _settings, _cursor_seal
    with _lock:
        _service = service
        _settings = settings
        _cursor_seal = None
