"""The harness's SDK clients have no spans on CPython 3.11 and earlier, where the tool
runners a crash abandons would otherwise crash the interpreter when collected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentckpt._scenario import SDK_SPANS, _Router

ROOT = Path(__file__).resolve().parents[2]


def test_harness_clients_have_spans_only_where_collection_is_deferred() -> None:
    router = _Router()
    if sys.version_info < (3, 12):
        assert router.client()._tracer is None
        assert router.async_client()._tracer is None
    else:
        assert SDK_SPANS is None  # the SDK's default, the environment's choice


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the collector runs at safe points from 3.12")
def test_abandoned_tool_runners_collected_mid_contextvar_update_do_not_crash() -> None:
    # In a child: without the fix, it dies of a segmentation fault or reports the freed
    # HAMT node it read (exit status 1).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.run(
        [sys.executable, "-m", "tests.harness.abandoned_runner"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert child.returncode == 0, child.stderr[-2000:]
