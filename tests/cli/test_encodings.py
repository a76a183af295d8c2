"""The command's output where stdout is not UTF-8: Chinese order numbers and flow names, as a maker types them.

Run as a separate Python, as a shell runs it, with its output redirected to a file: under ``LANG=C`` Python
writes UTF-8 (PEP 538 and 540), but on Windows a redirected stdout is the ANSI code page (cp1252 here,
which ``PYTHONIOENCODING`` stands in for on Linux). There ``--json`` and the tables stopped with a
``UnicodeEncodeError`` traceback, exit 1, and the file kept nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import FUNCTION_KEY
from tests.http.client import ServerApi
from tests.http.test_actions import ok

REPO = Path(__file__).resolve().parents[2]
SCOPE = "erp.create-order"
ORDER = "订单-001 北京"
FLOW = {"name": "下单 flow", "environment": "Default-contoso"}
# The stream's encoding as the command finds it: the C locale with nothing else set, and a Windows redirect.
ENCODINGS = {
    "LANG=C": ({"LANG": "C", "LC_ALL": "C"}, "utf-8"),
    "Windows redirect (cp1252)": ({"PYTHONIOENCODING": "cp1252"}, "cp1252"),
}


def claimed(api: ServerApi) -> dict[str, Any]:
    body = {"scope": SCOPE, "key": ORDER, "payload": {"客户": "张三"}, "runId": "run-1", "flow": FLOW}
    return ok(api.call("check_and_claim", body))


def oncegate(url: str, setting: dict[str, str], *argv: str) -> subprocess.CompletedProcess[bytes]:
    kept = {name: value for name, value in os.environ.items() if not name.startswith(("ONCEGATE_", "LC_", "PYTHONIO"))}
    return subprocess.run(
        [sys.executable, "-m", "oncegate.cli", "--url", url, "--key", FUNCTION_KEY, *argv],
        cwd=REPO,
        env={**kept, "LANG": "C", **setting},
        capture_output=True,
        timeout=60,
    )


@pytest.mark.parametrize("where", ENCODINGS)
def test_json_of_a_chinese_key_is_valid_json_that_reads_back_the_same(api: ServerApi, url: str, where: str) -> None:
    claimed(api)
    setting, encoding = ENCODINGS[where]

    done = oncegate(url, setting, "--json", "claims", "lookup", "--scope", SCOPE, "--key", ORDER)

    assert (done.returncode, done.stderr) == (0, b"")
    answer = json.loads(done.stdout.decode(encoding))
    assert answer["flow"] == FLOW
    assert answer == ok(api.call("lookup_claim", {"scope": SCOPE, "key": ORDER}))


@pytest.mark.parametrize("where", ENCODINGS)
def test_a_table_of_chinese_names_is_printed_whole(api: ServerApi, url: str, where: str) -> None:
    claim_id = claimed(api)["claimId"]
    setting, encoding = ENCODINGS[where]

    shown = oncegate(url, setting, "claims", "show", claim_id)
    listed = oncegate(url, setting, "flows", "list")

    for done in (shown, listed):
        assert (done.returncode, done.stderr) == (0, b"")
    # What the encoding cannot hold is its escape, the rest as it is.
    name = FLOW["name"] if encoding == "utf-8" else FLOW["name"].encode("ascii", "backslashreplace").decode()
    assert f"flow {name} (Default-contoso)" in shown.stdout.decode(encoding)
    assert name in listed.stdout.decode(encoding)


def test_an_error_naming_a_chinese_id_is_one_line(url: str) -> None:
    setting, encoding = ENCODINGS["Windows redirect (cp1252)"]

    done = oncegate(url, setting, "claims", "show", ORDER)

    assert done.returncode == 2
    assert done.stderr.decode(encoding).splitlines() == [
        "not_found: No claim has the id '\\u8ba2\\u5355-001 \\u5317\\u4eac'."
    ]
