"""The restore runbook of docs/operations.md (*Backup and restore*) with a fault at each of its steps in turn.

Each case runs the runbook's blocks as written, a fault strikes one step, then the operator does what the
runbook says for that failure (each remedy is quoted from the runbook, so a test fails if the runbook stops
saying it), and goes on. Afterwards the promise holds: every key done before the export is ``duplicate``, the
held one still ``in_progress`` (none proceeds twice), a second export of the restored store counts the same
records as the first (no claim, conflict or secret lost or doubled), and the runbook's own check, ``oncegate
keys``, tells the truth at every point: it names the store only once the store is whole.

The ``oncegate`` lines of a block run through the command's ``main`` in this process, with the argv the line
gives (the operator's shell expands ``$EXPORTED_AT`` the same way); the other lines run in bash. A fault is the
command's own exception at the Nth record: ``StoreUnavailable``, as either store raises for an outage, or
``Killed``, which no handler of the command catches, so the SQLite transaction under way is rolled back and the
export's file is left half written, as a kill -9 leaves them (one case kills a real process to show it).
Imports are saved in chunks of 4 records here, so a fault lands after some chunks were saved.

Every case runs on SQLite. On Table Storage (the real Azurite) run only the steps whose outcome can differ by
store: a fault in the middle of the import (SQLite commits a chunk and its progress in one transaction; Table
Storage writes each claim's partition on its own and its progress after the chunk, so a run cut short leaves
rows beyond the progress saved, which the run again writes over), and an app left running (on Table Storage the
running app reads the same tables; on SQLite it holds the database the runbook moved aside).
"""

from __future__ import annotations

import gzip
import json
import os
import shlex
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import Settings
from oncegate.domain.statuses import Decision
from oncegate.errors import NotConfigured, StoreUnavailable
from oncegate.service import backups
from oncegate.stores import export_format
from oncegate.stores.tables.store import table_names
from tests.cli.test_backup_runbook import OPERATIONS, bash, in_a_clean_folder, on_table_storage, runbook
from tests.docs.markdown import ShellBlock, shell_blocks
from tests.gate import Gate
from tests.service.calls import claim, record, report

DONE = [f"SO-{index}" for index in range(8)]
HELD = "SO-HELD"
CHUNK = 4
# The runbook's own words for what the operator does after each failure: the test fails if it stops saying them.
REMEDIES = {
    "export": "An export cut short leaves no file of its name",
    "aside": "A move cut short: run the block again; it moves what is left",
    "import": "Cut short (Ctrl+C, an outage, the process killed), run the same command again",
    "stale": "To import another export instead, before the app serves the restored store (step 4), empty the store",
    "running": "An instance left running while the store was emptied or imported does not serve it",
}


class Killed(BaseException):
    """The process killed where it stood: no handler of the command catches it."""


@dataclass
class Ran:
    code: int
    out: str
    err: str


def section() -> str:
    text = OPERATIONS.read_text(encoding="utf-8")
    start = text.index("## Backup and restore\n")
    return text[start : text.index("\n## ", start + 1)]


def steps() -> dict[str, ShellBlock]:
    """The runbook's blocks (tests/cli/test_backup_runbook.py finds the first three) and the one that empties again."""
    [empty] = [block for block in shell_blocks(OPERATIONS) if block.code.startswith("rm -f .oncegate/oncegate.db ")]
    return {**runbook(), "empty again": empty}


def run(block: ShellBlock, capsys: pytest.CaptureFixture[str], **env: str) -> Ran:
    """The block as ``bash -e`` runs it: line by line, ending at the first that fails; ``oncegate`` lines in process."""
    lines = [line for line in block.code.strip().splitlines() if line.strip()]
    if not all(line.startswith("oncegate ") for line in lines):
        done = subprocess.run(
            ["bash", "-e", "-c", block.code], capture_output=True, text=True, timeout=30, check=False, env=os.environ
        )
        return Ran(done.returncode if done.returncode >= 0 else 128 - done.returncode, done.stdout, done.stderr)
    out, err = "", ""
    for line in lines:
        argv = shlex.split(line.replace('"$EXPORTED_AT"', shlex.quote(env.get("EXPORTED_AT", ""))))
        try:
            code = main(argv[1:])
        except Killed:
            code = 128 + signal.SIGKILL
        taken = capsys.readouterr()
        out, err = out + taken.out, err + taken.err
        assert "Traceback" not in taken.err, taken.err
        if code != 0:
            return Ran(code, out, err)
    return Ran(0, out, err)


