"""The poll address of Check and claim (wait), at the HTTP edge: the waiting run sealed into ``ticket`` (issue 25).

A ``202 Accepted`` answer's ``Location`` is ``/api/claims/{claimId}/wait?ticket=...``: the flow engine
GETs it after ``Retry-After`` seconds until it answers something else. The ticket is the run's
:class:`~oncegate.domain.waiting.Waiting` in base64url, sealed with the service's cursor seal
(``oncegate.cursors``) for that claim's poll list: a ticket tampered with, made by another service,
or moved to another claim's address is refused as a 400 naming ``ticket`` before it is read. It
carries claim ids and keyed fingerprints, never the business key or its data.

Its size is bounded by its format, whatever the run sent: each field is its UTF-8 bytes after a
two-byte length, so a character takes at most 4 bytes, and the run id, the flow and the reference
(256 characters each at most) fit the ticket's limit with room to spare. The first format wrote
JSON, where a control character takes 6 bytes: 256 of them in the run id, the flow and the
reference made a ticket longer than the limit, which its own poll address then refused (issue 31).
A ticket of that first format is still read, until the last of them expires.
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
# The ticket's own format, its first byte, so that a later release can tell (and refuse) one of another shape.
FORMAT = 2
# The first format: JSON, whose first byte is "{". Still read: a wait lasts a day at most, an address an hour more.
JSON_FORMAT = 1
# A field's length takes two bytes; this one stands for a field left out (None).
ABSENT = 0xFFFF


def seal(waiting: Waiting, address: str, seal_: CursorSeal) -> str:
    """The ticket of ``waiting``, sealed for one claim's poll address (its path below ``/api/``, which the
    operation table gives), so that a ticket is refused at any other claim's address."""
    packed = _pack(_texts(waiting))
    return seal_.seal(base64.urlsafe_b64encode(packed).decode("ascii").rstrip("="), address)


def open_ticket(ticket: str, address: str, seal_: CursorSeal) -> Waiting:
    """The waiting run a ticket holds; 400 naming ``ticket`` unless this service sealed it for this address."""
    refusal = (
        "ticket is not one this service handed out for this claim's wait: it was changed, or belongs to another "
        "claim. Follow the Location of the last answer as it was given, or ask Check and claim again."
    )
    plain = seal_.open(ticket, address, target=TICKET, refusal=refusal)
    try:
        packed = base64.urlsafe_b64decode(plain + "=" * (-len(plain) % 4))
        if packed[:1] == b"{":
            return _waiting_of_json(json.loads(packed))
        if packed[:1] != bytes([FORMAT]):
            raise ValueError(f"format {packed[:1]!r}")
        return _waiting(_unpack(packed[1:]))
    except (binascii.Error, ValueError, KeyError, TypeError, IndexError) as exc:
        # Sealed by this service, so only a release with another format gets here.
        raise InvalidRequest(
            "This poll address is not one this release reads: ask Check and claim again.", target=TICKET
        ) from exc


def _texts(waiting: Waiting) -> list[str | None]:
    """The ticket's fields, in their order: text only; the identities as compact JSON, whose text is ASCII."""
    flow = waiting.flow
    identities = [
        [known.key_id, known.claim_id, {str(version): keyed for version, keyed in known.fingerprints.items()}]
        for known in waiting.identities
    ]
    return [
        waiting.scope,
        waiting.run_id,
        flow.name if flow else None,
        flow.environment if flow else None,
        str(waiting.lease_seconds),
        json.dumps(identities, separators=(",", ":")),
        str(waiting.rules_version),
        waiting.deadline.astimezone(UTC).isoformat(),
        waiting.since.astimezone(UTC).isoformat(),
        waiting.source,
        waiting.reference,
        waiting.granted_to,
    ]


def _waiting(texts: list[str | None]) -> Waiting:
    (
        scope,
        run_id,
        flow_name,
        flow_environment,
        lease,
        identities,
        rules,
        until,
        since,
        source,
        reference,
        granted_to,
    ) = texts
    return Waiting(
        scope=_given(scope),
        run_id=_given(run_id),
        flow=Flow(flow_name, flow_environment) if flow_name is not None and flow_environment is not None else None,
        lease_seconds=int(_given(lease)),
        identities=_identities(json.loads(_given(identities))),
        rules_version=int(_given(rules)),
        deadline=datetime.fromisoformat(_given(until)),
        since=datetime.fromisoformat(_given(since)),
        source=source,
        reference=reference,
        granted_to=granted_to,
    )


def _given(text: str | None) -> str:
    if text is None:
        raise ValueError("a field every ticket holds is left out")
    return text


def _identities(listed: list[Any]) -> tuple[WaitingIdentity, ...]:
    return tuple(
        WaitingIdentity(key_id, claim_id, {int(version): keyed for version, keyed in fingerprints.items()})
        for key_id, claim_id, fingerprints in listed
    )


def _pack(texts: list[str | None]) -> bytes:
    packed = bytearray([FORMAT])
    for text in texts:
        if text is None:
            packed += ABSENT.to_bytes(2, "big")
        else:
            data = text.encode("utf-8")
            packed += len(data).to_bytes(2, "big") + data
    return bytes(packed)


def _unpack(packed: bytes) -> list[str | None]:
    texts: list[str | None] = []
    at = 0
    while at < len(packed):
        size = int.from_bytes(packed[at : at + 2], "big")
        at += 2
        if size == ABSENT:
            texts.append(None)
            continue
        if at + size > len(packed):
            raise ValueError("a field runs past the ticket's end")
        texts.append(packed[at : at + size].decode("utf-8"))
        at += size
    return texts


def _waiting_of_json(fields: dict[str, Any]) -> Waiting:
    """A ticket of the first format (JSON), handed out before issue 31 and perhaps still polled."""
    if fields.get("v") != JSON_FORMAT:
        raise ValueError(f"format {fields.get('v')}")
    flow = fields["flow"]
    deadline = datetime.fromisoformat(fields["until"])
    return Waiting(
        scope=fields["scope"],
        run_id=fields["run"],
        flow=Flow(flow[0], flow[1]) if flow else None,
        lease_seconds=int(fields["lease"]),
        identities=_identities(fields["ids"]),
        rules_version=int(fields["rules"]),
        deadline=deadline,
        # A ticket of 0.4.0 does not say when its wait began: read as begun as long ago as a wait may last, its
        # polls come as that release paced them (the lease left, at most a minute and a half).
        since=datetime.fromisoformat(fields["from"]) if "from" in fields else deadline - MAX_WAIT,
        source=fields["source"],
        reference=fields["ref"],
        granted_to=fields["to"],
    )
