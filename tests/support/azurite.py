"""Pytest plugin: the Azurite Table Storage emulator, started once per session.

The ``azurite`` fixture runs ``node_modules/.bin/azurite-table`` (``npm ci`` installs it) on a
free port, or, when ``ONCEGATE_TEST_TABLES_CONNECTION_STRING`` is set, uses that emulator or
account and starts nothing. ``table_store_factory`` makes ``TableStore`` instances on tables of
their own per test (a prefix per test). Mark tests that use them ``pytest.mark.azurite``.

A test's tables are left in place when it ends, and the whole run's are dropped once at its end:
made new for each test and never dropped costs about 100 ms a test on Azurite, against about 180 ms
made and dropped, and about 200 ms for a pool of table sets made once and emptied row by row after
each test (a ``TableStore`` still asks for its six tables when it opens, so a pool saves only the
drops and pays for a query per table). An Azurite the suite started keeps them in memory and forgets
them when it stops; an emulator or account named by the environment has them dropped at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableServiceClient

from oncegate.stores.tables.store import TableStore, table_names
from oncegate.stores.tables.transport import client_options, endpoint_of

CONNECTION_STRING_VARIABLE = "ONCEGATE_TEST_TABLES_CONNECTION_STRING"
AZURITE = Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "azurite-table"
# Azurite's fixed, public development account.
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
HOST = "127.0.0.1"
START_SECONDS = 30.0
STOP_SECONDS = 10.0
# The session's emulator keeps an idle connection this long, not Azurite's 5 s: a pooled connection reused just as
# Azurite closed it gets ConnectionResetError, and the store rightly does not retry a batch POST that was reset after
# it was sent (it cannot know whether the batch was applied, and a batch is not idempotent), so a test that paused
# about 5 s between requests failed with store_unavailable (the batch drill on tables did, once). Azure's own front
# ends keep idle connections open for minutes, so a long keep-alive is the service's behaviour, not a kindness.
SESSION_KEEP_ALIVE_SECONDS = 600


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return False
    return True


class Azurite:
    """An Azurite process on a fixed port, which tests may stop and start again.

    By default data is kept in memory only (``--inMemoryPersistence``): after ``stop()`` and
    ``start()`` every table and entity is gone, so a store made before the restart finds no
    tables. With ``location`` it is kept on disk there (``--location``) and survives a restart,
    as an account's data survives an outage; ``stop()`` then interrupts Azurite (SIGINT) so that
    it writes its database out before it exits. ``keep_alive_seconds`` replaces Azurite's 5 s
    keep-alive timeout: a client reusing a connection just as Azurite closes it gets "remote end
    closed connection", which a benchmark pausing between phases would otherwise meet.
    """

    def __init__(self, workdir: Path, *, location: Path | None = None, keep_alive_seconds: int | None = None) -> None:
        self.port = _free_port()
        self.connection_string = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"TableEndpoint=http://{HOST}:{self.port}/{ACCOUNT};"
        )
        self._workdir = workdir
        self._location = location
        self._keep_alive = ["--tableKeepAliveTimeout", str(keep_alive_seconds)] if keep_alive_seconds else []
        self._log = workdir / "azurite.log"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the emulator on the same port and return once it accepts connections."""
        if not AZURITE.exists():
            pytest.fail(f"{AZURITE} is missing: run `npm ci` in the repository root.")
        persistence = ["--location", str(self._location)] if self._location else ["--inMemoryPersistence"]
        command = [
            str(AZURITE), *persistence, *self._keep_alive, "--disableTelemetry", "--silent", "--skipApiVersionCheck",
            "--tableHost", HOST, "--tablePort", str(self.port),
        ]  # fmt: skip
        # --silent: no access-log line per request (about a tenth of the CPU Azurite spends on a test's requests);
        # what it still says (its start, its errors) goes to a file, not a pipe that nobody reads and that could block.
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(command, cwd=self._workdir, stdout=log, stderr=subprocess.STDOUT)
        self._wait_until_listening(self._process)

    def _wait_until_listening(self, process: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_SECONDS
        while not _listening(self.port):
            if process.poll() is not None:
                pytest.fail(f"Azurite exited with code {process.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(
                    f"Azurite did not listen on port {self.port} within {START_SECONDS:.0f} s:\n{self.output()}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the emulator: terminate (interrupt, when it keeps data on disk), then kill if it lingers."""
        process, self._process = self._process, None
        if process is None:
            return
        # Azurite saves its on-disk database when interrupted; SIGTERM ends it without saving.
        process.send_signal(signal.SIGINT if self._location else signal.SIGTERM)
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def output(self) -> str:
        """Everything Azurite wrote to stdout and stderr this session."""
        return self._log.read_text(errors="replace") if self._log.exists() else ""


class ExternalTables:
    """An emulator or account the suite did not start, named by the environment."""

    def __init__(self, connection_string: str) -> None:
        self.connection_string = connection_string

    def stop(self) -> None:
        pytest.skip(f"{CONNECTION_STRING_VARIABLE} names an emulator this suite cannot stop")

    def start(self) -> None:
        pytest.skip(f"{CONNECTION_STRING_VARIABLE} names an emulator this suite cannot start")


class TableStoreFactory:
    """Makes TableStores that share one test's own tables, and closes them after the test."""

    def __init__(self, connection_string: str, made: list[str]) -> None:
        self.connection_string = connection_string
        self._endpoint = endpoint_of(connection_string)
        # Table names are letters and digits, starting with a letter.
        self.prefix = "T" + uuid.uuid4().hex[:10]
        self._made = made
        self._stores: list[TableStore] = []

    def __call__(self, **given_options: Any) -> TableStore:
        """A store on this test's tables; ``given_options`` go to the SDK client (e.g. ``retry_total``).

        Its transport is the one ``TableStore.from_connection_string`` gives the service, which reads the proxy
        settings once (``oncegate.stores.tables.transport``): the SDK's default, which has ``requests`` scan the
        whole environment at every request, is not what the service runs (and was a tenth of the time a fault
        sweep's requests spent in the SDK)."""
        options = client_options(self._endpoint) | given_options
        service = TableServiceClient.from_connection_string(self.connection_string, **options)
        if not self._stores:
            self._made.append(self.prefix)
        store = TableStore(service, prefix=self.prefix)
        self._stores.append(store)
        return store

    def close(self) -> None:
        """Close the stores; their tables stay until the end of the run (``test_tables``)."""
        for store in self._stores:
            store.close()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite | ExternalTables]:
    """The Table Storage emulator for the session: ``.connection_string``, ``.stop()``, ``.start()``."""
    external = os.environ.get(CONNECTION_STRING_VARIABLE)
    if external:
        yield ExternalTables(external)
        return
    emulator = Azurite(tmp_path_factory.mktemp("azurite"), keep_alive_seconds=SESSION_KEEP_ALIVE_SECONDS)
    emulator.start()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def test_tables(azurite: Azurite | ExternalTables) -> Iterator[list[str]]:
    """The prefixes of every test's tables this run; those of an emulator or account the suite did not start
    are dropped at the end (they would pile up there), the suite's own Azurite forgets them when it stops."""
    made: list[str] = []
    yield made
    if isinstance(azurite, ExternalTables) and made:
        with TableServiceClient.from_connection_string(azurite.connection_string) as service:
            for prefix in made:
                for name in table_names(prefix):
                    service.delete_table(name)


@pytest.fixture
def table_store_factory(azurite: Azurite | ExternalTables, test_tables: list[str]) -> Iterator[TableStoreFactory]:
    """Call it for a TableStore; every call in one test shares that test's own tables."""
    factory = TableStoreFactory(azurite.connection_string, test_tables)
    yield factory
    factory.close()
