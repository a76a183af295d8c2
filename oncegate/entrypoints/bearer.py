"""Entra ID mode: the app validates the caller's ``Authorization: Bearer`` access token itself.

App Service authentication may check the token first, but the app does not rely on it: where the
platform lets unauthenticated callers through, this check is the gate. PyJWT does the JWT work. A
token passes only if it is signed with ``RS256`` by a key the tenant publishes (read through the
tenant's OpenID configuration, cached, and re-read when a token names a key not seen yet), was issued
by the tenant (v1 or v2 issuer, as the tenant's own OpenID configurations state them), is meant for
the API (its client id or App ID URI), is within its lifetime give or take ``LEEWAY``, and names the
application that asked for it, which access tokens do and ID tokens do not. The app roles are checked
by the caller of :meth:`TokenValidator.principal`.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.error import URLError
from urllib.request import HTTPRedirectHandler, Request, build_opener

from oncegate.config import EntraApi
from oncegate.domain.copies import frozen
from oncegate.entrypoints.principal import Principal, principal_from_claims
from oncegate.errors import NotSignedIn, SignInUnavailable

# PyJWT, and the cryptography it loads (about a tenth of the app's import), is imported where a token is read:
# an app in function-key mode never loads it, and one in Entra ID mode loads it with its first token (issue 36).
if TYPE_CHECKING:
    import jwt

logger = logging.getLogger(__name__)

# What Entra ID signs access tokens with. Any other ``alg`` is refused before a key is even looked
# up: never ``none``, and never an HS* whose "secret" would be the public key anyone can download.
ALGORITHMS = ("RS256",)
# Clocks differ a little between Entra ID and an instance; more would keep an expired token alive longer.
LEEWAY = timedelta(seconds=60)
REQUIRED_CLAIMS = ["exp", "nbf", "iss", "aud"]
# Microsoft's guidance is to re-read the OpenID configuration about daily; the keys are re-read hourly,
# and at once (at most every REFRESH_COOLDOWN_SECONDS) when a token names a key not seen yet.
CONFIGURATION_LIFETIME_SECONDS = 24 * 60 * 60
KEYS_LIFETIME_SECONDS = 60 * 60
# A stream of tokens naming made-up keys must not become a stream of requests to Entra ID.
REFRESH_COOLDOWN_SECONDS = 30.0
# While Entra ID cannot be reached, answer 503 at once for a few seconds instead of every request
# waiting out its own timeout.
RETRY_AFTER_FAILURE_SECONDS = 5.0
FETCH_TIMEOUT_SECONDS = 10


@frozen
class Published:
    """What the tenant publishes: the issuers of its tokens and a client of its keys (JWKS)."""

    issuers: frozenset[str]
    keys: jwt.PyJWKClient
    read_at: float


class TokenValidator:
    """Validates the access tokens of one API in one tenant against the keys the tenant publishes."""

    def __init__(self, api: EntraApi, *, refresh_cooldown: float | None = None) -> None:
        self.api = api
        self._refresh_cooldown = REFRESH_COOLDOWN_SECONDS if refresh_cooldown is None else refresh_cooldown
        self._lock = threading.Lock()
        self._published: Published | None = None
        self._failed_at: float | None = None

    def principal(self, authorization: str | None) -> Principal:
        """The caller the token in an ``Authorization`` header names; 401 for any token not valid here."""
        import jwt

        token = _bearer_token(authorization)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise invalid_token("The bearer token is not a JWT.") from exc
        if header.get("alg") not in ALGORITHMS:
            raise invalid_token(f"The token's algorithm must be {' or '.join(ALGORITHMS)}.")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise invalid_token("The token names no signing key (kid).")
        published = self._read_published()
        claims = _decode(token, _signing_key(published.keys, kid), self.api, published.issuers)
        if not isinstance(claims.get("azp") or claims.get("appid"), str):
            raise invalid_token("The token is not an access token: it names no calling application (azp or appid).")
        principal = principal_from_claims(claims)
        if principal is None:
            raise invalid_token("The token names no caller.")
        return principal

    def _read_published(self) -> Published:
        """The tenant's issuers and keys, read on first use and again once a day; kept when a re-read fails."""
        with self._lock:
            now = time.monotonic()
            current = self._published
            if current is not None and now - current.read_at < CONFIGURATION_LIFETIME_SECONDS:
                return current
            if self._failed_at is not None and now - self._failed_at < RETRY_AFTER_FAILURE_SECONDS:
                if current is not None:
                    return current
                raise SignInUnavailable(f"The tenant's signing keys cannot be read from {self.api.authority}.")
            try:
                fresh = self._fetch(now, current)
            except SignInUnavailable:
                self._failed_at = now
                if current is None:
                    raise
                logger.warning("Keeping the tenant's OpenID configuration read earlier: it could not be re-read.")
                return current
            self._published, self._failed_at = fresh, None
            return fresh

    def _fetch(self, now: float, current: Published | None) -> Published:
        import jwt

        base = f"{self.api.authority}/{self.api.tenant_id}"
        v2 = _openid_configuration(f"{base}/v2.0/.well-known/openid-configuration")
        v1 = _openid_configuration(f"{base}/.well-known/openid-configuration")
        jwks_uri = v2.get("jwks_uri")
        issuers = [document.get("issuer") for document in (v1, v2)]
        # The keys must come from the sign-in host itself, and each issuer must name one tenant: a
        # multi-tenant template ("{tenantid}") would let every tenant's tokens in.
        if not (isinstance(jwks_uri, str) and jwks_uri.startswith(f"{self.api.authority}/")) or any(
            not isinstance(issuer, str) or not issuer or "{" in issuer for issuer in issuers
        ):
            logger.error("The OpenID configuration at %s does not name one tenant's issuer and keys.", base)
            raise SignInUnavailable(f"The OpenID configuration at {base} cannot be used.")
        keys = (
            current.keys
            if current is not None and current.keys.uri == jwks_uri
            else jwt.PyJWKClient(
                jwks_uri,
                lifespan=KEYS_LIFETIME_SECONDS,
                timeout=FETCH_TIMEOUT_SECONDS,
                cooldown_duration=self._refresh_cooldown,
            )
        )
        return Published(issuers=frozenset(str(issuer) for issuer in issuers), keys=keys, read_at=now)


