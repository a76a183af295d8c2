"""When a conflict is reported: the Logic Apps polling contract, as the local server serves it.

Nothing new is ``202`` with ``Location`` (the next poll, carrying the trigger state) and
``Retry-After``; new conflicts are ``200`` with them and the advanced state; each conflict is
delivered once. The engine always polls the ``Location`` it was last given.
"""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import pytest
import requests

from tests.connector.spec import operation, resolve

POLL = "/api/conflict-events"


class Poller:
    """Polls as the engine does: the first time without state, then always the Location it was given."""

    def __init__(self, base_url: str, scope: str) -> None:
        self.base_url = base_url
        self.next = f"{base_url}{POLL}?scope={scope}"

    def poll(self) -> requests.Response:
        response = requests.get(self.next, timeout=10)
        assert response.status_code in (200, 202), response.text
        assert int(response.headers["Retry-After"]) >= 0
        location = response.headers["Location"]
        assert urlsplit(location).path == POLL
        assert parse_qs(urlsplit(location).query)["state"]
        self.next = location
        return response


def conflict(base_url: str, scope: str, key: str) -> str:
    """A claim, then the same key with changed data: the service opens a conflict."""
    claim = {"scope": scope, "key": key, "runId": "run-1", "fingerprint": "v1"}
    first = requests.post(f"{base_url}/api/claims", json=claim, timeout=10).json()
    requests.post(
        f"{base_url}/api/claims/{first['claimId']}/result",
        json={"claimToken": first["claimToken"], "outcome": "succeeded", "targetRecordId": "R-1"},
        timeout=10,
    ).raise_for_status()
    answer = requests.post(
        f"{base_url}/api/claims", json={**claim, "runId": "run-2", "fingerprint": "v2"}, timeout=10
    ).json()
    assert answer["decision"] == "conflict"
    conflict_id: str = answer["conflictId"]
    return conflict_id


@pytest.fixture
def scope() -> str:
    return f"trigger-{uuid.uuid4().hex[:12]}"


def test_first_poll_starts_from_now_with_202(base_url: str, scope: str) -> None:
    conflict(base_url, scope, "before-the-trigger")
    response = Poller(base_url, scope).poll()
    assert response.status_code == 202
    assert response.content == b""


def test_new_conflict_is_delivered_once_with_200(base_url: str, scope: str, definition: dict[str, Any]) -> None:
    poller = Poller(base_url, scope)
    assert poller.poll().status_code == 202
    conflict_id = conflict(base_url, scope, "SO-1")

    delivered = poller.poll()
    assert delivered.status_code == 200
    assert [item["conflictId"] for item in delivered.json()["value"]] == [conflict_id]
    batch = {**resolve(definition, operation(definition, "OnConflictReported").spec["responses"]["200"]["schema"])}
    jsonschema.Draft4Validator({**batch, "definitions": definition["definitions"]}).validate(delivered.json())

    again = poller.poll()
    assert again.status_code == 202, "a conflict is delivered once"


def test_state_advances_only_with_new_conflicts(base_url: str, scope: str) -> None:
    poller = Poller(base_url, scope)
    poller.poll()
    quiet = poller.next
    assert poller.poll().status_code == 202
    assert poller.next == quiet, "nothing new keeps the state"
    conflict(base_url, scope, "SO-2")
    assert poller.poll().status_code == 200
    assert poller.next != quiet


def test_several_conflicts_arrive_in_one_batch_oldest_first(base_url: str, scope: str) -> None:
    poller = Poller(base_url, scope)
    poller.poll()
    opened = [conflict(base_url, scope, f"SO-{n}") for n in range(3)]
    delivered = poller.poll()
    assert [item["conflictId"] for item in delivered.json()["value"]] == opened


def test_conflicts_of_another_scope_are_not_delivered(base_url: str, scope: str) -> None:
    poller = Poller(base_url, scope)
    poller.poll()
    conflict(base_url, scope + "-other", "SO-3")
    assert poller.poll().status_code == 202


def test_invalid_scope_is_a_400_error_body(base_url: str) -> None:
    response = requests.get(f"{base_url}{POLL}?scope=not%20a%20scope", timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_a_backlog_drains_at_once_and_then_the_engine_waits(base_url: str, scope: str) -> None:
    poller = Poller(base_url, scope)
    poller.poll()
    opened = [conflict(base_url, scope, f"SO-{n}") for n in range(55)]

    full, rest, quiet = poller.poll(), poller.poll(), poller.poll()

    # A full batch may have more behind it: Retry-After 0, not a minute per 50 conflicts (issue 13).
    assert (full.status_code, len(full.json()["value"]), full.headers["Retry-After"]) == (200, 50, "0")
    assert (rest.status_code, len(rest.json()["value"]), rest.headers["Retry-After"]) == (200, 5, "60")
    assert (quiet.status_code, quiet.headers["Retry-After"]) == (202, "60")
    delivered = [item["conflictId"] for answer in (full, rest) for item in answer.json()["value"]]
    assert delivered == opened
