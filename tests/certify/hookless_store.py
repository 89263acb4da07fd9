"""Correct-looking stores without certification hooks: damage cannot be checked, only reported so."""

from __future__ import annotations

from typing import Any

from stores import Checkpoint, CheckpointSummary, StoreInfo
from stores.memory import MemoryStore

from .buggy_stores import NoneOnCorruptStore, _root


class HooklessStore(MemoryStore):
    """A MemoryStore subclass: the built-in adapter does not recognise it."""


HooklessStore.__module__ = __name__


def make_store(namespace: str) -> HooklessStore:
    return HooklessStore(namespace)


class HooklessNoneOnCorrupt:
    """The store that returns None for damaged data, offering no hook to damage it.

    Shared across processes (a directory), so every contract but the two damage ones is
    checked; those two cannot be, which is exactly what hid its bug.
    """

    def __init__(self, namespace: str) -> None:
        self._inner = NoneOnCorruptStore(_root("hookless-none-on-corrupt", namespace))

    def load(self, task_id: str) -> Checkpoint | None:
        return self._inner.load(task_id)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        return self._inner.save(checkpoint)

    def delete(self, task_id: str) -> None:
        self._inner.delete(task_id)

    def list_checkpoints(self, **filters: Any) -> list[CheckpointSummary]:
        return self._inner.list_checkpoints(**filters)

    def info(self) -> StoreInfo:
        return self._inner.info()

    def close(self) -> None:
        self._inner.close()


def make_none_on_corrupt(namespace: str) -> HooklessNoneOnCorrupt:
    return HooklessNoneOnCorrupt(namespace)
