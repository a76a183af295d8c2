"""Declared targets on the wire (issue 34): ``PUT /api/targets`` sets one, ``GET /api/targets`` lists them.

Neither holds a secret: ``auth`` names one (``secret:HEADER=SECRET-NAME``). The fields are checked by the
domain's one check (``oncegate.domain.target_declarations``), which names the field of a refusal; the model
checks only their JSON types and lengths. The actions are for operators (the reviewer role, Entra ID mode
only): the connector shows them to no maker.
"""

from datetime import datetime
from typing import Annotated

from pydantic import Field

from oncegate.domain.target_declarations import DEFAULT_TIMEOUT_SECONDS, MAX_LISTED
from oncegate.models.base import INTERNAL, _Model, _Request, designer

Short = Annotated[str, Field(max_length=256)]
Long = Annotated[str, Field(max_length=2048)]

NAME = designer("Target", "The target's name: lower-case letters, digits and hyphens, such as erp.", INTERNAL)
BASE_URL = designer(
    "Base URL",
    "https://host[:port][/path]: every call goes to a path under it, never elsewhere.",
    INTERNAL,
)
TIMEOUT = designer(
    "Timeout Seconds",
    f"The whole call's bound, from 1 to 90 seconds ({DEFAULT_TIMEOUT_SECONDS} when left out); past it the outcome is "
    "unknown.",
    INTERNAL,
)
LOOKUP = designer(
    "Look-up Path",
    "How to find a record after an unknown outcome: a path naming {reference} or {idempotencyKey}.",
    INTERNAL,
)
AUTH = designer(
    "Auth",
    "none, identity:AUDIENCE (the app's managed identity) or secret:HEADER=SECRET-NAME (a Key Vault secret's name "
    "starting oncegate-target-, never the secret).",
    INTERNAL,
)
CIDRS = designer(
    "Allowed CIDRs", "Private ranges the target's name may resolve to (private endpoints, VNets).", INTERNAL
)
HONOURS = designer(
    "Honours Idempotency Key",
    "Whether the target makes one record per Idempotency-Key, so that a call may be sent again under the same key.",
    INTERNAL,
)
SUCCESS = designer("Success Statuses", "The 2xx statuses that mean success; empty: every 2xx.", INTERNAL)
RETRYABLE = designer("Retryable Statuses", "The 4xx statuses after which a call may be tried again.", INTERNAL)
POINTER = designer(
    "Record Pointer", "The JSON pointer to the record's id in the target's answer, such as /id.", INTERNAL
)
KEPT_HEADERS = designer("Kept Headers", "The headers of the target's answer kept with the claim.", INTERNAL)
KEPT_POINTERS = designer("Kept Pointers", "The parts of the answer's JSON body kept with the claim.", INTERNAL)


class SetTargetRequest(_Request):
    """Declare a target, or declare it anew: a declaration is whole, and a field left out takes its default."""

    name: Annotated[str, Field(max_length=63), NAME]
    base_url: Annotated[Long, BASE_URL]
    timeout_seconds: Annotated[int, TIMEOUT] = DEFAULT_TIMEOUT_SECONDS
    lookup_path: Annotated[Long | None, LOOKUP] = None
    auth: Annotated[str, Field(max_length=400), AUTH] = "none"
    allow_cidrs: Annotated[list[Short], Field(max_length=MAX_LISTED), CIDRS] = Field(default_factory=list)
    honours_idempotency_key: Annotated[bool, HONOURS] = False
    success_statuses: Annotated[list[int], Field(max_length=MAX_LISTED), SUCCESS] = Field(default_factory=list)
    retryable_statuses: Annotated[list[int], Field(max_length=MAX_LISTED), RETRYABLE] = Field(default_factory=list)
    record_pointer: Annotated[Short | None, POINTER] = None
    kept_headers: Annotated[list[Short], Field(max_length=MAX_LISTED), KEPT_HEADERS] = Field(default_factory=list)
    kept_pointers: Annotated[list[Short], Field(max_length=MAX_LISTED), KEPT_POINTERS] = Field(default_factory=list)


class TargetView(_Model):
    """A declared target: everything but a secret, which it only names."""

    name: Annotated[str, NAME]
    base_url: Annotated[str, BASE_URL]
    timeout_seconds: Annotated[int, TIMEOUT]
    lookup_path: Annotated[str | None, LOOKUP] = None
    auth: Annotated[str, AUTH]
    allow_cidrs: Annotated[list[str], CIDRS]
    honours_idempotency_key: Annotated[bool, HONOURS]
    success_statuses: Annotated[list[int], SUCCESS]
    retryable_statuses: Annotated[list[int], RETRYABLE]
    record_pointer: Annotated[str | None, POINTER] = None
    kept_headers: Annotated[list[str], KEPT_HEADERS]
    kept_pointers: Annotated[list[str], KEPT_POINTERS]
    declared_by: Annotated[str | None, designer("Declared By", "Who declared the target last.", INTERNAL)] = None
    declared_at: Annotated[datetime | None, designer("Declared At", "When it was declared last.", INTERNAL)] = None


class TargetList(_Model):
    """Every declared target, by name (a handful: one page)."""

    value: Annotated[list[TargetView], designer("Targets", "The declared targets, by name.", INTERNAL)]
