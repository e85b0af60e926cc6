"""A throwaway PostgreSQL server for tests: Debian's binaries, a temporary data directory, a free port.

``PostgresServer().start()`` finds the newest ``/usr/lib/postgresql/<version>/bin`` (Debian's
``postgresql`` package, which ``make os-packages`` installs before the tests), runs ``initdb`` into a
new temporary directory and starts the server on 127.0.0.1 with trust authentication for the
superuser ``nimbus``. Durability is switched
off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the data lives for one test session.
``stop()`` kills it (``pg_ctl stop -m immediate``) and removes the directory.

initdb and postgres refuse to run as root, so as root they run as Debian's ``postgres`` system user,
which then owns the temporary directory. Every server has its own directory, port and socket, so
several pytest-xdist workers can each start one at the same time.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Self

import psycopg
from psycopg import sql

POSTGRESQL_ROOT = Path("/usr/lib/postgresql")
SUPERUSER = "nimbus"
SYSTEM_USER = "postgres"  # made by Debian's postgresql-common; owns the server when we are root
BINARIES = ("initdb", "pg_ctl", "postgres")

# Appended to postgresql.conf. A test database needs no durability; a small shared_buffers lets one
# server per xdist worker sit side by side without each taking initdb's 128MB.
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "'32MB'",
}

# How often start() tries another port when the one it picked was taken between choosing and binding.
PORT_ATTEMPTS = 5
COMMAND_TIMEOUT = 180  # seconds; initdb on a busy machine


class PostgresError(RuntimeError):
    """The server could not be installed, initialised, started or reached."""


def find_binaries(root: Path = POSTGRESQL_ROOT) -> Path | None:
    """The ``bin`` directory of the newest PostgreSQL under ``root`` that has initdb, pg_ctl and postgres."""
    found: list[tuple[tuple[int, ...], Path]] = []
    for candidate in root.glob("*/bin"):
        version = candidate.parent.name
        if not re.fullmatch(r"\d+(\.\d+)*", version):
            continue
        if all(os.access(candidate / name, os.X_OK) for name in BINARIES):
            found.append((tuple(int(part) for part in version.split(".")), candidate))
    return max(found)[1] if found else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PostgresServer:
    """One PostgreSQL server in its own temporary directory, for one test process."""

    def __init__(self) -> None:
        """Nothing runs until :meth:`start`."""
        self.port: int | None = None
        self.base: Path | None = None
        self.binaries: Path | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Self:
        """Initialise a cluster and start it; returns when it accepts connections."""
        if self.port is not None:
            return self
        binaries = find_binaries()
        if binaries is None:
            # Installed once before the tests, never by one: the Makefile's os-packages target.
            installs = "`make test` (or `make os-packages`) installs it"
            raise PostgresError(f"no PostgreSQL server under {POSTGRESQL_ROOT}: {installs}")
        self.binaries = binaries
        self.base = Path(tempfile.mkdtemp(prefix="nimbus-pg-"))
        # Registered before anything can fail, so even an interrupted start leaves no server behind.
        atexit.register(self.stop)
        try:
            if os.geteuid() == 0:
                owner = pwd.getpwnam(SYSTEM_USER)
                os.chown(self.base, owner.pw_uid, owner.pw_gid)
            self._initdb()
            self._configure()
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Kill the server (no clean shutdown: its data is thrown away) and remove its directory."""
        base, self.base = self.base, None
        port, self.port = self.port, None
        atexit.unregister(self.stop)
        if base is None:
            return
        if port is not None:
            self._run(
                [self._bin("pg_ctl"), "stop", "-D", str(self._data(base)), "-m", "immediate", "-w"], base
            )
        shutil.rmtree(base, ignore_errors=True)

    def __enter__(self) -> Self:
        """Start the server."""
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        """Stop the server and remove its files."""
        self.stop()

    # -- databases ----------------------------------------------------------------------------------

    def url(self, dbname: str) -> str:
        """The libpq URL of a database on this server, as the superuser (trust: no password)."""
        if self.port is None:
            raise PostgresError("the server is not running (call start() first)")
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create an empty database (a copy of template1) and return its URL."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, closing whatever connections a test left open to it."""
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    # -- the steps ----------------------------------------------------------------------------------

    def _initdb(self) -> None:
        base = self._base()
        command = [
            self._bin("initdb"),
            "-D",
            str(self._data(base)),
            "--auth=trust",
            "-U",
            SUPERUSER,
            "--encoding=UTF8",
        ]
        result = self._run([*command, "--locale=C.UTF-8"], base)
        if result.returncode != 0 and "locale" in result.stdout + result.stderr:
            # A system without the C.UTF-8 locale: byte-order collation, UTF-8 still.
            shutil.rmtree(self._data(base), ignore_errors=True)
            result = self._run([*command, "--no-locale"], base)
        if result.returncode != 0:
            raise PostgresError(f"initdb failed:\n{result.stdout}{result.stderr}")

    def _configure(self) -> None:
        base = self._base()
        settings = {**SETTINGS, "unix_socket_directories": f"'{base}'"}
        lines = "".join(f"{key} = {value}\n" for key, value in settings.items())
        # Appending keeps the file's owner (the postgres user when we are root).
        with (self._data(base) / "postgresql.conf").open("a") as conf:
            conf.write("\n# nimbus tests\n" + lines)

    def _start_on_free_port(self) -> None:
        base = self._base()
        log = base / "server.log"
        for _ in range(PORT_ATTEMPTS):
            port = free_port()
            command = [
                self._bin("pg_ctl"),
                "start",
                "-D",
                str(self._data(base)),
                "-l",
                str(log),
                "-w",
                "-t",
                "60",
                "-o",
                f"-p {port}",
            ]
            result = self._run(command, base)
            if result.returncode == 0:
                self.port = port
                return
            server_log = log.read_text(errors="replace") if log.exists() else ""
            # Another process took the port between free_port() and the server's bind: pick again.
            if "could not bind" not in server_log and "already in use" not in server_log:
                raise PostgresError(f"pg_ctl start failed:\n{result.stdout}{result.stderr}\n{server_log}")
        raise PostgresError(f"no free port after {PORT_ATTEMPTS} attempts")

    def _run(self, command: list[str], base: Path) -> subprocess.CompletedProcess[str]:
        """Run a server command as the data directory's owner, from a directory that owner can read."""
        if os.geteuid() == 0:
            if shutil.which("runuser"):
                command = ["runuser", "-u", SYSTEM_USER, "--", *command]
            else:
                command = ["su", SYSTEM_USER, "-s", "/bin/sh", "-c", shlex.join(command)]
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=base,
            env=_server_environment(),
            timeout=COMMAND_TIMEOUT,
            check=False,
        )

    def _bin(self, name: str) -> str:
        if self.binaries is None:
            raise PostgresError("PostgreSQL binaries not located (call start() first)")
        return str(self.binaries / name)

    def _base(self) -> Path:
        if self.base is None:
            raise PostgresError("the server has no directory (call start() first)")
        return self.base

    @staticmethod
    def _data(base: Path) -> Path:
        return base / "data"


def _server_environment() -> dict[str, str]:
    # A developer's PGDATA, PGPORT or PGHOST must not point the commands at another cluster.
    return {key: value for key, value in os.environ.items() if not key.startswith("PG")}
