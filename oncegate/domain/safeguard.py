"""What must hold before any claim is made: the right key secrets, a clock that agrees (the same store:
:mod:`oncegate.domain.store_id`).

Each check is a pure function of what the store says about itself (:class:`StoreMarks`) and of
this instance's settings; the service (``oncegate.service.safeguard``) reads, calls and writes.
Each refusal is one an operator's mistake would otherwise turn into a second ``proceed``
(issue 22): a key done under one secret looked up under another, a lease granted or expired on a
clock that runs ahead.

**Key secrets.** The store keeps a record per secret (:class:`KeySecretRecord`): announced (an
instance holds it as the next secret), in use from a given time, retired. The timeline of a
rotation, as the runbook in docs/operations.md runs it::

    SECRET=A                 A in use from t0 (the store's first claim)
    SECRET=A NEXT=B          B announced: A-only instances still fine (nobody claims with B)
    SECRET=B PREVIOUS=A      B in use from t1 + SWITCH_GRACE; until then these instances claim with A
                             and look B up; from t1 on an A-only instance refuses (it cannot read B)
    keys retire A            A retired, once no claim made with it is needed
    SECRET=B                 nothing older is live: fine

An instance refuses when a live secret is not among its own (it would answer ``proceed`` for keys
done under it), when its secrets' roles contradict the order they came into use (swapped
settings), and when its current secret was retired.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import datetime, timedelta

from oncegate.domain.copies import frozen
from oncegate.domain.marks import StoreMarks
from oncegate.domain.records import KeySecretRecord
from oncegate.domain.times import said
from oncegate.errors import ClockSkewed, InvalidRequest, NotConfigured, NotFound

# Longer than an instance's interval between two reads of the marks plus the largest clock difference
# allowed, so that every instance on the older secret alone has refused before a claim is made with a new one.
SWITCH_GRACE = timedelta(seconds=60)
# How far this instance's clock may be from the store's before leases can no longer be trusted.
MAX_CLOCK_SKEW = timedelta(seconds=5)
# Table Storage's Date header has whole seconds: the store's time lies within this second.
STORE_CLOCK_RESOLUTION = timedelta(seconds=1)
# The round trip a reading of the store's clock is trusted over: the store answered at some time within it, which the
# measurement cannot see through. A slower reading is judged only as far as it can tell (check_clock).
CLOCK_ROUND_TRIP = timedelta(seconds=1)
# How far an instance the check lets through (at MAX_CLOCK_SKEW) may really be from the store's clock: its measured skew
# within MAX_CLOCK_SKEW plus the measurement's own uncertainty (half the resolution and half the round trip), which
# the measured skew may be off by again. Two instances' clocks may be twice this apart
# (oncegate.domain.records.CALL_DEADLINE_MARGIN).
MAX_CLOCK_ERROR = MAX_CLOCK_SKEW + STORE_CLOCK_RESOLUTION + CLOCK_ROUND_TRIP

SECRET = "ONCEGATE_KEY_SECRET"
PREVIOUS = "ONCEGATE_KEY_SECRET_PREVIOUS"
NEXT = "ONCEGATE_KEY_SECRET_NEXT"
RUNBOOK = "See docs/operations.md, 'The key secret'."
# The hex digits of the code ``--orphan`` gives after the number of rows (SecretUsage.confirmation).
CONFIRMATION_DIGITS = 6


@frozen
class Roles:
    """This instance's secrets by check value: the one it makes claims with, and the other of a rotation."""

    current: str
    previous: str | None = None
    next: str | None = None

    def knows(self, key_id: str) -> bool:
        return key_id in (self.current, self.previous, self.next)


@frozen
class SecretsVerdict:
    """The records to write, and the secret (check value) to make new claims with.

    Every instance makes claims with the newest secret in use that it holds, whatever its role:
    before the current secret's switch, the previous one (the current one is looked up, as an
    instance that holds it as the next secret does); once the next secret is in use, that one (the
    current is looked up, as the previous secret of a switched instance). So from the end of a
    switch grace on no claim is made with an older secret, and the count an operator confirms when
    retiring it stays as counted.
    """

    claim_with: str
    writes: tuple[KeySecretRecord, ...] = ()


def _at(moment: datetime | None) -> str:
    return said(moment) if moment else "?"


