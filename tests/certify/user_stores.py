"""Factories a user might write that point at a store holding their own tasks.

They read the URL from ``$USER_STORE_URL`` (inherited by the spawned writer processes).
``make`` takes no namespace, ``make_ignoring_namespace`` takes one and ignores it, and
``make_process_local`` shares data between instances of one process only.
"""

from __future__ import annotations

import os

from stores import CheckpointStore, open_store
from stores.memory import MemoryStore

URL_VARIABLE = "USER_STORE_URL"


def make() -> CheckpointStore:
    return open_store(os.environ[URL_VARIABLE])


def make_ignoring_namespace(namespace: str) -> CheckpointStore:
    return open_store(os.environ[URL_VARIABLE])


#: One in-process store per namespace: instances share data, processes never do.
_IN_THIS_PROCESS: dict[str, MemoryStore] = {}


def make_process_local(namespace: str) -> CheckpointStore:
    return _IN_THIS_PROCESS.setdefault(namespace, MemoryStore(namespace))


def make_warning(namespace: str) -> CheckpointStore:
    """Warns on every open, as a Redis store without AOF does (with its own URL in it)."""
    import warnings

    warnings.warn(f"store {namespace} is not durable", UserWarning, stacklevel=1)
    return MemoryStore(namespace)
