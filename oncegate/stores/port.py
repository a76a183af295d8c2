"""The store port: the few primitives the services need from any backend, in small groups.

Every adapter implements :class:`ClaimStore`, all of them; each service declares the groups it uses
(``ClaimRecords`` is the claims' groups together) and is handed the store typed as just those.

Adapters only translate records to rows and driver errors to :mod:`oncegate.errors`;
every decision lives in :mod:`oncegate.service`. One contract suite
(``tests/stores/contract.py``) holds every adapter to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import (
    Claim,
    ClaimFilter,
    Conflict,
    FingerprintRecord,
    FlowRecord,
    HistoryEvent,
    KeySecretRecord,
    Overlap,
    Page,
    ScopeRecord,
)
from oncegate.domain.statuses import ConflictStatus

if TYPE_CHECKING:
    # Types of the export's, the restore's and Perform once's records alone: a store answers a claim without them.
    from oncegate.domain.backups import ClaimBackup, Restore
    from oncegate.domain.targets import Target


class ClaimReads(Protocol):
    """Reading one claim, and what reviewers decided about its fingerprints."""

    def get_claim(self, claim_id: str) -> Claim:
        """The stored claim; raises ``NotFound``."""

    def get_fingerprints(self, claim_id: str, fingerprints: Collection[str]) -> list[FingerprintRecord]:
        """The claim's fingerprint records for these fingerprints, in no particular order; none is not an error."""


class ClaimWrites(Protocol):
    """Writing claims: each write conditioned on the version read, except the first."""

    def create_claim(self, claim: Claim, event: HistoryEvent) -> Claim:
        """Insert the claim and its first event together, only if no claim has that id.

        Raises ``AlreadyExists`` carrying the stored claim otherwise.
        """

    def create_claims(self, new: Sequence[tuple[Claim, HistoryEvent]]) -> list[Claim | None]:
        """``create_claim`` for each pair, in order (issue 36): each claim as written, or None where a claim had
        its id already (or an earlier pair of the call did) or its row is one the store cannot hold, and nothing
        of that pair was written (``create_claim`` of that pair alone says which).

        SQLite reads which ids are taken in one query and writes the rest set-based, in one transaction: all of
        it is kept or none. Table Storage writes each pair in a transaction of its own, as ``create_claim``.
        """

    def update_claim(
        self,
        claim: Claim,
        event: HistoryEvent | None,
        *,
        fingerprint: FingerprintRecord | None = None,
        relabelled: bool = False,
    ) -> Claim:
        """Replace the claim if ``claim.version`` is still current, with its event in the same commit.

        ``fingerprint`` is saved in the same commit too: inserted when its version is None, else
        replaced if that version is current. Raises ``ConcurrentUpdate`` when another writer got
        to the claim or the fingerprint record first; then nothing was written. ``relabelled``: the
        change may have given the claim a source or reference, which a store that finds claims by
        them through rows of its own writes again (the service decides, not the store).
        """

    def delete_claim(self, claim: Claim, *, tombstone: Claim | None = None) -> None:
        """Delete the claim, its whole history and its fingerprint records if ``claim.version`` is still current.

        With ``tombstone`` (the claim with ``purged_at`` set and only what a late replay needs), the claim's
        row is replaced by it instead of deleted, in the same commit as the last of the history; the
        fingerprint records :func:`~oncegate.domain.tombstones.buried_fingerprints` names stay, rewritten as it
        returns them in that commit (issue 31). Deleting a tombstone deletes every record left with it.

        Raises ``ConcurrentUpdate`` when the claim changed since it was read, or is gone. The claim row
        goes last: a delete cut short leaves the claim with part of its history, which the next purge
        finds again, never history without its claim, which nothing would ever find.
        """


class HistoryRecords(Protocol):
    """A claim's history: answers that change nothing else are added or counted; read whole or by page."""

    def add_event(self, event: HistoryEvent) -> None:
        """Append a history event that changes nothing else (a duplicate, an in-progress answer).

        An event whose id is stored already is this very event sent again: no error, nothing changes.
        """

    def count_event(self, event: HistoryEvent) -> None:
        """Count an answer that repeats (a duplicate, an in-progress answer) in its line of the history.

        ``event.event_id`` names the series: the first answer is stored as given, with ``count`` 1; each
        later one counts in it, which adds its ``count`` (1, or the answers a wait's polls left unwritten),
        keeps the earliest ``at`` and the latest ``last_at``, and changes nothing else. One write on SQLite;
        on Table Storage an insert, and for a series already there a read and a write conditioned on its ETag.
        A retried write may count an answer twice; under contention an answer may be kept as a line of its own:
        none is lost.
        """

    def list_events(self, claim_id: str) -> list[HistoryEvent]:
        """The claim's whole history, in the order of ``list_history``; empty when there is none."""

    def list_history(self, claim_id: str, *, limit: int, cursor: str | None = None) -> Page[HistoryEvent]:
        """One page of the claim's history, oldest first by ``(at, event_id)``, and the cursor of the next.

        A page holds at most ``limit`` lines. The cursor is the place of the page's last line: the next
        page goes on after it, so lines added meanwhile never shift a page. Raises ``InvalidRequest`` for
        a cursor the store did not hand out.
        """


