"""The local server's pool writes answers on sockets that never block (issue 36): whole, or refused in time.

A socket with a timeout made the pool pay a poll before every read and write; its sockets are
non-blocking now, and what a write cannot send at once waits in the writer for the pool to send it as the
client reads, never in a thread.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from oncegate.entrypoints.framing import _Writer

# Far more than the kernel buffers of a socket pair, so that the writer must wait for its reader.
ANSWER = bytes(range(256)) * 16_384


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    server.setblocking(False)
    yield server, client
    server.close()
    client.close()


def test_an_answer_longer_than_the_buffers_arrives_whole_to_a_client_that_reads(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """What a write cannot send at once waits in the writer, and is sent as the socket drains (the pool's selector
    says when), without ever waiting in a send."""
    server, client = pair
    received = bytearray()

    def read() -> None:
        while len(received) < len(ANSWER) and (chunk := client.recv(65536)):
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    writer = _Writer(server, timeout=10)
    written = writer.write(ANSWER)
    with selectors.DefaultSelector() as selector:
        selector.register(server, selectors.EVENT_WRITE)
        while writer.sending():
            assert selector.select(timeout=10), "the socket did not drain"
            writer.send()
    reader.join(timeout=10)

    assert written == len(ANSWER)
    assert bytes(received) == ANSWER
    assert server.gettimeout() == 0.0  # never blocking, for the pool's next read


def test_the_rest_of_an_answer_its_client_does_not_read_is_abandoned_after_the_timeout_without_a_wait(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    writer = _Writer(server, timeout=0.3)
    began = time.monotonic()

    writer.write(ANSWER)
    first = writer.abandoned_at()
    client.recv(65536)  # the client takes a little: progress puts the abandonment off
    sent_more = writer.send()

    assert time.monotonic() - began < 5  # neither write nor send waited for the client
    assert writer.sending()
    assert not sent_more
    assert began + 0.3 <= first <= writer.abandoned_at() <= time.monotonic() + 0.3
