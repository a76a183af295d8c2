"""What must hold before any claim is made: the right key secrets, the same store, a clock that agrees.

Each check is a pure function of what the store says about itself (:class:`StoreMarks`) and of
this instance's settings; the service (``oncegate.service.safeguard``) reads, calls and writes.
Each refusal is one an operator's mistake would otherwise turn into a second ``proceed``
(issue 22): a key done under one secret looked up under another, a wiped store read as a new one,
a lease granted or expired on a clock that runs ahead.

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

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from oncegate.domain.marks import StoreMarks, TableMark
from oncegate.domain.records import KeySecretRecord
from oncegate.errors import ClockSkewed, InvalidRequest, NotConfigured, NotFound

# Longer than an instance's interval between two reads of the marks plus the largest clock difference
# allowed, so that every instance on the older secret alone has refused before a claim is made with a new one.
SWITCH_GRACE = timedelta(seconds=60)
# How far this instance's clock may be from the store's before leases can no longer be trusted.
MAX_CLOCK_SKEW = timedelta(seconds=5)
# Table Storage's Date header has whole seconds: the store's time lies within this second.
STORE_CLOCK_RESOLUTION = timedelta(seconds=1)

SECRET = "ONCEGATE_KEY_SECRET"
PREVIOUS = "ONCEGATE_KEY_SECRET_PREVIOUS"
NEXT = "ONCEGATE_KEY_SECRET_NEXT"
STORE_ID = "ONCEGATE_STORE_ID"
RUNBOOK = "See docs/operations.md, 'The key secret'."


@dataclass(frozen=True)
class Roles:
    """This instance's secrets by check value: the one it makes claims with, and the other of a rotation."""

    current: str
    previous: str | None = None
    next: str | None = None

    def knows(self, key_id: str) -> bool:
        return key_id in (self.current, self.previous, self.next)