class ClaimListing(Protocol):
    """Claims listed by a filter, a page at a time, without their history."""

    def list_claims(self, matching: ClaimFilter, *, limit: int, cursor: str | None = None) -> Page[Claim]:
        """Claims ``matching`` the filter (see ``ClaimFilter``).

        A page holds at most ``limit`` claims, possibly fewer (even none) while ``cursor`` says more may
        follow. The order is the store's own (oldest change first in SQLite, claim id order in Table
        Storage); the cursor is a place in it, so claims deleted meanwhile neither shift nor repeat a page.
        Raises ``InvalidRequest`` for a cursor the store did not hand out.
        """


class ClaimIndex(Protocol):
    """Where a store keeps apart what finds claims by source or reference (issue 16)."""

    def flush_index(self) -> None:
        """Write what the store keeps in memory to find claims by source or reference (issue 16).

        Table Storage keeps the index rows of new claims here, off the claim path; SQLite has nothing to write.
        Raises ``StoreUnavailable``; what was not written waits for the next call.
        """

    def repair_index(self, *, received_since: datetime) -> int:
        """Index every claim first received since ``received_since`` again: the rows an instance that stopped
        before its flush left out. Idempotent; how many claims it indexed (0 where nothing is kept apart).
        """


class WritesTogether(Protocol):
    """How the writes of a bulk call reach the store (issue 24): together where the store can commit them so."""

    # Whether writes to different claims gain from being sent at once: Table Storage's are each a request of
    # their own, which a bulk call overlaps; SQLite has one writer at a time and commits a bulk call together.
    parallel_writes: bool

    def writing_together(self) -> AbstractContextManager[None]:
        """A block whose writes, made by this thread, are all kept or all lost at its end.

        Within it each write still stands alone: one that raises changes nothing and the others stay, and
        this thread reads what it wrote. SQLite commits the block in one transaction, each write its own
        savepoint, holding the writers' lock for the block; leaving the block with an exception keeps none
        of it, and a commit that fails raises ``StoreUnavailable``. Where each write is a request of its own
        (Table Storage) every write is kept as it is made, as outside the block.
        """


class ClaimRecords(ClaimReads, ClaimWrites, HistoryRecords, ClaimListing, ClaimIndex, WritesTogether, Protocol):
    """Claims, their history and their fingerprint records: every adapter implements all of it; each service
    is handed only the groups it uses (issue 23)."""


class ConflictRecords(Protocol):
    """The conflict queue: conflicts written and read without reading the claims."""

    def create_conflict(self, conflict: Conflict) -> Conflict:
        """Insert the conflict only if its id is new; raises ``AlreadyExists`` carrying the stored one."""

    def get_conflict(self, conflict_id: str) -> Conflict:
        """The stored conflict; raises ``NotFound``."""

    def update_conflict(self, conflict: Conflict) -> Conflict:
        """Replace the conflict if ``conflict.version`` is current; raises ``ConcurrentUpdate``."""

    def list_conflicts(
        self, *, status: ConflictStatus | None, scope: str | None, limit: int, cursor: str | None
    ) -> Page[Conflict]:
        """Conflicts oldest first by ``(created_at, conflict_id)``, filtered by status and scope, no claim read.

        A page reads about ``limit`` rows, however many conflicts there are (issue 12): every adapter
        keeps the conflicts in that order per status. The cursor is a place in the order, so it stays
        valid while conflicts are added or resolved.
        """

    def conflicts_after(self, created_at: datetime, conflict_id: str = "") -> str:
        """A cursor of ``list_conflicts`` that resumes after this conflict (or, with no id, after every
        conflict created before ``created_at``): where the polling trigger starts and goes on.
        """


class InventoryRecords(Protocol):
    """The flow inventory and the side-effect catalogue: a few small tables, read whole."""

    def list_flows(self) -> list[FlowRecord]:
        """Every flow in the inventory, in no particular order."""

    def save_flow(self, record: FlowRecord) -> FlowRecord:
        """Insert the flow when ``record.version`` is None, else replace it if that version is current.

        Raises ``ConcurrentUpdate`` when the flow exists already (insert) or changed since it was read.
        """

    def list_scopes(self) -> list[ScopeRecord]:
        """Every scope in the catalogue, in no particular order."""

    def save_scope(self, record: ScopeRecord) -> ScopeRecord:
        """Insert or replace the scope as ``save_flow`` does a flow."""

    def list_overlaps(self) -> list[Overlap]:
        """Every pair of overlapping flows, in no particular order."""

    def save_overlap(self, record: Overlap) -> Overlap:
        """Insert or replace the overlap as ``save_flow`` does a flow."""


