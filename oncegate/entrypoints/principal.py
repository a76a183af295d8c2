"""Who is calling, read from the claims of an access token the app has validated itself.

Only ``oncegate.entrypoints.bearer`` makes a ``Principal``, and only from a token whose signature,
issuer, audience and lifetime it checked. ``X-MS-CLIENT-PRINCIPAL``, which App Service authentication
adds, is never read: where the platform does not block unauthenticated callers (Flex Consumption
has been documented not to) anyone can send it, and where it does, the same platform passes the
token on in ``Authorization``, so the header would add nothing the token does not prove.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from oncegate.domain.copies import frozen

# Most readable first: a person's sign-in name (v2, then v1 tokens), else the calling application's id.
# A display name ("name") is left out: two people may share one, and the record names its reviewer.
NAME_CLAIMS = ("preferred_username", "upn", "unique_name", "azp", "appid", "oid", "sub")


class Role(StrEnum):
    """The API's app roles (see docs/deploy.md)."""

    FLOW = "OnceGate.Flow"
    REVIEWER = "OnceGate.Reviewer"


@frozen
class Principal:
    """The authenticated caller: a name to record and the app roles the token carries."""

    name: str
    roles: frozenset[str]

    def may(self, role: Role) -> bool:
        # A reviewer may do whatever a flow may; the reverse is what the roles exist to prevent.
        return role in self.roles or Role.REVIEWER in self.roles


def principal_from_claims(claims: Mapping[str, Any]) -> Principal | None:
    """The caller a validated token names, with its app roles; None when it names nobody."""
    listed = claims.get("roles")
    roles = frozenset(role for role in listed if isinstance(role, str)) if isinstance(listed, list) else frozenset()
    for claim in NAME_CLAIMS:
        name = claims.get(claim)
        if isinstance(name, str) and name.strip():
            return Principal(name.strip(), roles)
    return None
