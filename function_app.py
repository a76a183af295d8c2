"""OnceGate's Azure Functions app (Python v2 model): one thin function per contract action.

Each function hands its request to ``oncegate.entrypoints.http``; ``oncegate serve`` serves
this very ``app`` object locally, so the routes below are the only route table. Two timer
functions (``oncegate.entrypoints.timers``) purge finished claims after their retention and
watch for claims needing attention; their schedules are app settings, which the host reads.
"""

import logging

import azure.functions as func

from oncegate.config import AuthMode, ConfigError, Settings, read_auth_mode
from oncegate.entrypoints import http, logs, timers
from oncegate.entrypoints.principal import Role

logs.configure()

try:
    auth_mode = Settings.from_environment().auth
except ConfigError as exc:
    # One clear line naming the setting, instead of a stack trace on the first request. The app still loads
    # every function, so that health says what is wrong and each action answers 503 not_configured naming the
    # setting (http.respond), instead of the app having no function at all until someone restarts it (an
    # unresolved Key Vault reference at the first start after a deployment, for one).
    logging.getLogger("oncegate").critical("OnceGate is not configured, every action answers 503: %s", exc)
    # The gate still follows ONCEGATE_AUTH when it can be read on its own: an Entra ID caller then gets the
    # 503 that says what is wrong, not the host's bare 401 for a missing key. When ONCEGATE_AUTH itself is
    # unreadable, function keys: the stricter gate, which lets in only those holding a key of this app.
    auth_mode = read_auth_mode() or AuthMode.KEY

# In entra mode the app validates each caller's access token itself (oncegate.entrypoints.bearer) and
# checks its app roles, so the host lets requests through; App Service authentication may stand in front
# as an outer gate. Otherwise the host checks a function key on every action.
app = func.FunctionApp(
    http_auth_level=func.AuthLevel.ANONYMOUS if auth_mode is AuthMode.ENTRA else func.AuthLevel.FUNCTION
)


@app.route(route="claims", methods=["POST"])
def check_and_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.check_and_claim)


# Bulk calls (issue 24): literal segments, so the host matches them before claims/{claimId}.
@app.route(route="claims/batch", methods=["POST"])
def check_and_claim_many(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.check_and_claim_many)


@app.route(route="claims/results", methods=["POST"])
def record_results(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.record_results)


@app.route(route="claims", methods=["GET"])
def list_claims_needing_attention(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_claims_needing_attention)


@app.route(route="claim-list", methods=["GET"])
def list_claims(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_claims)


@app.route(route="claims/lookup", methods=["POST"])
def lookup_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.lookup_claim)


@app.route(route="claims/{claimId}", methods=["GET"])
def get_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.get_claim)


@app.route(route="claims/{claimId}/history", methods=["GET"])
def list_claim_history(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_claim_history)


# The poll address of Check and claim (wait): the Location of its 202 answer (issue 25).
@app.route(route="claims/{claimId}/wait", methods=["GET"])
def wait_for_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.wait_for_claim)


# Perform once (issue 34): OnceGate makes the call to a declared target itself, once; its poll address.
@app.route(route="perform", methods=["POST"])
def perform_once(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.perform_once)


@app.route(route="perform/{claimId}/wait", methods=["GET"])
def wait_for_perform(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.wait_for_perform)


@app.route(route="claims/{claimId}/result", methods=["POST"])
def record_result(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.record_result)


@app.route(route="claims/{claimId}/release", methods=["POST"])
def release_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.release_claim)


# The contract's Heartbeat. The function keeps its first name: the connector's operation (RenewClaim)
# is named after it, and saved flows refer to their actions by operation.
@app.route(route="claims/{claimId}/heartbeat", methods=["POST"])
def renew_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.renew_claim)


@app.route(route="claims/{claimId}/review", methods=["POST"])
def review_claim(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.review_claim, role=Role.REVIEWER)


@app.route(route="conflicts", methods=["POST"])
def report_conflict(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.report_conflict)


@app.route(route="conflicts", methods=["GET"])
def list_conflicts(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_conflicts)


@app.route(route="conflict-events", methods=["GET"])
def on_conflict_reported(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.poll_conflicts)


@app.route(route="conflicts/{conflictId}", methods=["GET"])
def get_conflict(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.get_conflict)


@app.route(route="conflicts/{conflictId}/resolve", methods=["POST"])
def resolve_conflict(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.resolve_conflict, role=Role.REVIEWER)


@app.route(route="flows", methods=["GET"])
def list_flows(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_flows)


@app.route(route="flows", methods=["PUT"])
def register_flow(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.register_flow, role=Role.REVIEWER)


@app.route(route="flows/overlaps", methods=["GET"])
def list_flow_overlaps(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_flow_overlaps)


@app.route(route="scopes", methods=["GET"])
def list_scopes(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.list_scopes)


@app.route(route="scopes", methods=["PUT"])
def set_scope(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.set_scope, role=Role.REVIEWER)


@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
def health(req: func.HttpRequest) -> func.HttpResponse:
    return http.respond(req, http.health, role=None)


# NCRONTAB with seconds; the %NAME% syntax makes the host read the app setting (set in infra/app/api.bicep).
@app.timer_trigger(schedule="%ONCEGATE_RETENTION_SCHEDULE%", arg_name="timer", run_on_startup=False, use_monitor=True)
def purge_finished_claims(timer: func.TimerRequest) -> None:
    timers.purge(timer)


@app.timer_trigger(schedule="%ONCEGATE_ATTENTION_SCHEDULE%", arg_name="timer", run_on_startup=False, use_monitor=True)
def watch_claims_needing_attention(timer: func.TimerRequest) -> None:
    timers.watch_attention(timer)


@app.route(
    route="{*path}",
    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
    auth_level=func.AuthLevel.ANONYMOUS,
)
def unknown_route(req: func.HttpRequest) -> func.HttpResponse:
    """JSON 404/405 for what no action serves, instead of the host's empty answer."""
    return http.unknown_route(app, req)
