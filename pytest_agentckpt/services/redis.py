"""Redis for the test suites: find a running server, or start a private one on loopback.

:func:`find_url` is what the ``agentckpt_redis_url`` fixture uses. :class:`PrivateRedis`
runs a ``redis-server`` of its own (for tests that restart or kill the server, or need
AOF on or off: never do that to a shared server).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from . import LoopbackServer, docker_engine_answers, free_port, port_open, start_container

__all__ = ["ENV_VAR", "HOW_TO_ENABLE", "PrivateRedis", "find_url"]

ENV_VAR = "AGENTCKPT_TEST_REDIS_URL"

HOW_TO_ENABLE = (
    f"set {ENV_VAR}=redis://host:port/db to a Redis server the tests may write to "
    "(each test uses its own key prefix and removes nothing else), or run redis-server on "
    "127.0.0.1:6379 (e.g. 'apt install redis-server' or 'redis-server --daemonize yes'), or "
    "start a Docker engine so that testcontainers can run Redis "
    "(pip install 'pytest-agentckpt[containers]')"
)

_LOCAL = ("127.0.0.1", 6379)


def _ping(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a Redis server answers PING at ``host:port`` (a reply of any kind counts
    as Redis only when it is a RESP reply, so another service on the port does not)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
    except OSError:
        return False
    # +PONG, or -NOAUTH when a password is set: both are a Redis server.
    return reply.startswith((b"+PONG", b"-NOAUTH", b"-ERR"))


def _container_url() -> str | None:
    try:
        from testcontainers.redis import RedisContainer
    except ImportError:
        return None
    return start_container(
        lambda: RedisContainer("redis:7-alpine"),
        lambda c: f"redis://{c.get_container_host_ip()}:{c.get_exposed_port(6379)}/0",
    )


def find_url() -> str | None:
    """A Redis URL for tests: ``$AGENTCKPT_TEST_REDIS_URL``, else a server answering on
    127.0.0.1:6379, else a testcontainers Redis when a Docker engine answers, else None.

    >>> find_url()  # doctest: +SKIP
    'redis://127.0.0.1:6379/0'
    """
    url = os.environ.get(ENV_VAR)
    if url:
        return url
    if _ping(*_LOCAL):
        return f"redis://{_LOCAL[0]}:{_LOCAL[1]}/0"
    if docker_engine_answers():
        return _container_url()
    return None


class PrivateRedis(LoopbackServer):
    """A ``redis-server`` of one's own on 127.0.0.1, data under ``base_dir``.

    For durability tests: :meth:`restart` stops the server cleanly and starts it again on
    the same port and directory (data survive only with AOF on), :meth:`kill` sends
    SIGKILL (an acknowledged save with ``appendfsync always`` still survives).

    >>> with PrivateRedis(tmp_path) as server:  # doctest: +SKIP
    ...     store = RedisStore.from_url(server.url)
    """

    def __init__(self, base_dir: Path, *, appendonly: bool = True) -> None:
        self.base_dir = Path(base_dir)
        self.appendonly = appendonly
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None
        self._log = self.base_dir / "redis.log"

    def _command(self) -> list[str]:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not on PATH: install it (e.g. 'apt install redis-server')"
            )
        command = [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--dir",
            str(self.base_dir),
            "--daemonize",
            "no",
            "--save",
            "",  # no RDB snapshots: AOF alone decides durability here
            "--protected-mode",
            "yes",
            "--logfile",
            str(self._log),
        ]
        if self.appendonly:
            command += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            command += ["--appendonly", "no"]
        return command

    def start(self, timeout: float = 15.0) -> None:
        """Start the server and wait until it answers PING."""
        if self._process is not None and self._process.poll() is None:
            return
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                break
            if _ping("127.0.0.1", self.port, timeout=0.5):
                return
            time.sleep(0.05)
        self.kill()
        tail = self._log.read_text(errors="replace")[-2000:] if self._log.exists() else ""
        raise RuntimeError(f"redis-server did not answer on port {self.port}: {tail}")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM: it finishes writing its AOF first)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
        self._wait_port_closed()

    def kill(self) -> None:
        """SIGKILL the server: no shutdown, no final flush."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        self._wait_port_closed()

    def restart(self) -> None:
        """Stop and start again on the same port and data directory."""
        self.stop()
        self.start()

    def _wait_port_closed(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and port_open("127.0.0.1", self.port, 0.2):
            time.sleep(0.05)

