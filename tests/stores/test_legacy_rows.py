"""Rows written by release 0.1.0 stay readable and keep their meaning, with no migration step.

``tests/fixtures/legacy/claims-0.1.0.sqlite`` was written by that release's own code, run from a
checkout of it with ``make_0.1.0.py`` beside it (the manifest says what each claim holds). Since
then the claim token is no longer stored (a MAC over a grant id instead), fingerprints are keyed,
conflict resolutions live in rows of their own instead of a growing ``Resolutions`` column
(issue 9), and the reconciling state is in columns, not the history (issue 11). An upgrade must
not turn a finished key into ``proceed``, a live token into ``stale_claim``, a kept alias into a
conflict, or a reconcile into a proceed.
"""

from __future__ import annotations

import json
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import EdmType, EntityProperty, TableServiceClient

from oncegate.domain.keys import KeyHasher, KeyRing
from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision, Resolution
from oncegate.errors import InvalidRequest, StateConflict
from oncegate.models import (
    ClaimRequest,
    ClaimResponse,
    FlowRef,
    ListConflictsQuery,
    RecordResultRequest,
    ResolveConflictRequest,
    SetScopeRequest,
)
from oncegate.stores import row_writing
from oncegate.stores.port import ClaimStore
from oncegate.stores.sqlite import SqliteStore
from tests.gate import Gate
from tests.support.azurite import TableStoreFactory

FIXTURES = Path(__file__).parent.parent / "fixtures" / "legacy"
SQLITE_MANIFEST: dict[str, Any] = json.loads((FIXTURES / "claims-0.1.0.json").read_text())
TABLES_DUMP: dict[str, Any] = json.loads((FIXTURES / "tables-0.1.0.json").read_text())
FLOW = FlowRef(name="Create order in ERP", environment="Production")
EDM = {"Edm.Boolean": EdmType.BOOLEAN, "Edm.Int32": EdmType.INT32, "Edm.Double": EdmType.DOUBLE}


@dataclass(frozen=True)
class Legacy:
    """Today's service over the claims 0.1.0 wrote, and the manifest of what they hold."""

    service: Gate
    manifest: dict[str, Any]


@pytest.fixture
def database(tmp_path: Path) -> Path:
    copy = tmp_path / "claims.sqlite"
    shutil.copyfile(FIXTURES / "claims-0.1.0.sqlite", copy)
    copy.chmod(0o644)  # as release 0.1.0 left it
    return copy


def _service(store: ClaimStore, manifest: dict[str, Any]) -> Gate:
    # Minutes after the fixture was written, so its live claims are still within their leases.
    written = datetime.fromisoformat(manifest["written_at"])
    return Gate(store, KeyHasher(manifest["secret"]), clock=lambda: written + timedelta(minutes=5))


def _entity(row: dict[str, list[Any]]) -> dict[str, Any]:
    """An entity as 0.1.0 wrote it, every property with its EDM type."""
    entity: dict[str, Any] = {}
    for name, (edm, value) in row.items():
        if edm == "Edm.DateTime":
            entity[name] = datetime.fromisoformat(value)
        elif edm in EDM:
            entity[name] = EntityProperty(value, EDM[edm])
        else:
            entity[name] = value
    return entity


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def legacy(request: pytest.FixtureRequest, database: Path) -> Legacy:
    if request.param == "sqlite":
        return Legacy(_service(SqliteStore(database), SQLITE_MANIFEST), SQLITE_MANIFEST)
    factory: TableStoreFactory = request.getfixturevalue("table_store_factory")
    # The tables as 0.1.0 left them, before today's store first opens them (and upgrades what it must).
    with TableServiceClient.from_connection_string(factory.connection_string) as client:
        for suffix, rows in TABLES_DUMP["entities"].items():
            table = client.create_table_if_not_exists(factory.prefix + suffix)
            for row in rows:
                table.create_entity(_entity(row))
    return Legacy(_service(factory(), TABLES_DUMP["manifest"]), TABLES_DUMP["manifest"])


