"""--agentckpt-redis-db shares failures between machines: two project directories, one Redis.

Against the real Redis on 127.0.0.1, under a key prefix of its own (deleted afterwards).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_hypothesis_database import ARGS, BUGGY, found_after

redis = pytest.importorskip("redis")


@pytest.fixture
def prefix() -> Iterator[str]:
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    name = f"agentckpt-test-{uuid.uuid4().hex[:12]}:"
    try:
        yield name
    finally:
        for key in client.scan_iter(match=f"{name}*"):
            client.delete(key)
        client.close()


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "test_buggy.py").write_text(BUGGY)
    return root


def _pytest(project: Path, url: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *ARGS, f"--agentckpt-redis-db={url}"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


def test_a_failure_found_on_one_machine_is_replayed_first_on_another(tmp_path: Path, prefix: str) -> None:
    url = f"redis://127.0.0.1:6379/0?key_prefix={prefix}"
    first = _pytest(_project(tmp_path / "machine_a"), url)
    assert "failures shared through Redis" in first
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    assert any(client.scan_iter(match=f"{prefix}*")), "nothing saved in Redis"
    client.close()
    second_dir = _project(tmp_path / "machine_b")
    second = _pytest(second_dir, url)
    assert found_after(second) <= 3


def test_an_unreachable_redis_is_a_usage_error_naming_it_without_its_password(tmp_path: Path) -> None:
    # It was a redis ConnectionError traceback in the first fuzz test, failing the test.
    project = _project(tmp_path / "project")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *ARGS, "--agentckpt-redis-db=redis://:s3cretpw@127.0.0.1:1/0"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 4, output  # pytest's usage error
    assert "--agentckpt-redis-db: cannot reach redis://:***@127.0.0.1:1/0: ConnectionError" in output
    assert "leave the option out" in output and "s3cretpw" not in output and "Traceback" not in output


class _Flaky:
    """An example database whose Redis stops answering after ``good`` calls."""

    def __init__(self, good: int) -> None:
        self.good, self.calls = good, 0

    def _call(self) -> None:
        self.calls += 1
        if self.calls > self.good:
            raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    def save(self, key: bytes, value: bytes) -> None:
        self._call()

    def fetch(self, key: bytes) -> Iterator[bytes]:
        self._call()
        yield b"example"


def test_a_redis_that_stops_answering_mid_run_is_one_warning_and_an_empty_database() -> None:
    from pytest_agentckpt.fixtures.harness import _Tolerant

    inner = _Flaky(good=2)
    database = _Tolerant(inner, "redis://127.0.0.1:6379/0")  # type: ignore[arg-type]
    assert list(database.fetch(b"k")) == [b"example"]
    database.save(b"k", b"v")
    with pytest.warns(RuntimeWarning, match="stopped answering .ConnectionError.; failing examples are kept in the local"):
        assert list(database.fetch(b"k")) == []
    database.save(b"k", b"v")
    database.delete(b"k", b"v")
    assert list(database.fetch(b"k")) == []
    assert inner.calls == 3  # once down, it is not asked again (each call would wait on the network)
