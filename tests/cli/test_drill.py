"""``oncegate drill`` against the local server: it passes on SQLite and on Table Storage, and names what a broken
service gets wrong.

The broken services are the real one with one promise undone: a second run told ``proceed`` while the first
holds the claim, or a result that is acknowledged and never stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import function_app
from oncegate import bootstrap
from oncegate.bootstrap import Services, wire
from oncegate.cli.drill import made_up_record_id
from oncegate.config import AuthMode, Settings
from oncegate.domain.decisions import ClaimAnswer, Intent
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Claim
from oncegate.domain.sensitive import sensitive_findings
from oncegate.domain.statuses import ClaimStatus, Decision
from oncegate.entrypoints import framing
from oncegate.service.claims import Claims, Waited
from oncegate.service.commands.results import RecordResult
from oncegate.service.results import Results
from oncegate.stores.port import ClaimStore
from tests.cli.conftest import FUNCTION_KEY, Oncegate, Seen
from tests.cli.test_signin import SIGN_IN, FakeMsal
from tests.cli.test_signin_accepted import DELEGATED_SCOPE, IssuingMsal, sign_in
from tests.conftest import KEY_SECRET, FakeClock
from tests.gate import Gate
from tests.http.client import ServerApi
from tests.http.test_actions import ok
from tests.support.entra import LocalEntra

REPO = Path(__file__).resolve().parents[2]
CONCURRENCY = 16
BURST = ["--concurrency", str(CONCURRENCY)]
DRILL_KEY = re.compile(r"drill-\d{8}T\d{6}Z-[0-9a-f]{8}")
# What the drill says on stderr as it goes, one line a step.
PROGRESS = [
    "drill 1 first: 1 run on key A",
    "drill 1 again: 1 run on key A",
    f"drill 2 burst: {CONCURRENCY} runs on key A",
    f"drill 2 race: {CONCURRENCY} runs on key B",
    "drill 2 after: 1 run on key B",
    "drill 3 changed: 1 run on key A",
    "drill: reading each key's claim back",
]


@pytest.fixture(params=["sqlite", pytest.param("tables", marks=pytest.mark.azurite)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """The drill runs on both stores, as it would against a deployment of either."""
    kind: str = request.param
    return kind


def rows(out: str, step: str) -> list[list[str]]:
    """The call table's rows of one step, split into cells (no cell holds a double space)."""
    return [re.split(r"\s{2,}", line) for line in out.splitlines() if line.startswith(step + " ")]


