"""The embedded store's generated key secret: made once, never seen empty or partial, never replaced.

The secret maps business keys to claim ids, so a start that reads an empty file (and fails every
request) or writes a second secret (and orphans every claim) is the failure these tests look for.
Racers are real processes, started once and released together at a barrier for every round.
"""

from __future__ import annotations

import stat
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from oncegate.bootstrap import build_services
from oncegate.config import DEFAULT_TABLE_PREFIX, ConfigError, Settings, StoreKind
from oncegate.domain.keys import MIN_SECRET_LENGTH
from oncegate.local_secret import SECRET_FILE_NAME, local_key_secret
from tests.support.processes import racing

PROCESSES = 8
ROUNDS = 100
DATABASE = "oncegate.db"


def start_racing(barrier: Barrier, folders: list[str], answers: Queue[tuple[str, str]]) -> None:
    """One racing process: for each fresh folder, wait for the others, then ask for the secret at once."""
    for folder in folders:
        barrier.wait(timeout=60)
        try:
            answers.put((folder, local_key_secret(Path(folder) / DATABASE)))
        except Exception as exc:  # reported, not raised: the parent asserts on every answer
            answers.put((folder, f"{type(exc).__name__}: {exc}"))


def race(folders: list[Path]) -> dict[str, list[str]]:
    """Every folder's answers from PROCESSES racing processes released together at each folder."""
    context = racing(__name__)
    barrier = context.Barrier(PROCESSES)
    answers: Queue[tuple[str, str]] = context.Queue()
    names = [str(folder) for folder in folders]
    racers = [context.Process(target=start_racing, args=(barrier, names, answers)) for _ in range(PROCESSES)]
    for racer in racers:
        racer.start()
    collected: dict[str, list[str]] = {name: [] for name in names}
    for _ in range(PROCESSES * len(folders)):
        folder, answer = answers.get(timeout=90)
        collected[folder].append(answer)
    for racer in racers:
        racer.join(timeout=30)
    assert [racer.exitcode for racer in racers] == [0] * PROCESSES
    return collected


def secret_file(tmp_path: Path) -> Path:
    return tmp_path / SECRET_FILE_NAME


# -- many processes starting at once on a new folder ---------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_processes_starting_at_once_on_a_new_folder_all_get_the_one_published_secret(tmp_path: Path) -> None:
    folders = [tmp_path / f"round-{index}" for index in range(ROUNDS)]

    answers = race(folders)

    for folder in folders:
        seen = answers[str(folder)]
        assert len(seen) == PROCESSES
        assert len(set(seen)) == 1, f"{folder.name}: the racers saw {sorted(set(seen))}"
        assert len(seen[0]) >= MIN_SECRET_LENGTH
        written = secret_file(folder)
        assert written.read_text(encoding="utf-8").strip() == seen[0]
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
        # Losers clean up after themselves: only the secret is left beside the database.
        assert [path.name for path in folder.iterdir()] == [SECRET_FILE_NAME]


def test_a_second_start_reads_the_secret_the_first_one_wrote(tmp_path: Path) -> None:
    first = local_key_secret(tmp_path / DATABASE)

    assert local_key_secret(tmp_path / DATABASE) == first
    assert len(first) >= MIN_SECRET_LENGTH


