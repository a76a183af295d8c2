"""Serves the Azure Functions app locally, as Core Tools would, without Core Tools: from one process or several.

Each worker process loads the app and serves it on one listening socket they share, speaking the
HTTP/1.1 of :mod:`oncegate.entrypoints.framing`; this module starts them, passes a stop on to them,
and stops the others when one of them stops unasked.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import ThreadingHTTPServer
from typing import Any

import azure.functions as func

from oncegate.entrypoints import framing, logs
from oncegate.entrypoints.handler_pool import DEFAULT_THREADS

if sys.platform == "win32":
    from multiprocessing.connection import PipeConnection as Connection
else:
    import resource
    from multiprocessing.connection import Connection

logger = logging.getLogger(__name__)

# prctl(2): the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
# How long the workers have, once asked to stop, to answer what they are answering and flush their counts.
STOP_GRACE_SECONDS = 30.0
# What a worker keeps of that grace for the counts of the calls it answered while stopping, and its store, once it
# stops waiting for the calls under way: it waited the whole grace before, so a call held longer (a slow target) had
# it killed with its counts unwritten. The counts gathered before the stop are written from its start, meanwhile.
FLUSH_SECONDS = 10.0


def calls_wait_seconds() -> float:
    """How long a worker waits for its busy handler threads before it flushes its counts and exits: the grace less
    what the flush keeps. Worked out by the command's process, which waits the grace, and handed to each worker
    (a spawned process of its own), so that the two never disagree."""
    return STOP_GRACE_SECONDS - FLUSH_SECONDS


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, as the server makes it; raises ``OSError`` if taken."""
    listener = socket.create_server((host, port), backlog=framing.AppServer.request_queue_size)
    listener.set_inheritable(True)
    # Workers sharing the socket are all woken by one connection, and all but one find nothing to accept:
    # blocking, such a worker would wait in accept() for the next connection, deaf to a request to stop.
    listener.setblocking(False)
    return listener


class WorkerFailed(Exception):
    """A worker process stopped on its own, before anyone asked the server to stop (it could not load the app)."""

    def __init__(self, name: str, exit_code: int | None) -> None:
        super().__init__(f"{name} stopped with exit status {exit_code}")
        self.name = name
        self.exit_code = exit_code


def serve_in_workers(
    load_app: Callable[[str], func.FunctionApp],
    app_dir: str,
    listener: socket.socket,
    *,
    workers: int,
    threads: int = DEFAULT_THREADS,
    on_ready: Callable[[], None] = lambda: None,
) -> None:
    """Serve the app from ``workers`` processes accepting on one socket, until SIGTERM or SIGINT.

    One process runs Python on one core at a time: on SQLite a second process nearly doubles the
    claims answered per second on two cores. Each worker loads the app itself (``load_app(app_dir)``,
    a module-level function, as a spawned process needs) and builds its own services, as instances
    of the function app in Azure do: the store is what they share, and every write is conditioned.

    In each worker, ``threads`` handler threads answer the requests of every connection (0: a thread per
    connection). ``on_ready`` is called once every worker serves. A stop asked of this process is passed on to
    each worker, which writes the inventory counts it holds while it answers the calls under way for at most
    :func:`calls_wait_seconds` (closing the connections of those still held then), then those of the calls it
    answered meanwhile, and exits; a worker still there ``STOP_GRACE_SECONDS`` later is killed. Raises
    :class:`WorkerFailed` when a worker stops unasked, after stopping the others.
    """
    more_open_files()
    calls_wait = calls_wait_seconds()
    if workers == 1:
        _worker(load_app, app_dir, listener, threads, calls_wait, on_ready=on_ready)
        return
    context = multiprocessing.get_context("spawn")
    readiness, ready = context.Pipe(duplex=False)
    processes = [
        context.Process(
            target=_worker,
            args=(load_app, app_dir, listener, threads, calls_wait, os.getpid(), ready),
            name=f"oncegate-worker-{number}",
        )
        for number in range(1, workers + 1)
    ]
    with _StopSignals() as stop:
        for process in processes:
            process.start()
        failed = _supervise(processes, stop, readiness, on_ready)
    if failed is not None:
        raise WorkerFailed(failed.name, failed.exitcode)


def more_open_files() -> None:
    """Raise this process's soft limit on open files to its hard limit (the workers inherit it).

    Every connection is a file, a slow client's too: at a soft limit of 1,024 (common on Linux) the server would
    stop accepting at about a thousand connections, though it holds them without threads. Where the hard limit
    is unlimited (macOS) or the platform has no such limit (Windows), the limit stays as it is.
    """
    if sys.platform != "win32":
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class _StopSignals:
    """SIGTERM and SIGINT, while in use, wake :func:`_supervise` through a pipe instead of raising.

    Sent to the process group (Ctrl+C, ``kill -- -PGID``), a signal reaches the workers as well as this
    process: raising here would end this process mid-wait, and stopping the workers on the way out
    would interrupt their flush of the counts with a second signal (issue 22). The pipe is
    multiprocessing's, which ``multiprocessing.connection.wait`` takes on Windows too (an ``os.pipe``
    descriptor it does not); one byte is written once, so the write never blocks.
    """

    def __enter__(self) -> _StopSignals:
        self.asked = False
        self.wake, self._wakes = multiprocessing.Pipe(duplex=False)
        self._previous = {number: signal.signal(number, self._asked) for number in STOP_SIGNALS}
        return self

    def _asked(self, signum: int, frame: object) -> None:
        if not self.asked:
            self.asked = True
            self._wakes.send_bytes(b"!")

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self.wake.close()
        self._wakes.close()


