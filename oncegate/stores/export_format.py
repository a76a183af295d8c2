"""The export file's records (issue 35): the stores' own rows, one JSON object a line, with a version.

An export holds rows in the stores' format (:mod:`oncegate.stores.row_writing`), never the API's, so that
a file written by one store reads into the other and a renamed API field breaks no export. Times are
fixed-width UTC text, as SQLite keeps them. The file is::

    {"record": "header", "format": "oncegate-export", "formatVersion": 2, "storeId": ..., "exportId": ...,
     "startedAt": ..., "horizonDays": ..., "keySecretIds": [...]}
    {"record": "secret", "row": {...}}                 the key secrets' records (check values, never secrets)
    {"record": "flow" | "overlap", "row": {...}}
    {"record": "target", "row": {...}}                 declared targets (a secret's name, never a secret)
    {"record": "conflict", "row": {...}}
    {"record": "claim", "row": {...}, "history": [{...}], "fingerprints": [{...}]}   one line per claim
    {"record": "scope", "row": {...}}                  its claims by status counted from the claims above
    {"record": "end", "finishedAt": ..., "counts": {...}, "keySecretIds": [...], "changedDuringExport": [...]}

A file without its ``end`` line was cut short: an import refuses it. ``.gz`` files are gzip. Files of releases
before 0.5.0 hold the scopes before the flows, with the counts their rows held; an import counts the claims again
whatever the order.

Format 2 added the ``target`` records (issue 34); a file of format 1 (releases before 0.5.0) has none
and still reads: its store had targets declared again by hand, or none.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from oncegate.domain.backups import ClaimBackup
from oncegate.domain.records import Conflict, FlowRecord, KeySecretRecord, Overlap, ScopeRecord
from oncegate.domain.targets import Target
from oncegate.stores import row_reading, row_writing
from oncegate.stores.paging import utc_text
from oncegate.stores.row_writing import Row
from oncegate.stores.target_rows import target_from_row, target_to_row

FORMAT = "oncegate-export"
FORMAT_VERSION = 2
# Every format this release imports: each later one only adds records of new kinds.
READABLE_VERSIONS = (1, 2)
HEADER = "header"
END = "end"
# What a record's rows are read back as: the store writes them at a version of its own.
NO_VERSION = ""
Record = dict[str, Any]


def _plain(row: Row) -> Row:
    return {name: utc_text(value) if isinstance(value, datetime) else value for name, value in row.items()}


def secret_record(record: KeySecretRecord) -> Record:
    return {"record": "secret", "row": _plain(row_writing.secret_to_row(record))}


def scope_record(record: ScopeRecord) -> Record:
    return {"record": "scope", "row": _plain(row_writing.scope_to_row(record))}


def flow_record(record: FlowRecord) -> Record:
    return {"record": "flow", "row": _plain(row_writing.flow_to_row(record))}


def overlap_record(record: Overlap) -> Record:
    return {"record": "overlap", "row": _plain(row_writing.overlap_to_row(record))}


def target_record(target: Target) -> Record:
    return {"record": "target", "row": _plain(target_to_row(target))}


def conflict_record(conflict: Conflict) -> Record:
    return {"record": "conflict", "row": _plain(row_writing.conflict_to_row(conflict))}


def claim_record(backup: ClaimBackup) -> Record:
    return {
        "record": "claim",
        "row": _plain(row_writing.claim_to_row(backup.claim)),
        "history": [_plain(row_writing.event_to_row(event)) for event in backup.events],
        "fingerprints": [_plain(row_writing.fingerprint_to_row(record)) for record in backup.fingerprints],
    }


Restored = KeySecretRecord | ScopeRecord | FlowRecord | Overlap | Target | Conflict | ClaimBackup


def restored(record: Record) -> Restored:
    """The store record an export line holds, at no version (the store it is written to gives one)."""
    kind, row = record["record"], record["row"]
    if kind == "secret":
        return row_reading.secret_from_row(row, NO_VERSION)
    if kind == "scope":
        return row_reading.scope_from_row(row, NO_VERSION)
    if kind == "flow":
        return row_reading.flow_from_row(row, NO_VERSION)
    if kind == "overlap":
        return row_reading.overlap_from_row(row, NO_VERSION)
    if kind == "target":
        return target_from_row(row, NO_VERSION)
    if kind == "conflict":
        return row_reading.conflict_from_row(row, NO_VERSION)
    if kind == "claim":
        events = tuple(row_reading.event_from_row(event) for event in record["history"])
        prints = tuple(row_reading.fingerprint_from_row(each, NO_VERSION) for each in record["fingerprints"])
        claim = row_reading.claim_from_row(row, NO_VERSION, lambda: list(events))
        return ClaimBackup(claim, events, prints, claim.updated_at)
    raise ValueError(f"an export holds no record of the kind {kind!r}")


def open_for_writing(path: Path) -> IO[str]:
    """The file to write an export to: gzip when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8")
    return path.open("w", encoding="utf-8")


def write(out: IO[str], record: Record) -> None:
    out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")


def _open_for_reading(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def records(path: Path) -> Iterator[Record]:
    """The export's records in file order, read a line at a time (gzip when its name ends in ``.gz``)."""
    with _open_for_reading(path) as lines:
        for line in lines:
            yield json.loads(line)
