"""In-process store for tests: encoded copies in, decoded copies out, the same CAS."""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .checkpoint import Checkpoint, CheckpointStatus, CheckpointSummary, utcnow
from .codec import (
    check_task_id,
    decode_checkpoint,
    decode_summary,
    encode_head,
    encode_messages,
    task_id_of,
)
from .errors import ConflictError, InvalidStoreURLError
from .incremental import PrefixTracker, WritePlan
from .protocol import (
    OnUnreadable,
    StoreInfo,
    check_listing_filters,
    summary_matches,
    summary_or_report,
)
from .retention import is_expired, parse_ttl
from .url import check_params, query_params, redact_url, split_url

__all__ = ["MemoryStore"]


@dataclass
class _Record:
    version: int
    lineage: str
    head: bytes
    status: CheckpointStatus
    updated_at: _dt.datetime
    messages: list[bytes] = field(default_factory=list)


class MemoryStore:
    """A thread-safe in-process :class:`~stores.CheckpointStore`.

    It keeps the encoded bytes, as a durable store would, so that it exercises the same
    serializer and never aliases the caller's objects. ``bytes_written`` counts what the
    saves wrote, for incremental-save checks. ``ttl`` (seconds or a duration such as
    ``"7d"``) forgets finished checkpoints that long after their last save
    (:mod:`stores.retention`).

    >>> store = MemoryStore()
    >>> store.load("missing") is None
    True
    """

    def __init__(self, name: str = "", *, ttl: float | str | None = None) -> None:
        self.name = name
        self.ttl = parse_ttl(ttl)
        self.bytes_written = 0
        self._records: dict[str, _Record] = {}
        self._lock = threading.Lock()
        self._tracker = PrefixTracker()

    @classmethod
    def from_url(cls, url: str, *, create: bool = True) -> MemoryStore:
        """``memory://``, ``memory://name`` or ``memory://name?ttl=7d``.

        ``create`` is accepted for :func:`~stores.open_store`; a memory store is always
        new and empty, and opening it creates nothing outside the process.
        """
        parts = split_url(url)
        params = query_params(parts, url)
        check_params("memory://", url, params, ["ttl"])
        try:
            return cls((parts.netloc + parts.path).strip("/"), ttl=params.get("ttl"))
        except ValueError as exc:
            raise InvalidStoreURLError(f"{redact_url(url)!r}: {exc}") from None

    def __repr__(self) -> str:
        return f"<MemoryStore {redact_url(self.info().url)!r}>"

    def _live(self, task_id: str, now: _dt.datetime) -> _Record | None:
        """The record of ``task_id`` unless it has expired (then it is dropped). Lock held."""
        record = self._records.get(task_id)
        if record is not None and is_expired(record.status, record.updated_at, self.ttl, now):
            del self._records[task_id]
            return None
        return record

    def load(self, task_id: str) -> Checkpoint | None:
        check_task_id(task_id)
        with self._lock:
            record = self._live(task_id, utcnow())
            if record is None:
                self._tracker.forget(task_id)
                return None
            version, lineage, head, messages = (
                record.version,
                record.lineage,
                record.head,
                list(record.messages),
            )
        copies = self._tracker.copies_for(task_id, version, lineage, len(messages))
        checkpoint = decode_checkpoint(task_id, head, messages, copies=copies)
        self._tracker.loaded(task_id, version, lineage, checkpoint.messages, copies=copies)
        if checkpoint.version != version:  # the head is written with its version
            checkpoint = checkpoint.model_copy(update={"version": version})
        return checkpoint

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = check_task_id(task_id_of(checkpoint), saving=True)
        now = utcnow()
        plan = self._tracker.plan(checkpoint)
        with self._lock:
            record = self._live(task_id, now)
            actual = None if record is None else record.version
            if (actual or 0) != checkpoint.version:
                self._tracker.forget(task_id)
                raise ConflictError(task_id, checkpoint.version, actual)
            new_version = checkpoint.version + 1
            saved = checkpoint.model_copy(update={"version": new_version, "updated_at": now})
            head = encode_head(saved)
            if record is None:
                record = _Record(new_version, plan.lineage, head, saved.status, now, list(plan.encoded))
                self._records[task_id] = record
            elif plan.rewrite or record.lineage != plan.lineage or len(record.messages) != plan.start:
                # The tracker's snapshot is not what is stored: rewrite the whole history.
                plan = WritePlan(True, 0, encode_messages(checkpoint.messages), record.lineage)
                record.messages = list(plan.encoded)
                record.version, record.head = new_version, head
            else:
                record.messages.extend(plan.encoded)
                record.version, record.head = new_version, head
            record.status, record.updated_at = saved.status, now
            self.bytes_written += len(head) + sum(map(len, plan.encoded))
        self._tracker.saved(task_id, new_version, plan, checkpoint.messages)
        return saved

    def delete(self, task_id: str) -> None:
        check_task_id(task_id)
        with self._lock:
            self._records.pop(task_id, None)
        self._tracker.forget(task_id)

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_unreadable: OnUnreadable | None = None,
    ) -> list[CheckpointSummary]:
        check_listing_filters(status, metadata, on_unreadable)
        with self._lock:
            now = utcnow()
            heads = sorted(
                (task_id, record.head)
                for task_id in list(self._records)
                if (record := self._live(task_id, now)) is not None
            )
        result = []
        for task_id, head in heads:
            summary = summary_or_report(on_unreadable, decode_summary, task_id, head)
            if summary is None or not summary_matches(summary, status, metadata):
                continue
            result.append(summary)
        return result

    def sweep_expired(self) -> int:
        """Drop every expired checkpoint now; how many (0 without a ``ttl``)."""
        with self._lock:
            now = utcnow()
            expired = [task_id for task_id in list(self._records) if self._live(task_id, now) is None]
        for task_id in expired:
            self._tracker.forget(task_id)
        return len(expired)

    def info(self) -> StoreInfo:
        return StoreInfo(
            backend="memory",
            url=redact_url(f"memory://{self.name}"),
            durable=False,
            incremental=True,
            notes=("in-process only: nothing survives the process",),
            ttl=self.ttl,
        )

    def close(self) -> None:
        return None

    # Raw access for tests that damage stored bytes on purpose.
    def _raw_record(self, task_id: str) -> _Record | None:
        return self._records.get(task_id)
