"""The one table that says how each error is answered over HTTP: its status, its error code and, for a
retry, how long to wait.

The errors (``oncegate/errors.py``) name what went wrong and know nothing of HTTP; the HTTP actions, the bulk
path, the timers' telemetry and the CLI's exit codes all read their status and code here, as httpx maps its
transport errors in one table. The local server's refusals of a request it cannot read as HTTP, which come
before any action and so before any error class, are the second table. docs/contract.md lists every code of
both (``tests/http/test_error_codes.py`` checks that they agree both ways).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

from oncegate.domain.copies import frozen
from oncegate.errors import (
    ClaimBusy,
    ClaimNotBlocked,
    ClockSkewed,
    ConflictResolved,
    EntraRequired,
    InvalidRequest,
    MethodNotAllowed,
    NotConfigured,
    NotFound,
    NotSignedIn,
    OnceGateError,
    RoleMissing,
    SensitiveData,
    SensitiveKey,
    SignInUnavailable,
    StaleClaim,
    StoreUnavailable,
    TooLarge,
)

if TYPE_CHECKING:
    from oncegate.models import ErrorInfo


@frozen
class Answered:
    """How an error is answered: ``status`` and ``code``, and ``retry_after`` (seconds) for the Retry-After header."""

    status: HTTPStatus
    code: str
    retry_after: int | None = None


ERRORS: dict[type[OnceGateError], Answered] = {
    OnceGateError: Answered(HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error"),
    InvalidRequest: Answered(HTTPStatus.BAD_REQUEST, "invalid_request"),
    SensitiveKey: Answered(HTTPStatus.BAD_REQUEST, "sensitive_key"),
    SensitiveData: Answered(HTTPStatus.BAD_REQUEST, "sensitive_data"),
    NotSignedIn: Answered(HTTPStatus.UNAUTHORIZED, "unauthorized"),
    RoleMissing: Answered(HTTPStatus.FORBIDDEN, "forbidden"),
    EntraRequired: Answered(HTTPStatus.FORBIDDEN, "entra_required"),
    NotFound: Answered(HTTPStatus.NOT_FOUND, "not_found"),
    MethodNotAllowed: Answered(HTTPStatus.METHOD_NOT_ALLOWED, "method_not_allowed"),
    StaleClaim: Answered(HTTPStatus.CONFLICT, "stale_claim"),
    ClaimBusy: Answered(HTTPStatus.CONFLICT, "claim_busy"),
    ConflictResolved: Answered(HTTPStatus.CONFLICT, "conflict_resolved"),
    ClaimNotBlocked: Answered(HTTPStatus.CONFLICT, "claim_not_blocked"),
    TooLarge: Answered(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large"),
    StoreUnavailable: Answered(HTTPStatus.SERVICE_UNAVAILABLE, "store_unavailable", retry_after=5),
    SignInUnavailable: Answered(HTTPStatus.SERVICE_UNAVAILABLE, "signin_unavailable", retry_after=5),
    # Leases are granted and expired on the store's clock: wait for this instance's to be set right.
    ClockSkewed: Answered(HTTPStatus.SERVICE_UNAVAILABLE, "clock_skew", retry_after=30),
    NotConfigured: Answered(HTTPStatus.SERVICE_UNAVAILABLE, "not_configured"),
}

# The status a single call answers each code with: what a client reads a bulk item's refusal as.
CODE_STATUS: dict[str, HTTPStatus] = {said.code: said.status for said in ERRORS.values()}

# The local server (``oncegate serve``) refusing a request it cannot read as HTTP, before any action; the
# Functions host answers those itself.
FRAMING: dict[HTTPStatus, str] = {
    HTTPStatus.BAD_REQUEST: ERRORS[InvalidRequest].code,
    HTTPStatus.REQUEST_TIMEOUT: "request_timeout",
    HTTPStatus.LENGTH_REQUIRED: "length_required",
    HTTPStatus.REQUEST_URI_TOO_LONG: "request_uri_too_long",
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: "request_header_fields_too_large",
    HTTPStatus.NOT_IMPLEMENTED: "not_implemented",
    HTTPStatus.HTTP_VERSION_NOT_SUPPORTED: "http_version_not_supported",
    HTTPStatus.SERVICE_UNAVAILABLE: "server_busy",
}


def answered(error: OnceGateError | type[OnceGateError]) -> Answered:
    """How ``error`` (or any error of that class) is answered: its class's entry, or its nearest base's."""
    kind = error if isinstance(error, type) else type(error)
    return next(ERRORS[cls] for cls in kind.__mro__ if cls in ERRORS)


def code(error: OnceGateError | type[OnceGateError]) -> str:
    """The error code ``error`` is answered with, e.g. ``stale_claim``."""
    return answered(error).code


def status(error: OnceGateError | type[OnceGateError]) -> HTTPStatus:
    """The HTTP status ``error`` is answered with, e.g. 409."""
    return answered(error).status


def refusal_code(refused: HTTPStatus) -> str:
    """The error code of the local server's refusal of a request it cannot read as HTTP, e.g. ``length_required``."""
    return FRAMING[refused]


# The wire's name of each record a store may find missing.
RECORD_FIELDS = {"claim": "claimId", "conflict": "conflictId", "target": "target"}


def error_info(error: OnceGateError) -> ErrorInfo:
    """The error as the body of any refusal says it: its code, message and details."""
    # Imported by the first refusal: a process that refuses nothing never makes the error body's models (issue 36).
    from oncegate.models import ErrorDetail, ErrorInfo

    target = error.target
    if target is None and isinstance(error, NotFound) and error.record is not None:
        target = RECORD_FIELDS[error.record]
    raw_details = error.details if isinstance(error, InvalidRequest) else ([(target, error.message)] if target else [])
    details = [ErrorDetail(target=target, message=message) for target, message in raw_details]
    return ErrorInfo(code=code(error), message=error.message, details=details)


def headers(error: OnceGateError) -> dict[str, str]:
    """The headers answering ``error`` carries: Retry-After, WWW-Authenticate, Allow."""
    said = answered(error)
    found = {"Retry-After": str(said.retry_after)} if said.retry_after is not None else {}
    if isinstance(error, NotSignedIn):
        found["WWW-Authenticate"] = error.challenge
    if isinstance(error, MethodNotAllowed):
        found["Allow"] = ", ".join(error.allowed)
    return found
