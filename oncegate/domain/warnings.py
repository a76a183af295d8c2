"""Every warning an answer may carry, in one place: the codes of the wire's ``warnings`` list.

A warning is worth a look but no reason to stop; docs/contract.md (*Warnings*) says what each means,
and a test holds that table to this module.
"""

from __future__ import annotations

# Neither payload nor fingerprint was sent: changed data cannot be detected, only the key is compared.
NO_FINGERPRINT = "no_fingerprint"
# No flow was sent: copies of a flow cannot be told apart, and the same run asking again is not recognised.
NO_FLOW = "no_flow"
# The claim is held by another flow or environment than the caller's (issue 5).
ANOTHER_FLOW_COPY = "another_flow_copy"
# The request names another source system than the claim's; the claim keeps its first (issue 16).
SOURCE_DIFFERS = "source_differs"
# The key seems to carry personal data, accepted because ONCEGATE_SENSITIVE_KEYS=warn.
SENSITIVE_KEY = "sensitive_key"
# A field stored as sent seems to carry personal data, accepted because ONCEGATE_SENSITIVE_DATA=warn.
SENSITIVE_DATA = "sensitive_data"

# An include pointer of the scope's fingerprint rules matched nothing in the payload: mistyped, every payload
# would fingerprint alike and real changes be answered duplicate (issue 33).
RULE_MATCHED_NOTHING = "rule_matched_nothing"

# Perform once (issue 34): a part of the target's answer was not kept (personal data under reject, or over the data
# limit); the answer and the claim leave it out. Never a refusal: the target has acted.
RESPONSE_NOT_KEPT = "response_not_kept"
# Perform once: the target answered and the store failed to record it; the claim stays in doubt, and the next
# Perform once after the call's deadline looks it up.
RESULT_NOT_RECORDED = "result_not_recorded"

WARNINGS = (
    NO_FINGERPRINT,
    NO_FLOW,
    ANOTHER_FLOW_COPY,
    SOURCE_DIFFERS,
    SENSITIVE_KEY,
    SENSITIVE_DATA,
    RULE_MATCHED_NOTHING,
    RESPONSE_NOT_KEPT,
    RESULT_NOT_RECORDED,
)
