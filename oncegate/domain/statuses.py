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


class AnswerStatus(StrEnum):
    """A claim's status as Check and claim answers it: always given, ``none`` when no claim exists.

    That is when the flow inventory blocked the flow before any claim was made, or a claim made during a key
    secret rotation was withdrawn again (attempt 0 either way). The other values are ClaimStatus's.
    """

    IN_PROGRESS = ClaimStatus.IN_PROGRESS.value
    SUCCEEDED = ClaimStatus.SUCCEEDED.value
    FAILED = ClaimStatus.FAILED.value
    UNKNOWN = ClaimStatus.UNKNOWN.value
    RELEASED = ClaimStatus.RELEASED.value
    NONE = "none"


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


class SettledOutcome(StrEnum):
    """The outcomes a reviewer may settle an attempt in doubt with: what the target system holds, or not."""

    SUCCEEDED = Outcome.SUCCEEDED.value
    FAILED = Outcome.FAILED.value


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
    # Perform once recorded that its call is being sent, before a byte left (issue 34).
    CALL = "call"


class ConflictOrigin(StrEnum):
    """Who noticed the conflict: the claim service or the flow itself."""

    CLAIM = "claim"
    REPORTED = "reported"


class AttentionReason(StrEnum):
    """Why a claim needs a person: nothing settles it by itself."""

    LEASE_EXPIRED = "lease_expired"
    UNKNOWN = "unknown"
    FAILED_UNREVIEWED = "failed_unreviewed"
