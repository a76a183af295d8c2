"""``oncegate targets set``, ``list`` and ``remove`` on a SQLite store, as an operator runs them (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oncegate import bootstrap
from oncegate.cli import main
from oncegate.config import Settings
from tests.cli.conftest import Run
from tests.cli.test_governance import STORE_SETTINGS

SECRET_VALUE = "the-erp-api-key-itself-0123456789"
ERP = (
    "targets",
    "set",
    "erp",
    "--base-url",
    "https://erp.example.com/api/v2",
    "--timeout-seconds",
    "45",
    "--lookup-path",
    "/orders?reference={reference}",
    "--auth",
    "secret:X-Api-Key=oncegate-target-erp-api-key",
    "--allow-cidr",
    "10.20.0.0/16",
    "--allow-cidr",
    "fd00:20::/64",
    "--honours-idempotency-key",
    "--success-status",
    "201",
    "--retryable-status",
    "409",
    "--record-pointer",
    "/data/id",
    "--keep-header",
    "Location",
    "--keep-pointer",
    "/data/status",
)


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SQLite store the app made, named by the environment as `oncegate serve` reads it, with a target secret."""
    path = tmp_path / "store" / "oncegate.db"
    for name in (*STORE_SETTINGS, "ONCEGATE_TARGETS_ALLOW_LOOPBACK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(path))
    monkeypatch.setenv("ONCEGATE_TARGET_SECRET_ERP_API_KEY", SECRET_VALUE)
    bootstrap.build_services(Settings.from_environment()).close()
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return Run(code, out, err)


def test_a_target_set_is_listed_with_every_setting_and_never_its_secret(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    declared = run(capsys, *ERP)
    listed = run(capsys, "targets", "list", "--json")
    text = run(capsys, "targets", "list")

    assert (declared.code, listed.code, text.code) == (0, 0, 0)
    [target] = json.loads(listed.out)["value"]
    assert target | {"declaredAt": None, "declaredBy": None} == {
        "name": "erp",
        "baseUrl": "https://erp.example.com/api/v2",
        "timeoutSeconds": 45,
        "lookupPath": "/orders?reference={reference}",
        "auth": "secret:X-Api-Key=oncegate-target-erp-api-key",
        "allowCidrs": ["10.20.0.0/16", "fd00:20::/64"],
        "honoursIdempotencyKey": True,
        "successStatuses": [201],
        "retryableStatuses": [409],
        "recordPointer": "/data/id",
        "keptHeaders": ["Location"],
        "keptPointers": ["/data/status"],
        "declaredAt": None,
        "declaredBy": None,
    }
    assert "1 target on sqlite at" in text.out
    assert "erp  https://erp.example.com/api/v2" in text.out
    for shown in (declared.out, listed.out, text.out):
        assert SECRET_VALUE not in shown


def test_every_line_fits_80_columns(database: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long_host = "https://" + ".".join(["segment-of-a-very-long-host-name"] * 3) + ".example.com/" + "p" * 60
    run(capsys, "targets", "set", "long", "--base-url", long_host, *ERP[5:])

    text = run(capsys, "targets", "list")

    assert text.code == 0
    assert max(len(line) for line in text.out.splitlines()) <= 80


def test_setting_a_target_again_replaces_the_whole_declaration(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, *ERP)

    again = run(capsys, "targets", "set", "erp", "--base-url", "https://erp.example.com/api/v3")
    [target] = json.loads(run(capsys, "targets", "list", "--json").out)["value"]

    assert again.code == 0
    assert (target["baseUrl"], target["timeoutSeconds"], target["auth"], target["allowCidrs"]) == (
        "https://erp.example.com/api/v3",
        30,
        "none",
        [],
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (("--base-url", "http://erp.example.com"), "--base-url"),
        (("--base-url", "https://169.254.169.254"), "--base-url"),
        (("--base-url", "https://e.example", "--timeout-seconds", "91"), "--timeout-seconds"),
        (("--base-url", "https://e.example", "--lookup-path", "/orders/{claimId}"), "--lookup-path"),
        (("--base-url", "https://e.example", "--auth", "secret:X-Key=oncegate-key-secret"), "--auth"),
        (("--base-url", "https://e.example", "--allow-cidr", "0.0.0.0/0"), "--allow-cidr"),
        (("--base-url", "https://e.example", "--success-status", "500"), "--success-status"),
        (("--base-url", "https://e.example", "--keep-header", "Set-Cookie"), "--keep-header"),
    ],
)
def test_a_refused_declaration_names_the_option_and_stores_nothing(
    database: Path, capsys: pytest.CaptureFixture[str], options: tuple[str, ...], named: str
) -> None:
    refused = run(capsys, "targets", "set", "erp", *options)

    assert refused.code == 2
    assert refused.err.startswith(f"oncegate targets set: {named} ")
    assert json.loads(run(capsys, "targets", "list", "--json").out) == {"value": []}


def test_loopback_needs_the_operator_setting(
    database: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    local = ("targets", "set", "local", "--base-url", "http://127.0.0.1:8081")

    assert run(capsys, *local).code == 2
    monkeypatch.setenv("ONCEGATE_TARGETS_ALLOW_LOOPBACK", "true")
    assert run(capsys, *local).code == 0


def test_remove_takes_the_target_away_and_says_when_there_was_none(
    database: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, *ERP)

    removed = run(capsys, "targets", "remove", "erp")
    again = run(capsys, "targets", "remove", "erp")

    assert removed.code == 0
    assert "Target erp is removed" in removed.out
    assert again.code == 1
    assert "no target is declared as erp" in again.err
    assert run(capsys, "targets", "list").out.startswith("0 targets on sqlite at")


def test_no_database_is_made_by_listing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in STORE_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ONCEGATE_SQLITE_PATH", str(tmp_path / "none" / "oncegate.db"))

    listed = run(capsys, "targets", "list")

    assert listed.code == 2
    assert not (tmp_path / "none" / "oncegate.db").exists()
