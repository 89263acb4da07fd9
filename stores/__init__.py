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
    InvalidTaskIdError,
    MissingDriverError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    UnstorableCheckpointError,
    UnsupportedSchemaVersionError,
)
from .protocol import CheckpointStore, StoreInfo
from .registry import open_store
from .url import DEFAULT_STORE_URL, redact_url

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
    "InvalidTaskIdError",
    "MissingDriverError",
    "RecordedResult",
    "StoreError",
    "StoreInfo",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "UnstorableCheckpointError",
    "UnsupportedSchemaVersionError",
    "open_store",
    "redact_url",
]
