"""The files under ``infra/``, read once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.bicep import BicepFile, read_all

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def bicep_files() -> list[BicepFile]:
    files = read_all(ROOT / "infra")
    assert files, "no Bicep under infra/"
    return files


@pytest.fixture(scope="session")
def main_bicep(bicep_files: list[BicepFile]) -> BicepFile:
    (main,) = [file for file in bicep_files if file.path == ROOT / "infra" / "main.bicep"]
    return main


@pytest.fixture(scope="session")
def bicep(bicep_files: list[BicepFile]) -> dict[str, BicepFile]:
    """Files by their path under infra/, such as ``app/api.bicep``."""
    return {file.path.relative_to(ROOT / "infra").as_posix(): file for file in bicep_files}
