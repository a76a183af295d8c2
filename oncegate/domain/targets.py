"""Targets: the HTTP systems OnceGate calls itself for Perform once (issue 34).

An operator declares a target (``oncegate targets set``); a flow names it and a path under its base URL,
never a URL. :class:`Target` is the declaration as the service reads it; :class:`TargetCall` what one
Perform once sends; :class:`TargetReply` what came back, or why nothing did. The service reaches a
target only through :class:`TargetCalls`, whose adapter checks every address before it connects.
"""

from __future__ import annotations

from dataclasses import field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from oncegate.domain.copies import frozen


class TargetAuth(StrEnum):
    """How OnceGate proves itself to a target."""

    NONE = "none"
    IDENTITY = "identity"
    SECRET = "secret"


@frozen(kw_only=True)
class Target:
    """One declared target, as the store keeps it: never a secret, only the secret's name.

    ``auth_value`` is the audience for ``identity`` and ``HEADER=SECRET-NAME`` for ``secret``.
    ``success_statuses`` empty means every 2xx; ``retryable_statuses`` are the 4xx statuses after
    which a failure may be retried; ``record_pointer`` the JSON pointer into the response body that
    names the record the target made (``targetRecordId``); ``kept_headers`` and ``kept_pointers`` what
    of a response is kept with the claim (within the data limit, after the sensitive-data check).
    ``declared_by``/``declared_at`` say who declared it last and when; ``version`` is the store's (None: new).
    :func:`oncegate.domain.target_declarations.declare_target` makes one, every field checked.
    """

    name: str
    base_url: str
    timeout_seconds: int = 30
    lookup_path: str | None = None
    auth: TargetAuth = TargetAuth.NONE
    auth_value: str | None = None
    allow_cidrs: tuple[str, ...] = ()
    honours_idempotency_key: bool = False
    success_statuses: tuple[int, ...] = ()
    retryable_statuses: tuple[int, ...] = ()
    record_pointer: str | None = None
    kept_headers: tuple[str, ...] = ()
    kept_pointers: tuple[str, ...] = ()
    declared_by: str | None = None
    declared_at: datetime | None = None
    version: str | None = None

    @property
    def secret(self) -> tuple[str, str] | None:
        """``(header, secret name)`` for ``secret`` auth, else None: which header carries which secret."""
        if self.auth is not TargetAuth.SECRET or not self.auth_value:
            return None
        header, _, name = self.auth_value.partition("=")
        return header, name

    @property
    def auth_headers(self) -> tuple[str, ...]:
        """The headers the target's auth fills: a flow may not send them itself."""
        if self.auth is TargetAuth.IDENTITY and self.auth_value:
            return ("Authorization",)
        secret = self.secret
        return (secret[0],) if secret is not None else ()


# Why a call whose time ran out before it left was not sent (its outcome: nothing sent, safe to try again).
DEADLINE_PASSED = "the call's deadline, recorded with its claim, passed before it could leave"


@frozen(kw_only=True)
class TargetCall:
    """One request to a target: a method and a path under its base URL, never a URL."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    idempotency_key: str | None = None
    # The time the call has, in seconds: what is left of the deadline its claim records, measured on the service's
    # clock when it leaves (the target's ``timeout_seconds`` at most); None: the target's whole time.
    seconds_left: float | None = None


class Failure(StrEnum):
    """Why a reply has no status: whether anything reached the target decides the claim's next state."""

    REFUSED = "refused"  # nothing sent: undeclared or forbidden address, path or header
    NOT_CONNECTED = "not_connected"  # nothing sent: connection refused or failed before the request left
    TIMEOUT = "timeout"  # sent, and no answer within the target's time: outcome unknown
    BROKEN = "broken"  # sent, and the connection broke before a whole answer: outcome unknown
    TOO_LARGE = "too_large"  # sent, and the answer was over the bound: outcome unknown


@frozen(kw_only=True)
class TargetReply:
    """What came back from one call: a status with headers and body, or a failure and ``reason``, a sentence
    for the history and the answer (never a secret)."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    failure: Failure | None = None
    reason: str | None = None

    @property
    def sent(self) -> bool:
        """Whether the request may have reached the target (so its outcome is unknown without an answer)."""
        return self.failure not in (Failure.REFUSED, Failure.NOT_CONNECTED)


# What a call whose time ran out before it left gets back, from the service or the adapter: nothing was sent (failed,
# retryable).
TOO_LATE = TargetReply(failure=Failure.NOT_CONNECTED, reason=DEADLINE_PASSED)


class TargetCalls(Protocol):
    """The one way the service reaches a target: the adapter refuses what the declaration does not allow."""

    def call(self, target: Target, request: TargetCall) -> TargetReply: ...
