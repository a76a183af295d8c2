"""What a flow sends to claim: Check and claim (the poll of its wait: ``claim_waits``; a claim once made:
``claim_records``)."""

from typing import Annotated

from pydantic import Field, JsonValue, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from oncegate.domain.waiting import DEFAULT_MAX_WAIT_SECONDS, MAX_MAX_WAIT_SECONDS, MIN_MAX_WAIT_SECONDS
from oncegate.models.base import (
    ADVANCED,
    IMPORTANT,
    LeaseSeconds,
    Reference,
    ScopeInput,
    SourceInput,
    Text256,
    _Request,
    designer,
)


class FlowRef(_Request):
    """The calling flow, e.g. ``{"name": "Create ERP order", "environment": "Default-contoso"}``."""

    name: Annotated[
        Text256,
        designer(
            "Flow Name",
            "The name of the flow, such as Create ERP order. "
            "Use the expression workflow()?['tags']?['flowDisplayName'].",
            ADVANCED,
        ),
    ]
    environment: Annotated[
        Text256,
        designer(
            "Flow Environment",
            "The environment the flow runs in. Use the expression workflow()?['tags']?['environmentName'].",
            ADVANCED,
        ),
    ]


def flow_in_answer(title: str, which: str) -> FieldInfo:
    """The designer text of a flow an answer shows, its name and environment titled apart from any other flow's.

    ``which`` names the flow, such as "the flow that did the side effect". FlowRef's own text is for requests.
    """
    return designer(
        title,
        f"{which[0].upper()}{which[1:]}.",
        parts={
            "name": (f"{title} Name", f"The name of {which}."),
            "environment": (f"{title} Environment", f"The environment of {which}."),
        },
    )


BusinessKey = Annotated[
    str,
    Field(min_length=1, max_length=4096),
    designer(
        "Business Key",
        "The business key from the source system, such as an order number or source system plus record id. "
        "It is compared after trimming and Unicode normalisation, and never stored in clear.",
        IMPORTANT,
    ),
]
RunId = Annotated[
    Text256,
    designer(
        "Run ID",
        "The run of this flow, which identifies one execution and never the business object. Use the "
        "expression workflow()?['run']?['name'].",
        ADVANCED,
    ),
]
CallingFlow = Annotated[
    FlowRef | None,
    designer(
        "Flow",
        "The calling flow by name and environment, so that copies of a flow in other environments are told apart.",
        ADVANCED,
    ),
]
# None: the scope's default lease (PUT /api/scopes), else DEFAULT_LEASE_SECONDS.
RequestedLease = Annotated[
    LeaseSeconds | None,
    designer(
        "Lease Seconds",
        "How long this run holds the claim, from 15 to 86400 seconds (the scope's default lease when left empty, "
        "else 300). A run that asks after the lease ended without a result is told to reconcile.",
        ADVANCED,
    ),
]


class BusinessIntent(_Request):
    """What identifies the business object and what it looks like."""

    scope: ScopeInput
    key: BusinessKey
    source: SourceInput = None
    payload: Annotated[
        JsonValue,
        designer(
            "Payload",
            "The business data as any JSON value, such as the order being created. The service compares its "
            "fingerprint with the claim's to detect changed data and never stores it; give this or Fingerprint.",
            IMPORTANT,
        ),
    ] = None
    fingerprint: Annotated[
        str | None,
        designer(
            "Fingerprint",
            "A version of the business data that you compute yourself, such as a document version, at most 128 "
            "characters. Give this or Payload, not both.",
            ADVANCED,
        ),
    ] = Field(default=None, min_length=1, max_length=128)

    @field_validator("fingerprint")
    @classmethod
    def _one_way_to_fingerprint(cls, fingerprint: str | None, info: ValidationInfo) -> str | None:
        # On the field, not the model, so the 400 names it; payload is declared (and validated) first.
        if fingerprint is not None and info.data.get("payload") is not None:
            raise ValueError("give either payload or fingerprint, not both")
        return fingerprint


class ClaimItem(BusinessIntent):
    """One record of Check and claim many, and what Check and claim's body has besides waiting (issue 25)."""

    run_id: RunId
    flow: CallingFlow = None
    lease_seconds: RequestedLease = None
    reference: Annotated[
        Reference | None,
        designer(
            "Reference",
            "A label to find the claim again by eye, such as the order number, at most 256 characters. Unlike the "
            "key it is stored in clear: leave out anything that must not be kept, such as personal data.",
            ADVANCED,
        ),
    ] = None


class ClaimRequest(ClaimItem):
    """Check and claim: may this run do the side effect for this business key?

    A bulk call's items are :class:`ClaimItem`: Check and claim many answers at once, so its items do not wait.
    """

    wait: Annotated[
        bool,
        designer(
            "Wait",
            "When another run holds the claim, wait for it to finish instead of answering in_progress: the action "
            "answers 202 and the flow engine polls until the holder succeeded, failed, released or ran out of its "
            "lease, then gives the decision this run gets at that moment. Needs Flow and Payload or Fingerprint.",
            ADVANCED,
        ),
    ] = False
    max_wait_seconds: Annotated[
        int | None,
        designer(
            "Max Wait Seconds",
            f"With Wait: how long to wait at most, from {MIN_MAX_WAIT_SECONDS} to {MAX_MAX_WAIT_SECONDS} seconds "
            f"({DEFAULT_MAX_WAIT_SECONDS} when left empty); then the answer is in_progress. Keep it within the "
            "action's timeout.",
            ADVANCED,
        ),
    ] = Field(default=None, ge=MIN_MAX_WAIT_SECONDS, le=MAX_MAX_WAIT_SECONDS)

    @field_validator("wait")
    @classmethod
    def _recognisable_when_waiting(cls, wait: bool, info: ValidationInfo) -> bool:
        # A repeated poll is the same run asking again only with its flow and business data (Intent.is_holder_of).
        data = info.data
        if wait and (data.get("flow") is None or (data.get("payload") is None and data.get("fingerprint") is None)):
            raise ValueError("wait needs flow, and payload or fingerprint, so that each poll is recognised as this run")
        return wait
