"""The timer-triggered functions: retention's daily purge and the watch on claims needing attention.

Both log for Application Insights: the purge one INFO summary, and a WARNING when it stopped
early; the watch one WARNING line with the count per scope when any claim needs attention, and
nothing when all is well, so that an alert on that line fires only when a person is needed.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import azure.functions as func

from oncegate import bootstrap
from oncegate.service.retention import DEFAULT_PAGE_SIZE, PurgeReport

logger = logging.getLogger(__name__)

# host.json's functionTimeout (2 minutes) ends a timer function too: stop well before it, and let the
# next run (or `oncegate purge --resume`) go on.
PURGE_TIME_BUDGET = timedelta(seconds=90)
PURGE_PAGE_SIZE = DEFAULT_PAGE_SIZE
ATTENTION_HINT = "list them with GET /api/claims?attention=true or `oncegate claims attention`"


def purge(timer: func.TimerRequest) -> PurgeReport:
    """Delete the finished claims whose retention is over, within the time budget."""
    report = bootstrap.get_services().retention.purge(page_size=PURGE_PAGE_SIZE, time_budget=PURGE_TIME_BUDGET)
    logger.info("Retention purge%s: %s", " (late run)" if timer.past_due else "", report.summary())
    if report.error is not None:
        logger.warning("Retention purge stopped early: the store failed (%s); the next run goes on.", report.error)
    elif report.stopped_early:
        logger.warning(
            "Retention purge stopped early after %d pages (time budget %d s): the next run goes on, or resume now "
            "with `oncegate purge --resume %s`; if this repeats, run it more often (ONCEGATE_RETENTION_SCHEDULE).",
            report.pages,
            PURGE_TIME_BUDGET.total_seconds(),
            report.cursor,
        )
    return report


def watch_attention(timer: func.TimerRequest) -> None:
    """One WARNING line with the claims needing attention per scope; nothing when there are none."""
    counts = bootstrap.get_services().attention.counts()
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
