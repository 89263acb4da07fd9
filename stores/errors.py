"""Errors raised by checkpoint stores.

Every error a store raises is a :class:`StoreError`. Damage is never reported as
absence: ``load`` returns ``None`` only when no checkpoint exists.
"""

from __future__ import annotations

__all__ = [
    "ConflictError",
    "CorruptCheckpointError",
    "InvalidStoreURLError",
    "InvalidTaskIdError",
    "MissingDriverError",
    "StatusOutOfStepError",
    "StoreError",
    "StoreNotFoundError",
    "StoreUnavailableError",
    "UnstorableCheckpointError",
    "UnsupportedSchemaVersionError",
]


class StoreError(Exception):
    """Base class of every error raised by a checkpoint store."""


class ConflictError(StoreError):
    """A compare-and-set save lost: the stored version is not the one the caller read.

    Nothing was written. Another worker owns the task (or wrote first): reload, decide,
    and save again, or stop.

    ``actual`` is the version stored, or ``None`` when no checkpoint is stored; a store
    whose refused create does not tell it the version (a conditional write, an insert
    that hit the unique key) passes ``None`` too, and the message says it was not read.

    >>> str(ConflictError("t", 0, None)).split(":")[0]
    "checkpoint 't' already exists (its version was not read); expected none"
    """

    def __init__(self, task_id: str, expected: int, actual: int | None) -> None:
        self.task_id = task_id
        self.expected = expected
        self.actual = actual
        found = "no checkpoint" if actual is None else f"version {actual}"
        if expected == 0:
            # A create refused: a checkpoint is there, whatever actual says.
            found = "its version was not read" if actual is None else found
            msg = f"checkpoint {task_id!r} already exists ({found}); expected none"
        elif actual is None:
            msg = f"checkpoint {task_id!r} is not stored (deleted, or never saved), expected version {expected}"
        else:
            msg = f"checkpoint {task_id!r} is at {found}, expected version {expected}"
        super().__init__(msg + ": another writer saved first; reload before saving again")


class CorruptCheckpointError(StoreError):
    """Stored data for a task exists but cannot be read back as a valid checkpoint.

    The stored bytes are left untouched so that they can be inspected or repaired.
    """

    def __init__(self, task_id: str, reason: str) -> None:
        self.task_id = task_id
        self.reason = reason
        super().__init__(
            f"checkpoint {task_id!r} is corrupt: {reason}. The stored data was left as it is; "
            "inspect it, restore it from a backup, or delete the task to start over"
        )


class StatusOutOfStepError(CorruptCheckpointError):
    """A store's status column says ``listed`` where the stored head says ``stored``: one
    was edited apart from the other. The task may be running: never a task to delete."""

    def __init__(self, task_id: str, listed: str, stored: str) -> None:
        self.listed, self.stored = listed, stored
        super().__init__(
            task_id,
            f"the status column says {listed!r} but the stored head says {stored!r}: one of them "
            "was edited apart from the other (load reads the head)",
        )


class UnsupportedSchemaVersionError(StoreError):
    """The stored checkpoint was written by a newer version of this code."""

    def __init__(self, task_id: str, found: int, supported: int) -> None:
        self.task_id = task_id
        self.found = found
        self.supported = supported
        super().__init__(
            f"checkpoint {task_id!r} has schema_version {found}, but this code reads up to "
            f"{supported}: upgrade pytest-agentckpt to resume it (nothing was changed)"
        )


class StoreUnavailableError(StoreError):
    """The backend could not be reached or refused the operation for a transient reason."""


class StoreNotFoundError(StoreUnavailableError):
    """No store exists where the URL points, and it was opened with ``create=False``.

    Nothing was created. Check the URL (a mistyped SQLite path, table prefix or
    bucket), or open it without ``create=False`` to create the store.
    """


class InvalidStoreURLError(StoreError, ValueError):
    """A store URL that names no supported backend or is malformed."""


class InvalidTaskIdError(StoreError, ValueError):
    """A task id no store accepts: not a string, empty, or not valid UTF-8.

    Raised before any I/O: nothing was read or written.
    """


class UnstorableCheckpointError(StoreError, ValueError):
    """A checkpoint holds data that could not be stored and read back faithfully.

    Raised by ``save`` before any byte is written, so that a save is never acknowledged
    that ``load`` would refuse: nesting deeper than
    :data:`~stores.codec.MAX_NESTING_DEPTH`, an integer longer than
    :data:`~stores.codec.MAX_INT_DIGITS` digits, a lone surrogate, NaN, or an object that
    is not JSON data. ``path`` names the place (``messages.3.content.0``).
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class MissingDriverError(StoreError, ImportError):
    """The backend's driver package is not installed."""

    def __init__(self, backend: str, extra: str, module: str) -> None:
        super().__init__(
            f"the {backend} store needs the {module!r} package: "
            f"pip install 'pytest-agentckpt[{extra}]'"
        )
        self.backend = backend
        self.extra = extra
