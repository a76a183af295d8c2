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
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from oncegate.domain.keys import KeyHasher
from oncegate.domain.statuses import ClaimStatus, ConflictStatus, Decision, Resolution
from oncegate.errors import StateConflict
from oncegate.models import ClaimRequest, ClaimResponse, FlowRef, RecordResultRequest, ResolveConflictRequest
from oncegate.service.claims import ClaimService
from oncegate.stores.sqlite import SqliteStore

FIXTURES = Path(__file__).parent.parent / "fixtures" / "legacy"
MANIFEST: dict[str, Any] = json.loads((FIXTURES / "claims-0.1.0.json").read_text())
WRITTEN = datetime.fromisoformat(MANIFEST["written_at"])
FLOW = FlowRef(name="Create order in ERP", environment="Production")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    copy = tmp_path / "claims.sqlite"
    shutil.copyfile(FIXTURES / "claims-0.1.0.sqlite", copy)
    copy.chmod(0o644)  # as release 0.1.0 left it
    return copy


@pytest.fixture
def service(database: Path) -> ClaimService:
    # Minutes after the fixture was written, so its live claim is still within its lease.
    return ClaimService(
        SqliteStore(database), KeyHasher(MANIFEST["secret"]), clock=lambda: WRITTEN + timedelta(minutes=5)
    )


def ask(service: ClaimService, case: str, run: str, payload: Any = None) -> ClaimResponse:
    fixture = MANIFEST[case]
    request = ClaimRequest(
        scope="erp.create-order", key=fixture["key"], run_id=run, flow=FLOW, payload=payload or fixture["payload"]
    )
    return service.check_and_claim(request)


def test_the_database_file_is_made_private_when_opened(database: Path, service: ClaimService) -> None:
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_a_live_claim_keeps_its_clear_token_until_its_attempt_ends(service: ClaimService) -> None:
    held = MANIFEST["held"]

    again = ask(service, "held", held["run"])
    other = ask(service, "held", "run-other")

    assert (again.decision, again.claim_token) == (Decision.PROCEED, held["token"])
    assert other.decision is Decision.IN_PROGRESS
    with pytest.raises(StateConflict):
        service.record_result(
            again.claim_id, RecordResultRequest(claim_token="1.forged", outcome="succeeded", target_record_id="X")
        )
    view = service.record_result(
        again.claim_id, RecordResultRequest(claim_token=held["token"], outcome="succeeded", target_record_id="ERP-1")
    )
    assert view.status is ClaimStatus.SUCCEEDED


def test_a_finished_key_is_still_a_duplicate_and_a_changed_one_a_conflict(service: ClaimService) -> None:
    done = MANIFEST["done"]

    same = ask(service, "done", "run-late")
    changed = ask(service, "done", "run-late", payload={"amount": 21})

    assert same.result is not None
    assert (same.decision, same.result.target_record_id) == (Decision.DUPLICATE, done["target"])
    assert changed.decision is Decision.CONFLICT


def test_an_alias_kept_in_the_resolutions_column_still_counts(service: ClaimService) -> None:
    aliased = MANIFEST["aliased"]

    alias = ask(service, "aliased", "run-late", payload=aliased["alias"])
    changed = ask(service, "aliased", "run-late", payload=aliased["changed"])

    assert alias.decision is Decision.DUPLICATE
    assert changed.decision is Decision.CONFLICT


def test_a_conflict_open_at_the_upgrade_is_resolved_and_then_holds(service: ClaimService) -> None:
    opened = MANIFEST["open"]

    resolved = service.resolve_conflict(
        opened["conflictId"], ResolveConflictRequest(decision=Resolution.KEEP_ORIGINAL, reviewer="ops@contoso")
    )
    again = ask(service, "open", "run-late", payload=opened["changed"])

    assert resolved.status is ConflictStatus.RESOLVED
    assert again.decision is Decision.DUPLICATE


def test_a_new_grant_on_an_old_claim_stores_no_token(database: Path, service: ClaimService) -> None:
    done = ask(service, "done", "run-late", payload={"amount": 22})
    assert done.conflict_id is not None
    service.resolve_conflict(
        done.conflict_id, ResolveConflictRequest(decision=Resolution.ACCEPT_NEW, reviewer="ops@contoso")
    )

    granted = ask(service, "done", "run-new", payload={"amount": 22})

    assert granted.decision is Decision.PROCEED
    stored = SqliteStore(database).get_claim(granted.claim_id)
    assert (stored.legacy_token, stored.grant_id is not None) == (None, True)
    assert granted.claim_token is not None
    assert granted.claim_token not in database.read_bytes().decode("latin-1")


def test_a_claim_granted_to_reconcile_before_the_upgrade_is_still_reconcile(service: ClaimService) -> None:
    # Schema 1 kept "granted to reconcile" in the history only: the same run asking again must not be told proceed.
    reconciling = MANIFEST["reconciling"]

    again = ask(service, "reconciling", reconciling["run"])

    assert (again.decision, again.claim_token) == (Decision.RECONCILE, reconciling["token"])
    assert again.last_attempt is not None
    assert (again.last_attempt.attempt, again.last_attempt.run_id) == (1, "run-old")


def test_a_claim_released_in_doubt_before_the_upgrade_is_reconciled_not_proceeded(service: ClaimService) -> None:
    # Schema 1 kept "released while reconciling" in the error text only.
    answer = ask(service, "in_doubt", "run-next")

    assert answer.decision is Decision.RECONCILE