def check_secrets(roles: Roles, secrets: tuple[KeySecretRecord, ...], now: datetime) -> SecretsVerdict:
    """Refuse settings that would read the store's claims with the wrong secrets; else what to record."""
    by_id = {record.key_id: record for record in secrets}
    live = sorted((record for record in secrets if record.live), key=lambda record: record.in_use_from or now)
    current, previous, next_ = by_id.get(roles.current), by_id.get(roles.previous or ""), by_id.get(roles.next or "")
    if current is not None and current.retired_at is not None:
        raise NotConfigured(
            f"ONCEGATE_KEY_SECRET is a secret (check value {current.key_id}) an operator retired on "
            f"{_at(current.retired_at)}: claims made with it no longer count. Set it to the store's current secret. "
            + RUNBOOK,
            target=SECRET,
        )
    current_from = current.in_use_from if current else None
    unknown = [record for record in live if not roles.knows(record.key_id)]
    if unknown:
        newest = unknown[-1]
        if current_from is not None and newest.in_use_from is not None and newest.in_use_from > current_from:
            raise NotConfigured(
                f"Another instance makes claims with a newer key secret (check value {newest.key_id}, in use from "
                f"{_at(newest.in_use_from)}) that this one does not know: its claims would be made again here. Set "
                "ONCEGATE_KEY_SECRET to that secret and ONCEGATE_KEY_SECRET_PREVIOUS to this one (the runbook's "
                "second step), or hold it as ONCEGATE_KEY_SECRET_NEXT. " + RUNBOOK,
                target=SECRET,
            )
        oldest = unknown[0]
        if current is None and roles.previous is None:
            # A secret the store never heard of, not even as the next one: a wrong setting, not a rotation.
            raise NotConfigured(
                "This store's claims were made with another key secret: every key already done would be claimed "
                "again. Set ONCEGATE_KEY_SECRET to the secret the store was used with (in Azure, Key Vault keeps its "
                "earlier versions; on SQLite, the key-secret file beside the database, or unset ONCEGATE_KEY_SECRET "
                "to use that file), or during a rotation set ONCEGATE_KEY_SECRET_PREVIOUS to it.",
                target=SECRET,
            )
        raise NotConfigured(
            f"Claims in this store were made with a key secret this instance does not know (check value "
            f"{oldest.key_id}, in use from {_at(oldest.in_use_from)}): every key done with it would be answered "
            "proceed again. Set ONCEGATE_KEY_SECRET_PREVIOUS to it; once no claim made with it is needed, retire it "
            f"with `oncegate keys retire {oldest.key_id}`. " + RUNBOOK,
            target=PREVIOUS,
        )
    if (
        next_ is not None
        and next_.in_use_from is not None
        and (current_from is None or current_from >= next_.in_use_from)
    ):
        raise NotConfigured(
            f"ONCEGATE_KEY_SECRET_NEXT is a secret (check value {next_.key_id}) the store's claims are made with since "
            f"{_at(next_.in_use_from)}, before ONCEGATE_KEY_SECRET: the two settings are swapped. Set "
            "ONCEGATE_KEY_SECRET to the secret in use and ONCEGATE_KEY_SECRET_NEXT to the new one. " + RUNBOOK,
            target=NEXT,
        )
    if (
        previous is not None
        and previous.in_use_from is not None
        and current_from is not None
        and previous.in_use_from >= current_from
    ):
        raise NotConfigured(
            f"ONCEGATE_KEY_SECRET_PREVIOUS is a secret (check value {previous.key_id}) that came into use after "
            "ONCEGATE_KEY_SECRET: the two settings are swapped. " + RUNBOOK,
            target=PREVIOUS,
        )
    writes: list[KeySecretRecord] = []
    # The first secret of a store is in use at once; a later one after the grace, for the reason above.
    starts = now + SWITCH_GRACE if live else now
    if current is None:
        current = KeySecretRecord(roles.current, added_at=now, in_use_from=starts)
        writes.append(current)
    elif current.in_use_from is None:
        current = replace(current, in_use_from=starts)
        writes.append(current)
    if roles.next is not None and next_ is None:
        writes.append(KeySecretRecord(roles.next, added_at=now))
    assert current.in_use_from is not None
    # Until the switch, claims are made with the secret in use before it (a retired one needs no switch).
    older_live = any(record.key_id != roles.current for record in live)
    if current.in_use_from > now and older_live and roles.previous is not None:
        return SecretsVerdict(claim_with=roles.previous, writes=tuple(writes))
    if next_ is not None and next_.live and next_.in_use_from is not None and next_.in_use_from <= now:
        return SecretsVerdict(claim_with=next_.key_id, writes=tuple(writes))
    return SecretsVerdict(claim_with=roles.current, writes=tuple(writes))