def report(run_out: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(run_out)
    return parsed


def test_the_drill_passes_and_shows_every_call_and_how_each_repeat_was_recognised(oncegate: Oncegate) -> None:
    run = oncegate("drill", *BURST, "--verbose")

    assert run.code == 0, run.out + run.err
    assert run.err.splitlines() == PROGRESS
    assert run.out.rstrip().endswith("Passed: each business result happened once, and every repeat was recognised.")
    assert run.out.count("  ok    ") == 6
    assert "FAIL" not in run.out
    keys = DRILL_KEY.findall(run.out)
    assert len(set(keys)) == 2

    first, recorded = rows(run.out, "1 first")
    target = recorded[6]
    assert first[2:5] == ["check and claim", "drill-run-1", "proceed"]
    assert recorded[2:5] == ["record result", "drill-run-1", "succeeded"]
    assert target.startswith("DRILL-")
    assert [row[4:7] for row in rows(run.out, "1 again")] == [["duplicate", "1", target]]
    assert [row[4:7] for row in rows(run.out, "2 burst")] == [["duplicate", "1", target]] * CONCURRENCY
    race = rows(run.out, "2 race")
    answers = sorted(row[4] for row in race if row[2] == "check and claim")
    assert answers == ["in_progress"] * (CONCURRENCY - 1) + ["proceed"]
    (winner,) = [row for row in race if row[2] == "record result"]
    assert [row[4:7] for row in rows(run.out, "2 after")] == [["duplicate", "1", winner[6]]]
    changed, dismissed = rows(run.out, "3 changed")
    assert changed[4] == "conflict"
    assert dismissed[2:5] == ["dismiss conflict", changed[3], "dismiss"]
    run_ids = [row[3] for step in ("1", "2", "3") for row in rows(run.out, step) if row[2] == "check and claim"]
    assert len(run_ids) == len(set(run_ids)) == 2 * CONCURRENCY + 4

    # Answers alike are one history line with their count (issue 22): the burst's duplicates, the race's losers.
    # Table Storage keeps an answer that lost the count's race too often as a line of its own.
    assert 2 <= run.out.count("which succeeded.") < CONCURRENCY + 2
    assert 1 <= run.out.count(f"Run {winner[3]} holds the lease until") < CONCURRENCY - 1
    assert f"Run drill-run-1 recorded succeeded (target record {target})." in run.out
    assert f"Reviewer oncegate drill resolved conflict {changed[6]} as dismiss" in run.out


def test_the_json_report_has_the_calls_the_checks_and_each_claim_with_its_history(
    oncegate: Oncegate, api: ServerApi
) -> None:
    run = oncegate("drill", *BURST, "--json")

    assert run.code == 0, run.out + run.err
    drill = report(run.out)
    assert drill["passed"] is True
    assert drill["deviations"] == []
    assert [check["passed"] for check in drill["checks"]] == [True] * 6
    assert drill["flow"] == {"name": "OnceGate drill", "environment": "127.0.0.1"}
    assert (drill["scope"], drill["concurrency"]) == ("drill.check", CONCURRENCY)
    assert len(drill["calls"]) == 2 * CONCURRENCY + 7
    assert {call["call"] for call in drill["calls"]} == {"check and claim", "record result", "dismiss conflict"}
    assert all(call["ms"] >= 0 for call in drill["calls"])
    history = {key: claim["history"] for key, claim in drill["claims"].items()}
    answers = {key: sum(entry.get("count", 1) for entry in entries) for key, entries in history.items()}
    assert [answers["A"], answers["B"]] == [CONCURRENCY + 5, CONCURRENCY + 2]
    assert len(history["A"]) < answers["A"]
    assert len(history["B"]) < answers["B"]
    assert drill["claims"]["B"] == ok(api.call("lookup_claim", {"scope": "drill.check", "key": drill["keys"]["B"]}))
    (conflict_id,) = [call["conflictId"] for call in drill["calls"] if call["call"] == "dismiss conflict"]
    conflict = ok(api.call("get_conflict", route={"conflictId": conflict_id}))
    assert conflict["status"] == "resolved"
    assert conflict["resolution"]["reviewer"] == "oncegate drill"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_the_drill_claims_in_the_scope_it_is_given(oncegate: Oncegate, api: ServerApi) -> None:
    run = oncegate("drill", "--scope", "Drill.Nightly", "--concurrency", "2", "--json")

    assert run.code == 0, run.out + run.err
    key = report(run.out)["keys"]["A"]
    assert ok(api.call("lookup_claim", {"scope": "drill.nightly", "key": key}))["status"] == "succeeded"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_the_drill_names_the_source_it_is_given_in_its_claims_and_report(oncegate: Oncegate, api: ServerApi) -> None:
    run = oncegate("drill", "--source", "drill-nightly", "--concurrency", "2", "--json")
    text = oncegate("drill", "--source", "drill-nightly", "--concurrency", "2")

    assert run.code == 0, run.out + run.err
    assert report(run.out)["source"] == "drill-nightly"
    key = report(run.out)["keys"]["A"]
    assert ok(api.call("lookup_claim", {"scope": "drill.check", "key": key}))["source"] == "drill-nightly"
    assert "drill-nightly" in text.out


# -- a service that breaks its promises -----------------------------------------------------------


class ProceedsTwice:
    """The claim service, but it tells the first run it would have answered ``in_progress`` to proceed as well."""

    def __init__(self, claims: Claims) -> None:
        self._claims = claims
        self._lock = threading.Lock()
        self._forged = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._claims, name)

    def check_and_claim(self, request: Intent, *, signed_in: str | None = None) -> ClaimAnswer:
        return self._forged_once(self._claims.check_and_claim(request, signed_in=signed_in))

    def decide_for(self, intent: Intent, waited: Waited | None = None) -> ClaimAnswer:
        # Check and claim many decides the items whose claims exist from their parse, through this method.
        return self._forged_once(self._claims.decide_for(intent, waited))

    def _forged_once(self, answer: ClaimAnswer) -> ClaimAnswer:
        with self._lock:
            if answer.decision is not Decision.IN_PROGRESS or self._forged:
                return answer
            self._forged = True
        return dataclasses.replace(answer, decision=Decision.PROCEED, claim_token="1.forged", holder=None)


