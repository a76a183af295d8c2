"""Retiring a key secret: never while a row found only through it remains, tombstones included (issue 31).

Retention turns a succeeded claim into a tombstone that keeps its ``KeyId``; ``oncegate keys`` and
``keys retire`` counted only the claims. Measured on main 7a113f4 (both stores, 20 of 20): succeed K
under secret A, switch to B with PREVIOUS=A, purge K down to its tombstone, ``oncegate keys`` showed A
with 0 claims, ``keys retire A`` was accepted ("0 orphaned"), and once PREVIOUS was dropped K answered
``proceed``.

Each test runs the app's instances as the service (a clock of their own, set back so that retention has
something to do) and the operator's commands through the CLI, on the store the environment names, as the
runbook in docs/operations.md has them typed; ``oncegate purge`` runs on the real clock, so the claims made
100 days ago are past their retention and their tombstones within their horizon.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oncegate.cli import main
from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.limits import DEFAULT_HORIZON_DAYS
from oncegate.domain.safeguard import SWITCH_GRACE, SecretUsage
from oncegate.domain.statuses import Decision
from oncegate.errors import NotConfigured
from oncegate.models import ListClaimsQuery, ReviewClaimRequest
from oncegate.stores.port import ClaimStore
from tests.cli.conftest import Run
from tests.conftest import SQLITE_FILE, FakeClock
from tests.gate import Gate
from tests.service.calls import claim, record, release, ring, set_scope

A = "secret-a-" + "a" * 32
B = "secret-b-" + "b" * 32
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
# How long before today the rotation's claims are made: past the default retention (90 days), within the horizon.
AGO = timedelta(days=100)


@pytest.fixture
def instance(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[KeyRing], Gate]:
    """An app instance with these key secrets over the test's store, reading its marks on every request."""
    clock.now = datetime.now(UTC) - AGO
    return lambda keys: Gate(open_store(), keys, clock=clock, check_interval=timedelta(0))


@pytest.fixture
def operator(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Run]:
    """``oncegate ...`` as an operator types it, with the app's store settings (those of the runbook's step 2)."""
    for name in ("ONCEGATE_STORE", "ONCEGATE_SQLITE_PATH", "ONCEGATE_STORE_ID", "ONCEGATE_KEY_SECRET_NEXT"):
        monkeypatch.delenv(name, raising=False)
    if store_kind == "tables":
        tables = request.getfixturevalue("table_store_factory")
        monkeypatch.setenv("ONCEGATE_STORE", "tables")
        monkeypatch.setenv("ONCEGATE_TABLES_CONNECTION_STRING", tables.connection_string)
        monkeypatch.setenv("ONCEGATE_TABLE_PREFIX", tables.prefix)
    else:
        monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / SQLITE_FILE))
    monkeypatch.setenv("ONCEGATE_KEY_SECRET", B)
    monkeypatch.setenv("ONCEGATE_KEY_SECRET_PREVIOUS", A)
    capsys = request.getfixturevalue("capsys")

    def run(command: str) -> Run:
        argv = shlex.split(command)
        assert argv[0] == "oncegate"
        code = main(argv[1:])
        out, err = capsys.readouterr()
        assert "Traceback" not in err, err
        return Run(code, out, err)

    return run


def listed(operator: Callable[..., Run]) -> dict[str, dict[str, Any]]:
    """``oncegate keys --json``: each secret's entry by key id."""
    shown = operator("oncegate keys --json")
    assert shown.code == 0, shown.err
    return {secret["keyId"]: secret for secret in json.loads(shown.out)["keySecrets"]}


def switched_from_a_to_b(instance: Callable[[KeyRing], Gate], clock: FakeClock, keys: list[str]) -> Gate:
    """The runbook's steps 1 and 2 with ``keys`` done under A before them; the switch's grace over."""
    before = instance(ring(A))
    for key in keys:
        record(before, claim(before, key=key, run="run-first"))
    instance(ring(A, next_=B)).health()
    switched = instance(ring(B, previous=A))
    switched.health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    return switched


