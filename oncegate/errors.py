"""Every error OnceGate raises, in one place.

::

    OnceGateError                 500 internal_error (what nobody expected); public, like each below:
    │                             one HTTP status and error code, rendered as ``{"error": {...}}``
    ├── InvalidRequest            400 invalid_request (names the field in ``target``)
    │   ├── SensitiveKey          400 sensitive_key (the key seems to carry personal data)
    │   └── SensitiveData         400 sensitive_data (a field the request would store seems to; names each field)
    ├── AccessDenied              401 unauthorized (with WWW-Authenticate) | 403 forbidden (Entra ID mode only)
    ├── NotFound                  404 not_found
    ├── MethodNotAllowed          405 method_not_allowed (with Allow: the methods the path takes)
    ├── StateConflict             409 stale_claim | claim_busy | conflict_resolved | claim_not_blocked
    ├── TooLarge                  413 too_large
    ├── StoreUnavailable          503 store_unavailable (with Retry-After)
    │   ├── SignInUnavailable     503 signin_unavailable (the tenant's signing keys could not be fetched)
    │   └── ClockSkewed           503 clock_skew (this instance's clock is too far from the store's)
    └── NotConfigured             503 not_configured (names the setting in ``target``)

    Framing refusals              answered by the local server (``oncegate serve``) to a request it cannot
                                  read as HTTP, before any action; the Functions host answers those itself:
                                  400 invalid_request | 408 request_timeout | 411 length_required |
                                  414 request_uri_too_long | 431 request_header_fields_too_large |
                                  501 not_implemented | 505 http_version_not_supported

    StoreRace                     internal: a conditional write lost a race
    ├── AlreadyExists             a conditional insert found a record (carries it)
    └── ConcurrentUpdate          a version/ETag-conditional update found a newer record

Every code above is in docs/contract.md's list of errors, and no other code is answered
(``tests/http/test_error_codes.py`` checks both against the code).

Store adapters translate their driver's errors into these at the edge
(``raise ... from exc``); nothing above the adapters sees ``sqlite3`` or
``azure.core`` exceptions. ``StoreRace`` never leaves the claim service.
"""

from __future__ import annotations

from typing import Any


class OnceGateError(Exception):
    """An error a caller can act on; rendered as ``{"error": {...}}``."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, *, target: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.target = target


class InvalidRequest(OnceGateError):
    """The request is malformed; nothing was stored."""

    status = 400
    code = "invalid_request"

    def __init__(
        self, message: str, *, target: str | None = None, details: list[tuple[str, str]] | None = None
    ) -> None:
        super().__init__(message, target=target)
        self.details = details if details is not None else ([(target, message)] if target else [])


class SensitiveKey(InvalidRequest):
    """The business key seems to carry personal data; the message names what, never the value."""

    code = "sensitive_key"


class SensitiveData(InvalidRequest):
    """A field the request would store seems to carry personal data; ``details`` name each field, never the value."""

    code = "sensitive_data"


class AccessDenied(OnceGateError):
    """The caller is not signed in (401) or lacks the app role the action needs (403).

    ``challenge`` is the ``WWW-Authenticate`` value a 401 carries (RFC 6750), e.g. ``Bearer``.
    """

    def __init__(self, status: int, code: str, message: str, *, challenge: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.challenge = challenge


class NotFound(OnceGateError):
    """No claim or conflict has that id.

    ``record`` names what is missing (``claim``, ``conflict``) where a store raised it: the stores know
    records, not the wire; the HTTP edge names the field (``claimId``) from it.
    """

    status = 404
    code = "not_found"

    def __init__(self, message: str, *, target: str | None = None, record: str | None = None) -> None:
        super().__init__(message, target=target)
        self.record = record


class MethodNotAllowed(OnceGateError):
    """No action at the path takes the request's method; ``allowed`` names those that do (the ``Allow`` header)."""

    status = 405
    code = "method_not_allowed"

    def __init__(self, message: str, *, allowed: list[str]) -> None:
        super().__init__(message)
        self.allowed = allowed


class StateConflict(OnceGateError):
    """The request does not fit the record's current state (a stale claim token, a busy claim...)."""

    status = 409

    def __init__(self, code: str, message: str, *, target: str | None = None) -> None:
        super().__init__(message, target=target)
        self.code = code


class TooLarge(OnceGateError):
    """A body or a field is over its size limit."""

    status = 413
    code = "too_large"


class StoreUnavailable(OnceGateError):
    """The store cannot be reached or is overloaded; the caller should retry later."""

    status = 503
    code = "store_unavailable"
    retry_after_seconds = 5


class SignInUnavailable(StoreUnavailable):
    """Entra ID mode: the tenant's published signing keys could not be fetched, so no token can be checked."""

    code = "signin_unavailable"


class ClockSkewed(StoreUnavailable):
    """This instance's clock is further from the store's than leases allow: nothing is granted or expired on it."""

    code = "clock_skew"
    retry_after_seconds = 30

    def __init__(self, message: str, *, skew: Any) -> None:
        super().__init__(message, target="clock")
        self.skew = skew


class NotConfigured(OnceGateError):
    """A setting is missing, wrong or does not fit the store (another key secret); ``target`` names it."""

    status = 503
    code = "not_configured"


class StoreRace(Exception):
    """A conditional write lost to another writer; the service re-reads and decides again."""


class AlreadyExists(StoreRace):
    """A conditional insert found an existing record, carried in ``existing``."""

    def __init__(self, existing: Any) -> None:
        super().__init__("record already exists")
        self.existing = existing


class ConcurrentUpdate(StoreRace):
    """The record changed since it was read (ETag or version mismatch)."""
