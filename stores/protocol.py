"""The checkpoint-store interface every backend honours."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .checkpoint import Checkpoint, CheckpointStatus, CheckpointSummary
from .errors import CorruptCheckpointError, StatusOutOfStepError, UnsupportedSchemaVersionError

__all__ = ["CheckpointStore", "OnUnreadable", "StoreInfo"]

#: ``list_checkpoints(on_unreadable=...)`` of the built-in stores: called with the error of
#: each task whose head cannot be read (that task is left out of the listing).
OnUnreadable = Callable[[CorruptCheckpointError | UnsupportedSchemaVersionError], None]


@dataclass(frozen=True)
class StoreInfo:
    """What a store says about itself: for reports, certification and warnings.

    ``durable`` is True when an acknowledged save survives a server restart, False when
    it does not (an in-memory Redis), None when the store cannot tell. ``ttl`` is the
    retention of finished checkpoints in seconds (see :mod:`stores.retention`), None when
    they are kept until deleted.
    """

    backend: str
    url: str
    durable: bool | None = None
    incremental: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    ttl: float | None = None


@runtime_checkable
class CheckpointStore(Protocol):
    """Durable storage of checkpoints with compare-and-set saves.

    >>> from stores import open_store, Checkpoint
    >>> store = open_store("memory://")
    >>> saved = store.save(Checkpoint(task_id="t1", goal="demo"))
    >>> saved.version, store.load("t1").version
    (1, 1)
    """

    def load(self, task_id: str) -> Checkpoint | None:
        """The stored checkpoint, or ``None`` only when none exists.

        Raises ``CorruptCheckpointError`` for unreadable data and
        ``UnsupportedSchemaVersionError`` for a newer schema: never ``None`` for damage.
        The result shares no mutable state with the store.
        """
        ...

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        """Compare-and-set: write ``checkpoint`` if the stored version is ``checkpoint.version``.

        Version 0 means "must not exist yet". The write is atomic. Returns the checkpoint
        carrying its new version (and ``updated_at``); raises ``ConflictError`` and
        changes nothing otherwise.
        """
        ...

    def delete(self, task_id: str) -> None:
        """Remove the checkpoint; deleting a missing one is not an error."""
        ...

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointSummary]:
        """Summaries of stored checkpoints, filtered by status and by metadata equality
        (every key of ``metadata`` must be present with an equal value), ordered by
        ``task_id``."""
        ...

    def info(self) -> StoreInfo:
        """What this store is and what it guarantees."""
        ...

    def close(self) -> None:
        """Release connections; the store is not used afterwards."""
        ...


def metadata_matches(stored: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """The one rule for metadata filters: every wanted key present with an equal value."""
    if not wanted:
        return True
    return all(key in stored and stored[key] == value for key, value in wanted.items())


def check_listing_filters(status: Any, metadata: Any, on_unreadable: Any = None) -> None:
    """Refuse filters no checkpoint can match before any store is asked: a ``status`` that
    is not one of the statuses (a typo, ``"complete"``, listed nothing without a word; a
    number reached PostgreSQL and came back as an outage), a ``metadata`` that is not a
    mapping with text keys, an ``on_unreadable`` that cannot be called."""
    from typing import get_args

    statuses = get_args(CheckpointStatus)
    if status is not None and (not isinstance(status, str) or status not in statuses):
        raise ValueError(f"status must be one of {', '.join(map(repr, statuses))} or None, not {status!r}")
    if metadata is not None and (
        not isinstance(metadata, Mapping) or not all(isinstance(key, str) for key in metadata)
    ):
        raise TypeError(f"metadata must be a mapping of text keys to values (or None), not {metadata!r:.80}")
    if on_unreadable is not None and not callable(on_unreadable):
        raise TypeError(f"on_unreadable must be a function of the error (or None), not {on_unreadable!r:.80}")


def summary_matches(
    summary: CheckpointSummary,
    status: CheckpointStatus | None,
    metadata: Mapping[str, Any] | None,
) -> bool:
    """The listing filter for stores that filter in Python: status, then metadata."""
    return (status is None or summary.status == status) and metadata_matches(
        summary.metadata, metadata
    )


def summary_or_report(
    on_unreadable: OnUnreadable | None,
    decode: Callable[..., CheckpointSummary],
    *args: Any,
) -> CheckpointSummary | None:
    """``decode(*args)``; with ``on_unreadable``, an unreadable head is handed to it and
    ``None`` returned (the listing goes on with the other tasks), else its error is raised."""
    if on_unreadable is None:
        return decode(*args)
    try:
        return decode(*args)
    except (CorruptCheckpointError, UnsupportedSchemaVersionError) as exc:
        on_unreadable(exc)
        return None


def check_listed_columns(task_id: str, head_status: str, version: Any, wanted: str | None) -> None:
    """The columns a listing filtered and ordered by must agree with the head it read:
    a ``status`` column edited apart from the head listed a running task as completed
    (what a prune by that listing would delete), a version below 1 a checkpoint no save
    wrote (an outside round edited both)."""
    if wanted is not None and head_status != wanted:
        raise StatusOutOfStepError(task_id, wanted, head_status)
    check_version_column(task_id, version)


def check_version_column(task_id: str, version: Any) -> None:
    """A version column below 1 (or not an integer) is damage: no save writes it."""
    if not isinstance(version, int) or version < 1:
        raise CorruptCheckpointError(task_id, f"the version column holds {version!r}, which no save writes")
