"""No placeholder ships: the publisher's contact, pages and host come from the publisher, checked (issue 35).

The definitions once carried ``oncegate.example.com`` as the contact, website and privacy policy, which a
gallery submission would have shipped. The committed definitions now carry none (a private import needs
none), and the package for the gallery takes the publisher's and refuses any placeholder left in it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.connector.spec import CONNECTOR, DEFINITIONS, PUBLISHER, load
from tools.connector import build as generator
from tools.connector.build import PLACEHOLDER_HOST
from tools.connector.publisher import Publisher, problems

# Any address under a name reserved for examples, tests or local use, or of Microsoft's fictitious companies.
RESERVED_ADDRESS = re.compile(
    r"[\w.-]*\b(example\.(com|net|org)|\.example|\.test|\.invalid|localhost|contoso\.com|fabrikam\.com)\b", re.I
)


@pytest.mark.parametrize("auth", sorted(DEFINITIONS))
def test_the_committed_definitions_carry_no_publisher_placeholder(auth: str) -> None:
    document = load(DEFINITIONS[auth])
    assert "contact" not in document["info"]
    names = {item["propertyName"] for item in document["x-ms-connector-metadata"]}
    assert names == {"Categories"}
    # The one reserved name left is the host, which every route to Azure replaces: the dynamichosturl
    # policy with the connection's host, the Logic Apps template with the app's, the package with the
    # publisher's. It keeps a connector imported without the policy from calling a stranger's host.
    assert document["host"] == PLACEHOLDER_HOST
    del document["host"]
    assert RESERVED_ADDRESS.findall(json.dumps(document)) == []


def test_the_package_carries_the_publishers_facts_and_nothing_else_changes(package: Path) -> None:
    for auth, committed in DEFINITIONS.items():
        packaged: dict[str, Any] = load(package / committed.relative_to(CONNECTOR))
        assert packaged["info"]["contact"] == {
            "name": PUBLISHER["name"],
            "url": PUBLISHER["supportUrl"],
            "email": PUBLISHER["email"],
        }
        pages = {item["propertyName"]: item["propertyValue"] for item in packaged["x-ms-connector-metadata"]}
        assert pages["Website"] == PUBLISHER["website"]
        assert pages["Privacy policy"] == PUBLISHER["privacyPolicy"]
        assert packaged["host"] == PUBLISHER["host"]
        assert RESERVED_ADDRESS.findall(json.dumps(packaged)) == [], auth
        original = load(committed)
        for document in (packaged, original):
            del document["info"], document["host"], document["x-ms-connector-metadata"]
        assert packaged == original, auth
    for name in generator.PACKAGE_FILES:
        assert (package / name).read_bytes() == (CONNECTOR / name).read_bytes()


def test_the_packages_properties_and_readme_name_the_publisher(package: Path) -> None:
    """A submission is the definition, the properties and a readme (the PowerPlatformConnectors repository's
    template, with its required "## Publisher:" heading): each names the publisher, not "OnceGate"."""
    for name in generator.PROPERTIES_FILES:
        packaged: dict[str, Any] = load(package / name)
        assert packaged["properties"]["publisher"] == PUBLISHER["name"]
        original: dict[str, Any] = load(CONNECTOR / name)
        del packaged["properties"]["publisher"], original["properties"]["publisher"]
        assert packaged == original, name
    readme = (package / "readme.md").read_text(encoding="utf-8").splitlines()
    committed = (CONNECTOR / "README.md").read_text(encoding="utf-8").splitlines()
    assert [line for line in readme if line.startswith("## Publisher:")] == [f"## Publisher: {PUBLISHER['name']}"]
    changed = [(ours, theirs) for ours, theirs in zip(readme, committed, strict=True) if ours != theirs]
    assert changed == [(f"## Publisher: {PUBLISHER['name']}", "## Publisher: OnceGate")]


PLACEHOLDER = "is a placeholder"
# (key, value) -> what the refusal says of it.
PLACEHOLDERS = {
    "the old contact": ("email", "support@oncegate.example.com", PLACEHOLDER),
    "the old website": ("website", "https://oncegate.example.com", PLACEHOLDER),
    "the old host": ("host", "oncegate.example.com", PLACEHOLDER),
    "a sample's company": ("privacyPolicy", "https://www.contoso.com/privacy", PLACEHOLDER),
    "a test domain": ("supportUrl", "https://help.oncegate.test/", PLACEHOLDER),
    "plain http": ("website", "http://northbank-logistics.eu", "is not an https address"),
    "a URL for a host": ("host", "https://oncegate.northbank-logistics.eu", "is not a bare host name"),
    "not an address": ("email", "integration team", "is not an e-mail address"),
}


@pytest.mark.parametrize("case", list(PLACEHOLDERS))
def test_the_package_refuses_a_placeholder_and_writes_nothing(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, value, what = PLACEHOLDERS[case]
    expected = f"{key} {value!r} {what}"
    publisher = tmp_path / "publisher.json"
    publisher.write_text(json.dumps(PUBLISHER | {key: value}), encoding="utf-8")
    out = tmp_path / "package"
    arguments = ["--connector-dir", str(CONNECTOR), "--publisher", str(publisher), "--out", str(out)]
    assert generator.main(arguments) == 1
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_a_publisher_field_left_empty_or_out_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    publisher = tmp_path / "publisher.json"
    left_out = {k: v for k, v in PUBLISHER.items() if k != "privacyPolicy"}
    publisher.write_text(json.dumps(left_out | {"name": " "}), encoding="utf-8")
    out = tmp_path / "package"
    assert generator.main(["--publisher", str(publisher), "--out", str(out)]) == 1
    refused = capsys.readouterr().err
    assert "name is empty" in refused
    assert "privacyPolicy is empty" in refused
    assert not out.exists()


def test_the_sample_publisher_passes_and_package_needs_both_options() -> None:
    fields = {"support_url": "supportUrl", "privacy_policy": "privacyPolicy"}
    values = {name: PUBLISHER[fields.get(name, name)] for name in Publisher.__dataclass_fields__}
    assert problems(Publisher(**values)) == []
    with pytest.raises(SystemExit):
        generator.main(["--out", "somewhere"])
    with pytest.raises(SystemExit):
        generator.main(["--check", "--publisher", "p.json", "--out", "somewhere"])


def test_the_readmes_publisher_file_as_shown_is_refused_naming_each_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Copied from connector/README.md and only partly filled in, no ``<your ...>`` value reaches the package.

    The pages and the name were accepted as they stand there: ``https://<your privacy policy>`` passed as an
    https address (``urlsplit`` takes any text for its host), and a package shipped with them once the e-mail
    and the host were filled in.
    """
    readme = (CONNECTOR / "README.md").read_text(encoding="utf-8")
    gallery = readme.split("### For the gallery", 1)[1]
    shown = json.loads(gallery.split("```json", 1)[1].split("```", 1)[0])
    assert set(shown) == set(PUBLISHER)
    filled_in = shown | {"email": PUBLISHER["email"], "host": PUBLISHER["host"]}
    publisher = tmp_path / "publisher.json"
    publisher.write_text(json.dumps(filled_in), encoding="utf-8")
    out = tmp_path / "package"
    assert generator.main(["--connector-dir", str(CONNECTOR), "--publisher", str(publisher), "--out", str(out)]) == 1
    refused = capsys.readouterr().err
    assert f"name {shown['name']!r} is a placeholder" in refused
    for key in ("supportUrl", "website", "privacyPolicy"):
        assert f"{key} {shown[key]!r} is not an https address" in refused
    assert not out.exists()
