"""The poll address of Check and claim (wait), at the HTTP edge: the waiting run sealed into ``ticket`` (issue 25).

A ``202 Accepted`` answer's ``Location`` is ``/api/claims/{claimId}/wait?ticket=...``: the flow engine
GETs it after ``Retry-After`` seconds until it answers something else. The ticket is the run's
:class:`~oncegate.domain.waiting.Waiting` as compact JSON in base64url, sealed with the service's cursor
seal (``oncegate.cursors``) for that claim's poll list: a ticket tampered with, made by another
service, or moved to another claim's address is refused as a 400 naming ``ticket`` before it is read.
It carries claim ids and keyed fingerprints, never the business key or its data.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from oncegate.cursors import CursorSeal
from oncegate.domain.records import Flow
from oncegate.domain.waiting import MAX_MAX_WAIT_SECONDS, Waiting, WaitingIdentity
from oncegate.errors import InvalidRequest
from oncegate.service.waits import TICKET

MAX_WAIT = timedelta(seconds=MAX_MAX_WAIT_SECONDS)
# The ticket's own format, so that a later release can tell (and refuse) one of another shape.
FORMAT = 1


def poll_list(claim_id: str) -> str:
    """The list a ticket is sealed for: one claim's polls, so a ticket is refused at any other claim's address."""
    return f"claims/{claim_id}/wait"


def seal(waiting: Waiting, claim_id: str, seal_: CursorSeal) -> str:
    """The ticket of ``waiting``, sealed for the poll address of ``claim_id``."""
    text = json.dumps(_fields(waiting), separators=(",", ":"), ensure_ascii=False).encode()
    return seal_.seal(base64.urlsafe_b64encode(text).decode("ascii").rstrip("="), poll_list(claim_id))


def open_ticket(ticket: str, claim_id: str, seal_: CursorSeal) -> Waiting:
    """The waiting run a ticket holds; 400 naming ``ticket`` unless this service sealed it for this claim."""
    refusal = (
        "ticket is not one this service handed out for this claim's wait: it was changed, or belongs to another "
        "claim. Follow the Location of the last answer as it was given, or ask Check and claim again."
    )
    plain = seal_.open(ticket, poll_list(claim_id), target=TICKET, refusal=refusal)
    try:
        fields = json.loads(base64.urlsafe_b64decode(plain + "=" * (-len(plain) % 4)))
        if fields.get("v") != FORMAT:
            raise ValueError(f"format {fields.get('v')}")
        return _waiting(fields)
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        # Sealed by this service, so only a release with another format gets here.
        raise InvalidRequest(
            "This poll address is not one this release reads: ask Check and claim again.", target=TICKET
        ) from exc


def _fields(waiting: Waiting) -> dict[str, Any]:
    return {
        "v": FORMAT,
        "scope": waiting.scope,
        "run": waiting.run_id,
        "flow": [waiting.flow.name, waiting.flow.environment] if waiting.flow else None,
        "lease": waiting.lease_seconds,
        "ids": [
            [known.key_id, known.claim_id, {str(version): keyed for version, keyed in known.fingerprints.items()}]
            for known in waiting.identities
        ],
        "rules": waiting.rules_version,
        "until": waiting.deadline.astimezone(UTC).isoformat(),
        "from": waiting.since.astimezone(UTC).isoformat(),
        "source": waiting.source,
        "ref": waiting.reference,
        "to": waiting.granted_to,
    }


def _waiting(fields: dict[str, Any]) -> Waiting:
    flow = fields["flow"]
    deadline = datetime.fromisoformat(fields["until"])
    return Waiting(
        scope=fields["scope"],
        run_id=fields["run"],
        flow=Flow(flow[0], flow[1]) if flow else None,
        lease_seconds=int(fields["lease"]),
        identities=tuple(
            WaitingIdentity(key_id, claim_id, {int(version): keyed for version, keyed in fingerprints.items()})
            for key_id, claim_id, fingerprints in fields["ids"]
        ),
        rules_version=int(fields["rules"]),
        deadline=deadline,
        # A ticket of 0.4.0 does not say when its wait began: read as begun as long ago as a wait may last, its
        # polls come as that release paced them (the lease left, at most a minute and a half).
        since=datetime.fromisoformat(fields["from"]) if "from" in fields else deadline - MAX_WAIT,
        source=fields["source"],
        reference=fields["ref"],
        granted_to=fields["to"],
    )
