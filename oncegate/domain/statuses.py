"""The enumerations of the contract, as ``str`` Enums so they serialise as their values."""

from __future__ import annotations

from enum import StrEnum


class ClaimStatus(StrEnum):
    """Where a claim's side effect stands."""

    IN_PROGRESS = "in_progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"
    RELEASED = "released"


class Decision(StrEnum):
    """What Check and claim tells the flow to do next."""

    PROCEED = "proceed"
    DUPLICATE = "duplicate"
    IN_PROGRESS = "in_progress"
    RECONCILE = "reconcile"
    CONFLICT = "conflict"
    BLOCKED = "blocked"


class Outcome(StrEnum):
    """What the flow reports after attempting the side effect."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNKNOWN = "unknown"


class ConflictStatus(StrEnum):
    """Whether a conflict still waits for its owner."""

    OPEN = "open"
    RESOLVED = "resolved"


class Resolution(StrEnum):
    """A reviewer's decision on a conflict."""

    ACCEPT_NEW = "accept_new"
    KEEP_ORIGINAL = "keep_original"
    DISMISS = "dismiss"


class EventKind(StrEnum):
    """What a history entry records."""

    CLAIM = "claim"
    RESULT = "result"
    RELEASE = "release"
    CONFLICT = "conflict"
    RESOLUTION = "resolution"
    REVIEW = "review"


class ConflictSource(StrEnum):
    """Who noticed the conflict: the claim service or the flow itself."""

    CLAIM = "claim"
    REPORTED = "reported"


class AttentionReason(StrEnum):
    """Why a claim needs a person: nothing settles it by itself."""

    LEASE_EXPIRED = "lease_expired"
    UNKNOWN = "unknown"
    FAILED_UNREVIEWED = "failed_unreviewed"