def ask(legacy: Legacy, case: str, run: str, payload: Any = None) -> ClaimResponse:
    fixture = legacy.manifest[case]
    request = ClaimRequest(
        scope="erp.create-order", key=fixture["key"], run_id=run, flow=FLOW, payload=payload or fixture["payload"]
    )
    return legacy.service.check_and_claim(request)


def test_the_database_file_is_made_private_when_opened(database: Path) -> None:
    SqliteStore(database).close()

    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_a_live_claim_keeps_its_clear_token_until_its_attempt_ends(legacy: Legacy) -> None:
    held = legacy.manifest["held"]

    again = ask(legacy, "held", held["run"])
    other = ask(legacy, "held", "run-other")

    assert (again.decision, again.claim_token) == (Decision.PROCEED, held["token"])
    assert other.decision is Decision.IN_PROGRESS
    with pytest.raises(StateConflict):
        legacy.service.record_result(
            again.claim_id, RecordResultRequest(claim_token="1.forged", outcome="succeeded", target_record_id="X")
        )
    view = legacy.service.record_result(
        again.claim_id, RecordResultRequest(claim_token=held["token"], outcome="succeeded", target_record_id="ERP-1")
    )
    assert view.status is ClaimStatus.SUCCEEDED


def test_a_finished_key_is_still_a_duplicate_and_a_changed_one_a_conflict(legacy: Legacy) -> None:
    done = legacy.manifest["done"]

    same = ask(legacy, "done", "run-late")
    changed = ask(legacy, "done", "run-late", payload={"amount": 21})

    assert same.result is not None
    assert (same.decision, same.result.target_record_id) == (Decision.DUPLICATE, done["target"])
    assert changed.decision is Decision.CONFLICT


def test_an_alias_kept_in_the_resolutions_column_still_counts(legacy: Legacy) -> None:
    aliased = legacy.manifest["aliased"]

    alias = ask(legacy, "aliased", "run-late", payload=aliased["alias"])
    changed = ask(legacy, "aliased", "run-late", payload=aliased["changed"])

    assert alias.decision is Decision.DUPLICATE
    assert changed.decision is Decision.CONFLICT


def test_a_conflict_open_at_the_upgrade_is_resolved_and_then_holds(legacy: Legacy) -> None:
    opened = legacy.manifest["open"]

    resolved = legacy.service.resolve_conflict(
        opened["conflictId"], ResolveConflictRequest(decision=Resolution.KEEP_ORIGINAL, reviewer="ops@contoso")
    )
    again = ask(legacy, "open", "run-late", payload=opened["changed"])

    assert resolved.status is ConflictStatus.RESOLVED
    assert again.decision is Decision.DUPLICATE


def test_conflicts_written_by_0_1_0_are_listed_oldest_first_and_move_when_resolved(legacy: Legacy) -> None:
    # 0.1.0 kept no listing rows (Table Storage) nor list indexes (SQLite): opening the store adds them (issue 12).
    opened = legacy.manifest["open"]["conflictId"]

    def listed(status: ConflictStatus | None) -> list[str]:
        conflicts, cursor = legacy.service.list_conflicts(ListConflictsQuery(status=status, top=1))
        ids = [conflict.conflict_id for conflict in conflicts]
        while cursor is not None:
            conflicts, cursor = legacy.service.list_conflicts(ListConflictsQuery(status=status, top=1, cursor=cursor))
            ids += [conflict.conflict_id for conflict in conflicts]
        return ids

    everything = listed(None)
    assert listed(ConflictStatus.OPEN) == [opened]
    assert len(everything) == 2
    assert everything == sorted(everything)  # created at the same instant: in id order

    legacy.service.resolve_conflict(opened, ResolveConflictRequest(decision=Resolution.DISMISS, reviewer="ops@contoso"))

    assert (listed(ConflictStatus.OPEN), listed(ConflictStatus.RESOLVED), listed(None)) == ([], everything, everything)


