"""The poll of Check and claim's wait: the run's request, sealed in the address the 202 answer gave.

Apart from Check and claim's body (``claim_requests``): a first Check and claim never polls, and a new process makes
this model only when the wait is first polled (issue 36's cold start).
"""

from typing import Annotated

from pydantic import Field

from oncegate.models.base import INTERNAL, _Query, designer

# A sealed ticket holds the run id, flow and reference (up to 256 characters each, 4 bytes a character at most in
# its format) and a few digests: 6,874 characters at the very most (tests/http/test_wait_ticket_size.py).
MAX_TICKET_LENGTH = 8192


class WaitQuery(_Query):
    """A poll of Check and claim (wait): the run's request, sealed in the address the 202 answer gave."""

    ticket: Annotated[
        str,
        Field(min_length=1, max_length=MAX_TICKET_LENGTH),
        designer("Ticket", "The waiting run's request, sealed; the Location header carries it.", INTERNAL),
    ]
