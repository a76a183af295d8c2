"""Personal data in what a request stores besides its key: one walk of its stored fields, under one policy.

Checked at the edge, on the wire's request, before its command reaches a service: the fields are
named as the caller sent them (``data.customer.email``), and a refused request has read nothing.

Flows store result data, target record ids, error texts, release reasons and conflict reports as
sent; people store review and resolution notes, a flow's notes and a scope's description. Each
string there (in JSON, every member's name and value and every array item, however nested) is read
by the detectors of :mod:`oncegate.domain.sensitive`, with the names of the members that hold it
(``cardNumber`` says its digits are a card's). Neighbouring strings, of one object or one array,
are also read together, as one text: a card number split into two fields (``"4111 1111"``,
``"1111 1111"``) is one card. All under ``ONCEGATE_SENSITIVE_DATA``:

- ``reject``: the request is refused before the service reads or writes anything for it, with
  ``400 sensitive_data`` naming each field (``data.customer.email``), never the value;
- ``warn``: it is stored, and the answer carries the warning ``sensitive_data``;
- ``off``: nothing is looked at.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from oncegate.domain.sensitive import SensitivePolicy, sensitive_findings
from oncegate.domain.warnings import SENSITIVE_DATA
from oncegate.errors import SensitiveData

if TYPE_CHECKING:
    from oncegate.models import ClaimView, ConflictView, FlowView, ScopeView

logger = logging.getLogger(__name__)

# In a target, a member name that is itself personal data: the target must not quote it.
HIDDEN_NAME = "*"

# The fields each request stores as sent. Left out on purpose, and listed in NOT_LOOKED_AT:
# - the key: only its HMAC is stored, and it has its own check (ONCEGATE_SENSITIVE_KEYS);
# - the payload: only its keyed fingerprint is stored;
# - the reviewer: the processing record names who decided, on purpose; a flow's or scope's owner is
#   the contact who answers for it, on purpose too;
# - the run id and flow: the caller's run as Power Automate names it, kept to recognise the run;
# - tokens, outcomes, decisions, flags, numbers, presets and scope names: no free text;
# - how long a run waits for the holder: stored nowhere (the poll address carries the run's request);
# - fingerprint rules: pointers name members of a payload a scope's owner chose, and Dataverse's annotations
#   read as e-mail addresses (totalamount@OData.Community.Display.V1.FormattedValue) to the check.
# By the model's name (``oncegate.models``): a process checks the requests of its actions without importing the others'.
STORED_FIELDS: dict[str, tuple[str, ...]] = {
    "ClaimRequest": ("source", "reference"),
    "ClaimItem": ("source", "reference"),
    "PerformRequest": ("source", "reference"),
    "RecordResultRequest": ("target_record_id", "data", "error"),
    "ReleaseRequest": ("reason",),
    "ReviewClaimRequest": ("note", "target_record_id", "data"),
    "ReportConflictRequest": ("source", "reason", "details"),
    "ResolveConflictRequest": ("note",),
    "RegisterFlowRequest": ("notes",),
    "SetScopeRequest": ("description", "key_pattern"),
}
NOT_LOOKED_AT = frozenset(
    {"key", "payload", "fingerprint", "reviewer", "owner", "run_id", "flow", "name", "environment", "scope"}
    | {"claim_token", "outcome", "retryable", "decision", "enabled", "lease_seconds", "retention_days", "attempt"}
    | {"horizon_days"}
    # Perform once's call: sent to the target, never stored (the claim keeps the target's name and the method).
    | {"target", "method", "path", "headers", "body"}
    | {"wait", "max_wait_seconds", "fingerprint_include", "fingerprint_ignore", "fingerprint_preset"}
)
View = TypeVar("View", "ClaimView", "ConflictView", "FlowView", "ScopeView")


def stored_findings(request: BaseModel) -> list[tuple[str, str]]:
    """Each place in ``request``'s stored fields that seems to carry personal data: (target, what), in order."""
    fields = type(request).model_fields
    # A field not sent (None) holds nothing to find: not walked (most claims send no source or reference).
    return [
        found
        for name in STORED_FIELDS.get(type(request).__name__, ())
        if (value := getattr(request, name)) is not None
        for found in _walk(value, fields[name].alias or name)
    ]


def value_findings(value: Any, path: str) -> list[str]:
    """What personal data each string of ``value`` seems to carry, named by place (``response.body.customer``):
    the check of what a service keeps that no request sent (a target's answer, for Perform once)."""
    return [what for _, what in _walk(value, path)]


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """The personal data in every string of ``value``: members' names and values, array items, however nested."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:  # iterative: data may be nested as deep as the JSON decoder allows
        node, where = stack.pop()
        if isinstance(node, str):
            if found := sensitive_findings(node, context=where):
                yield where, f"{where} seems to contain {_listed(found)}"
            continue
        children: list[tuple[Any, str]] = []
        if isinstance(node, dict):
            for name, child in node.items():
                named = sensitive_findings(name)
                if named:
                    yield where, f"a member name in {where} seems to contain {_listed(named)}"
                children.append((child, f"{where}.{HIDDEN_NAME if named else name}"))
        elif isinstance(node, list):
            children = [(child, f"{where}.{index}") for index, child in enumerate(node)]
        yield from _split(children)
        stack.extend(reversed(children))


def _split(children: list[tuple[Any, str]]) -> Iterator[tuple[str, str]]:
    """What two neighbouring strings carry together and neither alone: a number split across two fields."""
    for (first, first_at), (second, second_at) in itertools.pairwise(children):
        if not (isinstance(first, str) and isinstance(second, str)):
            continue
        # A space between: the two fields read as two groups of one number ("4111 1111" and "1111 1111").
        together = sensitive_findings(f"{first} {second}", context=f"{first_at} {second_at}")
        if not together:
            continue
        alone = {*sensitive_findings(first, context=first_at), *sensitive_findings(second, context=second_at)}
        if split := [finding for finding in together if finding not in alone]:
            yield first_at, f"{first_at} and {second_at} together seem to contain {_listed(split)}"


def _listed(findings: list[str]) -> str:
    return " and ".join(findings)


class SensitiveDataGuard:
    """The one check of what a request stores; each action calls it first, before any read or write."""

    def __init__(self, policy: SensitivePolicy) -> None:
        self.policy = policy

    def check(self, request: BaseModel, subject: str) -> list[str]:
        """The warnings ``request`` earned; under ``reject``, ``SensitiveData`` (nothing is stored yet).

        ``subject`` names what the request is about (``claim <id>``) in the warning logged under ``warn``.
        """
        if self.policy is SensitivePolicy.OFF:
            return []
        found = stored_findings(request)
        if not found:
            return []
        if self.policy is SensitivePolicy.REJECT:
            raise SensitiveData(_refusal(found), target=found[0][0], details=found)
        # Named, never quoted: where personal data is stored, for whoever means to turn reject on.
        logger.warning(
            "Personal data stored as sent for %s (ONCEGATE_SENSITIVE_DATA=warn): %s",
            subject,
            "; ".join(what for _, what in found),
        )
        return [SENSITIVE_DATA]


def _refusal(found: list[tuple[str, str]]) -> str:
    more = f" (and {len(found) - 1} more, listed in details)" if len(found) > 1 else ""
    return (
        f"This request would store personal data: {found[0][1]}{more}. Keep it out of what OnceGate stores "
        "(an internal record id instead). Nothing was stored."
    )


def warned(view: View, warnings: list[str]) -> View:
    """``view`` with ``warnings`` added to those it carries."""
    if not warnings:
        return view
    return view.model_copy(update={"warnings": [*(view.warnings or []), *warnings]})
