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