def at_the(nth: int, fault: BaseException, on: Any, name: str, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """``on.name`` raises ``fault`` at its ``nth`` call; the function returned takes the fault away."""
    real = getattr(on, name)
    calls = Counter[str]()

    def faulty(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == nth:
            raise fault
        return real(*args, **kwargs)

    monkeypatch.setattr(on, name, faulty)
    return lambda: monkeypatch.setattr(on, name, real)


def served_store() -> str:
    """The app's store with 8 keys done, one held, one conflict and a scope; returns its id."""
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    try:
        for key in DONE:
            record(service, claim(service, key=key, run=f"run-{key}"))
        claim(service, key=HELD, run="run-held")
        report(service, key=DONE[0])
        return service.services.key_secrets.marks().store_id or ""
    finally:
        service.close()


def exported_counts(path: Path) -> Counter[str]:
    return Counter(record["record"] for record in export_format.records(path) if "record" in record) - Counter(
        {export_format.HEADER: 1, export_format.END: 1}
    )


def promise_holds(store_id: str, original: Path, capsys: pytest.CaptureFixture[str], *, new: int = 0) -> None:
    """Every key back as it was, the records as many as the export's (and the ``new`` claims made since), and the
    runbook's check naming the store."""
    check = run(steps()["import"], capsys, EXPORTED_AT=started(original))
    assert check.code == 0, check.err
    assert "was restored from oncegate-export.jsonl.gz already" in check.out
    assert store_id in check.out, check.out  # `oncegate keys`: the store's id, the exported store's
    again = Path("again.jsonl")
    assert main(["store", "export", str(again)]) == 0
    capsys.readouterr()
    assert exported_counts(again) == exported_counts(original) + Counter(claim=new)
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    try:
        answers = [claim(service, key=key, run="run-after").decision for key in DONE]
        held = claim(service, key=HELD, run="run-after").decision
        assert service.health().restored is not None
    finally:
        service.close()
    assert answers == [Decision.DUPLICATE] * len(DONE)
    assert held is Decision.IN_PROGRESS


def started(export: Path) -> str:
    header = next(iter(export_format.records(export)))
    return backups.moment_text(datetime.fromisoformat(header["startedAt"]))


def keys_refused(capsys: pytest.CaptureFixture[str]) -> Ran:
    """The runbook's check on a store not (yet) whole: it must not name the store as one the app serves."""
    code = main(["keys"])
    taken = capsys.readouterr()
    return Ran(code, taken.out, taken.err)


@pytest.fixture
def sqlite_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    in_a_clean_folder(tmp_path, monkeypatch)
    monkeypatch.setattr(backups, "PROGRESS_EVERY", CHUNK)
    return served_store()


def export_and_empty(capsys: pytest.CaptureFixture[str], empty: Callable[[], None]) -> Path:
    exported = run(steps()["export"], capsys)
    assert exported.code == 0, exported.err
    empty()
    return Path("oncegate-export.jsonl.gz")


def aside(capsys: pytest.CaptureFixture[str]) -> None:
    moved = run(steps()["aside"], capsys)
    assert moved.code == 0, moved.err


@pytest.mark.parametrize("fault", ["outage", "killed"])
def test_an_export_cut_short_leaves_no_file_to_import_and_taken_again_restores_every_key(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    error = StoreUnavailable("the store did not answer") if fault == "outage" else Killed()
    heal = at_the(5, error, export_format, "claim_record", monkeypatch)

    cut = run(steps()["export"], capsys)
    heal()

    assert cut.code == (3 if fault == "outage" else 137), cut.err
    assert not Path("oncegate-export.jsonl.gz").exists()
    assert REMEDIES["export"] in section()
    original = export_and_empty(capsys, lambda: aside(capsys))
    imported = run(steps()["import"], capsys, EXPORTED_AT=started(original))
    assert imported.code == 0, imported.err
    promise_holds(sqlite_store, original, capsys)


def import_cut_short(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fault: str, original: Path
) -> Ran:
    error = StoreUnavailable("the store did not answer") if fault == "outage" else Killed()
    heal = at_the(CHUNK * 2 + 2, error, backups, "_write", monkeypatch)
    cut = run(steps()["import"], capsys, EXPORTED_AT=started(original))
    heal()
    return cut


@pytest.mark.parametrize("fault", ["outage", "killed"])
def test_an_import_cut_short_is_no_store_to_the_check_and_run_again_goes_on_to_every_key(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    original = export_and_empty(capsys, lambda: aside(capsys))

    cut = import_cut_short(capsys, monkeypatch, fault, original)
    check = keys_refused(capsys)
    again = run(steps()["import"], capsys, EXPORTED_AT=started(original))

    assert cut.code == (3 if fault == "outage" else 137), cut.err
    assert check.code == 3, check.out
    assert check.err.startswith("oncegate keys: ")
    assert "is half restored: an import of store " in check.err
    assert f"was cut short after record {CHUNK * 2}. The app refuses the store until it ends" in check.err
    assert "store id (none yet)" in check.out
    assert REMEDIES["import"] in section()
    assert again.code == 0, again.err
    assert f"going on after record {CHUNK * 2}" in again.out
    promise_holds(sqlite_store, original, capsys)


KILLER = """
import os, signal
from oncegate.service import backups
backups.PROGRESS_EVERY = {chunk}
written, write = [0], backups._write
def killed_at_the_nth(store, record):
    written[0] += 1
    if written[0] == {nth}:
        os.kill(os.getpid(), signal.SIGKILL)
    write(store, record)
backups._write = killed_at_the_nth
"""


def test_an_import_killed_for_real_half_way_is_no_store_and_run_again_goes_on_to_every_key(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As the in-process ``Killed``, with the import block run as written in bash and its process killed -9."""
    original = export_and_empty(capsys, lambda: aside(capsys))
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(KILLER.format(chunk=CHUNK, nth=CHUNK * 2 + 2), encoding="utf-8")

    cut = bash(steps()["import"], tmp_path, EXPORTED_AT=started(original), PYTHONPATH=str(hooks))
    check = keys_refused(capsys)
    again = run(steps()["import"], capsys, EXPORTED_AT=started(original))

    assert cut.returncode == 128 + signal.SIGKILL, cut.stderr
    assert f"was cut short after record {CHUNK * 2}. The app refuses the store until it ends" in check.err
    assert again.code == 0, again.err
    assert f"going on after record {CHUNK * 2}" in again.out
    promise_holds(sqlite_store, original, capsys)


def mv_killed_after_one(tmp_path: Path) -> str:
    """A PATH whose ``mv`` moves one file, then kills the shell that runs the block: the operator's session lost."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = subprocess.run(["bash", "-c", "command -v mv"], capture_output=True, text=True, check=True).stdout.strip()
    (bin_dir / "mv").write_text(f'#!/bin/sh\n{real} "$@" && kill -9 $PPID\n', encoding="utf-8")
    (bin_dir / "mv").chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_a_move_aside_cut_short_and_run_again_moves_the_rest_and_every_key_comes_back(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # An app killed (not stopped) leaves its WAL beside the database: the move has two files to make.
    app = Gate.of(bootstrap.build_services(Settings.from_environment()))
    record(app, claim(app, key="SO-WAL", run="run-wal"))
    DONE.append("SO-WAL")
    try:
        original = export_and_empty(capsys, lambda: None)
        path = os.environ["PATH"]
        monkeypatch.setenv("PATH", mv_killed_after_one(tmp_path))
        cut = run(steps()["aside"], capsys)
        monkeypatch.setenv("PATH", path)
        left = sorted(file.name for file in Path(".oncegate").glob("oncegate.db*") if file.suffix != ".db-writers")
        again = run(steps()["aside"], capsys)
        moved = sorted(file.name for file in Path("wiped").iterdir())
        imported = run(steps()["import"], capsys, EXPORTED_AT=started(original))

        assert cut.code == 128 + signal.SIGKILL
        assert left == ["oncegate.db-shm", "oncegate.db-wal"]  # the database moved, its WAL not
        assert REMEDIES["aside"] in section()
        assert again.code == 0, again.err
        assert moved == ["oncegate.db", "oncegate.db-shm", "oncegate.db-wal"]
        assert imported.code == 0, imported.err
        promise_holds(sqlite_store, original, capsys)
    finally:
        DONE.remove("SO-WAL")
        app.services.store.close()


def test_the_move_aside_run_again_after_an_import_never_moves_it_over_the_store_moved_before(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = export_and_empty(capsys, lambda: aside(capsys))
    kept = Path("wiped/oncegate.db").read_bytes()
    import_cut_short(capsys, monkeypatch, "killed", original)

    again = run(steps()["aside"], capsys)
    imported = run(steps()["import"], capsys, EXPORTED_AT=started(original))

    # Before, the half-imported database went over the one moved aside first, with the keys done after the export.
    assert again.code == 1
    assert again.err.strip() == "wiped/oncegate.db is there already: .oncegate/oncegate.db is not moved over it"
    assert Path("wiped/oncegate.db").read_bytes() == kept
    assert imported.code == 0, imported.err
    promise_holds(sqlite_store, original, capsys)


def other_store_export(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """An export of another store (another folder's), as a wrong file picked from the backups container."""
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    served_store()
    assert main(["store", "export", "other.jsonl.gz"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    return other / "other.jsonl.gz"


def test_a_wrong_or_cut_file_is_refused_before_anything_is_written_and_the_right_one_restores_every_key(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = other_store_export(tmp_path, capsys, monkeypatch)
    original = export_and_empty(capsys, lambda: aside(capsys))
    cut = Path("cut.jsonl")
    cut.write_text("".join(export_format_lines(original)[:-1]), encoding="utf-8")
    block = steps()["import"]

    wrong = run(of_file(block, other), capsys, EXPORTED_AT=started(other))
    half = run(of_file(block, cut), capsys, EXPORTED_AT=started(original))
    check = keys_refused(capsys)
    imported = run(block, capsys, EXPORTED_AT=started(original))

    assert wrong.code == 2
    assert f"names store {sqlite_store}, while the export is of store" in wrong.err, wrong.err
    assert half.code == 2
    assert "has no end: the export was cut short" in half.err, half.err
    assert check.code == 0  # nothing was written: an empty store, no import under way
    assert "store id (none yet)" in check.out
    assert "No key secret yet." in check.out
    assert imported.code == 0, imported.err
    promise_holds(sqlite_store, original, capsys)


def export_format_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return list(lines)


def of_file(block: ShellBlock, path: Path) -> ShellBlock:
    """The import block naming another file, as an operator who picked another one from the container."""
    return replace(block, code=block.code.replace("oncegate-export.jsonl.gz", str(path)))


def test_a_stale_export_imported_is_emptied_again_as_the_runbook_says_and_the_newest_restores_every_key(
    sqlite_store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = Path("stale.jsonl.gz")
    assert main(["store", "export", str(stale)]) == 0
    service = Gate.of(bootstrap.build_services(Settings.from_environment()))
    record(service, claim(service, key="SO-LATE", run="run-late"))
    service.close()
    DONE.append("SO-LATE")
    try:
        original = export_and_empty(capsys, lambda: aside(capsys))
        block = steps()["import"]
        assert run(of_file(block, stale), capsys, EXPORTED_AT=started(stale)).code == 0
        refused = run(block, capsys, EXPORTED_AT=started(original))
        emptied = run(steps()["empty again"], capsys)
        imported = run(block, capsys, EXPORTED_AT=started(original))

        assert refused.code == 2
        assert "the store was restored from another export" in refused.err, refused.err
        assert REMEDIES["stale"] in section()
        assert emptied.code == 0, emptied.err
        assert imported.code == 0, imported.err
        promise_holds(sqlite_store, original, capsys)
    finally:
        DONE.remove("SO-LATE")


def test_an_app_left_running_on_sqlite_refuses_from_the_move_and_restarted_serves_every_key_once(
    sqlite_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = Gate.of(bootstrap.build_services(Settings.from_environment()))
    claim(app, key="SO-BEFORE", run="run-before")  # the app has its connections open
    original = export_and_empty(capsys, lambda: aside(capsys))
    imported = run(steps()["import"], capsys, EXPORTED_AT=started(original))
    # Before, the running app wrote on in the file moved aside: this key proceeded there, and again after a restart.
    with pytest.raises(NotConfigured, match="was moved, deleted or replaced while this instance ran"):
        claim(app, key="SO-NEW", run="run-new")
    app.services.store.close()

    restarted = Gate.of(bootstrap.build_services(Settings.from_environment()))
    try:
        first = claim(restarted, key="SO-NEW", run="run-new").decision
    finally:
        restarted.close()

    assert imported.code == 0, imported.err
    assert REMEDIES["running"] in section()
    assert first is Decision.PROCEED
    promise_holds(sqlite_store, original, capsys, new=1)


# -- Table Storage: the steps whose outcome can differ by store ----------------------------------------------


@pytest.fixture
def tables_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], table_store_factory: Any
) -> tuple[str, Callable[[], None]]:
    on_table_storage(tmp_path, monkeypatch, table_store_factory)
    monkeypatch.setattr(backups, "PROGRESS_EVERY", CHUNK)
    assert main(["store", "init", "--new-only", "--json"]) == 0
    store_id = json.loads(capsys.readouterr().out)["storeId"]
    monkeypatch.setenv("ONCEGATE_KEY_SECRET", "secret-a-" + "a" * 32)
    monkeypatch.setenv("ONCEGATE_STORE_ID", store_id)
    served_store()

    def delete_the_tables() -> None:
        with TableServiceClient.from_connection_string(table_store_factory.connection_string) as tables:
            for name in table_names(table_store_factory.prefix):
                tables.delete_table(name)

    return store_id, delete_the_tables


@pytest.mark.azurite
def test_on_table_storage_an_import_cut_short_is_no_store_and_run_again_writes_over_what_it_left(
    tables_store: tuple[str, Callable[[], None]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store_id, delete_the_tables = tables_store
    original = export_and_empty(capsys, delete_the_tables)

    cut = import_cut_short(capsys, monkeypatch, "outage", original)
    check = keys_refused(capsys)
    again = run(steps()["import"], capsys, EXPORTED_AT=started(original))

    assert cut.code == 3, cut.err
    assert check.code == 3
    assert "is half restored" in check.err, check.err
    assert again.code == 0, again.err
    promise_holds(store_id, original, capsys)


@pytest.mark.azurite
def test_on_table_storage_an_app_left_running_refuses_the_half_imported_store_and_serves_the_restored_one(
    tables_store: tuple[str, Callable[[], None]], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app reads the store's marks again once they are older than its interval (5 s); Azure refuses a deleted
    table's name for a minute or so, so an import always begins past it. Here the app reads them at every request."""
    store_id, delete_the_tables = tables_store
    settings = Settings.from_environment()
    app = Gate(
        bootstrap.build_store(settings),
        bootstrap.key_ring(settings, bootstrap.key_secret(settings)),
        check_interval=timedelta(0),
        pin=bootstrap.store_pin(settings),
    )
    try:
        original = export_and_empty(capsys, delete_the_tables)
        import_cut_short(capsys, monkeypatch, "outage", original)
        half = [claim_or_refusal(app, key) for key in [*DONE[:3], DONE[-1], "SO-NEW"]]
        imported = run(steps()["import"], capsys, EXPORTED_AT=started(original))
        served = [claim_or_refusal(app, key) for key in [*DONE, "SO-NEW"]]
    finally:
        app.close()

    assert set(half) == {"not_configured"}, half
    assert imported.code == 0, imported.err
    assert served == ["duplicate"] * len(DONE) + ["proceed"]
    assert REMEDIES["running"] in section()
    promise_holds(store_id, original, capsys, new=1)


def claim_or_refusal(app: Gate, key: str) -> str:
    try:
        return str(claim(app, key=key, run="run-while-restoring").decision)
    except NotConfigured:
        return "not_configured"
