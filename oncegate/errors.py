"""Every error OnceGate raises, in one place: each class names what went wrong, and knows nothing of HTTP.

::

    OnceGateError                 what nobody expected; public, like each below
    ├── InvalidRequest            the request is malformed; nothing was stored (names the field in ``target``)
    │   ├── SensitiveKey          the key seems to carry personal data
    │   └── SensitiveData         a field the request would store seems to (names each field)
    ├── AccessDenied              Entra ID mode only
    │   ├── NotSignedIn           no valid token was sent (``challenge`` says how to sign in)
    │   └── RoleMissing           the caller lacks the app role the action needs
    ├── NotFound                  no claim or conflict has that id
    ├── MethodNotAllowed          no action at the path takes the method (``allowed`` names those that do)
    ├── StateConflict             the request does not fit the record's current state
    │   ├── StaleClaim            the claim token or attempt is not the claim's current one, or the attempt ended
    │   ├── ClaimBusy             a run still holds the claim, or its attempt is in doubt
    │   ├── ConflictResolved      the conflict was resolved otherwise, or outlived its claim
    │   └── ClaimNotBlocked       only a failure that is not retryable is acknowledged
    ├── TooLarge                  a body or a field is over its size limit
    ├── StoreUnavailable          the store cannot be reached or is overloaded; retry later
    │   ├── SignInUnavailable     the tenant's signing keys could not be fetched
    │   └── ClockSkewed           this instance's clock is too far from the store's
    └── NotConfigured             a setting is missing or wrong (names the setting in ``target``)

    StoreRace                     internal: a conditional write lost a race
    ├── AlreadyExists             a conditional insert found a record (carries it)
    └── ConcurrentUpdate          a version/ETag-conditional update found a newer record

The HTTP edge answers each with a status and an error code from one table,
``oncegate/entrypoints/error_map.py``; docs/contract.md lists those codes
(``tests/http/test_error_codes.py`` checks the tree, the table and the contract agree).

Store adapters translate their driver's errors into these at the edge
(``raise ... from exc``); nothing above the adapters sees ``sqlite3`` or
``azure.core`` exceptions. ``StoreRace`` never leaves the claim service.
"""

from __future__ import annotations

from typing import Any


class OnceGateError(Exception):
    """An error a caller can act on; ``target`` names the field, setting or part of the request it is about."""

    def __init__(self, message: str, *, target: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.target = target


class InvalidRequest(OnceGateError):
    """The request is malformed; nothing was stored."""

    def __init__(
        self, message: str, *, target: str | None = None, details: list[tuple[str, str]] | None = None
    ) -> None:
        super().__init__(message, target=target)
        self.details = details if details is not None else ([(target, message)] if target else [])


class SensitiveKey(InvalidRequest):
    """The business key seems to carry personal data; the message names what, never the value."""


class SensitiveData(InvalidRequest):
    """A field the request would store seems to carry personal data; ``details`` name each field, never the value."""


class AccessDenied(OnceGateError):
    """Entra ID mode: the caller is not signed in, or lacks the app role the action needs."""


class NotSignedIn(AccessDenied):
    """No valid token was sent; ``challenge`` says how to sign in (RFC 6750), e.g. ``Bearer``."""

    def __init__(self, message: str, *, challenge: str) -> None:
        super().__init__(message)
        self.challenge = challenge


class RoleMissing(AccessDenied):
    """The signed-in caller lacks the app role the action needs."""


class NotFound(OnceGateError):
    """No claim or conflict has that id.

    ``record`` names what is missing (``claim``, ``conflict``) where a store raised it: the stores know
    records, not the wire; the HTTP edge names the field (``claimId``) from it.
    """

    def __init__(self, message: str, *, target: str | None = None, record: str | None = None) -> None:
        super().__init__(message, target=target)
        self.record = record


class MethodNotAllowed(OnceGateError):
    """No action at the path takes the request's method; ``allowed`` names the methods that do."""

    def __init__(self, message: str, *, allowed: list[str]) -> None:
        super().__init__(message)
        self.allowed = allowed


class StateConflict(OnceGateError):
    """The request does not fit the record's current state; raised as one of the classes below."""


class StaleClaim(StateConflict):
    """The claim token or attempt sent is not the claim's current one, or the attempt already ended otherwise."""


class ClaimBusy(StateConflict):
    """A run still holds the claim, or its attempt is in doubt: it cannot be settled or changed yet."""


class ConflictResolved(StateConflict):
    """The conflict was already resolved with another decision, or was about a claim retention deleted."""


class ClaimNotBlocked(StateConflict):
    """Only a failure that is not retryable is acknowledged; this claim is in another state."""


class TooLarge(OnceGateError):
    """A body or a field is over its size limit."""


class StoreUnavailable(OnceGateError):
    """The store cannot be reached or is overloaded; the caller should retry later."""


class SignInUnavailable(StoreUnavailable):
    """Entra ID mode: the tenant's published signing keys could not be fetched, so no token can be checked."""


class ClockSkewed(StoreUnavailable):
    """This instance's clock is further from the store's than leases allow: nothing is granted or expired on it."""

    def __init__(self, message: str, *, skew: Any) -> None:
        super().__init__(message, target="clock")
        self.skew = skew


class NotConfigured(OnceGateError):
    """A setting is missing, wrong or does not fit the store (another key secret); ``target`` names it."""


class StoreRace(Exception):
    """A conditional write lost to another writer; the service re-reads and decides again."""


class AlreadyExists(StoreRace):
    """A conditional insert found an existing record, carried in ``existing``."""

    def __init__(self, existing: Any) -> None:
        super().__init__("record already exists")
        self.existing = existing


class ConcurrentUpdate(StoreRace):
    """The record changed since it was read (ETag or version mismatch)."""
