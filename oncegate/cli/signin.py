"""Signing the ``oncegate`` command in to Microsoft Entra ID with MSAL, for ``--entra``.

A person signs in with the device code flow, through the CLI's public client app
registration; automation signs in with client credentials when ``ONCEGATE_CLIENT_SECRET``
is set. Either way the token cache on disk is asked first, so a person signs in once and
then not again until the refresh token expires. The cache holds refresh tokens: it is one
file readable by its owner only.

The MSAL application comes from an ``AppFactory``, so tests hand in a fake and never reach
the network.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from oncegate.cli.client import SignInError, Unreachable
from oncegate.domain.copies import frozen

DEFAULT_CACHE_PATH = Path("~/.oncegate/msal-cache.json")
AUTHORITY_HOST = "https://login.microsoftonline.com"
OWNER_ONLY = 0o600
Result = dict[str, Any]


class MsalApp(Protocol):
    """What this module calls on an MSAL application.

    ``msal.PublicClientApplication`` has the first four, ``msal.ConfidentialClientApplication``
    the last; which ones are called depends on ``EntraSettings.client_secret``.
    """

    def get_accounts(self) -> list[dict[str, Any]]: ...

    def acquire_token_silent(self, scopes: list[str], account: dict[str, Any]) -> Result | None: ...

    def initiate_device_flow(self, scopes: list[str]) -> Result: ...

    def acquire_token_by_device_flow(self, flow: Result) -> Result: ...

    def acquire_token_for_client(self, scopes: list[str]) -> Result: ...


class TokenCache(Protocol):
    """``msal.SerializableTokenCache`` as far as this module uses it."""

    has_state_changed: bool

    def serialize(self) -> str: ...

    def deserialize(self, state: str) -> None: ...


@frozen
class EntraSettings:
    """Where and as whom to sign in."""

    tenant: str
    client_id: str
    scope: str
    client_secret: str | None = None
    cache_path: Path = DEFAULT_CACHE_PATH

    @classmethod
    def resolve(
        cls, *, tenant: str | None, client_id: str | None, scope: str | None, environ: Mapping[str, str]
    ) -> EntraSettings:
        """Each option as given, else from its environment variable; the client secret only from the environment."""
        tenant = tenant or environ.get("ONCEGATE_TENANT_ID")
        client_id = client_id or environ.get("ONCEGATE_CLIENT_ID")
        scope = scope or environ.get("ONCEGATE_API_SCOPE")
        if not (tenant and client_id and scope):
            options = {"--tenant (ONCEGATE_TENANT_ID)": tenant, "--client-id (ONCEGATE_CLIENT_ID)": client_id}
            options["--api-scope (ONCEGATE_API_SCOPE)"] = scope
            raise SignInError(f"--entra needs {', '.join(name for name, value in options.items() if not value)}.")
        # The app's own rule for ONCEGATE_ENTRA_TENANT_ID, checked before any request: MSAL would put a URL or a
        # name with a space into the authority's address and fail there, as if Entra ID could not be reached.
        from oncegate.config import TENANT_PATTERN

        if not re.fullmatch(TENANT_PATTERN, tenant):
            raise SignInError(
                f"--tenant (ONCEGATE_TENANT_ID) must be the tenant's id (a GUID) or domain, such as "
                f"contoso.onmicrosoft.com, not {tenant!r}."
            )
        return cls(
            tenant=tenant,
            client_id=client_id,
            scope=scope,
            client_secret=environ.get("ONCEGATE_CLIENT_SECRET") or None,
            cache_path=Path(environ.get("ONCEGATE_TOKEN_CACHE") or DEFAULT_CACHE_PATH).expanduser(),
        )

    @property
    def authority(self) -> str:
        return f"{AUTHORITY_HOST}/{self.tenant}"


AppFactory = Callable[[EntraSettings, TokenCache], MsalApp]


def msal_app(settings: EntraSettings, cache: TokenCache) -> MsalApp:
    """The real MSAL application: confidential with a client secret, public (device code) without."""
    import msal  # type: ignore[import-untyped]

    if settings.client_secret:
        app: MsalApp = msal.ConfidentialClientApplication(
            settings.client_id,
            client_credential=settings.client_secret,
            authority=settings.authority,
            token_cache=cache,
        )
    else:
        app = msal.PublicClientApplication(settings.client_id, authority=settings.authority, token_cache=cache)
    return app


def app_scope(scope: str) -> str:
    """Client credentials take the API's ``/.default`` scope: ``api://x/user_impersonation`` becomes ``api://x/.default``."""
    resource, _, _ = scope.rpartition("/")
    if not resource or resource.endswith(("/", ":")):
        # No path after the host (``api://x``) or no slash at all (a bare client id): the scope is the resource.
        resource = scope.rstrip("/")
    return f"{resource}/.default"