class StoreMarkRecords(Protocol):
    """What a store says about itself: its id and the key secrets its claims were made with (issue 22)."""

    def read_marks(self) -> StoreMarks:
        """The store's id, its key secrets' records, the marks of the tables that guard the promise and (Table
        Storage) the time it answered at.

        A table that is missing is reported as such (``TableMark.missing``, or no id when it is the id's own
        table), never read as an empty one; ``holds_claims`` is read when a mark or the id is missing.
        """

    def save_secret(self, record: KeySecretRecord) -> KeySecretRecord:
        """Insert the record (version None) or replace it at its version; raises ``ConcurrentUpdate``."""

    def mark_store(self, store_id: str, *, at: datetime) -> None:
        """Mark the store as ``store_id`` where a mark is missing: each guarded table's own mark, then the id.

        The tables' marks go first, so that a marking cut short leaves marked tables without an id (which the
        next check finishes while no claim was made), never an id over unmarked tables (which it refuses).
        Missing tables are made. Raises ``ConcurrentUpdate`` when a mark names another store.
        """


class BackupRecords(Protocol):
    """What an export reads and an import writes (issue 35), beside the groups above that serve them too.

    The export reads the conflicts, the inventory and the key secrets through their own groups; only the
    claims need a read of their own (each whole, as one view) and a write that puts them back as they were.
    """

    def export_claims(self) -> Iterator[ClaimBackup]:
        """Every claim and tombstone, each with its history and fingerprint records read as one view of it.

        Read a page at a time, whatever the store holds; the order is the store's own. A claim purged
        meanwhile may be in it or not; one made meanwhile, too.
        """

    def claims_changed_since(self, at: datetime) -> Iterator[tuple[str, str]]:
        """The id and version of every claim the store wrote at or after ``at``, on its own clock (see
        ``ClaimBackup.changed_at``)."""

    def restore_claim(self, backup: ClaimBackup) -> None:
        """Write the claim, its history and its fingerprint records as they are in ``backup``.

        ``AlreadyExists`` when the claim's row is there, which is left as it is: an earlier run of the import wrote
        it whole, or a run beside this one did, after which the app may have changed it. The history goes before
        the claim's row, so a restore cut short never leaves a claim without part of its history once its row is
        there; its history rows written again, before its row, are written over. A run that found no claim row writes
        nothing over the rows of one another run has written whole since (the app may have added to them).
        """

    def stored_contents(self) -> list[str]:
        """What the store holds, by the names an operator reads (``claims``, ``conflicts``, ``key secrets``...,
        ``store id``); empty for a store that holds nothing. The restore record is not counted."""

    def save_restore(self, restore: Restore) -> None:
        """Write the restore record where none is, or over one of the same export not completed.

        ``AlreadyExists`` (carrying the record) over another export's: two imports met in the store. And
        ``ConcurrentUpdate`` over a completed one: another run of the import ended (``refuse_writing_over``)."""


class RestoreReads(Protocol):
    """Whether the store was filled from an export, which its health says until the export's keys' horizon."""

    def read_restore(self) -> Restore | None:
        """The record of the import that filled this store; None for a store never restored."""


class TargetRecords(Protocol):
    """The targets operators declared for Perform once (issue 34): a small table read whole, never a secret in it."""

    def list_targets(self) -> list[Target]:
        """Every declared target, in name order."""

    def get_target(self, name: str) -> Target:
        """The target declared under ``name``; raises ``NotFound`` (record ``target``)."""

    def save_target(self, target: Target) -> Target:
        """Insert the target (version None) or replace it at its version; the target at its new version.

        Raises ``ConcurrentUpdate`` when a target of that name exists already (insert) or changed since it was read.
        """

    def delete_target(self, name: str) -> bool:
        """Delete the target declared under ``name``; whether there was one (none is not an error)."""


class Reachable(Protocol):
    """Which store it is, and whether it answers (health)."""

    kind: str

    def ping(self) -> None:
        """Raise ``StoreUnavailable`` if the store cannot be reached."""


class ClaimStore(
    ClaimRecords,
    ConflictRecords,
    InventoryRecords,
    StoreMarkRecords,
    BackupRecords,
    RestoreReads,
    TargetRecords,
    Reachable,
    Protocol,
):
    """One backend holding every group above: what bootstrap builds and every adapter implements."""

    def close(self) -> None:
        """Release connections."""
