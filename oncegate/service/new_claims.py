"""Check and claim many's new keys claimed together (issue 36): one store call for the first claims of many items.

On a store with one writer at a time (SQLite) a bulk call's items are parsed and identified first
(:meth:`~oncegate.service.core.ClaimsCore.identified`: keys, fingerprints, no store), and the items whose key
may be new are claimed here together. Each is decided by the contract's decision table on no claim, as a
single call decides a key never seen (:func:`~oncegate.domain.decisions.check_and_claim`), and their claims
and first history lines go to the store in one call (``create_claims``): one query for the claims already
there, set-based inserts for the rest, in one transaction. An item whose claim was there is left to Check
and claim alone (:meth:`~oncegate.service.claims.Claims.decide_for`), and so is every item that the single
call would not answer by writing a first claim straight away (:meth:`NewClaims.alone`).

Each item stays a run of its own: its claim, history line, usage counts and answer (claim token, idempotency
key) are the ones a single call makes; an item refused or left alone changes nothing of the others'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from oncegate.domain.copies import replaced
from oncegate.domain.decisions import ClaimAnswer, Intent, answer, check_and_claim, idempotency_key
from oncegate.domain.records import Claim, HistoryEvent
from oncegate.domain.statuses import EventKind
from oncegate.service.core import ClaimsCore, keyed, new_grant_id, token


class NewClaimWrites(Protocol):
    """What claiming new keys together uses of the store."""

    def create_claims(self, new: Sequence[tuple[Claim, HistoryEvent]]) -> list[Claim | None]: ...


class NewClaims:
    """Claims the new keys of a bulk call's items together, each answered as its single call would be."""

    def __init__(self, core: ClaimsCore, store: NewClaimWrites) -> None:
        self._core = core
        self._store = store

    def identified(self, sent: Intent, *, signed_in: str | None = None) -> Intent:
        """The item's request identified once, as Check and claim identifies it (refusals raised as there)."""
        return self._core.identified(sent, signed_in=signed_in)

    def alone(self, intent: Intent) -> bool:
        """Whether the single call would do more than write a first claim for a new key: the inventory refuses the
        flow (the answer is ``blocked``), the request may not claim (a poll), or a key-secret rotation is under
        way (the key is looked up under the older secrets first, and a claim made is withdrawn if it meets one
        made under another)."""
        return (
            not intent.may_claim or len(intent.identities) > 1 or self._core.inventory.refusal(intent.flow) is not None
        )

    def claim(self, intents: Sequence[Intent]) -> list[ClaimAnswer | None]:
        """Each intent's answer where its key was new and is now claimed; None where a claim had its key or the
        store could not hold its row (nothing of that item was written: Check and claim alone answers it). Claim ids
        are distinct, none ``alone``."""
        decided = [check_and_claim(None, replaced(intent, grant_id=new_grant_id())) for intent in intents]
        firsts: list[tuple[Claim, HistoryEvent]] = []
        for intent, first in zip(intents, decided, strict=True):
            claim = first.record
            assert claim is not None, "a new key's answer carries its first claim"
            line = self._core.event(
                claim,
                EventKind.CLAIM,
                first.decision.value,
                first.recognised_by,
                at=intent.written_at,
                run_id=intent.run_id,
                flow=intent.flow,
                fingerprint=keyed(intent.fingerprint),
                source=intent.source,
            )
            firsts.append((claim, line))
        made = self._store.create_claims(firsts)
        answers: list[ClaimAnswer | None] = []
        inventory = self._core.inventory
        for intent, first, stored in zip(intents, decided, made, strict=True):
            if stored is None:
                answers.append(None)
                continue
            self._core.counted(None, stored)
            if intent.source is not None:
                inventory.source_claimed(intent.scope, intent.flow, intent.source)
            inventory.answered(intent.scope, intent.flow, first.decision, intent.now)
            hasher = intent.hasher
            answers.append(answer(first, stored, intent, token(stored, hasher), idempotency_key(hasher, stored)))
        return answers
