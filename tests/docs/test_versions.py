"""One version, from ``oncegate/__init__.py``: Health, ``oncegate --version``, both connector definitions, the
contract and the changelog agree (issue 33), so that the version a deployment reports says which release it runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oncegate import __version__
from oncegate.cli import main
from tests.docs.markdown import REPO
from tests.gate import Gate

DEFINITIONS = [REPO / "connector" / name / "apiDefinition.swagger.json" for name in ("", "entra")]
RELEASE = re.compile(r"^## (?P<version>\d+\.\d+\.\d+)\b", re.MULTILINE)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_health_says_the_version(service: Gate) -> None:
    assert service.health().version == __version__


def test_the_command_says_the_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"oncegate {__version__}"


@pytest.mark.parametrize("definition", DEFINITIONS, ids=lambda path: str(path.relative_to(REPO)))
def test_the_connector_says_the_version(definition: Path) -> None:
    assert json.loads(definition.read_text(encoding="utf-8"))["info"]["version"] == __version__


def test_the_contract_says_the_version() -> None:
    contract = (REPO / "docs" / "contract.md").read_text(encoding="utf-8")

    assert re.findall(r"\*\*Version (\S+?)\.\*\*", contract) == [__version__]


def test_the_changelog_has_each_release_before_this_one_newest_first() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    released = [match["version"] for match in RELEASE.finditer(changelog)]

    assert changelog.index("## Unreleased") < changelog.index(f"## {released[0]}")
    assert released == sorted(released, key=_key, reverse=True)
    assert released[-1] == "0.1.0"
    # The version reported is the one this round releases: past the last release on the page.
    assert _key(__version__) > _key(released[0])
    assert f"Released as {__version__}" in changelog


SUBSECTIONS = ("What a flow must change", "What an operator must change", "New", "Fixed")


def test_each_release_names_each_subsection_once_in_order_and_every_entry_under_one() -> None:
    # Merges had left Unreleased with New and Fixed three times over, and three of issue 31's entries
    # under 0.1.0, where no reader of this round's notes looks.
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    for section in re.split(r"^(?=## )", changelog, flags=re.MULTILINE)[1:]:
        release, subsection, named = section.splitlines()[0], None, []
        for line in section.splitlines()[1:]:
            if line.startswith("### "):
                subsection = line[4:]
                named.append(subsection)
            elif line.startswith("- "):
                assert subsection is not None, f"{release}: an entry outside a subsection: {line}"
        assert named == [name for name in SUBSECTIONS if name in named], f"{release}: {named}"


def test_no_entry_says_a_line_twice() -> None:
    # A merge had left the end of one entry's line again under it ("gallery with the publisher's contact,
    # pages and host, refusing any placeholder."), a sentence read twice with no subject.
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    for entry in re.split(r"^(?=- |#)", changelog, flags=re.MULTILINE):
        lines = [line.strip().rstrip(".") for line in entry.splitlines() if len(line.strip()) > 20]
        for index, line in enumerate(lines):
            earlier = [other for other in lines[:index] if other.startswith(line) or line.startswith(other)]
            assert not earlier, f"said twice in an entry: {line!r}"
