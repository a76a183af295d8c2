"""The timer-triggered functions: retention's daily purge and the watch on claims needing attention.

Both log for Application Insights: the purge one INFO summary, and a WARNING when it stopped
early; the watch one WARNING line with the count per scope when any claim needs attention, and
nothing when all is well. With telemetry on (``oncegate.telemetry``) each run also sends its
events: the purge ``OnceGate.Purge``; the watch ``OnceGate.Watch`` every time, all clear or not,
with one ``OnceGate.Attention`` per scope and reason and one ``OnceGate.OpenConflicts`` per scope,
which the alerts of ``infra/core/monitor/alerts.bicep`` read. A run the store or the settings
failed sends ``OnceGate.Unavailable`` before it fails.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import azure.functions as func

from oncegate import bootstrap, telemetry
from oncegate.config import ConfigError
from oncegate.domain.backups import Restore
from oncegate.domain.limits import DEFAULT_PAGE_SIZE
from oncegate.domain.statuses import AttentionReason
from oncegate.entrypoints import error_map
from oncegate.errors import NotConfigured, StoreUnavailable
from oncegate.service.attention import Waiting, counted
from oncegate.service.retention import PurgeReport

logger = logging.getLogger(__name__)

# host.json's functionTimeout (2 minutes) ends a timer function too: stop well before it, and let the
# next run (or `oncegate purge --resume`) go on.
PURGE_TIME_BUDGET = timedelta(seconds=90)
PURGE_PAGE_SIZE = DEFAULT_PAGE_SIZE
# The claims the daily repair indexes again: two days, so that a run late by a day still covers every flush lost.
INDEX_REPAIR_WINDOW = timedelta(days=2)
ATTENTION_HINT = "list them with GET /api/claims?attention=true or `oncegate claims attention`"


@contextmanager
def _reported(function: str) -> Iterator[None]:
    """Send ``OnceGate.Unavailable`` for a run the store or the settings failed, then fail as before."""
    try:
        yield
    except StoreUnavailable as exc:
        _unavailable(function, error_map.code(exc), None)
        raise
    except NotConfigured as exc:
        _unavailable(function, error_map.code(exc), exc.target)
        raise
    except ConfigError as exc:
        _unavailable(function, error_map.code(NotConfigured), exc.setting)
        raise


def _unavailable(function: str, code: str, setting: str | None) -> None:
    dimensions = {telemetry.ACTION: function, telemetry.ERROR_CODE: code, telemetry.SETTING: setting}
    telemetry.emit(telemetry.UNAVAILABLE, dimensions)


def _repair_index() -> None:
    """Index again the recent claims an instance stopped before its flush left out (issue 16); a failure waits a day."""
    since = datetime.now(UTC) - INDEX_REPAIR_WINDOW
    try:
        repaired = bootstrap.get_services().store.repair_index(received_since=since)
    except StoreUnavailable as exc:
        logger.warning("Claim index repair failed (%s); the next daily run repairs it.", exc.message)
        return
    if repaired:  # SQLite, which keeps no index apart, always repairs none: nothing to say
        logger.info("Claim index repair: %d claims since %s indexed again", repaired, since.isoformat())


def purge(timer: func.TimerRequest) -> PurgeReport:
    """Delete the finished claims whose retention is over, within the time budget."""
    started = time.perf_counter()
    with _reported("purge_finished_claims"):
        report = bootstrap.get_services().retention.purge(page_size=PURGE_PAGE_SIZE, time_budget=PURGE_TIME_BUDGET)
    logger.info("Retention purge%s: %s", " (late run)" if timer.past_due else "", report.summary())
    if report.error is not None:
        logger.warning("Retention purge stopped early: the store failed (%s); the next run goes on.", report.error)
    elif report.stopped_early:
        logger.warning(
            "Retention purge stopped early after %d page%s (time budget %d s): the next run goes on, or resume now "
            "with `oncegate purge --resume %s`; if this repeats, run it more often (ONCEGATE_RETENTION_SCHEDULE).",
            report.pages,
            "s" * (report.pages != 1),
            PURGE_TIME_BUDGET.total_seconds(),
            report.cursor,
        )
    _repair_index()
    telemetry.emit(
        telemetry.PURGE,
        {
            telemetry.DELETED: report.deleted_total,
            telemetry.EXAMINED: report.examined,
            telemetry.KEPT: sum(report.kept.values()),
            telemetry.PAGES: report.pages,
            telemetry.FINISHED: report.finished,
            telemetry.STORE_FAILED: report.error is not None,
            telemetry.LATENCY_MS: round((time.perf_counter() - started) * 1000, 2),
        },
    )
    return report


def watch_attention(timer: func.TimerRequest) -> None:
    """One WARNING line with the claims needing attention per scope (nothing when none), and the watch's events."""
    with _reported("watch_claims_needing_attention"):
        _look_up_in_doubt()
        attention = bootstrap.get_services().attention
        waiting = attention.waiting()
        # Only the telemetry reads the open conflicts: without it the watch costs what it did.
        conflicts = attention.open_conflicts() if telemetry.enabled() else {}
        restore = bootstrap.get_services().claims.restore() if telemetry.enabled() else None
    _send_waiting(waiting, conflicts, restore)
    counts = counted(waiting)
    if not counts:
        return
    total = sum(sum(reasons.values()) for reasons in counts.values())
    scopes = "; ".join(
        f"{scope} {sum(reasons.values())} ("
        + ", ".join(f"{why.value} {count}" for why, count in sorted(reasons.items()))
        + ")"
        for scope, reasons in sorted(counts.items())
    )
    logger.warning("%d claims need attention: %s; %s.", total, scopes, ATTENTION_HINT)


def _look_up_in_doubt() -> None:
    """Perform once's calls in doubt whose deadline passed are looked up at their target, never sent (issue 34)."""
    found = bootstrap.get_services().perform.look_up_all_in_doubt()
    if found:
        logger.info("Perform once: %d calls in doubt were found at their target by a look-up and recorded", found)


def _send_waiting(
    waiting: dict[tuple[str, AttentionReason], Waiting], conflicts: dict[str, Waiting], restore: Restore | None
) -> None:
    """``OnceGate.Watch`` with the totals (and, on a store restored from an export, until when the keys done after
    it are forgotten), then what waits per scope; one id ties the run's events together."""
    run = secrets.token_hex(8)
    telemetry.emit(
        telemetry.WATCH,
        {
            telemetry.WATCH_RUN: run,
            telemetry.CLAIMS: sum(group.count for group in waiting.values()),
            telemetry.CONFLICTS: sum(group.count for group in conflicts.values()),
            telemetry.EXPORTED_AT: restore.exported_at.isoformat() if restore else None,
            telemetry.FORGOTTEN_UNTIL: restore.forgotten_until.isoformat() if restore else None,
        },
    )
    for (scope, why), group in waiting.items():
        telemetry.emit(
            telemetry.ATTENTION,
            {
                telemetry.WATCH_RUN: run,
                telemetry.SCOPE: scope,
                telemetry.REASON: why.value,
                telemetry.CLAIMS: group.count,
                telemetry.OLDEST_SINCE: group.oldest.isoformat(),
            },
        )
    for scope, group in conflicts.items():
        telemetry.emit(
            telemetry.OPEN_CONFLICTS,
            {
                telemetry.WATCH_RUN: run,
                telemetry.SCOPE: scope,
                telemetry.CONFLICTS: group.count,
                telemetry.OLDEST_SINCE: group.oldest.isoformat(),
            },
        )
