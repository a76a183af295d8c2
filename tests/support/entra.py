"""A stand-in for a Microsoft Entra ID tenant on 127.0.0.1: its OpenID configurations, its keys, its tokens.

The server publishes what the app reads at ``ONCEGATE_ENTRA_AUTHORITY``: the v2 and v1 OpenID
configurations (with the real issuer formats) and a JWKS of locally generated RSA keys, and counts
how often the JWKS is fetched. ``token`` signs an access token shaped like Entra ID's; a test
overrides any claim or header to forge one that must be refused.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from oncegate.config import EntraApi
from oncegate.entrypoints import bearer

TENANT_ID = "7d1f0a3c-5b2e-4c8a-9f10-2b3c4d5e6f70"
CLIENT_ID = "11111111-2222-3333-4444-555555555555"
V2_ISSUER = f"https://login.microsoftonline.com/{TENANT_ID}/v2.0"
V1_ISSUER = f"https://sts.windows.net/{TENANT_ID}/"
FLOW_APP_ID = "aaaaaaaa-0000-4000-8000-00000000f10a"
CLI_APP_ID = "bbbbbbbb-0000-4000-8000-0000000000c1"


# Keys made for earlier tests of this process, drawn again in order: an RSA key costs about 27 ms of CPU to make,
# and each test's tenant is its own (its own port, the app's validators started afresh), so no token or JWKS of an
# earlier test reaches it. Within a test every key drawn is still a different key.
_KEYS: list[rsa.RSAPrivateKey] = []
_drawn = 0


def new_key() -> rsa.RSAPrivateKey:
    """A signing key no other key of this test is: a forged token's key differs from the tenant's."""
    global _drawn
    if _drawn == len(_KEYS):
        _KEYS.append(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    _drawn += 1
    return _KEYS[_drawn - 1]


def _draw_from_the_first_key() -> None:
    global _drawn
    _drawn = 0


class LocalEntra:
    """One tenant: signing keys by kid (those in ``published`` are in its JWKS) and the tokens it issues."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {"key-1": new_key()}
        self.published = ["key-1"]
        self.jwks_fetches = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.005}, daemon=True)

    @property
    def authority(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api(self) -> EntraApi:
        """The app's settings for this tenant (ONCEGATE_ENTRA_*)."""
        return EntraApi(tenant_id=TENANT_ID, client_id=CLIENT_ID, authority=self.authority)

    def publish(self, kid: str) -> None:
        """A new signing key appears in the JWKS, as at a key rollover."""
        self.keys[kid] = new_key()
        self.published.append(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in self.published:
            jwk = RSAAlgorithm.to_jwk(self.keys[kid].public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "kty": "RSA"})
        return {"keys": keys}

    def claims(self, *roles: str, version: str = "2.0", **overrides: Any) -> dict[str, Any]:
        """An access token's claims: v2 (an application, by default) or v1 (a signed-in person)."""
        now = int(time.time())
        common = {"iat": now - 300, "nbf": now - 300, "exp": now + 3600, "tid": TENANT_ID, "roles": list(roles)}
        if version == "2.0":
            claims = {**common, "iss": V2_ISSUER, "aud": CLIENT_ID, "azp": FLOW_APP_ID, "oid": FLOW_APP_ID}
        else:
            claims = {**common, "iss": V1_ISSUER, "aud": f"api://{CLIENT_ID}", "appid": CLI_APP_ID}
            claims["upn"] = "ana@contoso.com"
        claims.update(ver=version, sub="subject-of-the-caller")
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def token(self, claims: dict[str, Any], *, kid: str = "key-1", key: rsa.RSAPrivateKey | None = None) -> str:
        """``claims`` signed with RS256 by the key ``kid`` (or by ``key``, under that kid)."""
        return jwt.encode(claims, key or self.keys[kid], algorithm="RS256", headers={"kid": kid})

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The tenant goes away (again is fine): its address refuses connections."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _handler(entra: LocalEntra) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"/{TENANT_ID}"
            documents = {
                f"{base}/v2.0/.well-known/openid-configuration": lambda: {
                    "issuer": V2_ISSUER,
                    "jwks_uri": f"{entra.authority}{base}/discovery/v2.0/keys",
                },
                f"{base}/.well-known/openid-configuration": lambda: {
                    "issuer": V1_ISSUER,
                    "jwks_uri": f"{entra.authority}/common/discovery/keys",
                },
                f"{base}/discovery/v2.0/keys": self._keys,
            }
            document = documents.get(self.path)
            payload = json.dumps(document() if document else {"error": "not found"}).encode()
            self.send_response(200 if document else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _keys(self) -> dict[str, Any]:
            entra.jwks_fetches += 1
            return entra.jwks()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def local_entra() -> Iterator[LocalEntra]:
    """A tenant of this test's own, on a free port; the app's validators start afresh with it."""
    _draw_from_the_first_key()
    entra = LocalEntra()
    entra.start()
    bearer.validator.cache_clear()
    yield entra
    bearer.validator.cache_clear()
    entra.stop()
