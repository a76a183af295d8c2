"""The store's key secrets and id, for operators: ``oncegate keys`` and ``oncegate store init`` (issue 22).

Retiring a secret is how a rotation ends: until then every instance must hold it (as
``ONCEGATE_KEY_SECRET_PREVIOUS``), because claims made with it are found only through it, and so
are the tombstones retention leaves of them until their scope's horizon (issue 31). The count of
those rows is what the operator confirms: zero once retention has deleted them, or the number of
keys that would proceed again, named on the command line.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Collection, Iterator
from datetime import datetime
from typing import Protocol

from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import Claim, ClaimFilter, KeySecretRecord, Page, ScopeRecord
from oncegate.domain.safeguard import SecretUsage, retired, secret_of
from oncegate.domain.statuses import ClaimStatus
from oncegate.domain.store_id import check_store_id
from oncegate.errors import InvalidRequest
from oncegate.service.inventory import open_conflicts
from oncegate.service.retention import gone_at
from oncegate.service.safeguard import StoreIdPin
from oncegate.stores.port import ConflictRecords, StoreMarkRecords

logger = logging.getLogger(__name__)
PAGE_SIZE = 1000


class KeySecretRecords(StoreMarkRecords, ConflictRecords, Protocol):
    """The marks, the claims and tombstones to count per secret, the scopes' retention and horizon, and the open
    conflicts, which keep their claims past both."""

    def list_claims(self, matching: ClaimFilter, *, limit: int, cursor: str | None = None) -> Page[Claim]: ...

    def list_scopes(self) -> list[ScopeRecord]: ...


def made_with(claim: Claim, record: KeySecretRecord, *, first_in_use: datetime | None) -> bool:
    """Whether the claim may have been made with this secret: it says so, or (rows of earlier releases, which do
    not say) it was first received while the secret was in use, or before any secret was recorded when this is
    the store's first (``first_in_use``: when that one came into use): releases before the records had one only.
    """
    if claim.key_id is not None:
        return claim.key_id == record.key_id
    if record.in_use_from is None:
        return False
    return claim.first_received_at >= record.in_use_from or record.in_use_from == first_in_use


class KeySecrets:
    """List the store's key secrets, count the claims made with one, retire it; mark a new store."""

    def __init__(self, store: KeySecretRecords, *, clock: Callable[[], datetime], pin: StoreIdPin | None) -> None:
        self._store = store
        self._clock = clock
        self._pin = pin

    def marks(self) -> StoreMarks:
        return self._store.read_marks()

    def usage(self, records: Collection[KeySecretRecord]) -> dict[str, SecretUsage]:
        """The rows found only through each of these secrets, by check value: its claims in every status and its
        tombstones (issue 31), each read once, however many secrets are counted."""
        usage = {record.key_id: SecretUsage() for record in records}
        known = self._store.read_marks().secrets
        in_use = [secret.in_use_from for secret in known if secret.in_use_from is not None]
        first = min(in_use, default=None)
        scopes = {scope.scope: scope for scope in self._store.list_scopes()}
        switched = {record.key_id: switched_at(record, known) for record in records}
        # Read before the rows: a conflict opened meanwhile moves its claim's UpdatedAt, and so its horizon.
        disputed = {conflict.claim_id for conflict in open_conflicts(self._store)}
        for row in self._rows():
            for record in records:
                if made_with(row, record, first_in_use=first):
                    gone = gone_at(row, scopes.get(row.scope))
                    counted = usage[record.key_id].counting(
                        tombstone=row.purged_at is not None,
                        gone_at=gone,
                        retryable=row.purged_at is None and row.retryable_failure,
                        unsettled=unsettled(row, switched[record.key_id]),
                        disputed=row.claim_id in disputed,
                    )
                    usage[record.key_id] = counted
        return usage

    def _rows(self) -> Iterator[Claim]:
        """Every claim, then every tombstone, a page at a time."""
        for matching in (ClaimFilter(list(ClaimStatus)), ClaimFilter(list(ClaimStatus), tombstones=True)):
            cursor = None
            while True:
                page = self._store.list_claims(matching, limit=PAGE_SIZE, cursor=cursor)
                yield from page.items
                cursor = page.cursor
                if cursor is None:
                    break

    def retire(self, key_id: str, *, orphan: int | str | None) -> tuple[KeySecretRecord, int]:
        """Retire the secret, once the rows found only through it are none or what ``orphan`` confirms
        (:attr:`~oncegate.domain.safeguard.SecretUsage.confirmation`): its record, and how many rows retiring it
        orphaned (none when there were none, whatever ``orphan`` said, or when it was retired already)."""
        known = self._store.read_marks().secrets
        record = secret_of(known, key_id)
        usage = self.usage([record])[key_id] if record.in_use_from is not None else SecretUsage()
        changed = retired(known, key_id, now=self._clock(), usage=usage, orphan=orphan)
        if changed is None:
            return record, 0
        logger.warning(
            "Key secret %s retired (%d claims and %d tombstones made with it orphaned)",
            key_id,
            usage.claims,
            usage.tombstones,
        )
        return self._store.save_secret(changed), usage.rows

    def start_store(self, *, new_only: bool = False) -> str:
        """Mark the store as the one this app serves, where a mark is missing; its id.

        The id is the store's own, else its tables', else the one the settings pin (``ONCEGATE_STORE_ID``, or the
        SQLite ``store-id`` file), else a new one. Plain, this is the operator's explicit step that accepts
        that claims lost with a table are forgotten: a store whose marks are whole is refused (nothing to
        start). ``new_only`` (a deployment's step) marks only what the app itself would take for new or for
        an earlier release's store, and answers a whole store's id; a store that lost a mark is refused.
        """
        marks = self._store.read_marks()
        pinned = self._pin.pinned() if self._pin else None
        if new_only:
            store_id = check_store_id(marks, pinned=pinned, seen=None, fresh=secrets.token_hex(8), may_start=True)
            if store_id is None:
                assert marks.store_id is not None
                return marks.store_id
        else:
            store_id = _store_to_start(marks, pinned)
        self._store.mark_store(store_id, at=self._clock())
        if self._pin is not None:
            self._pin.keep(store_id)
        logger.warning("Store marked as store %s by an operator", store_id)
        return store_id


