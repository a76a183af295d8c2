"""Bulk calls (issue 24): the items of one request, each applied as its single call applies it.

The entry point hands :meth:`Bulk.each` the items and one function that applies an item through
the single call's service (Check and claim, Record result), so every item gets the same checks,
history and answer as that call. What this adds is how the items meet the store:

* Items are decided as if sent one after another in order. Items for the same claim (``same``)
  always go one after another, in order; items for different claims touch different records.
* Where each write is a request of its own (Table Storage, a partition per claim), the groups of
  items run at once on one pool per instance, ``ONCEGATE_BULK_CONCURRENCY`` threads: a bulk call
  costs about the time of its slowest group instead of the sum of its items, and an instance sends
  the store at most that many requests for bulk calls at a time, however many calls it serves.
* Where the store has one writer at a time (SQLite), the items go one after another in this thread
  inside ``writing_together``: one transaction for the call instead of one per write. A call may answer
  some of its items together first (``ahead``: Check and claim many's new keys, written set-based,
  ``oncegate.service.new_claims``); the others then go one after another, in order.
* A store that fails mid-call: the item that met the failure answers ``store_unavailable``, and so
  does every item not yet started, without being tried; items applied before it stand. On SQLite
  a commit that fails loses the whole call, so every item that was not refused answers
  ``store_unavailable``: nothing it answered was kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from oncegate.config import DEFAULT_BULK_CONCURRENCY
from oncegate.errors import OnceGateError, StoreUnavailable
from oncegate.stores.port import WritesTogether

logger = logging.getLogger(__name__)

Item = TypeVar("Item")
Answer = TypeVar("Answer")

# A store failing mid-call may have kept the write of the item that met the failure (its answer was lost), so the
# advice is the whole call again, unchanged: in Check and claim many each item is then the same run asking again
# and is given back a claim its first answer lost, where a call of only these items would be other runs, told
# in_progress until the lease runs out (issue 31).
AGAIN = "Send the whole call again, unchanged, and use its answers instead of these."
NOT_APPLIED = (
    f"Not applied: the store failed during this call before this item was tried, so nothing of it was written. {AGAIN}"
)
LOST = f"Not kept: the store failed to commit this call, so nothing of it was written. {AGAIN}"


class _Answers(Generic[Item, Answer]):
    """The answers of one call, filled in by whichever thread applies each item."""

    def __init__(self, items: Sequence[Item], apply: Callable[[Item], Answer]) -> None:
        self.items = items
        self.apply = apply
        self.value: list[Answer | OnceGateError] = [StoreUnavailable(NOT_APPLIED)] * len(items)
        self.outage = threading.Event()

    def run(self, indexes: Sequence[int]) -> None:
        """Apply these items in order; after a store failure, leave the rest not applied."""
        for index in indexes:
            if self.outage.is_set():
                return
            try:
                self.value[index] = self.apply(self.items[index])
            except StoreUnavailable as exc:
                self.outage.set()
                self.value[index] = exc
            except OnceGateError as exc:
                self.value[index] = exc
            except Exception:
                # One item's defect must not cost the answers of the items applied beside it.
                logger.exception("Unexpected error in item %d of a bulk call", index)
                self.value[index] = OnceGateError("The service failed unexpectedly on this item; nothing more known.")


class Bulk:
    """Applies the items of a bulk call, on one pool of threads per instance where the store gains from it."""

    def __init__(
        self, store: WritesTogether, *, ready: Callable[[], None], concurrency: int = DEFAULT_BULK_CONCURRENCY
    ) -> None:
        self._store = store
        self._ready = ready
        self._concurrency = concurrency
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def each(
        self,
        items: Sequence[Item],
        apply: Callable[[Item], Answer],
        *,
        same: Callable[[Item], Hashable],
        ahead: Callable[[], Mapping[int, Answer]] | None = None,
    ) -> list[Answer | OnceGateError]:
        """Each item's answer, or the error that refused it alone, in the items' order.

        ``apply`` raises an ``OnceGateError`` to refuse its item; ``same`` names the claim an item is
        for (items naming the same one go one after another, in order). ``ahead``, where the store has one
        writer at a time, answers some items together before the others, by their places: it answers only
        items that no earlier item shares a claim with, so the order of each claim's items still holds.
        """
        # Checked once before any item: a store this instance must not act on refuses the whole call, and on
        # SQLite the marks are not read for the first time while the call holds the writers' lock.
        self._ready()
        answers = _Answers(items, apply)
        if not self._store.parallel_writes or self._concurrency <= 1:
            self._one_after_another(answers, ahead)
            return answers.value
        groups: dict[Hashable, list[int]] = {}
        for index, item in enumerate(items):
            groups.setdefault(same(item), []).append(index)
        pool = self._started()
        for done in [pool.submit(answers.run, indexes) for indexes in groups.values()]:
            done.result()
        return answers.value

    def _one_after_another(
        self, answers: _Answers[Item, Answer], ahead: Callable[[], Mapping[int, Answer]] | None
    ) -> None:
        try:
            with self._store.writing_together():
                done = ahead() if ahead is not None else {}
                for index, answer in done.items():
                    answers.value[index] = answer
                answers.run([index for index in range(len(answers.items)) if index not in done])
        except StoreUnavailable as exc:
            logger.warning("A bulk call's commit failed, none of its items was kept: %s", exc.message)
            answers.value = [
                answer
                if isinstance(answer, OnceGateError) and not isinstance(answer, StoreUnavailable)
                else StoreUnavailable(LOST)
                for answer in answers.value
            ]

    def _started(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="oncegate-bulk")
            return self._pool

    def close(self) -> None:
        """Stop the pool's threads once the calls under way are answered."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
