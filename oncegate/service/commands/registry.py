"""What Register flow and Set scope take: only the settings a request names change (issue 31)."""

from __future__ import annotations

from oncegate.domain.copies import frozen
from oncegate.domain.fingerprint_rules import FingerprintPreset
from oncegate.domain.records import Flow
from oncegate.service.commands import KEEP, Unchanged


@frozen(kw_only=True)
class RegisterFlow:
    """Register a flow, or change its registration.

    A setting left ``KEEP`` stays as the registration holds it; None resets it to its default (no owner, no
    notes, enabled), so that no request resets what an operator set without naming it.
    """

    flow: Flow
    owner: str | Unchanged | None = KEEP
    enabled: bool | Unchanged | None = KEEP
    notes: str | Unchanged | None = KEEP


@frozen(kw_only=True)
class SetScope:
    """A scope's owner, default lease, retention, horizon, description, key pattern and fingerprint rules.

    A setting left ``KEEP`` stays as the scope holds it; None (no pointers, for the rules' lists) resets it to
    its default. Only what the request names changes, so that no request resets what an operator set.
    """

    scope: str
    owner: str | Unchanged | None = KEEP
    lease_seconds: int | Unchanged | None = KEEP
    retention_days: int | Unchanged | None = KEEP
    horizon_days: int | Unchanged | None = KEEP
    description: str | Unchanged | None = KEEP
    key_pattern: str | Unchanged | None = KEEP
    # The fingerprint rules (issue 25): JSON Pointers, checked for shape at the edge.
    fingerprint_include: tuple[str, ...] | Unchanged = KEEP
    fingerprint_ignore: tuple[str, ...] | Unchanged = KEEP
    fingerprint_preset: FingerprintPreset | Unchanged | None = KEEP
