"""Checkpoint schema, store protocol and backends for checkpointed agents.

>>> from stores import Checkpoint, open_store
>>> store = open_store("memory://")
>>> saved = store.save(Checkpoint(task_id="t1", goal="demo"))
>>> store.load("t1").goal
'demo'

Database drivers are imported lazily inside their backend, so ``import stores`` works
with none installed.
"""

from __future__ import annotations

from .checkpoint import (
    SCHEMA_VERSION,
    ActionRecord,
    ActionState,
    Checkpoint,
    CheckpointStatus,
    CheckpointSummary,
    RecordedResult,
)
from .errors import (
    ConflictError,
    CorruptCheckpointError,
    InvalidStoreURLError,
    MissingDriverError,
    StoreError,
    StoreUnavailableError,
    UnsupportedSchemaVersionError,
)
from .protocol import CheckpointStore, StoreInfo
from .url import DEFAULT_STORE_URL, open_store, redact_url

__all__ = [
    "DEFAULT_STORE_URL",
    "SCHEMA_VERSION",
    "ActionRecord",
    "ActionState",
    "Checkpoint",
    "CheckpointStatus",
    "CheckpointStore",
    "CheckpointSummary",
    "ConflictError",
    "CorruptCheckpointError",
    "InvalidStoreURLError",
    "MissingDriverError",
    "RecordedResult",
    "StoreError",
    "StoreInfo",
    "StoreUnavailableError",
    "UnsupportedSchemaVersionError",
    "open_store",
    "redact_url",
]
