"""The contract's defaults and bounds: the service applies them, the API models check them.

They live in the domain so that the decision and retention code does not read them from the wire
models, and an API change cannot move them by accident.
"""

DEFAULT_LEASE_SECONDS = 300
MIN_LEASE_SECONDS = 15
MAX_LEASE_SECONDS = 86_400
DEFAULT_RETENTION_DAYS = 90
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 3650
# What a flow may store with a result or a conflict: small enough for one Table Storage row (issue 9).
DATA_LIMIT_BYTES = 16 * 1024
DETAILS_LIMIT_BYTES = 8 * 1024