@dataclass(frozen=True)
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
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "?"


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
    secrets: tuple[KeySecretRecord, ...], key_id: str, *, now: datetime, claims: int, orphan: int | None
) -> KeySecretRecord | None:
    """The secret's record, retired; None when it already is. ``claims``: how many claims were made with it.

    The newest secret in use cannot be retired (every new claim is made with it). One with claims
    left is retired only when the operator names how many it orphans: those keys would proceed again.
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
    if claims and orphan != claims:
        raise InvalidRequest(
            f"{claims} claim{'s were' if claims != 1 else ' was'} made with {key_id}: once it is retired, those keys "
            f"would be answered proceed again. Wait until retention has deleted them, or pass --orphan {claims} to "
            "retire it all the same.",
            target="orphan",
        )
    return replace(record, retired_at=now)


def check_store_id(
    marks: StoreMarks, *, pinned: str | None, seen: str | None, fresh: str, may_start: bool = True
) -> str | None:
    """Refuse a store that is not the one this instance, or its settings, knew; the id to mark it with.

    ``pinned`` is the id the settings name (``ONCEGATE_STORE_ID``, or the SQLite store's ``store-id``
    file); ``seen`` the one this process read before. The id is kept beside the key secrets, and each
    table that guards the promise carries a mark naming it (issue 31): a table that lost its mark was
    emptied, dropped or replaced behind an intact id, and only ``oncegate store init`` marks it again.

    A store without an id or marks is new, unless the pin or this process says it is not (then it was
    wiped, restored empty or replaced), or unless new stores are marked only on purpose (``may_start``
    False: Table Storage, whose new store looks exactly like a wiped one). An id an earlier release
    wrote, without the tables' marks, has them written while its claims table holds claims; with none,
    it may have lost them, and ``store init`` decides. Returns the id whose marks are to be written
    where they are missing (the stored one, the tables' own, else ``fresh``), or None when the store
    is whole.
    """
    stored = marks.store_id
    if stored is None:
        if seen is not None:
            raise NotConfigured(
                f"The store lost its identity ({seen}) while this instance ran{_missing(marks)}: it was wiped, "
                "restored empty or replaced, and every key done before would be answered proceed again. Nothing is "
                "claimed. Restore the store; to start a new one on purpose, run `oncegate store init` and restart.",
                target=STORE_ID,
            )
        return _unnamed_store(marks, pinned=pinned, fresh=fresh, may_start=may_start)
    if pinned is not None and stored != pinned:
        raise NotConfigured(
            f"This store is store {stored}, not store {pinned} that ONCEGATE_STORE_ID (or the store-id file beside a "
            "SQLite database) names: its claims are not the ones this app made. Either the store settings point at "
            f"another store (fix them), or store {pinned} was wiped and an instance without the setting started it "
            f"anew as {stored}: then every key done before would be answered proceed again. Restore store {pinned}; "
            f"only if its claims are truly lost, set ONCEGATE_STORE_ID to {stored}.",
            target=STORE_ID,
        )
    if seen is not None and stored != seen:
        raise NotConfigured(
            f"The store was replaced while this instance ran (store {seen} before, {stored} now). Restart the app "
            "if that was meant.",
            target=STORE_ID,
        )
    _refuse_foreign_tables(marks, stored)
    lost = [mark for mark in marks.tables if mark.store_id is None]
    if lost and (marks.tables_marked or not marks.holds_claims or any(mark.missing for mark in lost)):
        raise NotConfigured(_lost_tables(lost, stored), target=STORE_ID)
    # An id an earlier release wrote, over a claims table that holds claims: its tables get their marks now.
    return None if marks.tables_marked and not lost else stored


def _unnamed_store(marks: StoreMarks, *, pinned: str | None, fresh: str, may_start: bool) -> str:
    """The id to mark a store without one with: its tables' own, the pinned one or ``fresh``; or the refusal."""
    named = sorted({mark.store_id for mark in marks.tables if mark.store_id is not None})
    if named:
        # Tables marked, the id not yet written: a marking cut short (the tables are marked first), or the id's
        # own table lost. With no claim in the store nothing can be answered twice: the marking is finished.
        if len(named) > 1 or (pinned is not None and pinned != named[0]):
            raise NotConfigured(
                f"The store's tables belong to store {' and store '.join(named)}, while ONCEGATE_STORE_ID (or the "
                f"store-id file beside a SQLite database) names store {pinned or '(none)'}: they were mixed from "
                "different stores. Nothing is claimed. Point the store settings at one store, or restore it.",
                target=STORE_ID,
            )
        if marks.holds_claims:
            raise NotConfigured(
                f"The store's identity (kept beside its key secrets) is gone while its claims table, of store "
                f"{named[0]}, holds claims: the key secrets' records were lost with it, and a wrong secret would no "
                "longer be refused. Nothing is claimed. Restore the table of key secrets; to mark the store again "
                "on purpose, run `oncegate store init`.",
                target=STORE_ID,
            )
        return named[0]
    if pinned is not None:
        raise NotConfigured(
            f"The store carries no identity{_missing(marks)}, while ONCEGATE_STORE_ID (or the store-id file beside a "
            f"SQLite database) names store {pinned}: it was wiped, restored empty or replaced, and every key done "
            "before would be answered proceed again. Nothing is claimed. Restore the store, or point the setting at "
            "it; to start a new store on purpose, run `oncegate store init`.",
            target=STORE_ID,
        )
    if not may_start:
        raise NotConfigured(UNMARKED, target=STORE_ID)
    # A new store (SQLite's own new file), or one an earlier release wrote before stores had ids.
    return fresh


# Table Storage's first deployment, or any store that cannot tell new from wiped: the one command that marks it.
UNMARKED = (
    "This store carries no mark of the store the app serves: it is new, or it was wiped, restored empty or replaced "
    "(the two look the same), and every key done before a wipe would be answered proceed again. Nothing is claimed "
    "until it is marked on purpose: run `oncegate store init` with the app's store settings (an azd deployment "
    "runs it itself), then set ONCEGATE_STORE_ID to the id it prints. See docs/operations.md, 'A store that lost "
    "its claims'."
)


def _missing(marks: StoreMarks) -> str:
    missing = [mark.table for mark in marks.tables if mark.missing]
    return f" (the table {', '.join(missing)} does not exist)" if missing else ""


def missing_table(table: str) -> str:
    """Why an action on a table that is not there is refused: a table missing is never read as an empty one."""
    return (
        f"The table {table} does not exist: the store was deleted, wiped or not provisioned, and every key done "
        "before would be answered proceed again. Nothing is claimed until it is restored (docs/operations.md, 'A "
        "store that lost its claims'); only if its claims are truly lost, run `oncegate store init`."
    )


def _refuse_foreign_tables(marks: StoreMarks, stored: str) -> None:
    foreign = [mark for mark in marks.tables if mark.store_id not in (None, stored)]
    if foreign:
        tables = ", ".join(f"{mark.table} (store {mark.store_id})" for mark in foreign)
        raise NotConfigured(
            f"This store is store {stored}, but its table {tables} belongs to another store: it was restored or "
            "copied from elsewhere, and its claims are not this store's. Nothing is claimed. Restore the table of "
            f"store {stored}.",
            target=STORE_ID,
        )


def _lost_tables(lost: list[TableMark], stored: str) -> str:
    """Why a store whose id is intact is refused: tables of it that lost their marks, or are not there."""
    missing = [mark.table for mark in lost if mark.missing]
    unmarked = [mark.table for mark in lost if not mark.missing]
    what = " and ".join(
        [
            *([f"the table {', '.join(missing)} is missing"] if missing else []),
            *([f"the table {', '.join(unmarked)} lost its mark"] if unmarked else []),
        ]
    )
    return (
        f"This store is store {stored}, but {what}: it was deleted, emptied or replaced behind the store's id, and "
        "every key done before would be answered proceed again. Nothing is claimed. Restore it (docs/operations.md, "
        "'A store that lost its claims'); only if its claims are truly lost, run `oncegate store init` to mark it "
        "again on purpose."
    )


def clock_skew(marks: StoreMarks) -> timedelta | None:
    """How far this instance's clock runs ahead of the store's (negative: behind); None when they share one."""
    if marks.clock is None or marks.asked_at is None or marks.answered_at is None:
        return None
    local = marks.asked_at + (marks.answered_at - marks.asked_at) / 2
    # The Date header drops the fraction of its second: the store's time was within the next second.
    return local - (marks.clock + STORE_CLOCK_RESOLUTION / 2)


def check_clock(marks: StoreMarks, *, bound: timedelta = MAX_CLOCK_SKEW) -> None:
    """Refuse to grant or expire leases on a clock further from the store's than ``bound`` (plus the header's
    resolution and half the round trip, which the measurement cannot see through)."""
    skew = clock_skew(marks)
    if skew is None:
        return
    assert marks.asked_at is not None
    assert marks.answered_at is not None
    slack = STORE_CLOCK_RESOLUTION / 2 + (marks.answered_at - marks.asked_at) / 2
    if abs(skew) > bound + slack:
        direction = "ahead of" if skew > timedelta(0) else "behind"
        raise ClockSkewed(
            f"This instance's clock is {abs(skew).total_seconds():.1f} s {direction} the store's (at most "
            f"{bound.total_seconds():.0f} s is allowed): leases granted or expired on it could let two runs proceed. "
            "Nothing is claimed until the clocks agree; check the machine's time synchronisation.",
            skew=skew,
        )