class LosesResults:
    """The result service, but it acknowledges every result as stored, and stores none."""

    def __init__(self, results: Results, claims: Claims) -> None:
        self._results = results
        self._claims = claims

    def __getattr__(self, name: str) -> Any:
        return getattr(self._results, name)

    def record_result(self, claim_id: str, request: RecordResult) -> Claim:
        claim, _, _ = self._claims.get_claim(claim_id)
        return dataclasses.replace(
            claim, status=ClaimStatus.SUCCEEDED, target_record_id=request.result.target_record_id
        )


def proceeds_twice(services: Services) -> Services:
    return dataclasses.replace(services, claims=ProceedsTwice(services.claims))


def with_results(services: Services, results: Any) -> Services:
    """``services`` with ``results`` as their result service, which the app builds at its first use."""
    builds = {**services._later._builds, "results": lambda: results}
    return dataclasses.replace(services, _later=bootstrap._Later(builds))


def loses_results(services: Services) -> Services:
    return with_results(services, LosesResults(services.results, services.claims))


Broken = Callable[[Services], Services]


@pytest.fixture
def broken(open_store: Callable[[], ClaimStore], clock: FakeClock) -> Callable[[Broken], None]:
    """Serve broken services, over this test's store, to the local server from now on."""

    def serve(breaking: Broken) -> None:
        bootstrap.use_services(breaking(wire(open_store(), KeyHasher(KEY_SECRET), clock=clock)))

    return serve


def test_a_service_that_tells_two_runs_to_proceed_fails_the_drill_naming_them(
    oncegate: Oncegate, broken: Callable[[Broken], None]
) -> None:
    broken(proceeds_twice)

    run = oncegate("drill", *BURST, "--verbose")

    assert run.code == 1, run.out + run.err
    assert run.err.splitlines() == [*PROGRESS, "The drill found 5 deviation(s) from the contract."], run.out
    assert f"  FAIL  {CONCURRENCY} runs at once on a new record: one proceeds" in run.out
    assert "  FAIL  The business result happened once per key" in run.out
    assert "  FAIL  Each claim, read back" in run.out
    assert "  ok    Triggered twice in a row" in run.out
    deviations = run.out.split("FAILED: 5 deviation(s)\n")[1].splitlines()
    proceeded = sorted(row[3] for row in rows(run.out, "2 race") if row[4] == "proceed")
    assert len(proceeded) == 2
    assert deviations[0] == f"  - 2 race: 2 runs were told proceed ({', '.join(proceeded)}); exactly one must be."
    assert re.fullmatch(r"  - key B: the side effect was done 2 times \(.*\); once expected\.", deviations[1])
    assert re.fullmatch(
        r"  - 2 race: drill-run-\d+ \(key B\) did the side effect \(DRILL-[A-Z]{12}\), but Record result was "
        r"refused: stale_claim: This claim token does not match this claim: attempt 1 .*",
        deviations[2],
    )
    # The service's own history says what it really decided: in_progress for the run it told to proceed.
    assert deviations[3:] == [
        f"  - key B: the history holds {CONCURRENCY - 1} 'claim in_progress' entries; the drill was answered that "
        f"{CONCURRENCY - 2} times.",
        "  - key B: the history holds 1 'claim proceed' entries; the drill was answered that 2 times.",
    ]
    assert "stale_claim (409)" in run.out


