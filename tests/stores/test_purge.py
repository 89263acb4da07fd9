"""Test namespaces are purged, so runs leave nothing on shared servers."""

from __future__ import annotations

from pytest_agentckpt.fixtures.backends import purge_namespace
from stores import Checkpoint, open_store


def test_purge_removes_everything_a_namespace_holds(any_checkpoint_store_url: str) -> None:
    store = open_store(any_checkpoint_store_url)
    try:
        store.save(Checkpoint(task_id="a", messages=[{"role": "user", "content": "hi"}]))
        store.save(Checkpoint(task_id="b"))
    finally:
        store.close()
    purge_namespace(any_checkpoint_store_url)
    fresh = open_store(any_checkpoint_store_url)
    try:
        assert fresh.load("a") is None
        assert fresh.list_checkpoints() == []
    finally:
        fresh.close()
