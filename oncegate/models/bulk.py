"""Bulk calls (issue 24): Check and claim many and Record results, up to 100 items in one request.

Each item is exactly the body of its single call and is answered as that call answers it, in the
item's place: an entry of the answer is either that call's answer or ``{"error": {...}}`` for the
item alone. An entry's model is therefore the single answer with every field optional
(:func:`_entry_of`), so that the connector's definition declares an error entry truthfully and the
designer shows each field with the single action's own text.
"""

from typing import Annotated, Any

from pydantic import Field, create_model, field_validator
from pydantic.fields import FieldInfo

from oncegate.domain.limits import MAX_ITEMS as MAX_ITEMS
from oncegate.models.base import IMPORTANT, _Model, _Request, designer
from oncegate.models.claim_records import ClaimView, RecordResultRequest
from oncegate.models.claim_requests import ClaimItem
from oncegate.models.claim_views import ClaimResponse
from oncegate.models.health import ErrorInfo

ITEM_REFUSAL = designer(
    "Item Error",
    "Present instead of the answer when this item alone was refused: its code (such as invalid_request, "
    "sensitive_key, too_large, stale_claim or store_unavailable), message and details, as the single action "
    "would answer them. When any item has store_unavailable, send the whole call again, unchanged.",
    IMPORTANT,
)


def _entry_of(
    model: type[_Model], name: str, doc: str, *, renamed: dict[str, tuple[str, FieldInfo]] | None = None
) -> Any:
    """``model`` with every field optional and its designer text kept; ``renamed`` gives a field another name and
    designer text."""
    fields: dict[str, Any] = {}
    for field_name, info in model.model_fields.items():
        annotation: Any = info.annotation
        new_name, text = (renamed or {}).get(field_name, (field_name, None))
        merged = FieldInfo.merge_field_infos(info, *([text] if text else []), default=None)
        fields[new_name] = (annotation | None, merged)
    return create_model(name, __base__=_Model, __doc__=doc, **fields)


_ClaimAnswer = _entry_of(
    ClaimResponse, "_ClaimAnswer", "The answer Check and claim gives the item, every field absent for a refused item."
)
# The claim's recorded error text: ``error`` is the item's refusal here, as in every error body.
_ResultAnswer = _entry_of(
    ClaimView,
    "_ResultAnswer",
    "The claim as Record result answers it, every field absent for a refused item.",
    renamed={
        "error": (
            "error_message",
            designer("Recorded Error", "The error text recorded with a failed or unknown outcome, as sent."),
        )
    },
)


class ClaimManyRequest(_Request):
    """Check and claim many: 1 to 100 Check and claim bodies, decided as if sent one after another in order."""

    # Each item is read on its own, so that one bad item is refused alone (see oncegate.entrypoints.http).
    items: Annotated[
        list[ClaimItem],
        designer(
            "Items",
            "The records to check and claim, at most 100, each exactly a Check and claim body. Build them with a "
            "Select action over the rows: Scope, Business Key, Payload or Fingerprint, Run ID, Flow and a Reference "
            "that finds the row again.",
            IMPORTANT,
        ),
    ] = Field(min_length=1, max_length=MAX_ITEMS)


class ClaimManyEntry(_ClaimAnswer):  # type: ignore[misc,valid-type]
    """One item's answer, in the item's place: Check and claim's answer, or the item's own error."""

    reference: Annotated[
        str | None,
        designer(
            "Item Reference",
            "The item's own reference, given back so that the flow can find its row, as with a Filter array on "
            "the decision.",
            IMPORTANT,
        ),
    ] = None
    error: Annotated[ErrorInfo | None, ITEM_REFUSAL] = None


class ClaimManyAnswer(_Model):
    """The answers to Check and claim many, one per item and in the items' order."""

    value: Annotated[
        list[ClaimManyEntry],
        designer(
            "Answers",
            "One answer per item, in the items' order. Split them with a Filter array on Decision: proceed and "
            "reconcile carry the Claim Token to record the result with.",
            IMPORTANT,
        ),
    ]


class ResultItem(RecordResultRequest):
    """One result of a Record results call: Record result's body with the claim's id."""

    claim_id: Annotated[
        str,
        designer("Claim ID", "The claim's id, from Check and claim or Check and claim many.", IMPORTANT),
    ] = Field(min_length=1)


class RecordResultsRequest(_Request):
    """Record results: 1 to 100 results, each recorded as Record result records it."""

    items: Annotated[
        list[ResultItem],
        designer(
            "Items",
            "The results to record, at most 100: for each claim its Claim ID, Claim Token, Outcome and the Target "
            "Record ID that the target system holds. Build them with a Select action after the side effects.",
            IMPORTANT,
        ),
    ] = Field(min_length=1, max_length=MAX_ITEMS)


class ResultEntry(_ResultAnswer):  # type: ignore[misc,valid-type]
    """One item's answer, in the item's place: the claim as Record result answers it, or the item's own error."""

    error: Annotated[ErrorInfo | None, ITEM_REFUSAL] = None


class RecordResultsAnswer(_Model):
    """The answers to Record results, one per item and in the items' order."""

    value: Annotated[
        list[ResultEntry],
        designer(
            "Answers",
            "One answer per item, in the items' order: the claim with its result, or the item's error. A stale "
            "claim token is that item's stale_claim.",
            IMPORTANT,
        ),
    ]


class BulkItems(_Request):
    """A bulk call's body as read first: 1 to 100 items of any JSON, each then read as its single call's body."""

    # Any: an item the JSON reader refused already comes as its refusal, answered in its place.
    items: list[Any]

    @field_validator("items")
    @classmethod
    def _one_to_a_hundred(cls, items: list[Any]) -> list[Any]:
        if not 1 <= len(items) <= MAX_ITEMS:
            raise ValueError(f"give 1 to {MAX_ITEMS} items in one call, not {len(items)}: send more in further calls")
        return items
