"""Declared targets on the wire (issue 34): ``PUT /api/targets`` sets one, ``GET /api/targets`` lists them.

Neither holds a secret: ``auth`` names one (``secret:HEADER=SECRET-NAME``). The fields are checked by the
domain's one check (``oncegate.domain.target_declarations``), which names the field of a refusal; the model
checks only their JSON types and lengths.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from oncegate.domain.target_declarations import DEFAULT_TIMEOUT_SECONDS, MAX_LISTED, Declaration, auth_text
from oncegate.domain.targets import Target
from oncegate.models.base import _Model, _Request

Short = Annotated[str, Field(max_length=256)]
Long = Annotated[str, Field(max_length=2048)]


class SetTargetRequest(_Request):
    """Declare a target, or declare it anew: a declaration is whole, and a field left out takes its default."""

    name: Annotated[str, Field(max_length=63)]
    base_url: Long
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    lookup_path: Long | None = None
    auth: Annotated[str, Field(max_length=400)] = "none"
    allow_cidrs: Annotated[list[Short], Field(max_length=MAX_LISTED)] = Field(default_factory=list)
    honours_idempotency_key: bool = False
    success_statuses: Annotated[list[int], Field(max_length=MAX_LISTED)] = Field(default_factory=list)
    retryable_statuses: Annotated[list[int], Field(max_length=MAX_LISTED)] = Field(default_factory=list)
    record_pointer: Short | None = None
    kept_headers: Annotated[list[Short], Field(max_length=MAX_LISTED)] = Field(default_factory=list)
    kept_pointers: Annotated[list[Short], Field(max_length=MAX_LISTED)] = Field(default_factory=list)

    def declaration(self) -> Declaration:
        """The declaration as the operator sent it, for the domain's check."""
        return Declaration(
            name=self.name,
            base_url=self.base_url,
            timeout_seconds=self.timeout_seconds,
            lookup_path=self.lookup_path,
            auth=self.auth,
            allow_cidrs=tuple(self.allow_cidrs),
            honours_idempotency_key=self.honours_idempotency_key,
            success_statuses=tuple(self.success_statuses),
            retryable_statuses=tuple(self.retryable_statuses),
            record_pointer=self.record_pointer,
            kept_headers=tuple(self.kept_headers),
            kept_pointers=tuple(self.kept_pointers),
        )


class TargetView(_Model):
    """A declared target: everything but a secret, which it only names."""

    name: str
    base_url: str
    timeout_seconds: int
    lookup_path: str | None = None
    auth: str
    allow_cidrs: list[str]
    honours_idempotency_key: bool
    success_statuses: list[int]
    retryable_statuses: list[int]
    record_pointer: str | None = None
    kept_headers: list[str]
    kept_pointers: list[str]
    declared_by: str | None = None
    declared_at: datetime | None = None

    @classmethod
    def of(cls, target: Target) -> TargetView:
        return cls(
            name=target.name,
            base_url=target.base_url,
            timeout_seconds=target.timeout_seconds,
            lookup_path=target.lookup_path,
            auth=auth_text(target),
            allow_cidrs=list(target.allow_cidrs),
            honours_idempotency_key=target.honours_idempotency_key,
            success_statuses=list(target.success_statuses),
            retryable_statuses=list(target.retryable_statuses),
            record_pointer=target.record_pointer,
            kept_headers=list(target.kept_headers),
            kept_pointers=list(target.kept_pointers),
            declared_by=target.declared_by,
            declared_at=target.declared_at,
        )


class TargetList(_Model):
    """Every declared target, by name (a handful: one page)."""

    value: list[TargetView]
