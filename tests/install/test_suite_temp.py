"""The suite's own temporary folders: where a run leaves them, and how many runs' it keeps."""

from __future__ import annotations

import pytest


def test_a_run_keeps_only_the_last_run_s_temporary_folders(pytestconfig: pytest.Config) -> None:
    # On Linux they are in memory (/dev/shm, tests/conftest.py), which nothing frees until the next run: pytest
    # keeps three runs' by default, and three runs of make test held 1.4 GiB of memory (463 MiB each) after they
    # finished. A run in progress keeps its own (pytest's lock on it), whatever another run started meanwhile keeps.
    assert int(pytestconfig.getini("tmp_path_retention_count")) == 1


@pytest.mark.parametrize("variable", ["TMPDIR", "TEMP", "TMP"])
def test_a_temporary_folder_the_reader_named_is_kept(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Python's tempfile reads any of the three: a reader who named one with TEMP or TMP meant it as much.
    from tests import conftest

    for name in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "/var/tmp")
    assert conftest._memory_temp_fits() is False
