"""Incremental saves: decide whether a save may write only the new suffix of ``messages``.

Messages only grow during a correct run, so most saves add a few messages to a long
history. A store keeps, per task, a private snapshot of the messages it knows to be
durable at a given version and *lineage* (a random token fixed when the record is
created, so that a task deleted and created again is never mistaken for the old one).
A save whose prefix equals that snapshot writes the suffix; anything else (a changed
prefix, a shorter history, an unknown version) rewrites the whole history. The check
compares the prefix, it never assumes it. The backend must make the append conditional
on the stored version, lineage and message count, so that a stale snapshot can only
cause a conflict, never a wrong history.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .checkpoint import Checkpoint
from .codec import copy_containers, encode_messages

__all__ = ["PrefixTracker", "WritePlan", "new_lineage"]


def new_lineage() -> str:
    """A fresh lineage token for a newly created record."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class WritePlan:
    """What a save must write.

    ``rewrite`` True: replace the stored history by ``encoded`` (all messages) and use
    ``lineage`` (a new one when the record is created). ``rewrite`` False: append
    ``encoded`` (messages ``start`` onwards) to a stored history that must have exactly
    ``start`` messages under ``lineage``.
    """

    rewrite: bool
    start: int
    encoded: list[bytes]
    lineage: str

    @property
    def total(self) -> int:
        """The number of messages stored after the write."""
        return self.start + len(self.encoded)


@dataclass
class _Known:
    version: int
    lineage: str
    messages: list[Any]


class PrefixTracker:
    """Per-store memory of the durable history, bounded to ``max_tasks`` tasks (LRU)."""

    def __init__(self, max_tasks: int = 256) -> None:
        self._max = max_tasks
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._lock = threading.Lock()

    def plan(self, checkpoint: Checkpoint, *, stored_lineage: str | None = None) -> WritePlan:
        """The write a save of ``checkpoint`` needs.

        ``stored_lineage`` is for backends that already know the stored lineage (a new
        lineage is drawn when the record is created).
        """
        messages = checkpoint.messages
        with self._lock:
            known = self._known.get(checkpoint.task_id)
            if known is not None:
                self._known.move_to_end(checkpoint.task_id)
        if (
            checkpoint.version > 0
            and known is not None
            and known.version == checkpoint.version
            and len(messages) >= len(known.messages)
            and messages[: len(known.messages)] == known.messages
        ):
            start = len(known.messages)
            return WritePlan(False, start, encode_messages(messages[start:], start), known.lineage)
        if checkpoint.version == 0:
            lineage = new_lineage()
        else:
            lineage = stored_lineage or (known.lineage if known else new_lineage())
        return WritePlan(True, 0, encode_messages(messages), lineage)

    def saved(self, task_id: str, version: int, plan: WritePlan, messages: Sequence[Any]) -> None:
        """Record that ``plan`` was written durably and the record is now at ``version``.

        ``messages`` is the saved checkpoint's whole history (``plan`` says which part
        was written).
        """
        fresh = [copy_containers(message) for message in messages[plan.start : plan.total]]
        with self._lock:
            known = self._known.get(task_id)
            if plan.rewrite or known is None or known.lineage != plan.lineage:
                self._remember(task_id, _Known(version, plan.lineage, fresh))
            else:
                known.messages.extend(fresh)
                known.version = version
                self._known.move_to_end(task_id)

    def loaded(
        self,
        task_id: str,
        version: int,
        lineage: str,
        messages: Sequence[Any],
        *,
        copies: list[Any] | None = None,
    ) -> None:
        """Record the history a load read (the decoded messages handed to the caller).

        ``copies``: :func:`~stores.codec.copy_containers` of each of ``messages``, made
        already (``decode_checkpoint`` makes them while it decodes); the tracker keeps
        them instead of copying ``messages`` again.
        """
        with self._lock:
            if copies is None and _holds(self._known.get(task_id), version, lineage, len(messages)):
                # The snapshot already is this history (a version under a lineage is
                # written once): keep it.
                self._known.move_to_end(task_id)
                return
        if copies is not None and len(copies) == len(messages):
            fresh = copies
        else:
            fresh = [copy_containers(message) for message in messages]
        with self._lock:
            self._remember(task_id, _Known(version, lineage, fresh))

    def copies_for(self, task_id: str, version: int, lineage: str, count: int) -> list[Any] | None:
        """What a load passes as ``copies`` to the decoder and then to :meth:`loaded`.

        ``None`` when the snapshot held for ``task_id`` already is the stored history at
        ``version`` under ``lineage`` (``count`` messages; a version under a lineage is
        written once): the load need not copy what it decodes, and :meth:`loaded` keeps
        the snapshot (or copies the messages after all if a save moved it on in
        between). Else an empty list, to receive the copies.
        """
        with self._lock:
            held = _holds(self._known.get(task_id), version, lineage, count)
        return None if held else []

    def forget(self, task_id: str) -> None:
        """Drop what is known of ``task_id`` (after a delete, a conflict or an error)."""
        with self._lock:
            self._known.pop(task_id, None)

    def _remember(self, task_id: str, known: _Known) -> None:
        self._known[task_id] = known
        self._known.move_to_end(task_id)
        while len(self._known) > self._max:
            self._known.popitem(last=False)


def _holds(known: _Known | None, version: int, lineage: str, count: int) -> bool:
    """Whether ``known`` is the stored history at ``version`` under ``lineage``."""
    return (
        known is not None
        and known.version == version
        and known.lineage == lineage
        and len(known.messages) == count
    )
