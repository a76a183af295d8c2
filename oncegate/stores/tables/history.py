"""The Azure store's history: a claim's events, rows of its partition beside the claim row.

An event is a row ``history-<event id>``, written in the transaction of the claim change it records.
Answers alike share one row, ``history-series-<digest>``, which counts them (``count_event``).
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from secrets import token_hex

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from oncegate.bounded import Bounded
from oncegate.domain.records import HistoryEvent, Page
from oncegate.stores import columns, large_values
from oncegate.stores.paging import page_of
from oncegate.stores.tables.entities import (
    HISTORY_PREFIX,
    _claim_keys,
    _etag,
    _event_entity,
    _event_place,
    _if_unchanged,
)
from oncegate.stores.tables.errors import MISSING, STALE, _translated

# The first character after "-": every history row key sorts below it.
HISTORY_END = "history."
EVENTS_FILTER = "PartitionKey eq @pk and RowKey ge @lo and RowKey lt @hi"
# Lost races counting one answer in its series' line before it is kept as a line of its own.
SERIES_RACES = 4
# Series lines remembered at their ETags, least recently counted forgotten first: about 1 KB each.
SERIES_REMEMBERED = 4096


class TableHistory:
    """``HistoryRecords`` over the claims table."""

    # The store's own (store.TableStore).
    _claims: TableClient
    _series: Bounded[tuple[str, str], tuple[str, HistoryEvent]]

    def add_event(self, event: HistoryEvent) -> None:
        """Append a history event to its claim's partition."""
        # Event ids are unique, so a row already there is this very event: the SDK retried an insert whose
        # first answer was lost (a 500 "operation timed out" may come after the write landed).
        with suppress(ResourceExistsError), _translated():
            self._claims.create_entity(_event_entity(event))

    def count_event(self, event: HistoryEvent) -> None:
        """Count the answer in its series' line: write first, on the ETag this instance last wrote it with.

        The first answer of a series inserts its line, one request as ``add_event``. A later one merges the
        line's count and times, conditioned on the ETag this instance remembers from its own last write of
        the line: one request while no other instance counts in it. Only when the line is unknown here, or
        another writer changed it since (412), is it read, and the merge conditioned on the ETag read. After
        ``SERIES_RACES`` lost races the answer is kept as a line of its own.
        """
        entity = _event_entity(event)
        key = (event.claim_id, entity["RowKey"])
        with _translated():
            known = self._series.get(key)
            failed = self._counted_in(key, known, event) if known else MISSING[0]
            if failed is None:
                return
            if failed in MISSING:  # unknown here, or gone (the claim was deleted and made again)
                try:
                    self._series.put(key, (_etag(self._claims.create_entity(entity)), event))
                    return
                except ResourceExistsError:
                    pass
            for _ in range(SERIES_RACES):
                try:
                    stored = self._claims.get_entity(*key)
                except ResourceNotFoundError:
                    return  # the claim and its history were deleted meanwhile (retention): nothing to count in
                read = (_etag(stored.metadata), columns.event_from_row(large_values.gather(stored)))
                if self._counted_in(key, read, event) is None:
                    return
            self._claims.create_entity(_event_entity(replace(event, event_id=f"{event.event_id}-{token_hex(4)}")))

    def _counted_in(self, key: tuple[str, str], known: tuple[str, HistoryEvent], event: HistoryEvent) -> int | None:
        """Count ``event`` in the series line known at an ETag: None when counted, else the status that refused
        it (412: another writer changed the line since, 404: it is gone)."""
        etag, series = known
        counted = replace(
            series,
            count=(series.count or 1) + 1,
            at=min(series.at, event.at),
            last_at=max(series.last_at or series.at, event.last_at or event.at),
        )
        merged = {**_claim_keys(*key), "Count": counted.count, "At": counted.at, "LastAt": counted.last_at}
        try:
            metadata = self._claims.update_entity(merged, **_if_unchanged(etag, UpdateMode.MERGE))
        except HttpResponseError as exc:
            if exc.status_code not in STALE:
                raise
            self._series.pop(key)
            return exc.status_code
        self._series.put(key, (_etag(metadata), counted))
        return None

    def list_events(self, claim_id: str) -> list[HistoryEvent]:
        """The claim's history by time: its rows, one range of the partition, sorted here.

        RowKeys do not sort by time (a series line's id is no time), so the whole range is read; counting
        repeated answers in one line each keeps it to the claim's changes and the kinds of answer it had.
        """
        parameters = {"pk": claim_id, "lo": HISTORY_PREFIX, "hi": HISTORY_END}
        with _translated():
            entities = list(self._claims.query_entities(EVENTS_FILTER, parameters=parameters))
        return sorted((columns.event_from_row(large_values.gather(entity)) for entity in entities), key=_event_place)

    def list_history(self, claim_id: str, *, limit: int, cursor: str | None = None) -> Page[HistoryEvent]:
        """One page of ``list_events``: the page after the cursor's place."""
        events, after = page_of(self.list_events(claim_id), _event_place, top=limit, cursor=cursor)
        return Page(events, after)