def invalid_token(message: str) -> NotSignedIn:
    """A token that was sent but is not valid here (RFC 6750's ``invalid_token``)."""
    return NotSignedIn(message, challenge='Bearer error="invalid_token"')


def _bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotSignedIn(
            "Sign in with Microsoft Entra ID: send Authorization: Bearer <access token> for this API.",
            challenge="Bearer",
        )
    return token.strip()


def _signing_key(keys: jwt.PyJWKClient, kid: str) -> jwt.PyJWK:
    import jwt

    try:
        return keys.get_signing_key(kid)
    except jwt.PyJWKClientConnectionError as exc:
        logger.warning("The tenant's signing keys could not be fetched: %s", exc)
        raise SignInUnavailable("The tenant's signing keys cannot be fetched; retry shortly.") from exc
    except (jwt.PyJWKClientError, jwt.PyJWKSetError) as exc:
        raise invalid_token("The token is not signed with a key the tenant publishes.") from exc


def _decode(token: str, key: jwt.PyJWK, api: EntraApi, issuers: frozenset[str]) -> dict[str, Any]:
    import jwt

    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=list(ALGORITHMS),
            audience=list(api.audiences),
            issuer=list(issuers),
            leeway=LEEWAY,
            options={"require": REQUIRED_CLAIMS},
        )
    except jwt.ExpiredSignatureError as exc:
        raise invalid_token("The token has expired.") from exc
    except jwt.ImmatureSignatureError as exc:
        raise invalid_token("The token is not valid yet.") from exc
    except jwt.InvalidAudienceError as exc:
        raise invalid_token("The token is not meant for this API (audience).") from exc
    except jwt.InvalidIssuerError as exc:
        raise invalid_token("The token was not issued by this API's tenant.") from exc
    except jwt.InvalidSignatureError as exc:
        raise invalid_token("The token's signature does not verify.") from exc
    except jwt.PyJWTError as exc:
        raise invalid_token(f"The token is not valid here: {exc}.") from exc
    return claims


class _NoRedirect(HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        # The configuration is read from the sign-in host named in the settings, and from nowhere else.
        return None


def _openid_configuration(url: str) -> dict[str, Any]:
    try:
        opener = build_opener(_NoRedirect())
        with opener.open(Request(url, headers={"Accept": "application/json"}), timeout=FETCH_TIMEOUT_SECONDS) as reply:
            document = json.load(reply)
    except (URLError, TimeoutError, http.client.HTTPException, ValueError) as exc:
        logger.warning("The OpenID configuration %s could not be read: %s", url, exc)
        raise SignInUnavailable("The tenant's OpenID configuration cannot be read; retry shortly.") from exc
    if not isinstance(document, dict):
        raise SignInUnavailable(f"The OpenID configuration at {url} is not a JSON object.")
    return document


@functools.lru_cache(maxsize=4)
def validator(api: EntraApi) -> TokenValidator:
    """The process-wide validator of these settings: its keys are read once and shared by every request."""
    return TokenValidator(api)
