"""What the service says about itself: its health, and the error body any action may answer."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from oncegate.models.base import _Model, designer


class Health(_Model):
    """Liveness of the service and its store."""

    status: Annotated[str, designer("Service Status", "The word ok when the service and its store answer.")]
    store: Annotated[str, designer("Store Kind", "The store the service runs on: sqlite or tables.")]
    version: Annotated[str, designer("Version", "The version of the service.")]


class ErrorDetail(_Model):
    target: str | None = None
    message: str


class ErrorInfo(_Model):
    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(_Model):
    """Microsoft REST API guidelines error body."""

    error: ErrorInfo
