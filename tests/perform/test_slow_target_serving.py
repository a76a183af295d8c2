"""A Perform once waiting on a slow target holds one handler thread of ``oncegate serve``, never the requests behind it.

A call holds its thread until the target answers, up to the target's timeout (90 s at most): before, as many such
calls as a worker has threads held every other client (4 calls to a target taking 15 s, 2 workers of 2 threads: a
health probe waited 14 s; 8 calls: 59 s). A spare thread now starts while every thread is held. Every wait here is
bounded by a socket's timeout or the stand-in's release, never by a sleep.
"""

from __future__ import annotations

import http.client
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from oncegate.domain.targets import Target
from oncegate.entrypoints import handler_pool
from tests.http.test_server_framing import HEALTH, connected, read_answer
from tests.load.served import serving
from tests.perform.calls import perform_body
from tests.perform.conftest import Declared, with_target
from tests.support.target_server import Answer, StandInTarget

HELD = 3


@pytest.fixture
def slow_erp(declared: Declared, erp: Target) -> Target:
    return declared.declare(with_target(erp, timeout_seconds=60))


def perform(address: tuple[str, int], key: str) -> int:
    connection = http.client.HTTPConnection(*address, timeout=60)
    try:
        connection.request("POST", "/api/perform", json.dumps(perform_body(key)), {"Content-Type": "application/json"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_calls_held_by_a_slow_target_leave_a_thread_to_other_clients(
    slow_erp: Target, stand_in: StandInTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler_pool, "STALL_SECONDS", 0.1, raising=False)
    stand_in.script(*(Answer(late=True) for _ in range(HELD)))
    with serving(threads=1) as address, ThreadPoolExecutor(HELD) as pool, stand_in.released():
        calls = [pool.submit(perform, address, f"SO-slow-{number}") for number in range(HELD)]
        # Every call is at the target, each holding a thread of its own: the one thread, and spares.
        stand_in.wait_for(HELD)
        probes = []
        for _ in range(3):
            with connected(address) as (sock, reader):
                sock.sendall(HEALTH)
                probes.append(read_answer(reader).status)
        stand_in.release()
        statuses = [call.result(timeout=30) for call in calls]

    assert probes == [200, 200, 200]
    assert statuses == [200] * HELD
    assert len(stand_in.writes()) == HELD


def test_spare_threads_end_once_the_slow_calls_are_answered(
    slow_erp: Target, stand_in: StandInTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler_pool, "STALL_SECONDS", 0.1, raising=False)
    stand_in.script(*(Answer(late=True) for _ in range(HELD)))
    before = set(threading.enumerate())
    with serving(threads=1) as address, ThreadPoolExecutor(HELD) as pool, stand_in.released():
        calls = [pool.submit(perform, address, f"SO-spare-{number}") for number in range(HELD)]
        stand_in.wait_for(HELD)
        # The pool's handler threads, the one it started with among them (its watch is not one).
        handlers = [thread for thread in set(threading.enumerate()) - before if _handler(thread)]
        stand_in.release()
        assert [call.result(timeout=30) for call in calls] == [200] * HELD
        for thread in handlers:
            if thread.name != "oncegate-handler-1":
                thread.join(timeout=10)
        left = [thread.name for thread in handlers if thread.is_alive()]
        with connected(address) as (sock, reader):
            sock.sendall(HEALTH)
            assert read_answer(reader).status == 200

    assert len(handlers) >= HELD
    assert left == ["oncegate-handler-1"]


def _handler(thread: threading.Thread) -> bool:
    return thread.name.startswith("oncegate-handler-") and not thread.name.endswith("-watch")


def test_a_spare_thread_the_system_refuses_is_tried_again(
    slow_erp: Target, stand_in: StandInTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process at its limit of threads (a container's pids limit) refuses one: the watch ended with the error, and the
    # pool counted the thread that never started as free, so no spare started again while the call held the thread.
    monkeypatch.setattr(handler_pool, "STALL_SECONDS", 0.1, raising=False)
    start = threading.Thread.start
    refused: list[str] = []

    def start_unless_first_spare(thread: threading.Thread) -> None:
        if _handler(thread) and thread.name != "oncegate-handler-1" and not refused:
            refused.append(thread.name)
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_unless_first_spare)
    stand_in.script(Answer(late=True))
    with serving(threads=1) as address, ThreadPoolExecutor(1) as pool, stand_in.released():
        call = pool.submit(perform, address, "SO-refused-spare")
        stand_in.wait_for(1)
        with connected(address) as (sock, reader):
            sock.sendall(HEALTH)
            probe = read_answer(reader).status
        stand_in.release()
        assert call.result(timeout=30) == 200

    assert refused == ["oncegate-handler-2"]
    assert probe == 200