def test_a_service_that_loses_results_fails_the_drill_naming_each_wrong_answer(
    oncegate: Oncegate, broken: Callable[[Broken], None]
) -> None:
    broken(loses_results)

    run = oncegate("drill", *BURST, "--json")

    assert run.code == 1, run.out + run.err
    drill = report(run.out)
    assert drill["passed"] is False
    # The drill did the side effect once per key: what went wrong is every later answer, and the claims read back.
    assert [check["passed"] for check in drill["checks"]] == [False, False, False, True, True, False]
    deviations = drill["deviations"]
    assert deviations[0].startswith(
        "1 again: drill-run-2 (key A) was told in_progress, expected duplicate: Another run is doing the side effect"
    )
    told_in_progress = [
        deviation for deviation in deviations if "was told in_progress, expected duplicate" in deviation
    ]
    assert len(told_in_progress) == 1 + CONCURRENCY + 1
    lost = r"key A: the claim is in_progress with target record None; expected succeeded with DRILL-\w+\."
    assert any(re.fullmatch(lost, deviation) for deviation in deviations)
    assert "key A: the history holds 0 'result succeeded' entries; the drill was answered that 1 times." in deviations
    assert "key B: the history holds 0 'result succeeded' entries; the drill was answered that 1 times." in deviations
    assert drill["claims"]["A"]["status"] == "in_progress"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_drill_flow_disabled_in_the_inventory_stops_at_once_and_ends_with_the_command_that_fixes_it(
    oncegate: Oncegate, url: str, seen: list[Seen]
) -> None:
    oncegate("flows", "register", "--name", "OnceGate drill", "--environment", "127.0.0.1", "--disabled")
    seen.clear()

    run = oncegate("drill", "--concurrency", "2", "--verbose")
    as_json = report(oncegate("drill", "--concurrency", "2", "--json").out)
    fix = oncegate(*shlex.split(run.out.splitlines()[-1])[3:])
    again = oncegate("drill", "--concurrency", "2", "--verbose")

    assert run.code == 2, run.out + run.err
    assert [request.url.split("/api/")[1] for request in seen][:2] == ["health", "claims"]
    assert [row[2:5] for row in rows(run.out, "1 first")] == [["check and claim", "drill-run-1", "blocked"]]
    assert "deviation" not in run.out + run.err
    reason, command = run.out.splitlines()[-2:]
    assert reason.startswith("Flow 'OnceGate drill' in '127.0.0.1' is disabled")
    assert command == f"oncegate --url {url} flows register --name 'OnceGate drill' --environment 127.0.0.1 --enabled"
    assert run.err.splitlines() == ["drill 1 first: 1 run on key A"]
    assert (as_json["passed"], as_json["fix"], as_json["blocked"]["answer"]) == (False, command, "blocked")
    assert (fix.code, again.code) == (0, 0), again.out


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_where_only_registered_flows_may_claim_the_drill_stops_at_the_first_blocked_answer(
    oncegate: Oncegate, open_store: Callable[[], ClaimStore], clock: FakeClock, seen: list[Seen]
) -> None:
    bootstrap.use_services(wire(open_store(), KeyHasher(KEY_SECRET), clock=clock, require_registered_flows=True))

    run = oncegate("drill", *BURST, "--verbose")

    assert run.code == 2, run.out + run.err
    claims = [request for request in seen if request.url.endswith("/api/claims")]
    assert len(claims) == 1
    assert run.out.splitlines()[-1].endswith("flows register --name 'OnceGate drill' --environment 127.0.0.1 --enabled")


