"""What one connection of ``oncegate serve`` has sent of its next request, gathered without a thread.

The bytes arrive as they come, a byte at a time from a slow client, and wait here until the next
step of the connection can run without waiting for the client: a request's head is whole (or can
be refused as it stands), the body its head declared is whole, or the client closed. Until then a
connection holds no handler thread (issue 31: with the handler threads reading, 2 clients sending
their headers a byte at a time kept most health probes waiting, and 64 all of them).

Each step is also due at a time, answered then as late: a connection idle between requests is
closed; a head, like a body, must arrive as a whole within the idle time of its first byte; what
a client still sends after a 413 is read and thrown away for a bounded time and amount.
"""

from __future__ import annotations

import re
import time

# The stdlib's limits on a header section (http.client's _MAXLINE and _MAXHEADERS), the request line's too.
MAX_HEADER_LINE = 65536
MAX_HEADERS = 100
# The header fields in all (after the request line). The stdlib sets no such bound; here a head waits in memory
# for as long as its client takes to send it, so a thousand slow clients hold at most a thousand of these.
MAX_HEADER_BYTES = 65536
EMPTY_LINES = (b"\r\n", b"\n")
# The empty lines before a request line, dropped unread (RFC 9112 §2.2 asks a server to ignore at least one): at most
# a request line's bytes of them. Beyond, the first is read as the request line, of no words, and the connection
# closes: else a client sending nothing but empty lines was read for the whole idle time, as fast as it could send.
MAX_EMPTY_LINE_BYTES = MAX_HEADER_LINE
_LEADING_EMPTY_LINES = re.compile(rb"(?:\r?\n)*")


