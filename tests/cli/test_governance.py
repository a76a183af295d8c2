"""``oncegate claims attention``, ``claims review`` against the service, and ``oncegate purge`` on a SQLite file."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from oncegate.cli import main
from oncegate.cli.store_rendering import purge_text
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import ClaimFilter
from oncegate.domain.statuses import ClaimStatus
from oncegate.local_secret import local_key_secret
from oncegate.service.retention import PurgeReport
from oncegate.stores.sqlite import SqliteStore
from tests.cli.conftest import Oncegate, Run, Seen
from tests.conftest import FakeClock
from tests.gate import Gate
from tests.http.client import ServerApi
from tests.http.test_actions import claim_body, ok
from tests.service.calls import claim, record, succeeded

STORE_SETTINGS = (
    "ONCEGATE_STORE",
    "ONCEGATE_KEY_SECRET",
    "ONCEGATE_TABLES_CONNECTION_STRING",
    "ONCEGATE_TABLES_ENDPOINT",
)


def failed_for_good(api: ServerApi, key: str) -> dict[str, Any]:
    answer = ok(api.call("check_and_claim", claim_body(key=key, run=f"run-{key}")))
    result = {"claimToken": answer["claimToken"], "outcome": "failed", "retryable": False, "error": "ERP said no"}
    ok(api.call("record_result", result, route={"claimId": answer["claimId"]}))
    return answer


# -- against the service ------------------------------------------------------------------------


def test_claims_attention_lists_them_oldest_first(api: ServerApi, oncegate: Oncegate, clock: FakeClock) -> None:
    first = failed_for_good(api, "ORDER-1")
    clock.advance(1)
    second = failed_for_good(api, "ORDER-2")

    text = oncegate("claims", "attention")
    raw = oncegate("claims", "attention", "--json")

    assert text.code == raw.code == 0
    header, *rows = text.out.splitlines()
    assert header.split() == ["SINCE", "WHY", "SOURCE", "REFERENCE", "SCOPE", "ATTEMPT", "RUN", "FLOW", "CLAIM"]
    assert [row.split()[-1] for row in rows] == [first["claimId"], second["claimId"]]
    assert all(row.split()[1] == "failed_unreviewed" for row in rows)
    assert json.loads(raw.out) == ok(api.call("list_claims_needing_attention", params={"attention": "true"}))


def test_claims_attention_follows_next_link_with_all_pages(
    api: ServerApi, oncegate: Oncegate, clock: FakeClock, seen: list[Seen]
) -> None:
    ids = []
    for index in range(3):
        ids.append(failed_for_good(api, f"ORDER-{index}")["claimId"])
        clock.advance(1)
    seen.clear()

    run = oncegate("--json", "claims", "attention", "--scope", "erp.create-order", "--top", "2", "--all-pages")

    assert run.code == 0, run.err
    assert [item["claim"]["claimId"] for item in json.loads(run.out)["value"]] == ids
    assert [request.url.split("/api/")[1].split("?")[0] for request in seen] == ["claims"] * 2
    assert all("attention=true" in request.url for request in seen)


def test_claims_attention_says_when_all_is_well(oncegate: Oncegate) -> None:
    run = oncegate("claims", "attention")

    assert (run.code, run.out) == (0, "No claims need attention.\n")


def test_claims_review_acknowledges_a_failure(api: ServerApi, oncegate: Oncegate) -> None:
    blocked = failed_for_good(api, "ORDER-1")

    run = oncegate("claims", "review", blocked["claimId"], "--reviewer", "ana@contoso.com", "--note", "closed")

    assert run.code == 0, run.err
    assert re.search(r"^Reviewer\s+ana@contoso.com$", run.out, re.MULTILINE)
    assert "History" not in run.out
    assert oncegate("claims", "attention").out == "No claims need attention.\n"


def test_claims_review_settles_an_attempt_in_doubt_with_its_outcome(api: ServerApi, oncegate: Oncegate) -> None:
    """Issue 22: the runbook's command for a claim whose run vanished, no claim token needed."""
    answer = ok(api.call("check_and_claim", claim_body(key="ORDER-2", run="run-2")))
    ok(
        api.call(
            "record_result",
            {"claimToken": answer["claimToken"], "outcome": "unknown"},
            route={"claimId": answer["claimId"]},
        )
    )
    settle = ("--outcome", "succeeded", "--attempt", "1", "--target-record-id", "SO-2", "--data", '{"n": 2}')

    run = oncegate("claims", "review", answer["claimId"], "--reviewer", "ana@contoso.com", *settle)
    bad = oncegate("claims", "review", answer["claimId"], "--reviewer", "ana@contoso.com", *settle[:-1], "{n")

    assert run.code == 0, run.err
    assert re.search(r"^Status\s+succeeded \(attempt 1\)$", run.out, re.MULTILINE), run.out
    assert re.search(r"^Target record\s+SO-2$", run.out, re.MULTILINE), run.out
    assert oncegate("claims", "attention").out == "No claims need attention.\n"
    assert (bad.code, bad.err.startswith("--data is not JSON")) == (2, True), bad.err