def test_a_secret_whose_tombstones_remain_is_not_retired_and_its_keys_stay_duplicate(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    switched = switched_from_a_to_b(instance, clock, ["K-1"])
    a_id = KeyHasher(A).key_id

    purged = operator("oncegate purge")
    shown = listed(operator)[a_id]
    retire = operator(f"oncegate keys retire {a_id}")

    assert purged.code == 0, purged.err
    assert retire.code == 2, retire.out
    assert (shown["claims"], shown["tombstones"]) == (0, 1)
    assert "1 tombstone" in retire.err
    assert "--orphan 1" in retire.err
    assert listed(operator)[a_id]["state"] == "previous"
    # The runbook's step 4 cannot be taken early: an instance without PREVIOUS refuses instead of proceeding.
    with pytest.raises(NotConfigured) as dropped:
        claim(instance(ring(B)), key="K-1", run="run-again")
    assert dropped.value.target == "ONCEGATE_KEY_SECRET_PREVIOUS"
    assert claim(switched, key="K-1", run="run-again").decision is Decision.DUPLICATE


def test_claims_in_every_status_count_and_those_retention_keeps_have_no_horizon(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    before = instance(ring(A))
    claim(before, key="K-running", run="run-first")
    record(before, claim(before, key="K-failed", run="run-first"), "failed", error="ERP down", retryable=True)
    release(before, claim(before, key="K-released", run="run-first"))
    record(before, claim(before, key="K-done", run="run-first"))
    done_at = clock.now
    instance(ring(A, next_=B)).health()
    instance(ring(B, previous=A)).health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)

    purged = operator("oncegate purge --json")
    shown = listed(operator)[KeyHasher(A).key_id]
    refused = operator(f"oncegate keys retire {KeyHasher(A).key_id}")

    assert json.loads(purged.out)["deleted"] == 2  # the released claim, and the succeeded one down to its tombstone
    assert (shown["claims"], shown["tombstones"], shown["held"], shown["retryableFailures"]) == (2, 1, 1, 1)
    horizon = datetime.fromisoformat(shown["lastHorizon"])
    assert abs(horizon - done_at - timedelta(days=DEFAULT_HORIZON_DAYS)) < timedelta(seconds=1)
    assert refused.code == 2
    assert "2 claims and 1 tombstone (1 claim that retention never deletes by itself" in refused.err
    assert "1 retryable failure, on no attention list: each waits for its key's next run, or for its scope's" in (
        refused.err
    )
    assert "--orphan 3" in refused.err


def test_a_lease_settled_as_failed_is_named_as_a_retryable_failure_no_attention_list_shows(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    """Run against oncegate serve on Azurite: a lease ran out under A, was settled as the docs say (`claims review
    --outcome failed`), the purge kept it (retryable); `oncegate keys` said "6 held" and the retire "6 claims that
    retention never deletes by itself, in the attention list" while `oncegate claims attention` listed none."""
    before = instance(ring(A))
    gone = claim(before, key="K-gone", run="run-first", lease_seconds=60)
    running = claim(before, key="K-running", run="run-first")
    clock.advance(61)
    settled = before.review(
        gone.claim_id,
        ReviewClaimRequest.model_validate({"reviewer": "ana@contoso.com", "outcome": "failed", "attempt": 1}),
    )
    instance(ring(A, next_=B)).health()
    switched = instance(ring(B, previous=A))
    switched.health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    clock.advance(300)  # K-running's lease is over too: it is on the attention list, the settled failure is not

    assert (settled.status, settled.retryable) == ("failed", True)
    assert operator("oncegate purge").code == 0
    shown = listed(operator)[KeyHasher(A).key_id]
    table = operator("oncegate keys")
    refused = operator(f"oncegate keys retire {KeyHasher(A).key_id}")
    waiting = {item.claim.claim_id for item in switched.attention_page(ListClaimsQuery(attention=True))[0]}

    assert (shown["claims"], shown["held"], shown["retryableFailures"]) == (2, 1, 1)
    assert "1 held, 1 retryable failed" in table.out
    assert waiting == {running.claim_id}
    assert refused.code == 2
    assert "(1 claim that retention never deletes by itself, in the attention list until someone settles it;" in (
        refused.err
    )
    assert "1 retryable failure, on no attention list: each waits for its key's next run" in refused.err
    assert "`oncegate claims list --status failed`" in refused.err


def test_a_retryable_failure_past_its_horizon_is_purged_and_no_longer_holds_the_secret(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    """A failure its flow left retryable under A, whose key never came back: the purge kept it for ever, and `keys
    retire` refused A ("1 retryable failure that retention never deletes") until run with --orphan."""
    clock.now = datetime.now(UTC) - timedelta(days=DEFAULT_HORIZON_DAYS + 10)
    before = instance(ring(A))
    record(before, claim(before, key="K-failed", run="run-first"), "failed", error="ERP down", retryable=True)
    instance(ring(A, next_=B)).health()
    instance(ring(B, previous=A)).health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)

    purged = operator("oncegate purge --json")
    retired = operator(f"oncegate keys retire {KeyHasher(A).key_id}")

    assert json.loads(purged.out)["byScope"] == [{"scope": "erp.create-order", "status": "failed", "claims": 1}]
    assert retired.code == 0, retired.err
    # Its key comes back as its retry would have: proceed, a first attempt of a claim made anew under B.
    again = claim(instance(ring(B)), key="K-failed", run="run-again")
    assert (again.decision, again.attempt) == (Decision.PROCEED, 1)


def runbook_commands() -> list[str]:
    """The commands of the rotation runbook (docs/operations.md, 'The key secret'), in the order it gives them."""
    text = OPERATIONS.read_text(encoding="utf-8")
    section = text.split("## The key secret", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip().startswith("oncegate ")]


def test_the_rotation_runbook_as_written_with_the_purge_between_its_steps(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    commands = runbook_commands()
    assert commands == ["oncegate keys", "oncegate keys", "oncegate keys retire '<its key id>'"]
    list_keys, retire = commands[1], commands[2].replace("'<its key id>'", KeyHasher(A).key_id)
    # Before the rotation: a key done long ago (its horizon is over by today) and one done 100 days ago.
    started = clock.now
    clock.now = started - timedelta(days=300)
    before = instance(ring(A))
    record(before, claim(before, key="K-long-ago", run="run-first"))
    clock.now = started
    record(before, claim(before, key="K-1", run="run-first"))
    # 1. Next.
    instance(ring(A, next_=B)).health()
    assert operator("oncegate purge").code == 0
    # 2. Switch; the grace over, new keys are claimed with B.
    switched = instance(ring(B, previous=A))
    switched.health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    record(switched, claim(switched, key="K-after-the-switch", run="run-first"))
    assert operator("oncegate purge").code == 0
    # 3. Retire: refused while K-1's tombstone is there, which `oncegate keys` shows, with the day it goes.
    shown = operator(list_keys)
    a_entry = listed(operator)[KeyHasher(A).key_id]
    refused = operator(retire)
    horizon = datetime.fromisoformat(a_entry["lastHorizon"])

    assert shown.code == 0
    assert "TOMBSTONES" in shown.out
    assert "LAST HORIZON" in shown.out
    assert (a_entry["claims"], a_entry["tombstones"], a_entry["held"]) == (0, 1, 0)
    assert horizon - started - timedelta(days=DEFAULT_HORIZON_DAYS) < timedelta(minutes=1)
    assert refused.code == 2
    assert "1 tombstone (the last reaches its horizon on" in refused.err
    assert claim(switched, key="K-1", run="run-again").decision is Decision.DUPLICATE

    # The daily purge on the day after that horizon deletes the tombstone: now the retire is accepted.
    clock.now = horizon + timedelta(days=1)
    record(switched, claim(switched, key="K-late", run="run-first"))
    switched.retention.purge()
    emptied = listed(operator)[KeyHasher(A).key_id]
    retired = operator(retire)
    # 4. Drop the setting.
    after = instance(ring(B))

    assert (emptied["claims"], emptied["tombstones"], emptied["lastHorizon"]) == (0, 0, None)
    assert retired.code == 0, retired.err
    assert f"Key secret {KeyHasher(A).key_id} is retired" in retired.out
    assert after.health().status == "ok"
    assert claim(after, key="K-late", run="run-again").decision is Decision.DUPLICATE
    # K-1's horizon is over: it is answered as a key never seen, as it would be without a rotation.
    assert claim(after, key="K-1", run="run-again").decision is Decision.PROCEED


def test_a_retryable_failure_done_between_keys_and_the_retire_is_not_orphaned_under_the_same_number(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    """`--orphan N` confirmed a number, not which rows: K-failed's key succeeded after `oncegate keys` counted it as a
    retryable failure (its key proceeding anyway), the number stayed 2, and `keys retire A --orphan 2` orphaned a key
    done, which the next run made again. While such rows remain, `keys` shows the number with a code of which they
    are, and a retire with the number alone or with a code that no longer holds is refused. K-again, taken again
    since the switch, makes the code needed from the first look on."""
    before = instance(ring(A))
    record(before, claim(before, key="K-done", run="run-first"))
    record(before, claim(before, key="K-failed", run="run-first"), "failed", error="ERP down", retryable=True)
    release(before, claim(before, key="K-again", run="run-first"))
    instance(ring(A, next_=B)).health()
    switched = instance(ring(B, previous=A))
    switched.health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    record(switched, claim(switched, key="K-again", run="run-again"))
    a_id = KeyHasher(A).key_id

    seen = listed(operator)[a_id]
    table = operator("oncegate keys")
    # Between the look and the retire, K-failed's key comes back and succeeds: the row is still one of A's three.
    retried = claim(switched, key="K-failed", run="run-again")
    record(switched, retried)
    by_number = operator(f"oncegate keys retire {a_id} --orphan 3")
    # As `oncegate keys` counted them, 3 rows: the number alone no longer retires A, its key done since.
    assert by_number.code == 2, by_number.out
    by_old_code = operator(f"oncegate keys retire {a_id} --orphan {seen['orphan']}")
    now = listed(operator)[a_id]
    retired = operator(f"oncegate keys retire {a_id} --orphan {now['orphan']}")

    assert re.fullmatch(r"3\.[0-9a-f]{6}", seen["orphan"]), seen
    assert f"--orphan {seen['orphan']}" in table.out
    assert retried.decision is Decision.PROCEED
    assert by_old_code.code == 2, by_old_code.out
    assert f"pass --orphan {now['orphan']} to retire it all the same" in by_old_code.err
    assert re.fullmatch(r"3\.[0-9a-f]{6}", now["orphan"]), now
    assert now["orphan"] != seen["orphan"]
    assert retired.code == 0, retired.err
    assert ": 3 rows made with it orphaned" in retired.out


def test_rows_whose_keys_proceed_anyway_are_orphaned_by_their_number_alone(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    """Measured on main deee47c (both stores): a horizon after the switch only retryable failures and a released
    claim were left under A, each a key that proceeds anyway, and `oncegate keys` still showed `--orphan 3.8382cc`,
    refusing `--orphan 3`: a code guards against a row done between the look and the retire under the same number,
    and such a row is taken again first, so while none was taken since the switch the number says it all."""
    before = instance(ring(A))
    record(before, claim(before, key="K-done", run="run-first"))
    record(before, claim(before, key="K-failed", run="run-first"), "failed", error="ERP down", retryable=True)
    release(before, claim(before, key="K-released", run="run-first"))
    switched_from_a_to_b(instance, clock, [])
    a_id = KeyHasher(A).key_id

    seen = listed(operator)[a_id]
    table = operator("oncegate keys")
    retired = operator(f"oncegate keys retire {a_id} --orphan 3")

    assert seen["orphan"] == "3"
    assert "--orphan" not in table.out
    assert retired.code == 0, retired.err
    assert ": 3 rows made with it orphaned" in retired.out
    # Their keys proceed as they would have; the one done is done again, which --orphan 3 accepted.
    after = instance(ring(B))
    assert [claim(after, key=key, run="run-again").decision for key in ("K-failed", "K-released", "K-done")] == [
        Decision.PROCEED
    ] * 3


def test_a_row_an_open_conflict_keeps_past_its_horizon_is_held_not_due(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    """Measured on main deee47c (both stores): a claim and a tombstone made with A, each with a conflict open past its
    scope's horizon, were kept by the purge as it says, and `oncegate keys` showed A's LAST HORIZON 9 days in the past
    (the later of the two), with nothing held: the day the purge deletes them had gone by, and it never will until
    the conflicts are resolved."""
    clock.now = datetime.now(UTC) - timedelta(days=200)
    before = instance(ring(A))
    set_scope(before, horizon_days=100)
    record(before, claim(before, key="K-claim", run="run-first"))
    disputed = claim(before, key="K-claim", run="run-changed", fingerprint="v2")
    record(before, claim(before, key="K-tombstone", run="run-first"))
    clock.advance(timedelta(days=91).total_seconds())
    assert before.retention.purge().deleted_total == 1  # K-tombstone, down to its tombstone; K-claim is disputed
    reopened = claim(before, key="K-tombstone", run="run-changed", fingerprint="v2")
    instance(ring(A, next_=B)).health()
    instance(ring(B, previous=A)).health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)

    purged = operator("oncegate purge --json")
    shown = listed(operator)[KeyHasher(A).key_id]
    table = operator("oncegate keys")
    refused = operator(f"oncegate keys retire {KeyHasher(A).key_id}")

    assert (disputed.decision, reopened.decision) == (Decision.CONFLICT, Decision.CONFLICT)
    assert json.loads(purged.out)["kept"] == {"open_conflict": 1}
    assert (shown["claims"], shown["tombstones"], shown["held"], shown["openConflicts"]) == (1, 1, 0, 2)
    assert shown["lastHorizon"] is None
    assert "2 in conflict" in table.out
    assert refused.code == 2
    assert "1 claim and 1 tombstone (2 rows with an open conflict, which retention keeps past any horizon until a" in (
        refused.err
    )
    assert "reaches its horizon" not in refused.err


def test_a_row_an_open_conflict_keeps_leaves_the_other_rows_last_horizon(
    instance: Callable[[KeyRing], Gate], clock: FakeClock, operator: Callable[..., Run]
) -> None:
    """A row an open conflict keeps has no horizon of its own, but the rows beside it still have theirs: counted
    after them, it dropped the last horizon they had reached, and `oncegate keys` showed none for A (as if nothing
    were ever deleted by itself), though four succeeded claims reach their horizon 100 days on."""
    clock.now = datetime.now(UTC) - timedelta(days=10)
    before = instance(ring(A))
    set_scope(before, horizon_days=100)
    for n in range(4):
        record(before, claim(before, key=f"K-{n}", run="run-first"))
    clock.advance(60)
    record(before, claim(before, key="K-disputed", run="run-first"))
    disputed = claim(before, key="K-disputed", run="run-changed", fingerprint="v2")
    instance(ring(A, next_=B)).health()
    instance(ring(B, previous=A)).health()
    clock.advance(SWITCH_GRACE.total_seconds() + 1)
    horizon = clock.now - timedelta(seconds=SWITCH_GRACE.total_seconds() + 61) + timedelta(days=100)

    shown = listed(operator)[KeyHasher(A).key_id]
    table = operator("oncegate keys")

    assert disputed.decision is Decision.CONFLICT
    assert (shown["claims"], shown["held"], shown["openConflicts"]) == (5, 0, 1)
    assert shown["lastHorizon"] is not None
    assert abs(datetime.fromisoformat(shown["lastHorizon"]) - horizon) <= timedelta(seconds=2), shown
    assert "1 in conflict" in table.out
    assert shown["lastHorizon"][:10] in table.out


def test_the_last_horizon_is_the_latest_of_the_rows_no_open_conflict_keeps_in_any_order() -> None:
    """The store lists the rows in its own order: a row in conflict counted last dropped the horizon before it."""
    early, late = datetime(2027, 1, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC)
    rows = [(early, False), (late, False), (datetime(2027, 6, 1, tzinfo=UTC), True)]

    for order in itertools.permutations(rows):
        usage = SecretUsage()
        for gone_at, disputed in order:
            usage = usage.counting(tombstone=False, gone_at=gone_at, disputed=disputed)
        assert (usage.last_horizon, usage.disputed, usage.held) == (late, 1, 0), order