class Incoming:
    """The bytes of a connection's next request, and when what it awaits is due.

    It awaits, in turn: a head; once the head is read (:meth:`await_body`), the body it declared;
    after a request, the next head (:meth:`next_request`). After a refusal it may instead throw
    away what comes (:meth:`discard`). Not thread-safe: one thread at a time has the connection.
    """

    def __init__(self, idle_seconds: float) -> None:
        self._idle_seconds = idle_seconds
        self._bytes = bytearray()
        self.closed = False
        self._awaiting_head(time.monotonic())

    def _awaiting_head(self, now: float) -> None:
        self._head_end: int | None = None
        self._body_start = 0
        self._body_length: int | None = None
        self._discard_left: int | None = None
        self._line_start = self._scanned = self._lines = self._field_bytes = 0
        self._due_at = now + self._idle_seconds
        self._head_begun = False
        self._empty_bytes = 0
        self._begin_head(now)
        self._scan()

    def take(self, chunk: bytes) -> None:
        """What one read returned; ``b""`` when the client closed its side."""
        if not chunk:
            self.closed = True
        elif self._discard_left is not None:
            self._discard_left -= len(chunk)
        else:
            self._bytes += chunk
            if self._body_length is None and not self._head_begun:
                self._begin_head(time.monotonic())
            self._scan()

    def _begin_head(self, now: float) -> None:
        """Drop the empty lines before a request line (RFC 9112 §2.2: a client may send a CRLF after a body); at the
        head's first other byte, the head as a whole must arrive within the idle time from now. Empty lines alone
        never restart it: a client trickling them is closed as idle."""
        data = self._bytes
        empty = _LEADING_EMPTY_LINES.match(data)
        assert empty is not None  # matches zero lines too
        self._empty_bytes += empty.end()
        if self._empty_bytes > MAX_EMPTY_LINE_BYTES:
            self._head_begun = True  # read as a request line of no words: the connection closes unanswered
            return
        del data[: empty.end()]
        if data and data != b"\r":
            self._head_begun = True
            self._due_at = now + self._idle_seconds

    def due(self) -> bool:
        """Whether the next step can run without waiting for the client."""
        if self.closed:
            return True
        if self._discard_left is not None:
            return self._discard_left <= 0
        if self._body_length is not None:
            return len(self._bytes) >= self._body_start + self._body_length
        return self._head_end is not None

    def due_at(self) -> float:
        """The ``time.monotonic()`` at which the next step runs even though what it awaits is not all in."""
        return self._due_at

    @property
    def discarding(self) -> bool:
        return self._discard_left is not None

    @property
    def awaiting_body(self) -> bool:
        return self._body_length is not None

    @property
    def idle(self) -> bool:
        """Nothing of a next request has arrived."""
        return not self._bytes and self._body_length is None

    @property
    def head_in(self) -> bool:
        """The head is whole, or can be refused as it stands, or is all the client sent before it closed."""
        return self._head_end is not None or (self.closed and bool(self._bytes))

    def head(self) -> bytes:
        """The head's bytes; all those in, when the client closed before its end."""
        return bytes(self._bytes[: self._head_end]) if self._head_end is not None else bytes(self._bytes)

    def await_body(self, head_length: int, body_length: int) -> None:
        """The head took ``head_length`` bytes and declared a body of ``body_length``: it must arrive within the
        idle time as a whole, not a byte every few seconds for as long as the client likes."""
        self._body_start, self._body_length = head_length, body_length
        self._due_at = time.monotonic() + self._idle_seconds

    @property
    def body_length(self) -> int:
        """The length the head declared for its body."""
        assert self._body_length is not None
        return self._body_length

    def body(self) -> bytes:
        """The declared body, or the part of it in when the client closed or ran out of time."""
        assert self._body_length is not None
        return bytes(self._bytes[self._body_start : self._body_start + self._body_length])

    def next_request(self) -> None:
        """The request is answered: what followed its body (a request sent behind it) starts the next."""
        assert self._body_length is not None
        del self._bytes[: self._body_start + self._body_length]
        self._awaiting_head(time.monotonic())

    def answer_sent(self) -> None:
        """The rest of the last answer was taken by its client only now: the idle time before a next request
        starts again from here, not from the answer (the client was busy reading meanwhile)."""
        if self.idle and self._discard_left is None:
            self._due_at = time.monotonic() + self._idle_seconds

    def discard(self, head_length: int, budget: int, seconds: float) -> None:
        """Throw away what comes after the head, up to ``budget`` bytes (those already in count) or ``seconds``."""
        self._discard_left = budget - max(len(self._bytes) - head_length, 0)
        self._bytes.clear()
        self._due_at = time.monotonic() + seconds

    def end(self) -> None:
        """Nothing more is awaited: the connection closes (a discard done, say)."""
        self._discard_left = self._body_length = None

    def _scan(self) -> None:
        """Find the head's end, or the line that refuses it, among the bytes not yet scanned.

        As the handler reads the head (the request line, then fields up to an empty line): a line over
        MAX_HEADER_LINE, a field beyond MAX_HEADERS, fields over MAX_HEADER_BYTES in all, or a request line of
        fewer than three words (HTTP/0.9, or nothing the handler can read) ends the head here, for the handler
        to answer or refuse.
        """
        data = self._bytes
        # Only in the head's first read: tried again on every read of a slow client's request line, its two searches
        # of all the bytes in were quadratic (a 64 KiB request line a byte a read: 2.5 s of CPU, the scan's 0.03).
        if self._head_end is None and self._scanned == 0 and data and self._whole_head(data):
            return
        while self._head_end is None:
            newline = data.find(b"\n", max(self._scanned, self._line_start))
            if newline < 0:
                self._scanned = len(data)
                partial = len(data) - self._line_start
                # A lone CR may be the start of the empty line, which is no field's: it counts once more follows.
                fields = 0 if partial == 1 and data[-1] == 13 else partial
                if partial > MAX_HEADER_LINE or (self._lines and self._field_bytes + fields > MAX_HEADER_BYTES):
                    self._head_end = len(data)
                return
            line = data[self._line_start : newline + 1]
            self._line_start = self._scanned = newline + 1
            self._lines += 1
            if len(line) > MAX_HEADER_LINE:
                self._head_end = newline + 1
            elif self._lines == 1:
                # Split as the handler splits it: on the whitespace of the line read as Latin-1.
                if len(line.decode("iso-8859-1").split()) < 3:
                    self._head_end = newline + 1
            elif bytes(line) in EMPTY_LINES or self._lines > MAX_HEADERS + 1:
                self._head_end = newline + 1
            else:
                self._field_bytes += len(line)
                if self._field_bytes > MAX_HEADER_BYTES:
                    self._head_end = newline + 1

    def _whole_head(self, data: bytearray) -> bool:
        """Find a head that came whole, within every limit, at once: where the line by line scan would find its end.

        Nearly every head arrives in one read, and scanning it a line at a time was a tenth of the framing's time per
        request (issue 36). Its end is the first empty line (after a line ending in LF, a line of LF or CRLF alone);
        anything the line by line scan would end the head at before that (a line too long, too many fields, too many
        bytes of them, a request line it cannot read) is left to that scan.
        """
        ends = [found for found in (data.find(b"\n\n"), data.find(b"\n\r\n")) if found >= 0]
        if not ends:
            return False
        last_field_end = min(ends)
        head_end = last_field_end + (2 if data[last_field_end + 1] == 10 else 3)
        request_line_end = data.find(b"\n") + 1
        lines = data.count(b"\n", 0, head_end)
        if head_end > min(MAX_HEADER_LINE, MAX_HEADER_BYTES) or lines > MAX_HEADERS + 1:
            return False
        if len(data[:request_line_end].decode("iso-8859-1").split()) < 3:
            return False
        self._head_end = self._line_start = self._scanned = head_end
        self._lines = lines
        self._field_bytes = last_field_end + 1 - request_line_end
        return True
