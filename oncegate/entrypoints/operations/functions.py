"""The app's functions, one per entry of the operation table: written by ``python -m tools.functions`` from the table.

``function_app.py`` declares each from its line here and imports the entry's module (``aggregate``) when
the function is first called, so a new process loads only the entries it serves (issue 36's cold start).
Do not edit: change the entry, then run ``python -m tools.functions`` (the tests fail until it is run).
"""

from typing import NamedTuple


class Listed(NamedTuple):
    """One function: the entry's name, route and method, whether it takes no key, and the module that holds it."""

    name: str
    route: str
    method: str
    anonymous: bool
    aggregate: str


FUNCTIONS = (
    Listed("check_and_claim", "claims", "POST", False, "claims"),
    Listed("wait_for_claim", "claims/{claimId}/wait", "GET", False, "claims"),
    Listed("record_result", "claims/{claimId}/result", "POST", False, "claim_records"),
    Listed("check_and_claim_many", "claims/batch", "POST", False, "bulk"),
    Listed("record_results", "claims/results", "POST", False, "bulk"),
    Listed("release_claim", "claims/{claimId}/release", "POST", False, "claim_records"),
    Listed("renew_claim", "claims/{claimId}/heartbeat", "POST", False, "claim_records"),
    Listed("review_claim", "claims/{claimId}/review", "POST", False, "claim_records"),
    Listed("list_claims_needing_attention", "claims", "GET", False, "claim_records"),
    Listed("list_claims", "claim-list", "GET", False, "claim_records"),
    Listed("get_claim", "claims/{claimId}", "GET", False, "claim_records"),
    Listed("lookup_claim", "claims/lookup", "POST", False, "claim_records"),
    Listed("list_claim_history", "claims/{claimId}/history", "GET", False, "claim_records"),
    Listed("perform_once", "perform", "POST", False, "perform"),
    Listed("wait_for_perform", "perform/{claimId}/wait", "GET", False, "perform"),
    Listed("report_conflict", "conflicts", "POST", False, "conflicts"),
    Listed("list_conflicts", "conflicts", "GET", False, "conflicts"),
    Listed("on_conflict_reported", "conflict-events", "GET", False, "conflicts"),
    Listed("get_conflict", "conflicts/{conflictId}", "GET", False, "conflicts"),
    Listed("resolve_conflict", "conflicts/{conflictId}/resolve", "POST", False, "conflicts"),
    Listed("list_flows", "flows", "GET", False, "inventory"),
    Listed("register_flow", "flows", "PUT", False, "inventory"),
    Listed("list_flow_overlaps", "flows/overlaps", "GET", False, "inventory"),
    Listed("list_scopes", "scopes", "GET", False, "inventory"),
    Listed("set_scope", "scopes", "PUT", False, "inventory"),
    Listed("health", "health", "GET", True, "inventory"),
    Listed("set_target", "targets", "PUT", False, "targets"),
    Listed("list_targets", "targets", "GET", False, "targets"),
)