# -- refusals and usage -------------------------------------------------------------------------------


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_caller_who_may_not_resolve_leaves_the_conflict_open_and_the_drill_passes(
    oncegate: Oncegate, api: ServerApi, wired: Gate, local_entra: LocalEntra, tmp_path: Path
) -> None:
    # An Entra ID deployment, and a caller holding OnceGate.Flow only: the app itself refuses its resolve.
    settings = Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / "unused.db")})
    bootstrap.use_services(
        wired.services, settings=dataclasses.replace(settings, auth=AuthMode.ENTRA, entra=local_entra.api)
    )
    msal = IssuingMsal(local_entra, "OnceGate.Flow", "2.0")

    run = oncegate(*sign_in(DELEGATED_SCOPE), "drill", "--concurrency", "2", "--verbose", app_factory=msal.factory)

    assert run.code == 0, run.out + run.err
    (_, dismissed) = rows(run.out, "3 changed")
    assert dismissed[4] == "forbidden (403)"
    conflict_id = dismissed[5]
    assert f"Note: Conflict {conflict_id} was left open: this caller may not resolve conflicts" in run.out
    reviewer = {"Authorization": f"Bearer {local_entra.token(local_entra.claims('OnceGate.Reviewer'))}"}
    assert ok(api.call("get_conflict", route={"conflictId": conflict_id}, headers=reviewer))["status"] == "open"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_with_entra_the_burst_signs_in_once(oncegate: Oncegate, seen: list[Seen]) -> None:
    fake = FakeMsal(token="drill-token")

    run = oncegate(*SIGN_IN, "drill", "--concurrency", "8", app_factory=fake.factory)

    assert run.code == 0, run.out + run.err
    assert [name for name, _ in fake.calls].count("acquire_token_by_device_flow") == 1
    assert {request.headers.get("authorization") for request in seen} == {"Bearer drill-token"}


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_scope_the_service_refuses_is_exit_2_before_anything_is_sent(
    oncegate: Oncegate, seen: list[Seen], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        oncegate("drill", "--scope", "not a scope")

    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert (
        "argument --scope: give 1 to 64 letters, digits, dots, underscores or hyphens, such as erp.create-order; "
        in err
    )
    assert seen == []


@pytest.mark.parametrize("store_kind", ["sqlite"])
@pytest.mark.parametrize("concurrency", ["1", "129", "many"])
def test_a_burst_of_fewer_than_two_runs_is_bad_usage(
    oncegate: Oncegate, concurrency: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        oncegate("drill", "--concurrency", concurrency)

    assert exited.value.code == 2
    assert "--concurrency: give a whole number from 2 to 128" in capsys.readouterr().err


# -- interrupted ----------------------------------------------------------------------------------


class HoldsResults:
    """The result service, but each Record result waits until the test lets it go: the drill holds its claim."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.go = threading.Event()
        self.claim_ids: list[str] = []

    def around(self, services: Services) -> Services:
        """``services`` with their results held here."""
        self._results = services.results
        return with_results(services, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._results, name)

    def record_result(self, claim_id: str, request: RecordResult) -> Claim:
        self.claim_ids.append(claim_id)
        self.arrived.set()
        self.go.wait(timeout=60)
        return self._results.record_result(claim_id, request)


def drill_process(url: str) -> subprocess.Popen[str]:
    """``oncegate drill`` in a process of its own, which the test interrupts as Ctrl+C would.

    It starts with SIGINT as a terminal gives it to the command a person runs, whatever this process got: the
    suite started in the background by a non-interactive shell (``make test &``, a CI step) ignores SIGINT,
    and a child inherits that, so the Ctrl+C reached nothing and the drill's own Record result timed out
    after 30 s (exit 3). A handler of this process's own is reset to the default in the child when it starts
    the drill, where SIG_IGN would be inherited.
    """
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "oncegate.cli", "--url", url, "--key", FUNCTION_KEY, "drill", *BURST]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupted_holding(process: subprocess.Popen[str], holding: HoldsResults) -> None:
    """Once the first step's line is out and its Record result reached the server and waits there: Ctrl+C."""
    assert process.stderr is not None
    assert process.stderr.readline() == PROGRESS[0] + "\n"
    assert holding.arrived.wait(timeout=60)


def handler_stacks() -> str:
    """Where each handler thread of the local servers in this process is, as a traceback shows it."""
    frames = sys._current_frames()
    return "".join(
        f"\n{thread.name}:\n" + "".join(traceback.format_stack(frames[thread.ident]))
        for thread in threading.enumerate()
        if thread.name.startswith("oncegate-handler") and thread.ident in frames
    )


@contextlib.contextmanager
def own_server() -> Iterator[ThreadingHTTPServer]:
    """``oncegate serve``'s server for this test alone, which it may stop taking connections."""
    server = framing.make_server(function_app.app, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_an_interrupted_drill_releases_the_claims_it_holds_and_exits_130(
    url: str, api: ServerApi, broken: Callable[[Broken], None]
) -> None:
    """Issue 22: Ctrl+C left the drill's claims in_progress, on the attention list, and nobody could settle them."""
    holding = HoldsResults()
    broken(holding.around)
    process = drill_process(url)
    try:
        interrupted_holding(process, holding)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
        # Read while the record is still held: what the shared server's handler threads were doing, should the
        # release go unanswered.
        handlers = handler_stacks()
    finally:
        holding.go.set()

    assert (process.returncode, out) == (130, ""), err + handlers
    assert err.splitlines() == ["oncegate drill: interrupted; released 1 claim it held."], err
    released = ok(api.call("get_claim", route={"claimId": holding.claim_ids[0]}))
    assert released["status"] == "released"
    # The test's clock stands still, so the history's order among one instant's entries says nothing: find the release.
    releases = [entry["details"] for entry in released["history"] if entry["event"] == "release"]
    assert releases == [{"reason": "oncegate drill was interrupted before doing its side effect."}]
    assert ok(api.call("list_claims_needing_attention", params={"attention": "true"}))["value"] == []


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_an_interrupted_drill_whose_release_gets_no_answer_names_the_claim_it_left_and_exits_130(
    broken: Callable[[Broken], None], wired: Gate
) -> None:
    """A release the service did not answer ended the command with exit 3 and a connection error, naming
    neither the claim left in_progress nor how to settle it (and any other held claim went unreleased)."""
    holding = HoldsResults()
    broken(holding.around)
    with own_server() as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        process = drill_process(url)
        try:
            interrupted_holding(process, holding)
            # The service stops taking connections: the release is refused, as one that never answers ends.
            server.shutdown()
            server.socket.close()
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=60)
            (held,) = holding.claim_ids
            left = wired.get_claim(held).status
        finally:
            holding.go.set()

    assert (process.returncode, out) == (130, ""), err
    kept, reason = err.splitlines()
    assert kept == (
        f"oncegate drill: interrupted; released 0 claims it held, and could not release {held}: settle each with "
        "oncegate claims review CLAIM_ID --outcome failed --attempt N (the drill made no record anywhere)."
    )
    assert reason.startswith(f"Cannot reach {url}: "), reason
    assert left is ClaimStatus.IN_PROGRESS


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_the_drill_shows_what_a_person_reads_and_the_calls_behind_verbose(oncegate: Oncegate) -> None:
    """Issue 27: 450 lines at 80 columns, most of them calls; the checks and the verdict are what is read."""
    short = oncegate("drill", *BURST)
    verbose = oncegate("drill", *BURST, "--verbose")

    assert (short.code, verbose.code) == (0, 0)
    assert len(short.out.splitlines()) <= 25
    assert "add --verbose (or --json)" in short.out
    assert "Calls (" not in short.out
    assert "Calls (" in verbose.out
    assert short.out.splitlines()[-1] == verbose.out.splitlines()[-1]


# -- the batch drill (issue 24) ---------------------------------------------------------------------------------
RACERS = 8
BATCH_PROGRESS = [
    f"drill B1 race: {RACERS} racers on 20 records, 4 in batches and 4 in single calls",
    "drill B2 again: 1 batch of 21 items, one record twice",
    "drill: reading each record's claim back",
]
BATCH = ["drill", "--batch", "--concurrency", str(RACERS)]


def claims_of(drill: dict[str, Any], step: str) -> list[dict[str, Any]]:
    return [call for call in drill["calls"] if call["step"] == step and call["call"].startswith("check and claim")]


@pytest.mark.slow
def test_the_batch_drill_passes_with_one_proceed_and_one_result_per_record(oncegate: Oncegate, api: ServerApi) -> None:
    run = oncegate(*BATCH, "--json")

    assert run.code == 0, run.out + run.err
    assert run.err.splitlines() == BATCH_PROGRESS
    drill = report(run.out)
    assert (drill["passed"], drill["batch"], drill["deviations"]) == (True, True, [])
    assert [check["passed"] for check in drill["checks"]] == [True] * 4
    labels = [f"R{n:02d}" for n in range(1, 21)]
    assert list(drill["keys"]) == labels
    race = claims_of(drill, "B1 race")
    # Every racer asked for every record: half of them in one bulk call each, half one call at a time.
    assert Counter(call["call"] for call in race) == {"check and claim many": 80, "check and claim": 80}
    assert Counter(call["key"] for call in race if call["answer"] == "proceed") == Counter(labels)
    assert {call["answer"] for call in race} <= {"proceed", "in_progress", "duplicate"}
    results = [call for call in drill["calls"] if call["call"] in ("record results", "record result")]
    assert Counter(call["key"] for call in results) == Counter(labels)
    assert {call["answer"] for call in results} == {"succeeded"}
    again = claims_of(drill, "B2 again")
    assert [call["key"] for call in again] == [*labels, "R01"]
    assert {call["answer"] for call in again} == {"duplicate"}
    recorded = {call["key"]: call["targetRecordId"] for call in results}
    assert all(call["targetRecordId"] == recorded[call["key"]] for call in again)
    for label in ("R01", "R20"):
        claim = ok(api.call("lookup_claim", {"scope": "drill.check", "key": drill["keys"][label]}))
        assert (claim["status"], claim["targetRecordId"]) == ("succeeded", recorded[label])
        assert drill["claims"][label]["claimId"] == claim["claimId"]


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_the_batch_drill_shows_the_checks_and_verdict_and_the_calls_behind_verbose(oncegate: Oncegate) -> None:
    short = oncegate(*BATCH)
    verbose = oncegate(*BATCH, "--verbose")

    assert (short.code, verbose.code) == (0, 0), short.out + short.err
    assert len(short.out.splitlines()) <= 25
    assert re.search(r"Records\s+20 keys, R01 drill-\S+-r01 to R20 drill-\S+-r20", short.out)
    assert f"{RACERS} racers at once, in batches and single calls" in short.out
    assert short.out.count("  ok    ") == 4
    assert "add --verbose (or --json)" in short.out
    assert (
        short.out.splitlines()[-1]
        == verbose.out.splitlines()[-1]
        == ("Passed: each business result happened once, and every repeat was recognised.")
    )
    again = rows(verbose.out, "B2 again")
    assert [row[2] for row in again] == ["check and claim many"] * 21
    assert {row[4] for row in again} == {"duplicate"}


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_service_that_tells_two_runs_to_proceed_fails_the_batch_drill_naming_the_record(
    oncegate: Oncegate, broken: Callable[[Broken], None]
) -> None:
    broken(proceeds_twice)

    run = oncegate(*BATCH, "--json")

    assert run.code == 1, run.out + run.err
    drill = report(run.out)
    assert drill["checks"][0]["passed"] is False
    (twice,) = [deviation for deviation in drill["deviations"] if "runs were told proceed" in deviation]
    assert re.fullmatch(r"record R\d\d: 2 runs were told proceed \(.+, .+\); exactly one must be\.", twice)
    assert any("the side effect was done 2 times" in deviation for deviation in drill["deviations"])


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_service_that_loses_results_fails_the_batch_drill_at_every_repeat(
    oncegate: Oncegate, broken: Callable[[Broken], None]
) -> None:
    broken(loses_results)

    run = oncegate(*BATCH, "--json")

    assert run.code == 1, run.out + run.err
    drill = report(run.out)
    # Each record was done once, as told; what went wrong is every later answer, and the claims read back.
    assert [check["passed"] for check in drill["checks"]] == [True, False, True, False]
    told = [d for d in drill["deviations"] if d.startswith("B2 again: ") and "was told in_progress" in d]
    lost = [d for d in drill["deviations"] if re.fullmatch(r"key R\d\d: the claim is in_progress .*", d)]
    assert (len(told), len(lost)) == (21, 20)


def test_the_record_ids_a_drill_makes_up_never_look_like_personal_data() -> None:
    """Twelve hex digits ran to eleven digits one time in a hundred (DRILL-D15199593258, a phone number to the
    sensitive-data check), and the drill then failed its own Record result."""
    made = {made_up_record_id() for _ in range(2000)}

    assert len(made) == 2000
    assert [record for record in made if sensitive_findings(record)] == []
    assert sensitive_findings("DRILL-D15199593258")  # what hex once made: refused, as it should be