def test_a_new_grant_on_an_old_claim_stores_no_token(legacy: Legacy) -> None:
    done = ask(legacy, "done", "run-late", payload={"amount": 22})
    assert done.conflict_id is not None
    legacy.service.resolve_conflict(
        done.conflict_id, ResolveConflictRequest(decision=Resolution.ACCEPT_NEW, reviewer="ops@contoso")
    )

    granted = ask(legacy, "done", "run-new", payload={"amount": 22})

    assert granted.decision is Decision.PROCEED
    stored = legacy.service.store.get_claim(granted.claim_id)
    assert (stored.legacy_token, stored.grant_id is not None) == (None, True)
    assert granted.claim_token is not None
    assert granted.claim_token.split(".", 1)[1] not in repr(row_writing.claim_to_row(stored))


def test_a_claim_granted_to_reconcile_before_the_upgrade_is_still_reconcile(legacy: Legacy) -> None:
    # Schema 1 kept "granted to reconcile" in the history only: the same run asking again must not be told proceed.
    reconciling = legacy.manifest["reconciling"]

    again = ask(legacy, "reconciling", reconciling["run"])

    assert (again.decision, again.claim_token) == (Decision.RECONCILE, reconciling["token"])
    assert again.earlier_attempt is not None
    assert (again.earlier_attempt.attempt, again.earlier_attempt.run_id) == (1, "run-old")


def test_a_claim_released_in_doubt_before_the_upgrade_is_reconciled_not_proceeded(legacy: Legacy) -> None:
    # Schema 1 kept "released while reconciling" in the error text only.
    answer = ask(legacy, "in_doubt", "run-next")

    assert answer.decision is Decision.RECONCILE


def test_claims_of_0_1_0_are_compared_without_the_fingerprint_rules_set_since(legacy: Legacy) -> None:
    # Their fingerprints were made of the whole payload: version 0 of the rules, whatever the scope has now.
    legacy.service.set_scope(SetScopeRequest(scope="erp.create-order", fingerprint_ignore=["/amount"]))

    same = ask(legacy, "done", "run-late")
    changed = ask(legacy, "done", "run-late", payload={"amount": 21})

    assert (same.decision, changed.decision) == (Decision.DUPLICATE, Decision.CONFLICT)


def test_an_attempt_of_0_1_0_in_doubt_is_reconciled_with_one_idempotency_key(legacy: Legacy) -> None:
    first = ask(legacy, "in_doubt", "run-next")
    again = ask(legacy, "in_doubt", "run-next")

    assert first.decision is Decision.RECONCILE
    assert first.idempotency_key is not None
    assert again.idempotency_key == first.idempotency_key


def test_a_live_claim_of_0_1_0_is_not_waited_on_as_its_fingerprint_is_plain(legacy: Legacy) -> None:
    # A poll carries the keyed fingerprint only: against 0.1.0's plain one it would see changed data.
    held = legacy.manifest["held"]
    request = ClaimRequest(
        scope="erp.create-order", key=held["key"], run_id="run-other", flow=FLOW, payload=held["payload"], wait=True
    )

    answer, waiting = legacy.service.check_and_wait(request)

    assert (answer.decision, waiting) == (Decision.IN_PROGRESS, None)


def test_every_row_of_0_1_0_counts_against_retiring_the_secret_it_was_made_with(legacy: Legacy) -> None:
    # Rows of 0.1.0 do not name their secret, and were made before today's release first recorded it: counted
    # only from its recording on, none of them held the retire back, and each would have proceeded again (issue 31).
    secret, newer = legacy.manifest["secret"], "newer-secret-" + "n" * 32
    legacy.service.health()  # today's release records the secret 0.1.0 made every claim with
    rows = len(legacy.service.store.list_claims(ClaimFilter(list(ClaimStatus)), limit=1000).items)
    written = datetime.fromisoformat(legacy.manifest["written_at"])
    rotation = KeyRing(KeyHasher(newer), previous=KeyHasher(secret))
    Gate(legacy.service.store, rotation, clock=lambda: written + timedelta(minutes=10)).health()
    after_the_grace = Gate(legacy.service.store, rotation, clock=lambda: written + timedelta(minutes=20))

    with pytest.raises(InvalidRequest) as refused:
        after_the_grace.services.key_secrets.retire(KeyHasher(secret).key_id, orphan=None)

    assert rows > 5
    assert f"found only through it: {rows} claims (" in refused.value.message
    assert f"--orphan {rows}" in refused.value.message
