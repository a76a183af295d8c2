"""The local server's pool writes answers on sockets that never block (issue 36): whole, or refused in time.

A socket with a timeout made the pool pay a poll before every read and write; its sockets are
non-blocking now, and the writer waits only for a client slower to read than the answer is long.
"""

from __future__ import annotations

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
    server, client = pair
    received = bytearray()

    def read() -> None:
        while len(received) < len(ANSWER) and (chunk := client.recv(65536)):
            received.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    written = _Writer(server, timeout=10).write(ANSWER)
    reader.join(timeout=10)

    assert written == len(ANSWER)
    assert bytes(received) == ANSWER
    assert server.gettimeout() == 0.0  # non-blocking again, for the pool's next read


def test_a_client_that_does_not_read_is_given_up_after_the_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    server, _ = pair
    began = time.monotonic()

    with pytest.raises(TimeoutError):
        _Writer(server, timeout=0.3).write(ANSWER)

    assert 0.3 <= time.monotonic() - began < 5
    assert server.gettimeout() == 0.0