@frozen
class SecretUsage:
    """The rows found only through one key secret: what retiring it would orphan (issue 31).

    A row's lookup needs the secret its claim id was made with: a claim in any status, and the tombstone
    retention leaves of a succeeded one (it answers a late replay ``duplicate`` until its scope's horizon).
    Conflicts, fingerprint records and history hang off a claim's row and go with it; a poll address or
    an idempotency key is made again from the claim, never stored. ``held`` counts the claims retention
    never deletes by itself (in progress, unknown, a failure not reviewed); ``retryable``, the retryable
    failures, on no attention list (a review settling a claim as failed leaves one): each waits for its key's
    next run, or for its scope's horizon. ``last_horizon`` is when retention deletes the last of the others:
    tombstones, succeeded claims and retryable failures at their scope's horizon, released claims and reviewed
    failures at its retention (None: no such row). ``unsettled``: the rows a run may take again, or took again since
    the switch to the next secret (a released claim or a retryable failure, whose key proceeds anyway; or one whose
    current attempt began after the switch), each as its claim id and whether its key proceeds anyway now.
    """

    claims: int = 0
    tombstones: int = 0
    held: int = 0
    last_horizon: datetime | None = None
    retryable: int = 0
    unsettled: frozenset[tuple[str, bool]] = frozenset()
    disputed: int = 0

    @property
    def rows(self) -> int:
        return self.claims + self.tombstones

    @property
    def confirmation(self) -> str:
        """What ``--orphan`` must say to orphan these rows: their number, and while some are unsettled, a code of
        which rows those are and whether their keys proceed anyway (``12.3f9a0c``).

        The number alone cannot tell a retryable failure from the same key succeeded since it was counted: retired
        then, the key done would proceed again. One that succeeds stays unsettled, its code changed.
        """
        if not self.coded:
            return str(self.rows)
        rows = sorted(f"{claim_id} {'proceeds' if proceeds else 'answers'}" for claim_id, proceeds in self.unsettled)
        digest = hashlib.sha256("\n".join(rows).encode()).hexdigest()
        return f"{self.rows}.{digest[:CONFIRMATION_DIGITS]}"

    @property
    def coded(self) -> bool:
        """Whether the number alone is not enough: a row was taken again since the switch. While every unsettled row's
        key proceeds anyway, the rows orphaned now harm no more than the number said whatever was seen before: a row
        done since it was counted is taken again first, and then it is one of these (its code)."""
        return any(not proceeds for _, proceeds in self.unsettled)

    def counting(
        self,
        *,
        tombstone: bool,
        gone_at: datetime | None,
        retryable: bool = False,
        unsettled: tuple[str, bool] | None = None,
        disputed: bool = False,
    ) -> SecretUsage:
        """This usage with one row more: a tombstone or a claim, deleted by retention at ``gone_at`` (None: held),
        ``retryable`` when it is a retryable failure; ``unsettled``: its claim id and whether its key proceeds anyway,
        when it is unsettled; ``disputed`` when an open conflict keeps it, whatever its horizon says."""
        # A row an open conflict keeps has no horizon of its own; the rows counted before it keep theirs.
        horizons = [moment for moment in (self.last_horizon, None if disputed else gone_at) if moment is not None]
        return SecretUsage(
            claims=self.claims + (not tombstone),
            tombstones=self.tombstones + tombstone,
            held=self.held + (gone_at is None and not disputed),
            last_horizon=max(horizons, default=None),
            retryable=self.retryable + retryable,
            unsettled=self.unsettled | {unsettled} if unsettled is not None else self.unsettled,
            disputed=self.disputed + disputed,
        )

    def text(self) -> str:
        """What remains, in words: '2 claims and 1 tombstone (the last reaches its horizon on ...)'."""
        parts = [_counted(self.claims, "claim"), _counted(self.tombstones, "tombstone")]
        made = " and ".join(part for part in parts if part)
        when = []
        if self.held:
            held = _counted(self.held, "claim")
            them = "it" if self.held == 1 else "them"
            when.append(
                f"{held} that retention never deletes by itself, in the attention list until someone settles {them}"
            )
        if self.disputed:
            rows = _counted(self.disputed, "row")
            them = "it" if self.disputed == 1 else "them"
            when.append(
                f"{rows} with an open conflict, which retention keeps past any horizon until a reviewer resolves "
                f"{them} (`oncegate conflicts list`)"
            )
        if self.retryable:
            failures = _counted(self.retryable, "retryable failure")
            when.append(
                f"{failures}, on no attention list: each waits for its key's next run, or for its scope's horizon "
                "(`oncegate claims list --status failed`)"
            )
        if self.last_horizon is not None:
            others = " of the others" if self.held or self.disputed else ""
            when.append(f"the last{others} reaches its horizon on {_at(self.last_horizon)}")
        return f"{made} ({'; '.join(when)})" if when else made


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}" if count else ""


def secret_of(secrets: tuple[KeySecretRecord, ...], key_id: str) -> KeySecretRecord:
    """The record of the secret with this check value; ``NotFound`` listing the ones the store knows."""
    record = next((record for record in secrets if record.key_id == key_id), None)
    if record is None:
        known = ", ".join(sorted(record.key_id for record in secrets)) or "none"
        raise NotFound(
            f"This store knows no key secret with the check value {key_id!r} (it knows: {known}).", target="keyId"
        )
    return record