# -- oncegate purge on the local store ---------------------------------------------------------------


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite file of old claims (made in 2024), named by the environment as `oncegate serve` reads it.

    Five succeeded claims and two failures that may be retried, made 100 days ago: past the retention, within the
    horizon, until which retention keeps them.
    """
    path = tmp_path / "purged" / "oncegate.db"
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(path))
    clock = FakeClock()
    service = Gate(SqliteStore(path), KeyHasher(local_key_secret(path)), clock=clock)
    for index in range(5):
        succeeded(service, key=f"ORDER-{index}", run=f"run-{index}")
        clock.advance(1)
    clock.now = datetime.now(UTC) - timedelta(days=100)
    for index in range(2):
        record(service, claim(service, key=f"RETRY-{index}", run=f"run-r{index}"), "failed", retryable=True)
    service.close()
    return path


def purge(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    code = main(["purge", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return Run(code, out, err)


def claims_in(path: Path) -> int:
    store = SqliteStore(path)
    try:
        return len(store.list_claims(ClaimFilter(tuple(ClaimStatus)), limit=100).items)
    finally:
        store.close()


def test_purge_deletes_page_by_page_with_a_progress_line_each(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = purge(capsys, "--page-size", "2")

    assert run.code == 0, run.err
    assert run.err.splitlines() == [
        f"Purging on sqlite at {database}",
        "page 1: 2 examined, 2 deleted",
        "page 2: 4 examined, 4 deleted",
        "page 3: 6 examined, 5 deleted",
        "page 4: 7 examined, 5 deleted",
    ]
    store, table, totals = run.out.strip().split("\n\n")
    assert store == f"Store: sqlite at {database}"
    assert [row.split() for row in table.splitlines()] == [
        ["SCOPE", "STATUS", "DELETED"],
        ["erp.create-order", "succeeded", "5"],
    ]
    # Made in 2024: past the default horizon of a year too, so the tombstones they left go in the same purge.
    assert totals.splitlines() == [
        "Kept: retryable 2",
        "7 claims examined in 4 pages; deleted 5, each succeeded one down to its tombstone.",
        "Tombstones past their scope's horizon: deleted 5 (erp.create-order 5).",
    ]
    assert claims_in(database) == 2


def test_purge_says_how_many_tombstones_past_their_horizon_an_open_conflict_keeps() -> None:
    report = PurgeReport(dry_run=False, tombstones_deleted=Counter({"erp.a": 2}), tombstones_kept=Counter({"erp.a": 1}))
    console = Console(record=True, width=160)
    console.print(purge_text(report, "sqlite"))

    assert (
        "Tombstones past their scope's horizon: deleted 2 (erp.a 2). Kept past it, for an open conflict on each: 1."
        in console.export_text()
    )
    assert report.as_json()["tombstonesKept"] == 1


def test_purge_dry_run_in_json_counts_and_deletes_nothing(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = purge(capsys, "--dry-run", "--json")

    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert (report["dryRun"], report["finished"], report["examined"], report["deleted"]) == (True, True, 7, 5)
    assert report["byScope"] == [{"scope": "erp.create-order", "status": "succeeded", "claims": 5}]
    assert report["kept"] == {"retryable": 2}
    assert report["store"] == {"kind": "sqlite", "location": str(database)}
    assert run.err.splitlines()[1:] == ["page 1: 7 examined, 5 would delete"]
    assert claims_in(database) == 7
    assert "1 claim examined in 1 page; " in purge(capsys, "--dry-run", "--page-size", "1", "--max-pages", "1").out


def test_purge_stopped_by_max_pages_resumes_where_it_left_off(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = purge(capsys, "--page-size", "3", "--max-pages", "1")
    cursor = re.search(r"--resume (\S+)\.$", first.err, re.MULTILINE)
    assert cursor is not None, first.err
    second = purge(capsys, "--page-size", "3", "--resume", cursor.group(1), "--json")

    assert first.code == second.code == 0
    assert "Stopped after 1 page: " in first.err
    report = json.loads(second.out)
    assert (report["examined"], report["deleted"], report["finished"]) == (4, 2, True)
    assert claims_in(database) == 2


def test_purge_refuses_a_cursor_it_did_not_hand_out(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = purge(capsys, "--resume", "not-a-cursor")

    assert run.code == 2
    assert "cursor" in run.err
    assert claims_in(database) == 7


def test_purge_elsewhere_refuses_a_database_that_does_not_exist_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(elsewhere)

    run = purge(capsys, "--dry-run")

    assert (run.code, run.out) == (2, "")
    assert run.err == (
        f"oncegate purge: no database at {elsewhere.resolve() / '.oncegate' / 'oncegate.db'}: purge works on the "
        "store oncegate serve uses, which makes its database at its first request: on a new store, ask it once "
        "(oncegate health) first. Else run it in the folder where oncegate serve runs, or set ONCEGATE_SQLITE_PATH "
        "(or ONCEGATE_STORE=tables and its settings) as the app has them.\n"
    )
    assert list(elsewhere.iterdir()) == []


def test_purge_names_a_bad_setting(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ONCEGATE_STORE", "bogus")

    run = purge(capsys)

    assert run.code == 2
    assert "ONCEGATE_STORE" in run.err
