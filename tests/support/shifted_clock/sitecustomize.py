"""The service's clock, moved on by a test in a process it started, as ``FakeClock`` moves it in its own.

Python imports ``sitecustomize`` at the start of every process whose path holds this folder: a test puts it
first on ``PYTHONPATH`` of ``oncegate serve``, whose spawned workers inherit it. When ``ONCEGATE_TEST_CLOCK_SHIFT``
names a file, the clock every service of the process is wired with (``oncegate.service.core.utc_now``, replaced
before ``oncegate.bootstrap`` takes it as its default) reads the machine's time plus the seconds the file holds,
read at each call: the test writes them once the server has answered what it must answer first, and a lease runs
out without anyone waiting for it. Without the variable, nothing changes.
"""

import os
from datetime import datetime, timedelta


def shift_clock(shift_file: str) -> None:
    """Add the seconds ``shift_file`` holds (none while it is missing) to every reading of the service's clock."""
    import oncegate.service.core

    machine_time = oncegate.service.core.utc_now

    def shifted_now() -> datetime:
        try:
            with open(shift_file, encoding="utf-8") as file:
                seconds = float(file.read() or 0)
        except FileNotFoundError:
            seconds = 0.0
        return machine_time() + timedelta(seconds=seconds)

    oncegate.service.core.utc_now = shifted_now


if os.environ.get("ONCEGATE_TEST_CLOCK_SHIFT"):
    shift_clock(os.environ["ONCEGATE_TEST_CLOCK_SHIFT"])
