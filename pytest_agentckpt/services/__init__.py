"""Servers the test suites need: find a running one, or start a private one on loopback.

Each backend has its own module (``postgres``, ``redis``, ``s3``). A test that needs a
backend that cannot be had is skipped with a message that says how to enable it, except
under CI (``CI`` set), where the same condition fails the test: a CI run that silently
skips its backend tests proves nothing.
"""

from __future__ import annotations

import atexit
import os
import socket
from collections.abc import Callable
from types import TracebackType
from typing import Any, NoReturn, TypeVar
from urllib.parse import urlsplit

import pytest

__all__ = [
    "LoopbackServer",
    "backend_unavailable",
    "docker_engine_answers",
    "free_port",
    "in_ci",
    "port_open",
    "start_container",
]


def in_ci() -> bool:
    """True when running under CI (``CI`` set to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def backend_unavailable(backend: str, reason: str, how_to_enable: str) -> NoReturn:
    """Skip (or, under CI, fail) a test whose backend cannot be had."""
    message = f"{backend} backend unavailable: {reason}. To enable it: {how_to_enable}"
    if in_ci():
        pytest.fail(message + " [CI is set: a required backend must run, not skip]", pytrace=False)
    pytest.skip(message)


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def docker_engine_answers(timeout: float = 1.0) -> bool:
    """Whether a Docker engine answers ``/_ping`` (fast: an installed client with no
    daemon behind it answers False within ``timeout``)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    request = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n"
    try:
        if host.startswith("unix://"):
            path = host[len("unix://") :]
            if not os.path.exists(path):
                return False
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(path)
                sock.sendall(request)
                reply = sock.recv(64)
        elif host.startswith("tcp://"):
            parts = urlsplit(host)
            with socket.create_connection(
                (parts.hostname or "127.0.0.1", parts.port or 2375), timeout=timeout
            ) as sock:
                sock.sendall(request)
                reply = sock.recv(64)
        else:
            return False
    except OSError:
        return False
    return reply.startswith(b"HTTP/") and b" 200 " in reply.split(b"\r\n", 1)[0]


def start_container(make: Callable[[], Any], url_of: Callable[[Any], str]) -> str | None:
    """Start a testcontainers container (stopped at exit) and return its URL, or None when
    the engine refuses or the image cannot be had: the caller then skips as for no server."""
    try:
        container = make()
        container.start()
    except Exception:
        return None
    atexit.register(container.stop)
    return url_of(container)


_Server = TypeVar("_Server", bound="LoopbackServer")


class LoopbackServer:
    """What the test servers share: started on ``with`` entry, stopped on exit."""

    def start(self) -> None:
        """Start the server and return once it answers."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        raise NotImplementedError

    def __enter__(self: _Server) -> _Server:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
