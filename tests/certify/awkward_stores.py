"""Stores that are not buggy but awkward: slow, hanging at creation, or with a backend down.

``make_slow`` is the directory store with a delay before every call (a remote store's
round trip, ``$SLOW_STORE_DELAY`` seconds, default 0.02): correct, only slow.
``make_hanging`` never returns. ``make_down`` opens, then every call fails as a store
whose server went away does.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from stores import Checkpoint
from tests.certify.buggy_stores import DirectoryStore


def _root(kind: str, namespace: str) -> Path:
    base = Path(os.environ.get("BUGGY_STORE_DIR") or Path(tempfile.gettempdir()) / "agentckpt-buggy")
    return base / kind / namespace


class SlowStore(DirectoryStore):
    """Correct, with a round trip before every call."""

    @staticmethod
    def _wait() -> None:
        time.sleep(float(os.environ.get("SLOW_STORE_DELAY", "0.02")))

    def load(self, task_id: str) -> Checkpoint | None:
        self._wait()
        return super().load(task_id)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        self._wait()
        return super().save(checkpoint)

    def delete(self, task_id: str) -> None:
        self._wait()
        super().delete(task_id)

    def list_checkpoints(self, **filters: Any) -> Any:
        self._wait()
        return super().list_checkpoints(**filters)


class DownStore(DirectoryStore):
    """Every call fails: the backend went away after the store was opened."""

    def _down(self, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionRefusedError("connection refused (the backend is down)")

    load = save = delete = list_checkpoints = _down


def make_slow(namespace: str) -> SlowStore:
    return SlowStore(_root("slow", namespace))


def make_hanging(namespace: str) -> DirectoryStore:
    while True:
        time.sleep(3600)


def make_down(namespace: str) -> DownStore:
    return DownStore(_root("down", namespace))


class DriverErrorStore(DirectoryStore):
    """Lets a driver's own exception out of a save that loses a race (an outside round's
    NATS store let ``KeyWrongLastSequenceError`` escape instead of ConflictError): here, of
    a save whose messages differ from the stored ones, so that the writers' race meets it
    (the race of saves that change the metadata alone, before it, reports such an error
    as a failure of its own)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        if checkpoint.version >= 3:
            current = super().load(checkpoint.task_id)
            if current is not None and current.version != checkpoint.version and current.messages != checkpoint.messages:
                raise LookupError(f"wrong last sequence: {current.version}")
        return super().save(checkpoint)


def make_driver_error(namespace: str) -> DriverErrorStore:
    return DriverErrorStore(_root("driver-error", namespace))
