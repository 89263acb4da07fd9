"""Servers the test suites need: find a running one, or start a private one on loopback.

Each backend has its own module (``postgres``, ``redis``, ``s3``). A test that needs a
backend that cannot be had is skipped with a message that says how to enable it, except
under CI (``CI`` set), where the same condition fails the test: a CI run that silently
skips its backend tests proves nothing.
"""

from __future__ import annotations

import os
import socket
from typing import NoReturn

import pytest

__all__ = ["backend_unavailable", "free_port", "in_ci", "port_open"]


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
