"""The connector's view of the operation table: each action's entry, and the text that belongs to no one action.

Each entry of the operation table (``oncegate.entrypoints.operations``) carries its designer text
(summary, description, visibility, answers, errors) and its models. Keyed here by the name of the
app's function (``function_app.py``), which gives the route and method: the generator stops when a
function has no entry here, or an entry names no function. What follows is what the entries share:
the route parameters' text and each error status's description.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from oncegate.entrypoints import operations as table
from oncegate.entrypoints.operations import Operation
from oncegate.entrypoints.parse import CLAIM_ID_PATTERN, CONFLICT_ID_PATTERN


class PathParameter(NamedTuple):
    """A parameter of a route template, which is no field of a model."""

    summary: str
    description: str
    pattern: str
    extra: Mapping[str, Any] = {}


PATH_PARAMETERS = {
    "claimId": PathParameter("Claim ID", "The claim's id, from Check and claim.", CLAIM_ID_PATTERN),
    "conflictId": PathParameter(
        "Conflict ID",
        "The conflict's id, from Check and claim or the list of open conflicts.",
        CONFLICT_ID_PATTERN,
        # A picker of the open conflicts, titled by what differs.
        {
            "x-ms-dynamic-values": {
                "operationId": "ListConflicts",
                "value-collection": "value",
                "value-path": "conflictId",
                "value-title": "reason",
            }
        },
    ),
}

ERRORS = {
    400: "The request is not valid (invalid_request), or the key (sensitive_key) or a field it would store "
    "(sensitive_data) seems to carry personal data: the error names the field, and nothing was stored.",
    404: "No claim or conflict has this id, or no claim exists for this key.",
    409: "The request does not fit the claim's or the conflict's current state.",
    413: "The request body or one of its fields is over its size limit.",
    503: "The store cannot be reached or is busy (store_unavailable): nothing was changed, so retry after the given "
    "seconds. Or a setting of the app is wrong (not_configured), which its message names.",
}
# Each entry of the operation table, by the name of the app's function, in the table's order, which groups the
# actions as makers look for them.
OPERATIONS: dict[str, Operation] = {
    operation.name: operation for operation in table.OPERATIONS if operation.in_connector
}
# The app's functions no maker is offered (operators' actions): served, and left out of the connector on purpose.
NOT_OFFERED = frozenset(operation.name for operation in table.OPERATIONS if not operation.in_connector)
