"""A wait's poll address fits its own ticket limit whatever the run sent (issue 31).

256 control characters in the run id, the flow and the reference made a ticket of 8,614 characters,
over the 8,192 its poll address takes: the 202's own ``Location`` answered 400. The ticket is now
bounded by its format (a character takes at most 4 bytes); a ticket of the first format, handed out
before, is still read.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from oncegate import bootstrap
from oncegate.cursors import CursorSeal
from oncegate.domain.keys import KeyHasher
from oncegate.domain.records import Flow
from oncegate.domain.waiting import Unwritten, Waiting, WaitingIdentity
from oncegate.entrypoints import waits
from oncegate.entrypoints.operations.claims import WAIT_FOR_CLAIM
from oncegate.models.claim_waits import MAX_TICKET_LENGTH
from tests.http.client import Api, Reply

# A character as wide as the format writes any: a control character (6 bytes as JSON), one outside the BMP (4 bytes
# in UTF-8), a quote and a backslash (2 bytes as JSON).
WIDEST = ["\x01", "\U0010fffd", '"', "\\"]
SCOPE = "erp.create-order"


def worst_body(run_id: str, character: str, **fields: Any) -> dict[str, Any]:
    """Check and claim (wait) with the run id, the flow and the reference each 256 of ``character``."""
    body = {
        "scope": SCOPE,
        "key": "ORDER-1001",
        "runId": run_id,
        "flow": {"name": character * 256, "environment": character * 256},
        "reference": character * 256,
        "source": "s" * 64,
        "payload": {"order": "SO-1"},
        "wait": True,
    }
    return {**body, **fields}


def ticket_of(reply: Reply) -> str:
    ticket: str = dict(parse_qsl(urlsplit(reply.headers["location"]).query))["ticket"]
    return ticket


@pytest.mark.parametrize("character", WIDEST, ids=["control", "astral", "quote", "backslash"])
def test_the_poll_address_of_the_widest_run_is_answered(api: Api, character: str) -> None:
    holder = api.call("check_and_claim", {**worst_body("run-holder", "h"), "wait": False})
    assert holder.body["decision"] == "proceed", holder.body
    waiting_run = character * 256

    waiting = api.call("check_and_claim", worst_body(waiting_run, character))
    assert waiting.status == 202, waiting.body
    polled = api.follow(waiting.headers["location"])
    api.call("release_claim", {"claimToken": holder.body["claimToken"]}, route={"claimId": holder.body["claimId"]})
    granted = api.follow(waiting.headers["location"])

    assert len(ticket_of(waiting)) <= MAX_TICKET_LENGTH
    assert polled.status == 202, polled.body
    assert (granted.status, granted.body["decision"]) == (200, "proceed"), granted.body
    claim = api.call("get_claim", route={"claimId": granted.body["claimId"]}).body
    assert (claim["runId"], claim["flow"]["environment"]) == (waiting_run, waiting_run)


def widest_waiting(character: str) -> Waiting:
    """A waiting run as long as one can be: every text at its limit, three secrets, two versions of the rules."""
    hashers = [KeyHasher(f"secret-{n}-" + "k" * 40) for n in range(3)]
    fingerprints = [hasher.fingerprint(supplied=None, payload={"order": "SO-1"}) for hasher in hashers]
    return Waiting(
        scope="s" * 64,
        run_id=character * 256,
        flow=Flow(character * 256, character * 256),
        lease_seconds=86_400,
        identities=tuple(
            WaitingIdentity(hasher.key_id, hasher.claim_id("s" * 64, "k" * 512), {1: made.keyed, 99_999: made.keyed})
            for hasher, made in zip(hashers, fingerprints, strict=True)
            if made is not None
        ),
        rules_version=99_999,
        deadline=datetime(2026, 12, 6, 18, 0, 0, 123_456, tzinfo=UTC),
        since=datetime(2026, 12, 5, 18, 0, 0, 123_456, tzinfo=UTC),
        source="s" * 64,
        reference=character * 256,
        granted_to=hashers[0].signed_in_digest("someone@contoso.com"),
        unwritten=Unwritten(
            hashers[0].claim_id("s" * 64, "k" * 512),
            "series-" + "f" * 32,
            2**31,
            2**31,
            datetime(2026, 12, 6, 17, 59, 59, 123_456, tzinfo=UTC),
        ),
    )


@pytest.mark.parametrize("character", WIDEST, ids=["control", "astral", "quote", "backslash"])
def test_a_ticket_is_within_its_limit_by_its_format_and_reads_back_whole(character: str) -> None:
    seal = CursorSeal.from_secret("k" * 40)
    widest = widest_waiting(character)

    address = WAIT_FOR_CLAIM.path(claimId="c" * 32)
    ticket = waits.seal(widest, address, seal)

    assert len(ticket) <= MAX_TICKET_LENGTH
    assert waits.open_ticket(ticket, address, seal) == widest


def first_format(ticket: str, claim_id: str, seal: CursorSeal) -> str:
    """The same waiting run in a ticket as the release before issue 31 wrote it: JSON, in base64url, sealed for
    the claim's poll address as that release spelled it (tickets in flight across an upgrade carry it)."""
    address = f"claims/{claim_id}/wait"
    waiting = waits.open_ticket(ticket, address, seal)
    fields = {
        "v": 1,
        "scope": waiting.scope,
        "run": waiting.run_id,
        "flow": [waiting.flow.name, waiting.flow.environment] if waiting.flow else None,
        "lease": waiting.lease_seconds,
        "ids": [[known.key_id, known.claim_id, known.fingerprints] for known in waiting.identities],
        "rules": waiting.rules_version,
        "until": waiting.deadline.astimezone(UTC).isoformat(),
        "source": waiting.source,
        "ref": waiting.reference,
        "to": waiting.granted_to,
    }
    text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False).encode()
    return seal.seal(base64.urlsafe_b64encode(text).decode("ascii").rstrip("="), address)