# -- an existing file that cannot be the secret is refused, never replaced ------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "empty"),
        (b"\n  \n", "empty"),
        (b"x" * (MIN_SECRET_LENGTH - 1), f"shorter than {MIN_SECRET_LENGTH}"),
        (b"\xff\xfe" + b"x" * MIN_SECRET_LENGTH, "cannot be read"),
    ],
    ids=["empty", "blank", "short", "not-text"],
)
def test_an_existing_secret_file_that_cannot_be_the_secret_is_refused_with_one_line_naming_it(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    # An empty file is what a crash between creating the file and writing it left behind.
    secret_file(tmp_path).write_bytes(content)

    with pytest.raises(ConfigError) as refused:
        local_key_secret(tmp_path / DATABASE)

    assert_one_line_naming_the_file(refused.value, secret_file(tmp_path), problem)
    assert secret_file(tmp_path).read_bytes() == content


def test_the_service_refuses_the_empty_file_a_crash_left_instead_of_failing_every_request(tmp_path: Path) -> None:
    # The state a crash between creating the file and writing it left: before, every request was a 500.
    secret_file(tmp_path).write_bytes(b"")
    settings = Settings(StoreKind.SQLITE, tmp_path / DATABASE, None, None, DEFAULT_TABLE_PREFIX, key_secret=None)

    with pytest.raises(ConfigError) as refused:
        build_services(settings)

    assert_one_line_naming_the_file(refused.value, secret_file(tmp_path), "empty")


def test_a_secret_path_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    secret_file(tmp_path).mkdir()

    with pytest.raises(ConfigError) as refused:
        local_key_secret(tmp_path / DATABASE)

    assert_one_line_naming_the_file(refused.value, secret_file(tmp_path), "cannot be read")


def test_the_settings_refuse_an_empty_secret_file_at_start(tmp_path: Path) -> None:
    secret_file(tmp_path).write_bytes(b"")

    with pytest.raises(ConfigError) as refused:
        Settings.from_environment({"ONCEGATE_SQLITE_PATH": str(tmp_path / DATABASE)})

    assert_one_line_naming_the_file(refused.value, secret_file(tmp_path), "empty")


def test_a_rotation_on_sqlite_without_the_current_secret_set_names_the_file_that_holds_it(tmp_path: Path) -> None:
    """`oncegate serve` on SQLite with ONCEGATE_KEY_SECRET_NEXT, as the runbook's step 1 says ("keep
    ONCEGATE_KEY_SECRET as it is": unset, the file standing in for it), said only "a rotation needs the current
    secret set as well", leaving the operator to find that the secret to set is the file's."""
    local_key_secret(tmp_path / DATABASE)

    with pytest.raises(ConfigError) as refused:
        Settings.from_environment(
            {"ONCEGATE_SQLITE_PATH": str(tmp_path / DATABASE), "ONCEGATE_KEY_SECRET_NEXT": "n" * MIN_SECRET_LENGTH}
        )

    assert refused.value.setting == "ONCEGATE_KEY_SECRET"
    assert str(secret_file(tmp_path)) in str(refused.value)
    assert "the file's content" in str(refused.value)


def test_the_settings_ignore_the_file_when_the_secret_is_set(tmp_path: Path) -> None:
    secret_file(tmp_path).write_bytes(b"")

    settings = Settings.from_environment(
        {"ONCEGATE_SQLITE_PATH": str(tmp_path / DATABASE), "ONCEGATE_KEY_SECRET": "s" * MIN_SECRET_LENGTH}
    )

    assert settings.key_secret == "s" * MIN_SECRET_LENGTH


def assert_one_line_naming_the_file(error: ConfigError, path: Path, problem: str) -> None:
    message = str(error)
    assert "\n" not in message
    assert error.setting == "ONCEGATE_KEY_SECRET"
    assert str(path) in message
    assert problem in message
    # It says how to fix it, and warns against the fix that orphans every claim.
    assert "restore" in message
    assert "ONCEGATE_KEY_SECRET" in message


# -- what a crash leaves behind --------------------------------------------------------------


@pytest.mark.parametrize("content", [b"", b"half-writ"], ids=["empty", "partial"])
def test_a_temporary_file_left_by_a_crash_does_not_break_the_next_start(tmp_path: Path, content: bytes) -> None:
    leftover = tmp_path / f".{SECRET_FILE_NAME}.crashed.tmp"
    leftover.write_bytes(content)

    secret = local_key_secret(tmp_path / DATABASE)

    assert len(secret) >= MIN_SECRET_LENGTH
    assert local_key_secret(tmp_path / DATABASE) == secret
    assert secret_file(tmp_path).read_text(encoding="utf-8").strip() == secret
    assert leftover.read_bytes() == content


def test_a_secret_file_readable_by_others_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "key-secret"
    path.write_text("s" * 40)
    path.chmod(0o644)

    assert local_key_secret(tmp_path / "oncegate.db") == "s" * 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
