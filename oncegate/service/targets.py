"""Declaring targets for Perform once, for operators only: ``oncegate targets`` and ``PUT``/``GET /api/targets``
(issue 34).

A declaration is checked whole (``domain.target_declarations``) before it is stored, and replaces what
was declared under its name. Who declared it and when are kept with it, the secret never: only its name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from oncegate.domain.target_declarations import Declaration, declare_target
from oncegate.domain.targets import Target
from oncegate.errors import ConcurrentUpdate, NotFound, StoreUnavailable
from oncegate.stores.port import TargetRecords

logger = logging.getLogger(__name__)
# Operators declaring one target at once each read it again: a few tries settle any such race.
SAVE_TRIES = 5


class Targets:
    """Set, list and remove declared targets; ``allow_loopback`` is ``ONCEGATE_TARGETS_ALLOW_LOOPBACK``."""

    def __init__(self, store: TargetRecords, *, clock: Callable[[], datetime], allow_loopback: bool = False) -> None:
        self._store = store
        self._clock = clock
        self._allow_loopback = allow_loopback

    def set(self, declaration: Declaration, *, declared_by: str | None) -> Target:
        """Check the declaration and store it in place of any target of that name; raises ``InvalidRequest``."""
        checked = declare_target(declaration, allow_loopback=self._allow_loopback)
        for _ in range(SAVE_TRIES):
            try:
                version = self._store.get_target(checked.name).version
            except NotFound:
                version = None
            try:
                saved = self._store.save_target(
                    replace(checked, declared_by=declared_by, declared_at=self._clock(), version=version)
                )
            except ConcurrentUpdate:
                continue
            logger.info("Target %s declared: %s", saved.name, saved.base_url)
            return saved
        raise StoreUnavailable(f"the target {checked.name} kept changing while it was declared: try again")

    def list(self) -> list[Target]:
        """Every declared target, by name."""
        return self._store.list_targets()

    def get(self, name: str) -> Target:
        """The target declared as ``name``; raises ``NotFound``."""
        return self._store.get_target(name)

    def remove(self, name: str) -> bool:
        """Remove the target declared as ``name``: no flow reaches it from now on. Whether there was one."""
        removed = self._store.delete_target(name)
        if removed:
            logger.info("Target %s removed", name)
        return removed
