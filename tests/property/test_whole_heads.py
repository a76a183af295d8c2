"""A request's head found at once when it came whole, against the line by line scan: the same end, or the same refusal.

``oncegate serve`` reads a connection's bytes into ``Incoming``, which finds where the head ends (or the line that
refuses it) before a handler thread is given the request. A head that arrives in one read is found at once (issue
36); a head whose request line came in a read of its own is always scanned line by line. Both must end the head at
the same byte. (Byte by byte, the scan may end a head over the limits sooner, on a line not yet whole: refused
either way.)
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from oncegate.entrypoints.incoming import MAX_HEADER_BYTES, MAX_HEADER_LINE, MAX_HEADERS, Incoming

LINES = st.sampled_from(
    [
        b"POST /api/claims HTTP/1.1\r\n",
        b"GET / HTTP/1.0\n",
        b"GET /\r\n",
        b"Host: bench\r\n",
        b"Content-Length: 2\r\n",
        b"X-Lf-Only: yes\n",
        b"X-Cr: a\rb\r\n",
        b"\r\n",
        b"\n",
        b"\r",
        b" folded\r\n",
        b"{}",
        b"X-Long: " + b"a" * (MAX_HEADER_LINE - 9) + b"\r\n",
        b"X-Half: " + b"b" * (MAX_HEADER_BYTES // 2) + b"\r\n",
    ]
)


def _head_of(chunks: list[bytes]) -> tuple[bool, bytes]:
    incoming = Incoming(30.0)
    for chunk in chunks:
        if chunk:  # an empty read is the client closing
            incoming.take(chunk)
    return incoming.due(), incoming.head() if incoming.head_in else b""


def _whole_and_line_by_line(data: bytes) -> None:
    request_line_end = data.find(b"\n") + 1 or len(data)
    assert _head_of([data]) == _head_of([data[:request_line_end], data[request_line_end:]])


@given(st.lists(LINES, max_size=12))
@example([b"POST /api/claims HTTP/1.1\r\n", b"Host: bench\r\n", b"\r\n", b"{}"])
@example([b"GET / HTTP/1.1\r\n", b"\r\n", b"GET / HTTP/1.1\r\n", b"\r\n"])
@example([b"GET / HTTP/1.1\n", b"Host: x\n", b"\n", b"\r\n"])
@example([b"\r\n", b"\r\n"])
@example([b"GET /\r\n", b"\r\n"])
@example([b"GET / HTTP/1.1\r\n", b"X-Long: " + b"a" * (MAX_HEADER_LINE - 9) + b"\r\n", b"\r\n"])
def test_a_head_sent_whole_ends_where_the_scan_ends_it(lines: list[bytes]) -> None:
    _whole_and_line_by_line(b"".join(lines))


@given(st.integers(min_value=MAX_HEADERS - 2, max_value=MAX_HEADERS + 2))
def test_the_bound_on_fields_is_the_same_for_a_head_sent_whole(fields: int) -> None:
    _whole_and_line_by_line(b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * fields + b"\r\n")


@given(st.integers(min_value=-3, max_value=3))
def test_the_bound_on_bytes_is_the_same_for_a_head_sent_whole(off: int) -> None:
    field = b"X-A: " + b"c" * 1000 + b"\r\n"
    count, rest = divmod(MAX_HEADER_BYTES + off, len(field))
    last = b"X-B: " + b"d" * max(rest - 7, 0) + b"\r\n"
    _whole_and_line_by_line(b"GET / HTTP/1.1\r\n" + field * count + last + b"\r\n")
