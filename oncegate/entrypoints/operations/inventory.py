"""The operations on the flow inventory and the scope catalogue, and the service's health."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from oncegate.domain.keys import normalise_scope
from oncegate.domain.records import Flow, flow_text
from oncegate.entrypoints import render
from oncegate.entrypoints.operations.table import Call, Designer, Operation
from oncegate.entrypoints.parse import paging
from oncegate.entrypoints.principal import Role
from oncegate.errors import StoreUnavailable
from oncegate.models import (
    ADVANCED,
    INTERNAL,
    FlowList,
    FlowView,
    Health,
    ListPageQuery,
    OverlapList,
    RegisterFlowRequest,
    ScopeList,
    ScopeView,
    SetScopeRequest,
)
from oncegate.service.commands.registry import RegisterFlow, SetScope

if TYPE_CHECKING:
    from oncegate.bootstrap import Services

PAGEABLE = {"x-ms-pageable": {"nextLinkName": "nextLink"}}


def _registration(call: Call[RegisterFlowRequest, None]) -> RegisterFlow:
    """The settings the request names, a null among them reset; one left out stays as it is (issue 31)."""
    body = call.body
    named: dict[str, Any] = {name: getattr(body, name) for name in body.model_fields_set - {"name", "environment"}}
    return RegisterFlow(flow=Flow(body.name, body.environment), **named)


def _scope_settings(call: Call[SetScopeRequest, None]) -> SetScope:
    """The settings the request names, a null among them reset; one left out stays as it is (issue 31)."""
    body = call.body
    named: dict[str, Any] = {name: getattr(body, name) for name in body.model_fields_set - {"scope"}}
    for pointers in ("fingerprint_include", "fingerprint_ignore"):
        if pointers in named:
            named[pointers] = tuple(named[pointers] or ())
    return SetScope(scope=body.scope, **named)


def _health(services: Services, call: Call[None, None], command: None) -> Health:
    """The service's health, naming the store it runs on (and the store that does not answer)."""
    where = services.store_location
    try:
        health = render.health(services.claims.health(), services.claims.restore())
    except StoreUnavailable as exc:
        if where is None:
            raise
        raise StoreUnavailable(f"The {services.store.kind} store at {where} does not answer: {exc.message}") from exc
    return health.model_copy(update={"store_location": where})


LIST_FLOWS = Operation(
    name="list_flows",
    route="flows",
    method="GET",
    query=ListPageQuery,
    response=FlowList,
    parse=lambda call: paging(call.query),
    serve=lambda services, call, command: services.inventory.list_flows(command),
    render=lambda call, found: FlowList(
        value=[render.flow_view(record) for record in found[0]], next_link=call.link(found[1])
    ),
    designer=Designer(
        operation_id="ListFlows",
        summary="List flows",
        description=(
            "Lists every flow that claimed or was registered, with its owner, whether it may claim, and how often it "
            "claimed and was answered duplicate."
        ),
        visibility=ADVANCED,
        success="One page of flows, with the link to the next page.",
        errors=(400, 503),
        extra=PAGEABLE,
    ),
)

REGISTER_FLOW = Operation(
    name="register_flow",
    route="flows",
    method="PUT",
    role=Role.REVIEWER,
    body=RegisterFlowRequest,
    response=FlowView,
    parse=_registration,
    # Notes are free text kept for as long as the registration: checked like result data.
    stores=lambda call, command: flow_text(command.flow),
    serve=lambda services, call, command: services.inventory.register_flow(command),
    render=lambda call, record: render.flow_view(record),
    designer=Designer(
        operation_id="RegisterFlow",
        summary="Register flow",
        description=(
            "Registers a flow in the inventory, or changes its registration: its owner, its notes and whether it may "
            "claim; only the fields given change, the others stay as set. Check and claim answers blocked to a "
            "disabled flow."
        ),
        visibility=ADVANCED,
        success="The flow with its registration.",
        errors=(400, 413, 503),
        body_description="The flow and its registration.",
    ),
)

LIST_FLOW_OVERLAPS = Operation(
    name="list_flow_overlaps",
    route="flows/overlaps",
    method="GET",
    query=ListPageQuery,
    response=OverlapList,
    parse=lambda call: paging(call.query),
    serve=lambda services, call, command: services.inventory.list_overlaps(command),
    render=lambda call, found: OverlapList(
        value=[render.overlap_view(record) for record in found[0]], next_link=call.link(found[1])
    ),
    designer=Designer(
        operation_id="ListFlowOverlaps",
        summary="List flow overlaps",
        description=(
            "Lists the pairs of flows that met each other's claims, such as copies of one flow left running in two "
            "environments."
        ),
        visibility=ADVANCED,
        success="One page of overlapping pairs of flows, with the link to the next page.",
        errors=(400, 503),
        extra=PAGEABLE,
    ),
)

LIST_SCOPES = Operation(
    name="list_scopes",
    route="scopes",
    method="GET",
    query=ListPageQuery,
    response=ScopeList,
    parse=lambda call: paging(call.query),
    serve=lambda services, call, command: services.inventory.list_scopes(command),
    render=lambda call, found: ScopeList(
        value=[render.scope_view(record, open_conflicts) for record, open_conflicts in found[0]],
        next_link=call.link(found[1]),
    ),
    designer=Designer(
        operation_id="ListScopes",
        summary="List scopes",
        description=(
            "Lists every scope that was claimed or set up, with its owner, default lease, retention, claims by status "
            "and open conflicts."
        ),
        visibility=ADVANCED,
        success="One page of scopes, with the link to the next page.",
        errors=(400, 503),
        extra=PAGEABLE,
    ),
)

SET_SCOPE = Operation(
    name="set_scope",
    route="scopes",
    method="PUT",
    role=Role.REVIEWER,
    body=SetScopeRequest,
    response=ScopeView,
    parse=_scope_settings,
    stores=lambda call, command: f"scope {normalise_scope(call.body.scope)}",
    serve=lambda services, call, command: services.inventory.set_scope(command),
    render=lambda call, found: render.scope_view(*found),
    designer=Designer(
        operation_id="SetScope",
        summary="Set scope",
        description=(
            "Sets the owner, default lease, retention, horizon, description, key pattern or fingerprint rules of a "
            "scope: only the fields given change, the others stay as set. Claims of the scope that ask for no lease "
            "get its default lease."
        ),
        visibility=ADVANCED,
        success="The scope with its settings.",
        errors=(400, 413, 503),
        body_description="The scope and its settings.",
    ),
)

# Anyone may ask, without a function key or a token: it is meant for monitoring.
HEALTH = Operation(
    name="health",
    route="health",
    method="GET",
    role=None,
    response=Health,
    parse=lambda call: None,
    serve=_health,
    render=lambda call, health: health,
    designer=Designer(
        operation_id="GetHealth",
        summary="Get service health",
        description="Tells whether the service and its store answer. It is meant for monitoring, not for flows.",
        visibility=INTERNAL,
        success="The service and its store answer.",
        errors=(503,),
    ),
)

OPERATIONS = (LIST_FLOWS, REGISTER_FLOW, LIST_FLOW_OVERLAPS, LIST_SCOPES, SET_SCOPE, HEALTH)