def _supervise(
    processes: Sequence[multiprocessing.process.BaseProcess],
    stop: _StopSignals,
    readiness: Connection,
    on_ready: Callable[[], None],
) -> Any:
    """Until a stop signal or a worker's exit, count the workers ready; then stop them all.

    Returns the worker that exited unasked, or None. A signal to the process group reaches this
    process no later than the workers, so its handler has run (``stop.asked``) by the time a worker
    it stopped is seen gone.
    """
    waiting = len(processes)
    while True:
        woken = multiprocessing.connection.wait([stop.wake, readiness, *(process.sentinel for process in processes)])
        if stop.asked:
            failed = None
            break
        if readiness in woken:
            readiness.recv()
            waiting -= 1
            if waiting == 0:
                on_ready()
            continue
        failed = next((process for process in processes if process.sentinel in woken), None)
        if failed is not None:
            break
    # Each worker is asked once: one that got the signal from its process group ignores this second one.
    for process in processes:
        if process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid or 0, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0))
        if process.is_alive():
            # Its inventory counts since its last flush go with it: said as an error, with the command that
            # puts them right, since the operator who asked for the stop sees nothing else of it.
            logger.error(
                "%s did not stop within %s seconds and was killed: the inventory counts it had not yet written "
                "are lost; `oncegate store recount` counts each scope's claims by status again from the claims",
                process.name,
                STOP_GRACE_SECONDS,
            )
            process.kill()
            process.join()
    return failed


def _end_with_parent(parent: int) -> None:
    """Have Linux send this worker SIGTERM when the process that started it dies, even by SIGKILL.

    Elsewhere (macOS, Windows: no prctl) a worker whose parent died is only stopped by a signal of its own.
    """
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        # The parent died before the request above: nobody would stop this worker.
        raise SystemExit(0)


def _stop_serving_on_signal(server: ThreadingHTTPServer) -> dict[int, Any]:
    """The first SIGTERM or SIGINT stops ``server``, and later ones do nothing; returns the handlers replaced.

    The counts are flushed after the server stops (``bootstrap``'s exit handler): a second signal,
    the parent passing on the one the whole process group got, must not cut that flush short. The
    handler stays rather than giving way to SIG_IGN: Python raises on a signal that arrived before
    its handler was swapped for SIG_IGN ("ignored due to race condition").

    The handler takes no lock: that second signal may arrive while it runs, and runs the handler again, nested in
    it, in the main thread. A ``threading.Event`` deadlocked there (its ``set()`` holds a lock when Python runs
    pending handlers, and the nested call waited for it forever): the worker was killed 30 s later with its counts.
    """
    asked = False

    def stop(signum: int, frame: object) -> None:
        nonlocal asked
        if asked:
            return
        asked = True
        # shutdown() waits for serve_forever, which runs on this very thread: it is asked from another.
        threading.Thread(target=server.shutdown, name="oncegate-stop", daemon=True).start()

    return {number: signal.signal(number, stop) for number in STOP_SIGNALS}


def _flush_counts() -> None:
    """Write the inventory counts this process gathered so far; a failure is logged, and they wait for the exit's."""
    from oncegate import bootstrap
    from oncegate.errors import OnceGateError

    services = bootstrap.services_built
    if services is None:
        return  # no request built them: nothing was counted
    try:
        services.inventory.flush()
    except OnceGateError as exc:
        logger.warning("Inventory counts kept for the flush at exit: %s", exc.message)


def _worker(
    load_app: Callable[[str], func.FunctionApp],
    app_dir: str,
    listener: socket.socket,
    threads: int,
    calls_wait: float,
    parent: int | None = None,
    ready: Connection | None = None,
    *,
    on_ready: Callable[[], None] = lambda: None,
) -> None:
    """Serve until SIGTERM or SIGINT; ``parent``: the pid of the process that started this one, which it ends with.

    Once it serves, the worker says so on ``ready`` (to the parent), or calls ``on_ready`` (in the command's process).
    """
    if parent is not None:
        _end_with_parent(parent)
    logs.configure(handler=True)
    server = framing.make_server(load_app(app_dir), listener=listener, threads=threads, stop_seconds=calls_wait)
    replaced = _stop_serving_on_signal(server) if threading.current_thread() is threading.main_thread() else {}
    if ready is not None:
        ready.send(os.getpid())
    on_ready()
    try:
        server.serve_forever()
    finally:
        # The counts gathered so far are written while the calls under way finish, not once they have: written
        # after that wait, a flush slower than what the grace had left lost them all with the killed worker. What
        # the calls answered meanwhile is written at exit (bootstrap's exit handler).
        flushing = threading.Thread(target=_flush_counts, name="oncegate-flush")
        flushing.start()
        server.server_close()
        flushing.join()
        if parent is None:
            # Serving in the command's own process (one worker, or a test): its handlers are its own again.
            for number, handler in replaced.items():
                signal.signal(number, handler)
