"""Holds each instance to the store it serves: its key secrets, its id, its clock (issue 22).

Every few seconds, on the first request that needs it, the instance reads the store's marks (one
small read: the key secrets' records and the store's id, and on Table Storage the time the store
answered at) and applies the checks of :mod:`oncegate.domain.safeguard`. A refusal is not
remembered: the next request reads again, so an instance recovers as soon as the operator fixes
what was wrong. Between two reads the last good answer stands; the switch grace of a new secret is
longer than that interval, which is what makes the secrets' check hold across instances.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple, Protocol

from oncegate import telemetry
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.safeguard import (
    MAX_CLOCK_SKEW,
    Roles,
    check_clock,
    check_secrets,
    clock_skew,
)
from oncegate.domain.store_id import check_store_id
from oncegate.domain.times import said
from oncegate.errors import ClockSkewed, ConcurrentUpdate, StoreUnavailable
from oncegate.stores.port import StoreMarkRecords

logger = logging.getLogger(__name__)

# How long a good reading of the marks stands: well below SWITCH_GRACE (see oncegate.domain.safeguard).
CHECK_INTERVAL = timedelta(seconds=5)
# Writers of the marks race only at a store's first use or a switch: a few rounds always settle.
ROUNDS = 4


class StoreIdPin(Protocol):
    """Where the id of the store an app serves is kept outside the store, so a wiped store is recognised."""

    # Whether the app may take an unmarked, empty store for a new one and mark it itself (issue 31).
    starts_stores: bool

    def pinned(self) -> str | None:
        """The id kept, or None."""

    def keep(self, store_id: str) -> None:
        """Keep the id of a store just marked (where the pin can be written)."""


class PinnedSetting:
    """``ONCEGATE_STORE_ID``: written by the operator (or the deployment), never by the app.

    An app so pinned (Table Storage, or SQLite with the setting) never marks a new store itself: a new,
    empty store looks exactly like a wiped one, so ``oncegate store init`` marks it, on purpose.
    """

    starts_stores = False

    def __init__(self, store_id: str | None) -> None:
        self._store_id = store_id

    def pinned(self) -> str | None:
        return self._store_id

    def keep(self, store_id: str) -> None:
        if self._store_id is None:
            logger.warning(
                "Store %s: set ONCEGATE_STORE_ID=%s so that the app recognises a wiped or replaced store after a "
                "restart (docs/operations.md, 'A store that lost its claims')",
                store_id,
                store_id,
            )


class PinnedFile:
    """A ``store-id`` file beside a SQLite database, written when the store is first marked.

    The database and the file are apart on purpose: a database deleted or replaced while the file
    stays is refused, as the key-secret file beside it keeps the secret. The app makes the database
    itself, and marks it in the same transaction as its tables: a new file is taken for a new store.
    """

    starts_stores = True

    def __init__(self, path: Path) -> None:
        self.path = path

    def pinned(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8").strip() or None
        except FileNotFoundError:
            return None

    def keep(self, store_id: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Readable by its owner only, as the database and the key-secret file beside it.
        descriptor = os.open(self.path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(store_id + "\n")


class Reading(NamedTuple):
    """A good reading of the store's marks: the ring it lets this instance claim with, until ``until``
    (``time.monotonic()``); past it, the marks are read again."""

    ring: KeyRing
    until: float


class Safeguard:
    """The key ring this instance may claim with right now, or the refusal that says why it may not.

    :attr:`reading` is the last good reading while it may stand (None before the first, and from the moment a new
    one is taken until it is good): whoever claims takes its ring while ``until`` is ahead, without calling in
    here, and calls :meth:`ring` for a new reading once it is past.
    """

    def __init__(
        self,
        store: StoreMarkRecords,
        keys: KeyRing,
        *,
        clock: Callable[[], datetime],
        wall_clock: Callable[[], datetime] | None = None,
        pin: StoreIdPin | None = None,
        interval: timedelta = CHECK_INTERVAL,
        max_skew: timedelta = MAX_CLOCK_SKEW,
    ) -> None:
        self._store = store
        self._keys = keys
        self._clock = clock
        # The machine's clock, measured against the store's: in production ``clock`` is the same (tests move theirs).
        self._wall_clock = wall_clock or (lambda: datetime.now(UTC))
        self._pin = pin
        self._interval = interval.total_seconds()
        self._max_skew = max_skew
        self._hashers = {hasher.key_id: hasher for hasher in keys.lookup_order}
        self._roles = Roles(
            current=keys.current.key_id,
            previous=keys.lookup_order[0].key_id if keys.lookup_order[0] is not keys.current else None,
            next=keys.lookup_order[-1].key_id if keys.lookup_order[-1] is not keys.current else None,
        )
        self._lock = threading.Lock()
        self.reading: Reading | None = None
        self._seen: str | None = None
        self.skew: timedelta | None = None

    def ring(self, *, fresh: bool = False) -> KeyRing:
        """The ring to claim with: the marks read again unless another thread just did (``fresh``: read now
        whatever the last reading, as health does, so that it never reports a store it last read seconds ago).
        A refusal raised here is not kept: the next call reads again."""
        with self._lock:
            reading = self.reading
            if fresh or reading is None or time.monotonic() >= reading.until:
                self.reading = None
                ring = self._check()
                self.reading = reading = Reading(ring, time.monotonic() + self._interval)
            return reading.ring

    def _check(self) -> KeyRing:
        for _ in range(ROUNDS):
            try:
                return self._check_once()
            except ConcurrentUpdate:
                continue  # another instance wrote the marks meanwhile: read them again
        raise StoreUnavailable("the store's key secrets kept changing under this request; retry shortly.")

    def _check_once(self) -> KeyRing:
        # The pin before the store: an instance marks a new store before it pins the id, so a pin read first is
        # always in the store read after it. Read the other way round, a worker starting beside another one on a
        # new store could read the store empty, then the pin just written, and refuse the new store as wiped.
        pinned = self._pin.pinned() if self._pin else None
        asked_at = self._wall_clock()
        marks = self._store.read_marks()
        marks = replace(marks, asked_at=asked_at, answered_at=self._wall_clock())
        self.skew = clock_skew(marks)
        try:
            check_clock(marks, bound=self._max_skew)
        except ClockSkewed as refused:
            logger.error("Refusing to claim: %s", refused.message)
            telemetry.describe({telemetry.CLOCK_SKEW_SECONDS: round(refused.skew.total_seconds(), 1)})
            raise
        new_id = check_store_id(
            marks,
            pinned=pinned,
            seen=self._seen,
            fresh=secrets.token_hex(8),
            may_start=self._pin.starts_stores if self._pin else True,
        )
        now = self._clock()
        verdict = check_secrets(self._roles, marks.secrets, now)
        for record in verdict.writes:
            in_use_from = said(record.in_use_from) if record.in_use_from else "not yet"
            logger.info("Key secret %s recorded (in use from %s)", record.key_id, in_use_from)
            self._store.save_secret(record)
        if new_id is not None:
            self._store.mark_store(new_id, at=now)
            logger.info("Store marked as store %s", new_id)
            if self._pin is not None:
                self._pin.keep(new_id)
        self._seen = marks.store_id or new_id
        return self._ring_claiming_with(verdict.claim_with)

    def _ring_claiming_with(self, key_id: str) -> KeyRing:
        """This instance's secrets, with ``key_id`` the one new claims are made with (see ``SecretsVerdict``)."""
        if key_id == self._keys.current.key_id:
            return self._keys
        other: KeyHasher = self._hashers[key_id]
        if key_id == self._roles.previous:
            return KeyRing(other, next_=self._keys.current)
        return KeyRing(other, previous=self._keys.current)
