"""PostgreSQL for the test suites: find a running server, or start a private one on loopback.

:func:`find_url` is what the ``agentckpt_postgres_url`` fixture uses. :class:`PrivatePostgres`
runs a ``postgres`` of its own from the installed binaries, for tests that stop, restart
or kill the server (never do that to a shared server).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from . import LoopbackServer, docker_engine_answers, free_port, port_open, start_container

__all__ = ["ENV_VAR", "HOW_TO_ENABLE", "PrivatePostgres", "find_url", "server_answers"]

ENV_VAR = "AGENTCKPT_TEST_POSTGRES_URL"

HOW_TO_ENABLE = (
    f"set {ENV_VAR}=postgresql://user:password@host:5432/dbname to a server the tests may "
    "create tables in (each test uses its own table prefix), or run PostgreSQL on "
    "127.0.0.1:5432 with a database 'test' that the user 'postgres' reaches with trust "
    "authentication (e.g. 'apt install postgresql' and 'createdb test'), or start a Docker "
    "engine so that testcontainers can run PostgreSQL (pip install 'pytest-agentckpt[containers]')"
)

_LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/test"


def server_answers(url: str, timeout: float = 3.0) -> bool:
    """Whether a PostgreSQL server at ``url`` accepts a login and answers ``SELECT 1``."""
    try:
        import psycopg
    except ImportError:
        return False
    try:
        with psycopg.connect(url, connect_timeout=max(1, round(timeout))) as conn:
            row = conn.execute("SELECT 1").fetchone()
    except psycopg.Error:
        return False
    return row == (1,)


def _container_url() -> str | None:
    try:
        from testcontainers.postgres import PostgresContainer
    except ImportError:
        return None
    return start_container(
        lambda: PostgresContainer("postgres:16-alpine", dbname="test"),
        lambda c: str(c.get_connection_url(driver=None)),
    )


@functools.cache
def find_url() -> str | None:
    """A PostgreSQL URL for tests: ``$AGENTCKPT_TEST_POSTGRES_URL``, else a server answering
    on 127.0.0.1:5432 (database ``test``, user ``postgres``), else a testcontainers
    PostgreSQL when a Docker engine answers, else None.

    >>> find_url()  # doctest: +SKIP
    'postgresql://postgres@127.0.0.1:5432/test'
    """
    url = os.environ.get(ENV_VAR)
    if url:
        return url
    if port_open("127.0.0.1", 5432) and server_answers(_LOCAL_URL):
        return _LOCAL_URL
    if docker_engine_answers():
        return _container_url()
    return None


def _bindir() -> Path:
    """Where ``initdb`` and ``postgres`` are: ``pg_config --bindir``, else the newest
    ``/usr/lib/postgresql/*/bin`` (Debian keeps them off PATH), else PATH."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    candidates += [Path(p) for p in reversed(versions)]
    on_path = shutil.which("postgres")
    if on_path:
        candidates.append(Path(on_path).parent)
    for candidate in candidates:
        if (candidate / "initdb").is_file() and (candidate / "postgres").is_file():
            return candidate
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, postgres) not found: install the server "
        "(e.g. 'apt install postgresql') or put its bin directory on PATH"
    )


class PrivatePostgres(LoopbackServer):
    """A ``postgres`` of one's own on 127.0.0.1 at a free port, with ``fsync`` on.

    For durability tests: :meth:`restart` stops the server cleanly (fast shutdown) and
    starts it again on the same port and data directory; :meth:`kill` sends SIGKILL to
    the postmaster (an acknowledged commit still survives: fsync and synchronous_commit
    are on). ``url`` points at the ``postgres`` database as user ``postgres``, trust
    authentication on loopback only.

    Run as root, the server runs as the ``postgres`` OS user (PostgreSQL refuses root),
    and the data directory lives in a private directory that user can reach.

    >>> with PrivatePostgres(tmp_path) as server:  # doctest: +SKIP
    ...     store = PostgresStore.from_url(server.url)
    ...     server.restart()
    """

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = Path(base_dir)
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._bin = _bindir()
        self._as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self._own_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.base_dir / "postgres.log"

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory (created by the first :meth:`start`)."""
        if self._own_dir is None:
            if self._as_root:
                # pytest's temporary directories are 0700 root: the postgres user could
                # not reach a data directory inside them.
                self._own_dir = Path(tempfile.mkdtemp(prefix="agentckpt-pg-"))
                shutil.chown(self._own_dir, "postgres", "postgres")
                # This directory is outside base_dir, so a caller that only stop()s (and
                # lets its temporary base_dir go) could not clean it: do it at exit.
                atexit.register(self.remove)
                (self.base_dir / "data-dir").write_text(str(self._own_dir))
            else:
                self._own_dir = self.base_dir / "pgdata-parent"
                self._own_dir.mkdir(exist_ok=True)
        return self._own_dir / "data"

    def _command(self, binary: str, *args: str) -> list[str]:
        command = [str(self._bin / binary), *args]
        if self._as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        return command

    def _initdb(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        result = subprocess.run(
            self._command(
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ),
            capture_output=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError("initdb failed: " + result.stderr.decode(errors="replace")[-2000:])

    def start(self, timeout: float = 30.0) -> None:
        """Create the cluster if needed, start the server and wait until it answers."""
        if self._process is not None and self._process.poll() is None:
            return
        self._initdb()
        command = self._command(
            "postgres",
            "-D", str(self.data_dir),
            "-p", str(self.port),
            "-c", "listen_addresses=127.0.0.1",
            "-c", f"unix_socket_directories={self.data_dir.parent}",
            "-c", "fsync=on",
            "-c", "synchronous_commit=on",
            "-c", "full_page_writes=on",
            "-c", "max_connections=30",
            "-c", "shared_buffers=16MB",
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            attempts += 1
            with self.log_path.open("ab") as log:
                self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            while time.monotonic() < deadline and self._process.poll() is None:
                if port_open("127.0.0.1", self.port, 0.2) and server_answers(self.url, 2):
                    return
                time.sleep(0.1)
            # After a SIGKILL the old backends may still hold shared memory for a moment:
            # a start that exits at once is worth another try until the deadline.
            if self._process.poll() is None or time.monotonic() >= deadline or attempts >= 20:
                break
            time.sleep(0.25)
        self._signal_postmaster(signal.SIGKILL)
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"postgres did not answer on port {self.port}: {tail}")

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first.strip())
        except (OSError, ValueError):
            return None

    def _signal_postmaster(self, sig: signal.Signals) -> None:
        pid = self._postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.kill(pid, sig)

    def _wait_stopped(self, timeout: float) -> None:
        process, self._process = self._process, None
        deadline = time.monotonic() + timeout
        if process is not None:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        # The postmaster removes its pid file on a clean stop; after SIGKILL wait for the
        # port to close so that a restart can bind it again.
        while time.monotonic() < deadline and port_open("127.0.0.1", self.port, 0.2):
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (fast shutdown: it ends sessions and writes a checkpoint)."""
        if self._process is None or self._process.poll() is not None:
            self._process = None
            return
        self._signal_postmaster(signal.SIGINT)
        self._wait_stopped(timeout)

    def restart(self) -> None:
        """Stop cleanly and start again on the same port; the data stay."""
        self.stop()
        self.start()

    def kill(self) -> None:
        """SIGKILL the postmaster: no shutdown checkpoint; crash recovery on next start."""
        if self._process is None:
            return
        self._signal_postmaster(signal.SIGKILL)
        self._wait_stopped(15)

    def remove(self) -> None:
        """Stop the server and delete its data directory (also done at interpreter exit)."""
        self.stop()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.remove()