def retired(
    secrets: tuple[KeySecretRecord, ...],
    key_id: str,
    *,
    now: datetime,
    usage: SecretUsage,
    orphan: int | str | None,
) -> KeySecretRecord | None:
    """The secret's record, retired; None when it already is. ``usage``: the rows found only through it.

    The newest secret in use cannot be retired (every new claim is made with it). One with rows left
    (claims or tombstones) is retired only when ``orphan`` is their :attr:`SecretUsage.confirmation`, as
    ``oncegate keys`` showed it: those keys would be answered proceed again. Their number alone is refused while
    some are unsettled (a released claim or a retryable failure may have succeeded since it was counted).
    """
    record = secret_of(secrets, key_id)
    if record.retired_at is not None:
        return None
    live = sorted((other for other in secrets if other.live), key=lambda other: other.in_use_from or now)
    switching = [other for other in live if other.in_use_from is not None and other.in_use_from > now]
    if switching:
        raise InvalidRequest(
            f"The switch to key secret {switching[-1].key_id} is under way until {_at(switching[-1].in_use_from)}: "
            "until then claims are still made with the older one. Retire it after that.",
            target="keyId",
        )
    if record.live and live[-1].key_id == key_id:
        raise InvalidRequest(
            f"{key_id} is the store's current key secret: new claims are made with it. Retire a secret only after "
            "the switch to a newer one.",
            target="keyId",
        )
    if usage.rows and (orphan is None or str(orphan) != usage.confirmation):
        which = ""
        if usage.coded:
            which = (
                f" (after the dot, a code of the {_counted(len(usage.unsettled), 'row')} a run may take again or took "
                "since the switch: one that succeeds before the retire changes it)"
            )
        raise InvalidRequest(
            f"Rows made with {key_id} remain, found only through it: {usage.text()}. Once it is retired, those keys "
            "would be answered proceed again. Wait until retention has deleted them (`oncegate keys` shows when), or "
            f"pass --orphan {usage.confirmation} to retire it all the same{which}.",
            target="orphan",
        )
    return replace(record, retired_at=now)


def clock_skew(marks: StoreMarks) -> timedelta | None:
    """How far this instance's clock runs ahead of the store's (negative: behind); None when they share one."""
    if marks.clock is None or marks.asked_at is None or marks.answered_at is None:
        return None
    local = marks.asked_at + (marks.answered_at - marks.asked_at) / 2
    # The Date header drops the fraction of its second: the store's time was within the next second.
    return local - (marks.clock + STORE_CLOCK_RESOLUTION / 2)


def check_clock(marks: StoreMarks, *, bound: timedelta = MAX_CLOCK_SKEW) -> None:
    """Refuse to grant or expire leases on a clock further from the store's than ``bound`` (plus the header's
    resolution and half the round trip, which the measurement cannot see through), or one that may really be further
    than ``bound`` + STORE_CLOCK_RESOLUTION + CLOCK_ROUND_TRIP from it (MAX_CLOCK_ERROR at MAX_CLOCK_SKEW): a reading
    over a round trip longer than CLOCK_ROUND_TRIP lets through only a skew it measured that much smaller."""
    skew = clock_skew(marks)
    if skew is None:
        return
    assert marks.asked_at is not None
    assert marks.answered_at is not None
    round_trip = marks.answered_at - marks.asked_at
    slack = STORE_CLOCK_RESOLUTION / 2 + round_trip / 2
    direction = "ahead of" if skew > timedelta(0) else "behind"
    measured = f"This instance's clock is {abs(skew).total_seconds():.1f} s {direction} the store's"
    if abs(skew) > bound + slack:
        raise ClockSkewed(
            f"{measured} (at most {bound.total_seconds():.0f} s is allowed): leases granted or expired on it could "
            "let two runs proceed. Nothing is claimed until the clocks agree; check the machine's time "
            "synchronisation.",
            skew=skew,
        )
    if abs(skew) + slack > bound + STORE_CLOCK_RESOLUTION + CLOCK_ROUND_TRIP:
        raise ClockSkewed(
            f"{measured}, measured over a round trip of {round_trip.total_seconds():.1f} s to the store: it may "
            f"really be more than {bound.total_seconds():.0f} s off, which a reading over a round trip of at most "
            f"{CLOCK_ROUND_TRIP.total_seconds():.0f} s would tell. Nothing is claimed until a reading shows the "
            "clocks agree (the next request reads again); check the machine's time synchronisation and the "
            "store's latency.",
            skew=skew,
        )
