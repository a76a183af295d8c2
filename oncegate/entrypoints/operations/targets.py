"""The operations on declared targets (issue 34): ``PUT /api/targets`` and ``GET /api/targets``, for operators.

Both need the app role ``OnceGate.Reviewer`` in Entra ID mode. With function keys there are no roles, and a
key is what every flow holds: there, both answer ``403 entra_required`` before anything is read or stored,
and targets are declared with ``oncegate targets`` on the store instead. The connector leaves them out:
no maker is offered them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oncegate.domain.target_declarations import Declaration, written
from oncegate.entrypoints.operations.table import Call, Designer, Operation
from oncegate.entrypoints.principal import Role
from oncegate.entrypoints.target_views import target_list, target_view
from oncegate.errors import EntraRequired
from oncegate.models import INTERNAL
from oncegate.models.targets import SetTargetRequest, TargetList, TargetView

if TYPE_CHECKING:
    pass


def signed_in_only(call: Call[Any, Any]) -> None:
    """Refuse a caller with a function key: a key names no one and carries no role (issue 34)."""
    if call.caller is None:
        raise EntraRequired(
            "Targets are declared by operators only: over HTTP in Entra ID mode with the app role OnceGate.Reviewer, "
            "never with a function key; use oncegate targets on the store instead."
        )


def declaration(call: Call[SetTargetRequest, None]) -> Declaration:
    """The declaration as the operator sent it, for the domain's one check (which names a refused field)."""
    signed_in_only(call)
    return written(call.body)


SET_TARGET = Operation(
    name="set_target",
    route="targets",
    method="PUT",
    role=Role.REVIEWER,
    body=SetTargetRequest,
    response=TargetView,
    in_connector=False,
    parse=declaration,
    serve=lambda services, call, command: services.targets.set(command, declared_by=call.caller),
    render=lambda call, target: target_view(target),
    designer=Designer(
        operation_id="SetTarget",
        summary="Set target",
        description=(
            "Declares a target Perform once may call, or declares it anew (a declaration is whole). For operators: "
            "Entra ID sign-in with the reviewer role only, never a function key."
        ),
        visibility=INTERNAL,
        success="The target as declared, its secret named, never shown.",
        errors=(400, 413, 503),
        body_description="The target's declaration.",
    ),
)

LIST_TARGETS = Operation(
    name="list_targets",
    route="targets",
    method="GET",
    role=Role.REVIEWER,
    response=TargetList,
    in_connector=False,
    parse=signed_in_only,
    serve=lambda services, call, command: services.targets.list(),
    render=lambda call, targets: target_list(targets),
    designer=Designer(
        operation_id="ListTargets",
        summary="List targets",
        description=(
            "Lists the declared targets, by name, each secret named, never shown. For operators: Entra ID sign-in "
            "with the reviewer role only."
        ),
        visibility=INTERNAL,
        success="Every declared target.",
        errors=(503,),
    ),
)

OPERATIONS = (SET_TARGET, LIST_TARGETS)
