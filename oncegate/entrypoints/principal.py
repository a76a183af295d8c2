"""Who is calling, as App Service authentication (Easy Auth) tells the app.

With ``ONCEGATE_AUTH=entra`` the platform validates the caller's Microsoft Entra ID token
before the request reaches the app, and passes its claims in ``X-MS-CLIENT-PRINCIPAL``
(base64 JSON), a header it strips from outside requests. With function keys nobody strips
it, so the header is read only in ``entra`` mode.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

PRINCIPAL_HEADER = "x-ms-client-principal"
PRINCIPAL_NAME_HEADER = "x-ms-client-principal-name"
ROLE_CLAIM_TYPES = ("roles", "http://schemas.microsoft.com/ws/2008/06/identity/claims/role")
# Most readable first: a person's sign-in name, else the calling application's id.
NAME_CLAIM_TYPES = (
    "preferred_username",
    "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/upn",
    "name",
    "azp",
    "appid",
    "http://schemas.microsoft.com/identity/claims/objectidentifier",
)


class Role(StrEnum):
    """The API's app roles (see docs/deploy.md)."""

    FLOW = "OnceGate.Flow"
    REVIEWER = "OnceGate.Reviewer"


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: a name to record and the app roles the token carries."""

    name: str
    roles: frozenset[str]

    def may(self, role: Role) -> bool:
        # A reviewer may do whatever a flow may; the reverse is what the roles exist to prevent.
        return role in self.roles or Role.REVIEWER in self.roles


def read_principal(headers: Mapping[str, str]) -> Principal | None:
    """The principal the platform passed, or None when the header is absent or unreadable."""
    lowered = {name.lower(): value for name, value in headers.items()}
    encoded = lowered.get(PRINCIPAL_HEADER)
    if not encoded:
        return None
    try:
        document: Any = json.loads(base64.b64decode(encoded, validate=True))
        claims = [(str(claim["typ"]), str(claim["val"])) for claim in document.get("claims") or []]
        name_type = str(document.get("name_typ") or "")
        role_type = str(document.get("role_typ") or "")
    except (binascii.Error, ValueError, TypeError, KeyError, AttributeError):
        return None
    roles = frozenset(value for kind, value in claims if kind in ROLE_CLAIM_TYPES or (role_type and kind == role_type))
    for wanted in (name_type, *NAME_CLAIM_TYPES):
        name = next((value for kind, value in claims if wanted and kind == wanted and value), None)
        if name:
            return Principal(name, roles)
    fallback = lowered.get(PRINCIPAL_NAME_HEADER)
    return Principal(fallback, roles) if fallback else None
