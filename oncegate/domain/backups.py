"""What an export carries and a restore leaves behind (issue 35).

An export is a point in time: every claim whole (its row, history and fingerprint records, read as one
view of its partition), and the records the promise needs besides. A store restored from one forgets
the keys done after the export began; its :class:`Restore` record says so until the horizon of those
keys has passed.
"""

from __future__ import annotations

from datetime import datetime

from oncegate.domain.copies import frozen
from oncegate.domain.records import Claim, FingerprintRecord, HistoryEvent
from oncegate.errors import AlreadyExists, ConcurrentUpdate


@frozen
class ClaimBackup:
    """A claim or tombstone with its whole history and its fingerprint records, read together.

    ``changed_at`` is when the store last wrote the claim, on the store's own clock (SQLite: the claim's
    ``UpdatedAt``; Table Storage: the row's ``Timestamp``): an export compares it with its start.
    """

    claim: Claim
    events: tuple[HistoryEvent, ...]
    fingerprints: tuple[FingerprintRecord, ...]
    changed_at: datetime


@frozen
class Restore:
    """A store filled from an export: which store it was, until when, and how far the import got.

    Keys done after ``exported_at`` are not in the export: they are forgotten (answered ``proceed``
    again) until ``forgotten_until``, when their horizon would have passed anyway. ``records_done``
    counts the export's records written, so that an import run again goes on after them;
    ``completed_at`` is None while the import is under way. ``export_id`` tells one export from another
    taken in the same second (Table Storage's clock has whole seconds).
    """

    restored_from: str
    export_id: str
    exported_at: datetime
    started_at: datetime
    forgotten_until: datetime
    records_done: int = 0
    completed_at: datetime | None = None

    def forgetting(self, now: datetime) -> bool:
        """Whether keys done after the export may still be answered ``proceed``: the restore is still to say."""
        return now < self.forgotten_until


def refuse_writing_over(stored: Restore, restore: Restore) -> None:
    """Refuse writing ``restore`` over the record ``stored``, as every store's ``save_restore`` does.

    Another export's record (``AlreadyExists``, carrying it): two imports of different exports met in one store,
    which must hold one of them. A completed one (``ConcurrentUpdate``): another run of this import ended, the
    store is marked and may serve; a run still under way saying it is not would make its health say so again.
    """
    if stored.export_id != restore.export_id:
        raise AlreadyExists(stored)
    if stored.completed_at is not None:
        raise ConcurrentUpdate(f"the import of export {stored.export_id} completed at {stored.completed_at}")
