"""What the service says about itself: its health, and the error body any action may answer."""

from datetime import datetime
from typing import Annotated

from pydantic import Field

from oncegate.models.base import _Model, designer


class RestoredStore(_Model):
    """The store was filled from an export: keys done after the export are forgotten until their horizon."""

    restored_from: Annotated[str, designer("Restored From", "The id of the store the export was taken from.")]
    exported_at: Annotated[
        datetime,
        designer("Exported At", "The export's time: keys done after it are not in the store and are answered proceed."),
    ]
    restored_at: Annotated[
        datetime | None, designer("Restored At", "When the import ended; empty while it is under way.")
    ] = None
    forgotten_until: Annotated[
        datetime,
        designer("Forgotten Until", "Until when keys done after the export may be answered proceed again."),
    ]
    message: Annotated[str, designer("Restore Message", "What the restore means for flows, in one sentence.")]


class Health(_Model):
    """Liveness of the service and its store."""

    status: Annotated[str, designer("Service Status", "The word ok when the service and its store answer.")]
    store: Annotated[str, designer("Store Kind", "The store the service runs on: sqlite or tables.")]
    version: Annotated[str, designer("Version", "The version of the service.")]
    store_location: Annotated[
        str | None,
        designer(
            "Store Location",
            "Where the store is: the SQLite file's path or the Table Storage endpoint, never a secret.",
        ),
    ] = None
    restored: Annotated[
        RestoredStore | None,
        designer(
            "Restored",
            "Present while the store, filled from an export, forgets the keys done after it: until their horizon.",
        ),
    ] = None


class ErrorDetail(_Model):
    """One thing wrong with the request, such as a field."""

    target: Annotated[
        str | None, designer("Error Target", "What is wrong, such as the field or the setting, when there is one.")
    ] = None
    message: Annotated[str, designer("Error Detail Message", "What is wrong with it, in one sentence.")]


class ErrorInfo(_Model):
    """What went wrong: a code to branch on and a message for people."""

    code: Annotated[
        str,
        designer(
            "Error Code",
            "What went wrong, to branch on, such as invalid_request, not_found, stale_claim or store_unavailable. "
            "Each action's error answers name the codes it gives.",
        ),
    ]
    message: Annotated[str, designer("Error Message", "What went wrong and what to do, for people.")]
    details: Annotated[
        list[ErrorDetail], designer("Error Details", "Each thing wrong with the request, such as each bad field.")
    ] = Field(default_factory=list)


class ErrorBody(_Model):
    """Microsoft REST API guidelines error body: every answer that is not a success."""

    error: Annotated[ErrorInfo, designer("Error", "What went wrong: its code, its message and the details.")]