def access_token(settings: EntraSettings, app_factory: AppFactory = msal_app) -> str:
    """An access token for the API: from the cache if it holds a usable one, else by signing in."""
    cache = load_cache(settings.cache_path)
    try:
        app = app_factory(settings, cache)
        result = _client_token(app, settings) if settings.client_secret else _user_token(app, settings)
    except ValueError as exc:
        # MSAL raises ValueError for an authority it cannot use (an unknown tenant, for one).
        raise SignInError(f"Cannot sign in at {settings.authority}: {exc}") from exc
    except OSError as exc:
        # Connection failures of the requests library MSAL uses are OSErrors.
        raise Unreachable(f"Cannot reach Microsoft Entra ID at {settings.authority}: {exc}") from exc
    finally:
        if cache.has_state_changed:
            save_cache(cache, settings.cache_path)
    return _token_of(result)


def _client_token(app: MsalApp, settings: EntraSettings) -> Result:
    # acquire_token_for_client looks in the cache itself first (MSAL 1.23+): a silent call has no account to pass.
    return app.acquire_token_for_client(scopes=[app_scope(settings.scope)])


def _user_token(app: MsalApp, settings: EntraSettings) -> Result:
    scopes = [settings.scope]
    for account in app.get_accounts():
        cached = app.acquire_token_silent(scopes, account=account)
        if cached and "access_token" in cached:
            return cached
    flow = app.initiate_device_flow(scopes=scopes)
    if "user_code" not in flow:
        raise SignInError(f"Microsoft Entra ID did not start a device code sign-in: {_why(flow)}")
    print(flow["message"], file=sys.stderr, flush=True)
    return app.acquire_token_by_device_flow(flow)


def _token_of(result: Result) -> str:
    token = result.get("access_token")
    if not token:
        raise SignInError(f"Microsoft Entra ID gave no token: {_why(result)}")
    return str(token)


def _why(result: Result) -> str:
    return f"{result.get('error', 'no error code')}: {result.get('error_description', 'no description')}"


def load_cache(path: Path) -> TokenCache:
    """The token cache kept at ``path``, empty if there is none yet; a file others could read is restricted first."""
    import msal

    cache: TokenCache = msal.SerializableTokenCache()
    try:
        if path.exists():
            _restrict(path)
            cache.deserialize(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        message = f"Cannot read the token cache {path} ({exc}): delete it, or set ONCEGATE_TOKEN_CACHE."
        raise SignInError(message) from exc
    return cache


def save_cache(cache: TokenCache, path: Path) -> None:
    """Write the cache, creating the file readable and writable by its owner only."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, OWNER_ONLY)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            _restrict(path)
            handle.write(cache.serialize())
    except OSError as exc:
        raise SignInError(f"Cannot write the token cache {path} ({exc}): set ONCEGATE_TOKEN_CACHE.") from exc


def _restrict(path: Path) -> None:
    # os.open's mode applies only when it creates the file: an older cache may have been written wider.
    if stat.S_IMODE(path.stat().st_mode) & ~OWNER_ONLY:
        os.chmod(path, OWNER_ONLY)
