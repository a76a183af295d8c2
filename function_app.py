"""OnceGate's Azure Functions app (Python v2 model): one function per action of the operation table.

Start reading at the operation table, ``oncegate/entrypoints/operations/``: one entry per action
holds its route, method, role, models, designer text and how it is parsed, served and rendered.
This module declares one Azure function per entry, under the entry's name, each running the one
pipeline of ``oncegate.entrypoints.http``; ``oncegate serve`` serves this very ``app`` object
locally, so its routes are the only route table. Besides them: the catch-all that answers 404/405,
and two timer functions (``oncegate.entrypoints.timers``) that purge finished claims after their
retention and watch for claims needing attention; their schedules are app settings, which the host reads.
"""

import gc
import logging
import os

import azure.functions as func

# Nothing the app's modules make while they are imported is garbage: modules, classes, functions and pydantic's
# schemas live as long as the process. The collector would walk them again and again while they are made (about
# 6 ms of a first claim's 160 ms of CPU, issue 36), so it waits until they are, and then leaves them out of every
# later collection (gc.freeze). It is paused only for OnceGate's own imports: azure.functions is the host's.
collecting = gc.isenabled()
gc.disable()
try:
    from oncegate.config import AuthMode, ConfigError, Settings, read_auth_mode
    from oncegate.entrypoints import http, logs
    from oncegate.entrypoints.operations.functions import FUNCTIONS
finally:
    gc.freeze()
    if collecting:
        gc.enable()

logs.configure()

# No pydantic plugins: looking for one reads the metadata of every installed distribution, which the first
# request would pay (issue 36's cold start). An app that uses one sets PYDANTIC_DISABLE_PLUGINS itself
# (empty: every plugin is loaded), and this leaves it as it is.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


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


# One function per entry of the operation table, under the entry's name: Microsoft's worker indexes each,
# and function keys and telemetry are per function. An anonymous entry (health) needs no function key either.
# Declared from the list written from the table (operations.functions): each entry's module is imported when
# its function is first called, so a new process loads only what the actions it serves need (issue 36).
for listed in FUNCTIONS:
    app.route(
        route=listed.route,
        methods=[listed.method],
        auth_level=func.AuthLevel.ANONYMOUS if listed.anonymous else None,
    )(http.function(listed))


# NCRONTAB with seconds; the %NAME% syntax makes the host read the app setting (set in infra/app/api.bicep).
@app.timer_trigger(schedule="%ONCEGATE_RETENTION_SCHEDULE%", arg_name="timer", run_on_startup=False, use_monitor=True)
def purge_finished_claims(timer: func.TimerRequest) -> None:
    from oncegate.entrypoints import timers  # with the timer's first run: a request never needs it (issue 36)

    timers.purge(timer)


@app.timer_trigger(schedule="%ONCEGATE_ATTENTION_SCHEDULE%", arg_name="timer", run_on_startup=False, use_monitor=True)
def watch_claims_needing_attention(timer: func.TimerRequest) -> None:
    from oncegate.entrypoints import timers

    timers.watch_attention(timer)


@app.route(
    route="{*path}",
    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
    auth_level=func.AuthLevel.ANONYMOUS,
)
def unknown_route(req: func.HttpRequest) -> func.HttpResponse:
    """JSON 404/405 for what no action serves, instead of the host's empty answer."""
    return http.unknown_route(app, req)
