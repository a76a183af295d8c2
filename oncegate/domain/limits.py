"""The contract's defaults and bounds: the service applies them, the API models check them, the stores'
contract suite holds every store to them.

They live in the domain so that the decision and retention code does not read them from the wire
models, and an API change cannot move them by accident.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oncegate.domain.records import ScopeRecord

DEFAULT_LEASE_SECONDS = 300
MIN_LEASE_SECONDS = 15
MAX_LEASE_SECONDS = 86_400
DEFAULT_RETENTION_DAYS = 90
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 3650
# How long a succeeded claim's key is recognised after its last change: the claim for its retention, then its
# tombstone. A year by default, as a late replay (a run resubmitted, a polling trigger turned back on) comes months on.
DEFAULT_HORIZON_DAYS = 365
MAX_HORIZON_DAYS = 3650
# The claims a purge reads per page (oncegate.service.retention), unless told, and at most.
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# What a flow may store with a result or a conflict: small enough for one Table Storage row (issue 9).
DATA_LIMIT_BYTES = 16 * 1024
DETAILS_LIMIT_BYTES = 8 * 1024
# How deep result data, conflict details and a target's kept answer may nest (objects and arrays): a page of views
# adds a few levels around them, and the JSON writer of every answer stops at 255 levels. Deeper, one stored value
# made every answer showing it a 500, a list's included (List conflicts, for every caller).
MAX_NESTING = 64
# The longest target record id and error text a result may carry.
TARGET_RECORD_ID_MAX_LENGTH = 512
ERROR_MAX_LENGTH = 4096
# The most items one bulk call takes: 100 keeps a Check and claim many within a minute of the platform's
# 500 calls a minute per connection even at full size, and its answer well under the designer's limits.
MAX_ITEMS = 100


def json_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON form, the size limits' unit."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def horizon_days(record: ScopeRecord) -> int:
    """How long after its last change a succeeded claim's key is recognised: never shorter than the retention."""
    horizon = record.horizon_days or DEFAULT_HORIZON_DAYS
    return max(horizon, record.retention_days or DEFAULT_RETENTION_DAYS)


def json_depth(value: Any) -> int:
    """How deep ``value`` nests: 0 for a scalar, 1 for an object or array of scalars (or empty)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:  # iterative: the value may nest as deep as the JSON decoder allows
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (node.values() if isinstance(node, dict) else node))
    return deepest