def test_a_ticket_of_the_first_format_still_live_is_still_answered(api: Api) -> None:
    holder = api.call("check_and_claim", {**worst_body("run-holder", "h"), "wait": False})
    waiting = api.call("check_and_claim", worst_body("run-waiting", "w"))
    assert waiting.status == 202, waiting.body
    parts = urlsplit(waiting.headers["location"])
    old = first_format(ticket_of(waiting), holder.body["claimId"], bootstrap.get_cursor_seal())
    location = urlunsplit(parts._replace(query=urlencode({"ticket": old})))

    still_waiting = api.follow(location)
    api.call("release_claim", {"claimToken": holder.body["claimToken"]}, route={"claimId": holder.body["claimId"]})
    granted = api.follow(location)

    assert still_waiting.status == 202, still_waiting.body
    assert (granted.status, granted.body["decision"]) == (200, "proceed"), granted.body


def test_a_ticket_of_a_format_this_release_does_not_know_is_refused_in_plain_words() -> None:
    seal = CursorSeal.from_secret("k" * 40)
    address = WAIT_FOR_CLAIM.path(claimId="c")
    unknown = seal.seal(base64.urlsafe_b64encode(b"\x07later").decode("ascii").rstrip("="), address)

    with pytest.raises(Exception, match="not one this release reads") as refused:
        waits.open_ticket(unknown, address, seal)
    assert getattr(refused.value, "target", None) == "ticket"


def test_a_ticket_of_the_release_before_issue_36_opens_without_answers_left_unwritten() -> None:
    """Its fields end before the answers its polls left unwritten: it opens, and its polls count as they did."""
    seal = CursorSeal.from_secret("k" * 40)
    widest = widest_waiting("a")
    packed = waits._pack(waits._texts(widest)[: waits.BEFORE_ISSUE_36])
    at = WAIT_FOR_CLAIM.path(claimId="c" * 32)
    ticket = seal.seal(base64.urlsafe_b64encode(packed).decode("ascii").rstrip("="), at)

    assert waits.open_ticket(ticket, at, seal) == replace(widest, unwritten=None)