def _store_to_start(marks: StoreMarks, pinned: str | None) -> str:
    """The id ``store init`` marks the store with; ``InvalidRequest`` when it is whole, or its marks disagree."""
    named = {mark.store_id for mark in marks.tables if mark.store_id is not None}
    if (
        marks.store_id is not None
        and marks.tables_marked
        and named == {marks.store_id}
        and all(mark.store_id for mark in marks.tables)
    ):
        raise InvalidRequest(
            f"The store is store {marks.store_id} already, and each of its tables carries its mark: it was not "
            "wiped, and nothing was changed.",
            target="store",
        )
    store_id = marks.store_id or (min(named) if len(named) == 1 else None) or pinned or secrets.token_hex(8)
    disagree = (named | {pinned}) - {store_id, None}
    if disagree:
        raise InvalidRequest(
            f"The store is store {store_id}, while {', '.join(sorted(str(other) for other in disagree))} is named by "
            "a table's mark or ONCEGATE_STORE_ID: the settings point at another store, or tables of two stores were "
            "mixed. Nothing was changed: fix the settings, or restore the tables of one store.",
            target="store",
        )
    return store_id


def unsettled(row: Claim, switched: datetime | None) -> tuple[str, bool] | None:
    """``row``'s claim id and whether its key proceeds anyway (released, or a retryable failure), when a run may take
    it again or took it again after the switch at ``switched``; None for a row as it was when it was counted."""
    if row.purged_at is not None:
        return None
    proceeds = row.status is ClaimStatus.RELEASED or row.retryable_failure
    if proceeds or (switched is not None and row.last_attempt_at >= switched):
        return row.claim_id, proceeds
    return None


def switched_at(record: KeySecretRecord, secrets: Collection[KeySecretRecord]) -> datetime | None:
    """When the secret after ``record`` came into use (None: none did yet)."""
    if record.in_use_from is None:
        return None
    later = [other.in_use_from for other in secrets if other.in_use_from and other.in_use_from > record.in_use_from]
    return min(later, default=None)
