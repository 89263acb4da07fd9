"""A small custom checkpoint store, certified in docs/certify.md.

One JSON file per task in a directory. A lock file serializes writers across threads
and processes (``flock``); each save writes a temporary file, fsyncs it and renames it
over the old one, so a crash leaves the old checkpoint or the new one, never a mix.
It uses the project's codec, so damaged files raise ``CorruptCheckpointError`` and
files from a newer schema raise ``UnsupportedSchemaVersionError``.

Certify it with::

    agentckpt certify my_store:make_store --quick

(run from ``docs/examples``, or with it on ``PYTHONPATH``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from stores import (
    Checkpoint,
    CheckpointStatus,
    CheckpointSummary,
    ConflictError,
    StoreInfo,
)
from stores.checkpoint import utcnow
from stores.codec import decode_checkpoint, decode_summary, dumps, loads
from stores.protocol import metadata_matches


class DirectoryStore:
    """A :class:`~stores.CheckpointStore` keeping one JSON file per task under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_path = self.root / ".lock"

    # -- files and locks ------------------------------------------------------------------

    def _file(self, task_id: str) -> Path:
        # Task ids are arbitrary strings: quote them into safe file names.
        return self.root / (quote(task_id, safe="") + ".json")

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        # A fresh descriptor per use: flock then excludes other threads as well as
        # other processes.
        with open(self._lock_path, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield  # closing the file releases the lock

    def _read(self, task_id: str) -> bytes | None:
        try:
            return self._file(task_id).read_bytes()
        except FileNotFoundError:
            return None

    def _write(self, task_id: str, data: bytes) -> None:
        path = self._file(task_id)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())  # durable before it becomes visible
            os.replace(tmp, path)  # atomic: readers see the old file or the new one
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        directory = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(directory)  # make the rename itself durable
        finally:
            os.close(directory)

    # -- encoding -------------------------------------------------------------------------

    @staticmethod
    def _encode(checkpoint: Checkpoint) -> bytes:
        # dumps raises ValueError for what JSON cannot carry (lone surrogates): nothing
        # is written then.
        return dumps(
            {
                "head": checkpoint.model_dump(mode="json", exclude={"messages"}),
                "messages": checkpoint.messages,
            }
        )

    @staticmethod
    def _decode(task_id: str, data: bytes) -> Checkpoint:
        record = loads(data, task_id=task_id)
        if not isinstance(record, dict) or not isinstance(record.get("head"), dict):
            from stores import CorruptCheckpointError

            raise CorruptCheckpointError(task_id, "the file holds no checkpoint head")
        return decode_checkpoint(task_id, record["head"], record.get("messages") or [])

    # -- CheckpointStore ------------------------------------------------------------------

    def load(self, task_id: str) -> Checkpoint | None:
        with self._locked(exclusive=False):
            data = self._read(task_id)
        return None if data is None else self._decode(task_id, data)

    # --8<-- [start:save]
    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._locked(exclusive=True):
            data = self._read(task_id)
            stored = None if data is None else self._decode(task_id, data).version
            if (stored or 0) != checkpoint.version:
                raise ConflictError(task_id, checkpoint.version, stored)
            saved = checkpoint.model_copy(
                update={"version": checkpoint.version + 1, "updated_at": utcnow()}
            )
            self._write(task_id, self._encode(saved))
        # Return a decoded copy: the caller's lists must not be the returned ones.
        return self._decode(task_id, self._encode(saved))

    # --8<-- [end:save]

    def delete(self, task_id: str) -> None:
        with self._locked(exclusive=True), contextlib.suppress(FileNotFoundError):
            self._file(task_id).unlink()

    def list_checkpoints(
        self,
        *,
        status: CheckpointStatus | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointSummary]:
        summaries = []
        with self._locked(exclusive=False):
            files = sorted(self.root.glob("*.json"))
            for path in files:
                task_id = unquote(path.stem)
                record = loads(path.read_bytes(), task_id=task_id)
                summary = decode_summary(task_id, record["head"])
                if status is not None and summary.status != status:
                    continue
                if metadata_matches(summary.metadata, metadata):
                    summaries.append(summary)
        return sorted(summaries, key=lambda s: s.task_id)

    def info(self) -> StoreInfo:
        return StoreInfo(backend="directory", url=f"file://{self.root}", durable=True)

    def close(self) -> None:
        return None

    # -- certification hooks --------------------------------------------------------------

    def certify_corrupt(self, task_id: str) -> None:
        """Damage the stored file (for the ``corruption_reported`` contract)."""
        self._file(task_id).write_bytes(b"\x00 this is not JSON")

    def certify_bump_schema(self, task_id: str) -> None:
        """Rewrite the stored head as schema_version + 1 (``newer_schema_refused``)."""
        path = self._file(task_id)
        record = json.loads(path.read_bytes())
        record["head"]["schema_version"] += 1
        path.write_bytes(json.dumps(record).encode("utf-8"))


def make_store(namespace: str) -> DirectoryStore:
    """The factory ``agentckpt certify`` calls: one directory per namespace."""
    base = Path(os.environ.get("MY_STORE_DIR") or Path(tempfile.gettempdir()) / "my-store")
    return DirectoryStore(base / namespace)
