"""The Azure store's history: a claim's events, rows of its partition beside the claim row, keyed by time.

An event is a row ``history-<time>-<event id>`` (the service's event ids start with their time, and are
the key as they are: ``history-20261102T090000123456Z-1f2e3d4c``), written in the transaction of the claim
change it records. The keys sort as the history lists, so a page is one range read of ``limit + 1`` rows
after the cursor's key, however long the history (issue 36).

Answers alike share one line, which counts them (``count_event``). The line stands at its first answer's
time; its tally, ``tally-<series id>``, is its twin outside the history, found by the series id alone, and
carries the ETag that counting is conditioned on. Each count writes both in one transaction::

    RowKey                                               one row per
    claim                                                claim
    history-20261102T090000000000Z-1f2e3d4c              event (a claim change, a result, a conflict)
    history-20261102T090500000000Z-series-9c1a…          series line, at its first answer
    tally-series-9c1a…                                   series line's tally

Releases before this one kept a series line under its series id, ``history-series-<digest>``, which
sorts after every time: a page's read runs on to them (a history shorter than a page is one read), or
reads them on their own, and answers counted since in the series' line at its time are shown in the
earlier line, as one. Only claims answered by an earlier release have such rows, so that second read is
made only for a history that may have them. A marker written the first time this release opens the store
says which: none if the store held no claims then; else those whose history starts before a day after it,
time enough for the instances of the earlier release to finish their requests; a history starting later
was begun by this release. The marker, beside the conflicts' own (every partition of the claims table but
its mark's is a claim's or an index's)::

    table              PartitionKey  RowKey                 columns
    OnceGateConflicts  upgrade       history-keyed-by-time  Since (the first open), HeldClaims (claims then)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import chain, islice
from operator import itemgetter
from secrets import token_hex
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, TableEntity, TransactionOperation, UpdateMode

from oncegate.bounded import Bounded
from oncegate.domain.records import HistoryEvent, Page
from oncegate.errors import InvalidRequest
from oncegate.stores import row_reading
from oncegate.stores.paging import decode_cursor, encode_cursor
from oncegate.stores.tables import batch, query
from oncegate.stores.tables.conflicts import UPGRADE_PARTITION
from oncegate.stores.tables.entities import (
    EXISTS,
    HISTORY_PREFIX,
    KEY_TIME,
    MISSING,
    STALE,
    TALLY_PREFIX,
    _claim_keys,
    _etag,
    _event_entity,
    _event_place,
    _history_key,
    _if_unchanged,
    _tally_entity,
    _translated,
)

# Keys that start with a time start with a digit; ":" follows "9", and "." follows "-": the history ends there.
TIMED_END = HISTORY_PREFIX + ":"
HISTORY_END = "history."
RANGE_FILTER = "PartitionKey eq @pk and RowKey gt @after and RowKey lt @end"
# Lost races counting one answer in its series' line before it is kept as a line of its own.
SERIES_RACES = 4
# Series tallies remembered at their ETags, least recently counted forgotten first: about 1 KB each.
SERIES_REMEMBERED = 4096
CURSOR_REFUSED = "cursor is not one this service handed out."
# The marker of when this release first opened the store.
KEYED_BY_TIME = "history-keyed-by-time"
# How long instances of an earlier release may go on answering after this one first opened the store: the
# end of a deployment's overlap is minutes; a day is far beyond it.
EARLIER_RELEASE_GRACE = timedelta(days=1)
# A cursor's time ends "+00:00" (paging.utc_text); "Z", the same instant to any reader (an earlier release's
# included), says that this release began the history, so the next pages need not look for earlier rows.
UTC_OFFSET = "+00:00"
BEGUN_HERE = "Z"


def _event(row: Mapping[str, Any]) -> HistoryEvent:
    return row_reading.event_from_row(row_reading.gather(row))


def _order(event: HistoryEvent) -> str:
    return _history_key(event.at, event.event_id)


def _counted(line: HistoryEvent, more: HistoryEvent) -> HistoryEvent:
    """``line`` with the answers ``more`` counts: the earliest first answer, the latest last one."""
    return replace(
        line,
        count=(line.count or 1) + (more.count or 1),
        at=min(line.at, more.at),
        last_at=max(line.last_at or line.at, more.last_at or more.at),
    )


def one_line_per_series(events: Iterable[HistoryEvent]) -> list[HistoryEvent]:
    """The events, a series kept in two lines (under its id before the upgrade, at its time since) as one."""
    lines: dict[str, HistoryEvent] = {}
    for event in events:
        kept = lines.get(event.event_id)
        lines[event.event_id] = event if kept is None else _counted(kept, event)
    return list(lines.values())


def _after(cursor: str | None) -> tuple[str, bool]:
    """The RowKey a page starts after (the cursor's place as a key, or the start of the history), and whether the
    cursor says that this release began the history."""
    if cursor is None:
        return HISTORY_PREFIX, False
    at, event_id = decode_cursor(cursor)
    try:
        return _history_key(datetime.fromisoformat(at), event_id), at.endswith(BEGUN_HERE)
    except ValueError as exc:
        raise InvalidRequest(CURSOR_REFUSED, target="cursor") from exc


def _cursor(line: HistoryEvent, begun_here: bool) -> str:
    """The cursor after ``line``; its time written with ``Z`` when this release began the history."""
    at, event_id = _event_place(line)
    return encode_cursor(at.removesuffix(UTC_OFFSET) + BEGUN_HERE if begun_here else at, event_id)


def _timed_since(marker: TableEntity | None) -> str:
    """The least key a history's first row has when the history cannot hold rows of an earlier release."""
    if marker is None:
        return TIMED_END  # not known (a store opened read only before any instance of this release): no claim
    if not marker.get("HeldClaims", True):
        return HISTORY_PREFIX  # the store held no claim when this release first opened it: every claim
    since: datetime = marker["Since"]
    return HISTORY_PREFIX + (since + EARLIER_RELEASE_GRACE).astimezone(UTC).strftime(KEY_TIME)


class TableHistory:
    """``HistoryRecords`` over the claims table."""

    # The store's own (store.TableStore) and its keys' (keys.TableKeys).
    _claims: TableClient
    _conflicts: TableClient
    _series: Bounded[tuple[str, str], tuple[str, HistoryEvent]]
    _holds_claims: Callable[[], bool]
    # A claim whose history's first key is at least this one holds no row of an earlier release.
    _history_timed_since: str

    def _read_history_marker(self, marker: TableEntity | None, *, write: bool) -> None:
        """Take when this release first opened the store (``marker``, as the open read it), writing it now if this
        is the first (``write``)."""
        with _translated():
            if marker is None and write:
                first = {"PartitionKey": UPGRADE_PARTITION, "RowKey": KEYED_BY_TIME}
                marker = TableEntity({**first, "Since": datetime.now(UTC), "HeldClaims": self._holds_claims()})
                try:
                    self._conflicts.create_entity(marker)
                except ResourceExistsError:  # another instance opened it at the same moment: its marker stands
                    marker = self._conflicts.get_entity(UPGRADE_PARTITION, KEYED_BY_TIME)
        self._history_timed_since = _timed_since(marker)

    def add_event(self, event: HistoryEvent) -> None:
        """Append a history event to its claim's partition."""
        # Event ids are unique, so a row already there is this very event: the SDK retried an insert whose
        # first answer was lost (a 500 "operation timed out" may come after the write landed).
        with suppress(ResourceExistsError), _translated():
            self._claims.create_entity(_event_entity(event))

    def count_event(self, event: HistoryEvent) -> None:
        """Count the answer in its series' line: write first, on the ETag this instance last wrote its tally with.

        The first answer of a series inserts its line and tally, one transaction. A later one merges the count
        and times into both, conditioned on the tally's ETag this instance remembers from its own last
        write: one request while no other instance counts in it. Only when the tally is unknown here, or
        another writer changed it since (412), is it read, and the merge conditioned on the ETag read. After
        ``SERIES_RACES`` lost races the answer is kept as a line of its own.
        """
        key = (event.claim_id, TALLY_PREFIX + event.event_id)
        with _translated():
            known = self._series.get(key)
            failed = self._counted_in(key, known, event) if known else MISSING[0]
            if failed is None:
                return
            if failed in MISSING:  # unknown here, or gone (the claim was deleted and made again)
                try:
                    first = [
                        (TransactionOperation.CREATE, _tally_entity(event)),
                        (TransactionOperation.CREATE, _event_entity(event)),
                    ]
                    self._series.put(key, (_etag(batch.submit_transaction(self._claims, first)[0]), event))
                    return
                except HttpResponseError as exc:
                    if exc.status_code not in EXISTS:
                        raise
            for _ in range(SERIES_RACES):
                try:
                    stored = self._claims.get_entity(*key)
                except ResourceNotFoundError:
                    return  # the claim and its history were deleted meanwhile (retention): nothing to count in
                if self._counted_in(key, (_etag(stored.metadata), _event(stored)), event) is None:
                    return
            self._claims.create_entity(_event_entity(replace(event, event_id=f"{event.event_id}-{token_hex(4)}")))

    def _counted_in(self, key: tuple[str, str], known: tuple[str, HistoryEvent], event: HistoryEvent) -> int | None:
        """Count ``event`` in the series line whose tally is known at an ETag: None when counted, else the status
        that refused it (412: another writer changed the tally since, 404: it is gone)."""
        etag, line = known
        counted = _counted(line, event)
        line_keys = _claim_keys(line.claim_id, _order(line))
        operations: list[tuple[Any, ...]]
        if counted.at == line.at:
            changes = {"Count": counted.count, "LastAt": counted.last_at}
            operations = [
                (TransactionOperation.UPDATE, {**_claim_keys(*key), **changes}, _if_unchanged(etag, UpdateMode.MERGE)),
                (TransactionOperation.UPDATE, {**line_keys, **changes}, {"mode": UpdateMode.MERGE}),
            ]
        else:
            # An answer earlier than the line's first (another instance's, counted late): the line moves to its time.
            operations = [
                (TransactionOperation.UPDATE, _tally_entity(counted), _if_unchanged(etag)),
                (TransactionOperation.DELETE, line_keys),
                (TransactionOperation.CREATE, _event_entity(counted)),
            ]
        try:
            written = batch.submit_transaction(self._claims, operations)
        except HttpResponseError as exc:
            if exc.status_code not in STALE + EXISTS:
                raise
            self._series.pop(key)
            return exc.status_code
        self._series.put(key, (_etag(written[0]), counted))
        return None

    def list_events(self, claim_id: str) -> list[HistoryEvent]:
        """The claim's whole history by time: the pages of ``list_history`` read at once."""
        with _translated():
            return [event for _, event in self._history(claim_id, HISTORY_PREFIX, top=None)[0]]

    def list_history(self, claim_id: str, *, limit: int, cursor: str | None = None) -> Page[HistoryEvent]:
        """The history after the cursor's place: one range of ``limit + 1`` rows of the partition, by time."""
        after, begun_here = _after(cursor)
        with _translated():
            lines, begun_here = self._history(claim_id, after, top=limit + 1, begun_here=begun_here)
            found = [event for _, event in islice(lines, limit + 1)]
        return Page(found[:limit], _cursor(found[limit - 1], begun_here) if len(found) > limit else None)

    def _history(
        self, claim_id: str, after: str, *, top: int | None, begun_here: bool = False
    ) -> tuple[Iterator[tuple[str, HistoryEvent]], bool]:
        """The history's lines after the key ``after``, by key: one range read to the history's end, ``top`` rows
        at a time as consumed (``query.pages``: the rows decoded from the answer's JSON); and whether this release
        began the history (``begun_here``: a cursor said so).

        The rows keyed by time come first, then the series lines of earlier releases, kept under their ids. Those
        are read on their own only when the rows keyed by time fill the first read, and the history may have
        them: not when its first row is keyed at or after ``_history_timed_since``. On Azurite a range read sorts
        every row of the partition in its range before it takes ``top`` (its ``LokiTableMetadataStore``
        filters the table and sorts what matched), so a second read costs about as much as the first."""
        parameters = {"pk": claim_id, "after": after, "end": HISTORY_END}
        answers = query.pages(self._claims, RANGE_FILTER, parameters, top=top)
        first, more = next(answers)
        if after == HISTORY_PREFIX and first:
            begun_here = self._history_timed_since <= first[0]["RowKey"] < TIMED_END
        if not more:
            by_id = [row for row in first if row["RowKey"] > TIMED_END]
        elif begun_here:
            by_id = []
        else:
            earlier_rows = query.pages(self._claims, RANGE_FILTER, {**parameters, "after": TIMED_END}, top=None)
            by_id = [row for rows, _ in earlier_rows for row in rows]
        earlier = [self._with_later_answers(_event(entity)) for entity in by_id]
        # A series line at its time whose series also has a line of an earlier release is counted in that one.
        shown_there = {line.event_id for line in earlier}
        timed = (
            (row["RowKey"], _event(row))
            for row in chain(first, chain.from_iterable(rows for rows, _ in answers))
            if row["RowKey"] < TIMED_END
        )
        kept = ((key, event) for key, event in timed if event.event_id not in shown_there)
        placed = sorted(((_order(line), line) for line in earlier if _order(line) > after), key=itemgetter(0))
        return heapq.merge(kept, placed, key=itemgetter(0)), begun_here

    def _with_later_answers(self, line: HistoryEvent) -> HistoryEvent:
        try:
            tally = self._claims.get_entity(line.claim_id, TALLY_PREFIX + line.event_id)
        except ResourceNotFoundError:
            return line
        return _counted(line, _event(tally))
