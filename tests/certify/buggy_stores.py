"""Known-buggy stores: each breaks one contract, the way real stores do.

They are variations of the worked example ``docs/examples/my_store.py`` (a directory of
JSON files shared by every instance and process), so that every other contract applies
to them and passes. Each has a factory ``make_<name>(namespace)`` for ``certify``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import secrets
import sys
import tempfile
import threading
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
if str(_EXAMPLES) not in sys.path:
    sys.path.insert(0, str(_EXAMPLES))

from my_store import DirectoryStore  # noqa: E402

from stores import SCHEMA_VERSION, Checkpoint, ConflictError, CorruptCheckpointError  # noqa: E402
from stores.checkpoint import utcnow  # noqa: E402
from stores.codec import decode_checkpoint, decode_summary, dumps, loads  # noqa: E402
from stores.memory import MemoryStore  # noqa: E402
from stores.protocol import metadata_matches  # noqa: E402
from stores.retention import cutoff, is_expired  # noqa: E402


def _root(kind: str, namespace: str) -> Path:
    base = Path(os.environ.get("BUGGY_STORE_DIR") or Path(tempfile.gettempdir()) / "agentckpt-buggy")
    return base / kind / namespace


def _listing(heads: Iterator[tuple[str, dict[str, Any]]], filters: dict[str, Any]) -> list[Any]:
    """The summaries of ``heads`` (task id, stored head) that match ``filters``, by task id:
    the listing every directory store here shares, whatever it reads its heads from."""
    status, metadata = filters.get("status"), filters.get("metadata")
    summaries = [decode_summary(task_id, head) for task_id, head in heads]
    return sorted(
        (s for s in summaries if (status is None or s.status == status) and metadata_matches(s.metadata, metadata)),
        key=lambda s: s.task_id,
    )


class NoCasStore(DirectoryStore):
    """Saves whatever it is given: the last writer silently wins (no compare-and-set)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._locked(exclusive=True):
            saved = checkpoint.model_copy(
                update={"version": checkpoint.version + 1, "updated_at": utcnow()}
            )
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


class AheadCasStore(DirectoryStore):
    """Compares versions with >=: a save from a version ahead of the stored one succeeds
    (an outside round's single-table store)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._locked(exclusive=True):
            data = self._read(task_id)
            stored = None if data is None else self._decode(task_id, data).version
            if checkpoint.version < (stored or 0) or (stored is None and checkpoint.version):
                raise ConflictError(task_id, checkpoint.version, stored)
            saved = checkpoint.model_copy(update={"version": (stored or 0) + 1, "updated_at": utcnow()})
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


class BlindRetryStore(DirectoryStore):
    """On a version that moved on, writes again under the newer version (an outside
    round's ORM store that caught StaleDataError, reloaded the row and wrote again)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._locked(exclusive=True):
            data = self._read(task_id)
            stored = None if data is None else self._decode(task_id, data).version
            if (stored is None and checkpoint.version) or (stored is not None and not checkpoint.version):
                raise ConflictError(task_id, checkpoint.version, stored)  # creates are checked
            # The "retry": whatever version is stored now, the caller's content goes on top.
            saved = checkpoint.model_copy(update={"version": (stored or 0) + 1, "updated_at": utcnow()})
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


class UnlockedCreateStore(DirectoryStore):
    """Creates a task (a save from version 0) without the lock, after checking that it is
    absent: two creates racing both pass the check (an outside round's store whose lock
    file lived in the task's directory, which a delete removed)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        if checkpoint.version:
            return super().save(checkpoint)
        task_id = checkpoint.task_id
        if self._read(task_id) is not None:
            raise ConflictError(task_id, 0, self._decode(task_id, self._read(task_id) or b"").version)
        time.sleep(0.002)  # between the check and the write
        saved = checkpoint.model_copy(update={"version": 1, "updated_at": utcnow()})
        self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


_PROCESS_LOCK = threading.Lock()


class ProcessLocalCreateStore(DirectoryStore):
    """Creates a task under a lock of its process only (a ``threading.Lock`` around the
    check and the write): threads never race past it, processes do (an outside round's
    MariaDB store, certified before the processes' contract raced creates)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        if checkpoint.version:
            return super().save(checkpoint)
        task_id = checkpoint.task_id
        with _PROCESS_LOCK:
            data = self._read(task_id)
            if data is not None:
                raise ConflictError(task_id, 0, self._decode(task_id, data).version)
            time.sleep(0.002)  # between the check and the write
            saved = checkpoint.model_copy(update={"version": 1, "updated_at": utcnow()})
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


class DuplicateKeyError(Exception):
    """A database's unique-key error, as its driver raises it."""


class UniqueKeyStore(DirectoryStore):
    """Checks that a task is absent before it creates it, then inserts under the lock; the
    insert that loses a race raises the database's unique-key error, not ConflictError
    (an outside round's ORM store, whose IntegrityError was not mapped)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        if checkpoint.version:
            return super().save(checkpoint)
        task_id = checkpoint.task_id
        data = self._read(task_id)
        if data is not None:
            raise ConflictError(task_id, 0, self._decode(task_id, data).version)
        time.sleep(0.002)  # the round trip between the check and the insert
        with self._locked(exclusive=True):
            if self._read(task_id) is not None:
                raise DuplicateKeyError(f"UNIQUE constraint failed: tasks.key ({task_id})")
            saved = checkpoint.model_copy(update={"version": 1, "updated_at": utcnow()})
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


class TextNewestStore(DirectoryStore):
    """Keeps every version in a file of its own, ``<task>.v<N>``, and takes the newest by
    the text of its name: version 9 after version 10 (an outside round's store)."""

    def _versions(self, task_id: str) -> list[Path]:
        return sorted(self.root.glob(self._file(task_id).name + ".v*"), key=lambda p: p.name)

    def _read(self, task_id: str) -> bytes | None:
        versions = self._versions(task_id)
        return versions[-1].read_bytes() if versions else None

    def _write(self, task_id: str, data: bytes) -> None:
        version = self._decode(task_id, data).version
        path = self.root / f"{self._file(task_id).name}.v{version}"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)

    def delete(self, task_id: str) -> None:
        with self._locked(exclusive=True):
            for path in self._versions(task_id):
                path.unlink(missing_ok=True)


class TombstoneStore(DirectoryStore):
    """Deletes by writing a tombstone beside the task that load honours and the listing
    does not (a soft delete the listing query forgot)."""

    def _tomb(self, task_id: str) -> Path:
        return self._file(task_id).with_suffix(".tomb")

    def load(self, task_id: str) -> Checkpoint | None:
        return None if self._tomb(task_id).exists() else super().load(task_id)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        if self._tomb(checkpoint.task_id).exists():
            with self._locked(exclusive=True):
                if self._tomb(checkpoint.task_id).exists():  # another create may have cleared it
                    self._file(checkpoint.task_id).unlink(missing_ok=True)
                    self._tomb(checkpoint.task_id).unlink()
        return super().save(checkpoint)

    def delete(self, task_id: str) -> None:
        with self._locked(exclusive=True):
            if self._file(task_id).exists():
                self._tomb(task_id).write_bytes(b"")


class ReturnsGivenStore(DirectoryStore):
    """Stores the save, then returns the object it was given: its version is not bumped."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        super().save(checkpoint)
        return checkpoint


class TwoReadStore(DirectoryStore):
    """Reads the version, then the content, in two reads a save can come between (a
    version attribute and a document kept apart): a load can mix two saves."""

    def load(self, task_id: str) -> Checkpoint | None:
        first = super().load(task_id)
        if first is None:
            return None
        time.sleep(0.002)  # the second round trip
        second = super().load(task_id)
        return None if second is None else second.model_copy(update={"version": first.version})


class TornStore(DirectoryStore):
    """Writes the messages and the head as two files, one after the other.

    Each file is replaced atomically, but the pair is not: a crash between the two
    writes leaves new messages under an old head.
    """

    def _read(self, task_id: str) -> bytes | None:
        head = super()._read(task_id)
        if head is None:
            return None
        try:
            messages = (self._file(task_id).with_suffix(".msgs")).read_bytes()
        except FileNotFoundError:
            messages = b"[]"
        try:
            record = json.loads(head)
        except ValueError:
            return head  # damaged: let the codec report it
        record["messages"] = json.loads(messages)
        return json.dumps(record, ensure_ascii=False).encode("utf-8")

    def _write(self, task_id: str, data: bytes) -> None:
        record = json.loads(data)
        messages = json.dumps(record.pop("messages"), ensure_ascii=False).encode("utf-8")
        msgs_path = self._file(task_id).with_suffix(".msgs")
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(messages)
        os.replace(tmp, msgs_path)
        time.sleep(0.01)  # the slow second round trip of a two-step write
        super()._write(task_id, json.dumps(record, ensure_ascii=False).encode("utf-8"))

    def delete(self, task_id: str) -> None:
        # Both files under the lock: its planted bug is the save's, not a delete racing it.
        with self._locked(exclusive=True):
            self._file(task_id).unlink(missing_ok=True)
            self._file(task_id).with_suffix(".msgs").unlink(missing_ok=True)


class AliasingStore(DirectoryStore):
    """Keeps the objects it saves and hands them out again from load (a cache done wrong)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._objects: dict[str, Checkpoint] = {}

    def load(self, task_id: str) -> Checkpoint | None:
        fresh = super().load(task_id)
        cached = self._objects.get(task_id)
        # The cache is checked against the stored version and creation time (a task
        # deleted and made again to the same version is another), so it is never stale:
        # its only bug is returning the object it holds.
        if (
            fresh is not None
            and cached is not None
            and (cached.version, cached.created_at) == (fresh.version, fresh.created_at)
        ):
            return cached
        if fresh is not None:
            self._objects[task_id] = fresh
        return fresh

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        # Shallow copy: its messages list is the caller's list.
        kept = checkpoint.model_copy(update={"version": saved.version, "updated_at": saved.updated_at})
        self._objects[checkpoint.task_id] = kept
        return kept


class NoneOnCorruptStore(DirectoryStore):
    """Treats unreadable data as "no checkpoint": the agent silently starts over."""

    def load(self, task_id: str) -> Checkpoint | None:
        try:
            return super().load(task_id)
        except CorruptCheckpointError:
            return None


def _floaty(value: Any) -> Any:
    """What a JSON library that keeps every number as a double does to integers."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > 2**53:
        return int(float(value))
    if isinstance(value, list):
        return [_floaty(item) for item in value]
    if isinstance(value, dict):
        return {key: _floaty(item) for key, item in value.items()}
    return value


class LossyStore(DirectoryStore):
    """Round-trips numbers through doubles: integers beyond 2**53 come back changed."""

    def _write(self, task_id: str, data: bytes) -> None:
        super()._write(task_id, json.dumps(_floaty(json.loads(data)), ensure_ascii=False).encode())


class WriteBehindStore(DirectoryStore):
    """Acknowledges a save at once and writes it a little later from a background thread.

    The lock stays held until the write is done, so every other reader and writer still
    sees a consistent, compare-and-set store; only a crash in that window loses a save
    that was already acknowledged.
    """

    FLUSH_DELAY = 0.02

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._pending = threading.Lock()

    @contextmanager
    def _held(self) -> Iterator[Any]:
        self._pending.acquire()
        lock = open(self._lock_path, "a+b")  # noqa: SIM115 - released by the flusher
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield lock

    def load(self, task_id: str) -> Checkpoint | None:
        with self._pending:
            return super().load(task_id)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._held() as lock:
            try:
                data = self._read(task_id)
                stored = None if data is None else self._decode(task_id, data).version
                if (stored or 0) != checkpoint.version:
                    raise ConflictError(task_id, checkpoint.version, stored)
                saved = checkpoint.model_copy(
                    update={"version": checkpoint.version + 1, "updated_at": utcnow()}
                )
                encoded = self._encode(saved)
            except BaseException:
                lock.close()
                self._pending.release()
                raise

        def flush() -> None:
            try:
                time.sleep(self.FLUSH_DELAY)
                self._write(task_id, encoded)
            finally:
                lock.close()
                self._pending.release()

        threading.Thread(target=flush, daemon=True).start()
        return self._decode(task_id, encoded)

    def delete(self, task_id: str) -> None:
        with self._pending:
            super().delete(task_id)

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._pending:
            return super().list_checkpoints(**filters)

    def close(self) -> None:
        # A clean close flushes (as real write-behind stores do); only a crash loses data.
        with self._pending:
            pass

    def certify_corrupt(self, task_id: str) -> None:
        with self._pending:
            super().certify_corrupt(task_id)

    def certify_bump_schema(self, task_id: str) -> None:
        with self._pending:
            super().certify_bump_schema(task_id)


class StaleCacheStore(DirectoryStore):
    """Caches loads per instance and never asks the disk again: other writers are invisible."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._cache: dict[str, bytes] = {}

    def load(self, task_id: str) -> Checkpoint | None:
        if task_id in self._cache:
            return self._decode(task_id, self._cache[task_id])
        with self._locked(exclusive=False):
            data = self._read(task_id)
        if data is None:
            return None
        self._cache[task_id] = data
        return self._decode(task_id, data)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        # Its own writes invalidate its entry; nobody else's do.
        self._cache.pop(saved.task_id, None)
        return saved

    def delete(self, task_id: str) -> None:
        super().delete(task_id)
        self._cache.pop(task_id, None)


class LaggingReplicaStore(DirectoryStore):
    """Now and then (every 6th load of an instance) serves the previous load's copy of a
    task another instance saved since: a replica a watcher keeps a few milliseconds behind
    (an outside round's NATS store loaded from its watcher's copy, and was certified once
    in eight quick runs). Its own saves it always sees."""

    EVERY = 6

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._loads = 0
        self._last: dict[str, bytes] = {}
        self._own: dict[str, bytes] = {}

    def load(self, task_id: str) -> Checkpoint | None:
        self._loads += 1
        with self._locked(exclusive=False):
            data = self._read(task_id)
        previous = self._last.get(task_id)
        if data is None:
            self._last.pop(task_id, None)
            return None
        if self._loads % self.EVERY == 0 and previous not in (None, data) and data != self._own.get(task_id):
            return self._decode(task_id, previous or b"")  # the replica has not caught up yet
        self._last[task_id] = data
        return self._decode(task_id, data)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        self._own[saved.task_id] = self._read(saved.task_id) or b""
        return saved


class LateReplicaStore(DirectoryStore):
    """Loads from a copy of the directory it refreshes at most every 0.1 s, empty when the
    instance is new: another instance's save is seen late, never at once."""

    EVERY = 0.1

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._copy: dict[str, bytes] = {}
        self._refreshed = time.monotonic()

    def load(self, task_id: str) -> Checkpoint | None:
        if time.monotonic() - self._refreshed >= self.EVERY:
            with self._locked(exclusive=False):
                self._copy = {unquote(path.stem): path.read_bytes() for path in self.root.glob("*.json")}
            self._refreshed = time.monotonic()
        data = self._copy.get(task_id)
        return None if data is None else self._decode(task_id, data)


class SnapshotStore(DirectoryStore):
    """Loads from a snapshot of the directory taken at its first load, as a REPEATABLE READ
    transaction that is never ended sees the database: later saves of other instances and
    processes are invisible to it; its own update the snapshot."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._snapshot: dict[str, bytes] | None = None

    def _view(self) -> dict[str, bytes]:
        if self._snapshot is None:
            with self._locked(exclusive=False):
                self._snapshot = {unquote(path.stem): path.read_bytes() for path in self.root.glob("*.json")}
        return self._snapshot

    def load(self, task_id: str) -> Checkpoint | None:
        data = self._view().get(task_id)
        return None if data is None else self._decode(task_id, data)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        with self._locked(exclusive=False):
            data = self._read(saved.task_id)
        if data is not None:
            self._view()[saved.task_id] = data
        return saved

    def delete(self, task_id: str) -> None:
        super().delete(task_id)
        self._view().pop(task_id, None)


def make_snapshot(namespace: str) -> SnapshotStore:
    return SnapshotStore(_root("snapshot", namespace))


def make_no_cas(namespace: str) -> NoCasStore:
    return NoCasStore(_root("no-cas", namespace))


def make_torn(namespace: str) -> TornStore:
    return TornStore(_root("torn", namespace))


def make_aliasing(namespace: str) -> AliasingStore:
    return AliasingStore(_root("aliasing", namespace))


def make_none_on_corrupt(namespace: str) -> NoneOnCorruptStore:
    return NoneOnCorruptStore(_root("none-on-corrupt", namespace))


def make_lossy(namespace: str) -> LossyStore:
    return LossyStore(_root("lossy", namespace))


def make_write_behind(namespace: str) -> WriteBehindStore:
    return WriteBehindStore(_root("write-behind", namespace))


def make_stale_cache(namespace: str) -> StaleCacheStore:
    return StaleCacheStore(_root("stale-cache", namespace))


class CacheByVersionStore(DirectoryStore):
    """Caches loads per instance and checks an entry by the stored version alone: a task
    deleted and made again by another instance, up to the version cached, is served as it
    was before (the lineage, which tells the two apart, is not looked at)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._cache: dict[str, Checkpoint] = {}

    def load(self, task_id: str) -> Checkpoint | None:
        with self._locked(exclusive=False):
            data = self._read(task_id)
        if data is None:
            self._cache.pop(task_id, None)
            return None
        cached = self._cache.get(task_id)
        stored = loads(data, task_id=task_id)["head"]["version"]
        if cached is not None and cached.version == stored:  # BUG: the lineage is not compared
            return cached.model_copy(deep=True)
        checkpoint = self._decode(task_id, data)
        self._cache[task_id] = checkpoint.model_copy(deep=True)
        return checkpoint

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        self._cache.pop(checkpoint.task_id, None)
        return super().save(checkpoint)

    def delete(self, task_id: str) -> None:
        self._cache.pop(task_id, None)
        super().delete(task_id)


def make_late_replica(namespace: str) -> LateReplicaStore:
    return LateReplicaStore(_root("late-replica", namespace))


def make_lagging_replica(namespace: str) -> LaggingReplicaStore:
    return LaggingReplicaStore(_root("lagging-replica", namespace))


def make_cache_by_version(namespace: str) -> CacheByVersionStore:
    return CacheByVersionStore(_root("cache-by-version", namespace))


class StaleViewStore(DirectoryStore):
    """Reads through a view of its own (as a store that caches the name of the object a
    pointer names does): once another instance has saved the task, this instance's view
    names data that save replaced, and its load calls the task corrupt."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._seen: dict[str, int] = {}

    def load(self, task_id: str) -> Checkpoint | None:
        checkpoint = super().load(task_id)
        if checkpoint is not None and self._seen.get(task_id, checkpoint.version) != checkpoint.version:
            raise CorruptCheckpointError(task_id, "the file this instance's view names is gone")
        if checkpoint is not None:
            self._seen[task_id] = checkpoint.version
        return checkpoint

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        self._seen[saved.task_id] = saved.version
        return saved


def make_stale_view(namespace: str) -> StaleViewStore:
    return StaleViewStore(_root("stale-view", namespace))


class ListsLeftoversStore(DirectoryStore):
    """Writes its temporary file beside the task's (``<name>.json.tmp-…``) and lists by a
    pattern that matches both: a writer killed between the temporary file and the rename
    leaves a second entry of the task in the listing, which delete() never removes."""

    def _write(self, task_id: str, data: bytes) -> None:
        path = self._file(task_id)
        tmp = path.with_name(f"{path.name}.tmp-{secrets.token_hex(4)}")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        time.sleep(0.01)  # a slow disk between the write and the rename: the kills' window
        os.replace(tmp, path)

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            files = sorted(self.root.glob("*.json*"))  # BUG: the temporary files match too
            heads = []
            for path in files:
                task_id = unquote(path.name.split(".json", 1)[0])
                heads.append((task_id, loads(path.read_bytes(), task_id=task_id)["head"]))
        return _listing(iter(heads), filters)


def make_lists_leftovers(namespace: str) -> ListsLeftoversStore:
    return ListsLeftoversStore(_root("lists-leftovers", namespace))


class DeletesLatestOnlyStore(DirectoryStore):
    """Keeps a file per save (``<name>.v<version>.json``, an append-only log of versions,
    the latest loaded), and deletes only the latest: the version before it comes back."""

    def _versions(self, task_id: str) -> list[tuple[int, Path]]:
        stem = quote(task_id, safe="")
        found = []
        for path in self.root.glob(f"{stem}.v*.json"):
            number = path.name[len(stem) + 2 : -len(".json")]
            if path.name.startswith(stem + ".v") and number.isdigit():
                found.append((int(number), path))
        return sorted(found)

    def _read(self, task_id: str) -> bytes | None:
        versions = self._versions(task_id)
        return versions[-1][1].read_bytes() if versions else None

    def _write(self, task_id: str, data: bytes) -> None:
        version = loads(data, task_id=task_id)["head"]["version"]
        path = self.root / f"{quote(task_id, safe='')}.v{version}.json"
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)

    def delete(self, task_id: str) -> None:
        with self._locked(exclusive=True):
            versions = self._versions(task_id)
            if versions:
                versions[-1][1].unlink()  # BUG: the earlier versions stay, and load finds one

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            latest: dict[str, tuple[int, Path]] = {}
            for path in self.root.glob("*.v*.json"):
                stem, _, number = path.name[: -len(".json")].rpartition(".v")
                if number.isdigit() and int(number) > latest.get(unquote(stem), (0, path))[0]:
                    latest[unquote(stem)] = (int(number), path)
            heads = [(task_id, loads(path.read_bytes(), task_id=task_id)["head"]) for task_id, (_, path) in latest.items()]
        return _listing(iter(heads), filters)

    def certify_corrupt(self, task_id: str) -> None:
        self._versions(task_id)[-1][1].write_bytes(b"\x00 not json")

    def certify_bump_schema(self, task_id: str) -> None:
        path = self._versions(task_id)[-1][1]
        record = json.loads(path.read_bytes())
        record["head"]["schema_version"] = SCHEMA_VERSION + 1
        path.write_bytes(json.dumps(record).encode())


def make_deletes_latest_only(namespace: str) -> DeletesLatestOnlyStore:
    return DeletesLatestOnlyStore(_root("deletes-latest-only", namespace))


class RewritingStore(DirectoryStore):
    """Declares incremental saves but rewrites the whole history at every save."""

    certify_capabilities = frozenset({"incremental"})

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.bytes_written = 0

    def _write(self, task_id: str, data: bytes) -> None:
        super()._write(task_id, data)
        self.bytes_written += len(data)


def make_rewriting(namespace: str) -> RewritingStore:
    return RewritingStore(_root("rewriting", namespace))


# -- retention ---------------------------------------------------------------------------
# Built on the in-process store with ttl=1: each gets one part of the retention rule wrong
# (stores/retention.py), as stores that add a TTL to an existing design tend to.


class ExpiresRunningStore(MemoryStore):
    """Expires every checkpoint, running ones too (a plain key TTL on everything)."""

    def _live(self, task_id: str, now: _dt.datetime) -> Any:
        record = self._records.get(task_id)
        if record is not None and self.ttl is not None and record.updated_at < cutoff(self.ttl, now):
            del self._records[task_id]
            return None
        return record


class FirstSaveTTLStore(MemoryStore):
    """Counts the ttl from the first save, not the last (a TTL set once, at creation)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._created: dict[str, _dt.datetime] = {}

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        self._created.setdefault(saved.task_id, saved.updated_at)
        return saved

    def _live(self, task_id: str, now: _dt.datetime) -> Any:
        record = self._records.get(task_id)
        if record is not None and is_expired(record.status, self._created.get(task_id, now), self.ttl, now):
            del self._records[task_id]
            self._created.pop(task_id, None)
            return None
        return record


class ListsExpiredStore(MemoryStore):
    """Hides expired checkpoints from load but still lists them (a filter added in one place)."""

    def list_checkpoints(self, **filters: Any) -> Any:
        ttl, self.ttl = self.ttl, None
        try:
            return super().list_checkpoints(**filters)
        finally:
            self.ttl = ttl


class RevivingStore(MemoryStore):
    """Filters expired checkpoints on read only: a save with the old version revives one."""

    def _live(self, task_id: str, now: _dt.datetime) -> Any:
        return self._records.get(task_id)

    def load(self, task_id: str) -> Checkpoint | None:
        record = self._records.get(task_id)
        if record is not None and is_expired(record.status, record.updated_at, self.ttl, utcnow()):
            return None
        return super().load(task_id)

    def list_checkpoints(self, **filters: Any) -> Any:
        now = utcnow()
        expired = {
            task_id for task_id, r in self._records.items() if is_expired(r.status, r.updated_at, self.ttl, now)
        }
        return [s for s in super().list_checkpoints(**filters) if s.task_id not in expired]


def make_expires_running() -> ExpiresRunningStore:
    return ExpiresRunningStore(ttl=1)


def make_first_save_ttl() -> FirstSaveTTLStore:
    return FirstSaveTTLStore(ttl=1)


def make_lists_expired() -> ListsExpiredStore:
    return ListsExpiredStore(ttl=1)


def make_reviving() -> RevivingStore:
    return RevivingStore(ttl=1)


# -- an append-only message log ----------------------------------------------------------
# A second design: the head file (``<task>.json``, so the directory store's listing and
# hooks still apply) names a JSON-lines message file and the byte length of it that is
# committed. A save whose stored history is the one this instance last saw appends only
# the new lines; any other save writes a new message file (a new lineage) whole. The head
# is replaced atomically after the messages are durable. Each store after the sound one
# breaks one step of that, the way such stores do.


class AppendLogStore(DirectoryStore):
    """The sound design: appends at the committed length, checks the lineage, splits on ``\\n``."""

    #: The head's round trip after the messages are written (a second request on a
    #: network store): kills land between the two.
    COMMIT_DELAY = 0.05

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        # task_id -> (version, message file, encoded lines) this instance knows are stored
        self._known: dict[str, tuple[int, str, list[bytes]]] = {}

    # -- the steps the buggy variants get wrong -------------------------------------------

    def _append(self, path: Path, committed: int, suffix: bytes) -> None:
        with open(path, "r+b") as out:
            out.truncate(committed)  # drop what a killed save left past the committed end
            out.seek(committed)
            out.write(suffix)
            out.flush()
            os.fsync(out.fileno())

    def _same_lineage(self, known_file: str, stored_file: str) -> bool:
        return known_file == stored_file

    @staticmethod
    def _same_prefix(lines: list[bytes], known: list[bytes]) -> bool:
        return lines[: len(known)] == known

    @staticmethod
    def _split(body: bytes) -> list[bytes]:
        return body.split(b"\n")[:-1]

    # -- reading --------------------------------------------------------------------------

    def _record(self, task_id: str) -> tuple[dict[str, Any], list[bytes]] | None:
        data = self._read(task_id)
        if data is None:
            return None
        record = loads(data, task_id=task_id)
        if (not isinstance(record, dict) or not isinstance(record.get("head"), dict)
                or not isinstance(record.get("msg_file"), str)):
            raise CorruptCheckpointError(task_id, "the file holds no checkpoint head")
        try:
            with open(self.root / record["msg_file"], "rb") as source:
                body = source.read(record["msg_bytes"])
        except FileNotFoundError:
            raise CorruptCheckpointError(task_id, "the message file is missing") from None
        if len(body) != record["msg_bytes"] or (body and not body.endswith(b"\n")):
            raise CorruptCheckpointError(task_id, "the message file is shorter than committed")
        lines = self._split(body)
        if len(lines) != record["msg_count"]:
            raise CorruptCheckpointError(task_id, "the message count does not match")
        return record, lines

    @staticmethod
    def _checkpoint(task_id: str, head: dict[str, Any], lines: list[bytes]) -> Checkpoint:
        messages = [loads(line, task_id=task_id) for line in lines]
        return decode_checkpoint(task_id, head, messages)

    def load(self, task_id: str) -> Checkpoint | None:
        with self._locked(exclusive=False):
            found = self._record(task_id)
        if found is None:
            self._known.pop(task_id, None)
            return None
        record, lines = found
        checkpoint = self._checkpoint(task_id, record["head"], lines)
        self._known[task_id] = (checkpoint.version, record["msg_file"], lines)
        return checkpoint

    # -- writing --------------------------------------------------------------------------

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        saved = checkpoint.model_copy(update={"version": checkpoint.version + 1, "updated_at": utcnow()})
        head = saved.model_dump(mode="json", exclude={"messages"})
        lines = [dumps(message) for message in checkpoint.messages]  # ValueError: nothing written
        dumps(head)
        with self._locked(exclusive=True):
            found = self._record(task_id)
            stored = None if found is None else found[0]["head"]["version"]
            if (stored or 0) != checkpoint.version:
                raise ConflictError(task_id, checkpoint.version, stored)
            known = self._known.get(task_id)
            stale_file = None
            if (found is not None and known is not None and known[0] == stored
                    and self._same_lineage(known[1], found[0]["msg_file"])
                    and len(known[2]) == found[0]["msg_count"]
                    and self._same_prefix(lines, known[2])):
                record = found[0]
                suffix = b"".join(line + b"\n" for line in lines[record["msg_count"]:])
                self._append(self.root / record["msg_file"], record["msg_bytes"], suffix)
                msg_file, msg_bytes = record["msg_file"], record["msg_bytes"] + len(suffix)
                time.sleep(self.COMMIT_DELAY)
            else:
                msg_file = quote(task_id, safe="") + f".{secrets.token_hex(6)}.msgs"
                body = b"".join(line + b"\n" for line in lines)
                fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
                with os.fdopen(fd, "wb") as out:
                    out.write(body)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, self.root / msg_file)
                msg_bytes = len(body)
                stale_file = None if found is None else found[0]["msg_file"]
            self._write(task_id, dumps({"head": head, "msg_file": msg_file, "msg_bytes": msg_bytes,
                                        "msg_count": len(lines)}))
            if stale_file is not None:
                (self.root / stale_file).unlink(missing_ok=True)
            self._known[task_id] = (saved.version, msg_file, lines)
        return self._checkpoint(task_id, head, lines)

    def delete(self, task_id: str) -> None:
        with self._locked(exclusive=True):
            try:
                found = loads(self._file(task_id).read_bytes(), task_id=task_id)
            except (FileNotFoundError, CorruptCheckpointError):
                found = None
            self._file(task_id).unlink(missing_ok=True)
            if isinstance(found, dict) and isinstance(found.get("msg_file"), str):
                (self.root / found["msg_file"]).unlink(missing_ok=True)
        self._known.pop(task_id, None)


class AppendAtEndStore(AppendLogStore):
    """Appends at the end of the message file, not at the committed length.

    A save killed after writing its lines but before its head leaves a tail past the
    committed end. Loads ignore it, so the checkpoint still loads whole after the kill;
    but the next append lands after that tail while the head counts only its own bytes,
    and the task never loads again.
    """

    def _append(self, path: Path, committed: int, suffix: bytes) -> None:
        with open(path, "ab") as out:
            out.write(suffix)
            out.flush()
            os.fsync(out.fileno())


class AppendForgetsLineageStore(AppendLogStore):
    """Appends when the version and the length match what it saw, whoever re-created the task.

    After another instance deletes the task and rebuilds it to the same version and
    length, a stale instance's save grafts its new messages onto the other history.
    """

    def _same_lineage(self, known_file: str, stored_file: str) -> bool:
        return True


class AppendAssumesPrefixStore(AppendLogStore):
    """Appends whenever the version, the lineage and the count allow, without comparing the
    messages it holds: a save that edits an earlier message (a secret redacted) and adds
    one keeps the old text (an outside round's MariaDB store)."""

    @staticmethod
    def _same_prefix(lines: list[bytes], known: list[bytes]) -> bool:
        return len(lines) >= len(known)


class AppendKeepsLastStore(AppendLogStore):
    """An append keeps only the last new message: a save adding two or more loses the others."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        known = self._known.get(checkpoint.task_id)
        messages = checkpoint.messages
        if (known is not None and known[0] == checkpoint.version
                and len(messages) > len(known[2]) + 1
                and [dumps(m) for m in messages[: len(known[2])]] == known[2]):
            kept = [*messages[: len(known[2])], messages[-1]]
            checkpoint = checkpoint.model_copy(update={"messages": kept})
        return super().save(checkpoint)


class SplitlinesStore(AppendLogStore):
    """Splits the message file with ``str.splitlines``: U+2028, U+0085, \\x1c... break a line too.

    JSON written with ``ensure_ascii=False`` leaves those characters raw in the line, so
    a message holding one comes back as two broken lines.
    """

    @staticmethod
    def _split(body: bytes) -> list[bytes]:
        return [line.encode("utf-8") for line in body.decode("utf-8").splitlines()]


class ListsOwnTasksStore(DirectoryStore):
    """Lists only the tasks this instance saved or loaded (an index kept per instance)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._seen: set[str] = set()

    def load(self, task_id: str) -> Checkpoint | None:
        self._seen.add(task_id)
        return super().load(task_id)

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        self._seen.add(checkpoint.task_id)
        return super().save(checkpoint)

    def list_checkpoints(self, **filters: Any) -> Any:
        return [s for s in super().list_checkpoints(**filters) if s.task_id in self._seen]


def _contains(stored: Any, wanted: Any) -> bool:
    """PostgreSQL's ``@>``: an object contains the keys it is asked for (and more), an array
    the elements."""
    if isinstance(wanted, dict):
        return isinstance(stored, dict) and all(k in stored and _contains(stored[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return isinstance(stored, list) and all(any(_contains(s, w) for s in stored) for w in wanted)
    return bool(stored == wanted)


class ContainsFilterStore(DirectoryStore):
    """Filters metadata by containment alone (a ``metadata @> %s`` query with no check of
    equality after it): an object or array filter matches a larger one too."""

    def list_checkpoints(self, **filters: Any) -> Any:
        wanted = dict(filters.pop("metadata", None) or {})
        return [s for s in super().list_checkpoints(**filters) if _contains(s.metadata, wanted)]


class ListingIgnoresSchemaStore(DirectoryStore):
    """Lists heads without looking at their schema version (load refuses a newer one)."""

    def list_checkpoints(self, **filters: Any) -> Any:
        def heads() -> Iterator[tuple[str, dict[str, Any]]]:
            for path in sorted(self.root.glob("*.json")):
                head = dict(json.loads(path.read_bytes())["head"])
                head["schema_version"] = SCHEMA_VERSION
                yield unquote(path.stem), head

        with self._locked(exclusive=False):
            return _listing(heads(), filters)


class ListsEveryNamespaceStore(DirectoryStore):
    """Lists the heads of every namespace's directory, not its own (a listing query without
    the tenant's WHERE clause): another tenant's tasks show up, for its cleanup to delete."""

    def list_checkpoints(self, **filters: Any) -> Any:
        def heads() -> Iterator[tuple[str, dict[str, Any]]]:
            for path in sorted(self.root.parent.glob("*/*.json")):
                try:
                    head = json.loads(path.read_bytes())["head"]
                except (OSError, ValueError, KeyError):
                    continue  # another namespace's file mid-write or gone
                yield unquote(path.stem), head

        with self._locked(exclusive=False):
            return _listing(heads(), filters)


def make_lists_every_namespace(namespace: str) -> ListsEveryNamespaceStore:
    return ListsEveryNamespaceStore(_root("lists-every-namespace", namespace))


def make_append_log(namespace: str) -> AppendLogStore:
    return AppendLogStore(_root("append-log", namespace))


def make_append_at_end(namespace: str) -> AppendAtEndStore:
    return AppendAtEndStore(_root("append-at-end", namespace))


def make_append_forgets_lineage(namespace: str) -> AppendForgetsLineageStore:
    return AppendForgetsLineageStore(_root("append-forgets-lineage", namespace))


def make_append_assumes_prefix(namespace: str) -> AppendAssumesPrefixStore:
    return AppendAssumesPrefixStore(_root("append-assumes-prefix", namespace))


def make_append_keeps_last(namespace: str) -> AppendKeepsLastStore:
    return AppendKeepsLastStore(_root("append-keeps-last", namespace))


def make_splitlines(namespace: str) -> SplitlinesStore:
    return SplitlinesStore(_root("splitlines", namespace))


def make_lists_own_tasks(namespace: str) -> ListsOwnTasksStore:
    return ListsOwnTasksStore(_root("lists-own-tasks", namespace))


def make_ahead_cas(namespace: str) -> AheadCasStore:
    return AheadCasStore(_root("ahead-cas", namespace))


def make_blind_retry(namespace: str) -> BlindRetryStore:
    return BlindRetryStore(_root("blind-retry", namespace))


def make_unlocked_create(namespace: str) -> UnlockedCreateStore:
    return UnlockedCreateStore(_root("unlocked-create", namespace))


def make_process_local_create(namespace: str) -> ProcessLocalCreateStore:
    return ProcessLocalCreateStore(_root("process_local_create", namespace))


def make_unique_key(namespace: str) -> UniqueKeyStore:
    return UniqueKeyStore(_root("unique-key", namespace))


def make_text_newest(namespace: str) -> TextNewestStore:
    return TextNewestStore(_root("text-newest", namespace))


def make_tombstone(namespace: str) -> TombstoneStore:
    return TombstoneStore(_root("tombstone", namespace))


def make_returns_given(namespace: str) -> ReturnsGivenStore:
    return ReturnsGivenStore(_root("returns-given", namespace))


def make_two_read(namespace: str) -> TwoReadStore:
    return TwoReadStore(_root("two-read", namespace))


def make_contains_filter(namespace: str) -> ContainsFilterStore:
    return ContainsFilterStore(_root("contains-filter", namespace))


def make_listing_ignores_schema(namespace: str) -> ListingIgnoresSchemaStore:
    return ListingIgnoresSchemaStore(_root("listing-ignores-schema", namespace))


class AppendAtEndQuickStore(AppendAtEndStore):
    """The same bug with no pause between the messages and the head: a narrow window."""

    COMMIT_DELAY = 0.0


def make_append_at_end_quick(namespace: str) -> AppendAtEndQuickStore:
    return AppendAtEndQuickStore(_root("append-at-end-quick", namespace))


# -- task ids merged: each breaks task_id_fidelity only ---------------------------------------
# Every other contract uses ids like ``certify-<hex>-name-N`` (lowercase letters, digits,
# '-'), which each of these keeps apart: only ids that differ in the way it merges show it.


class _MappedIdStore(DirectoryStore):
    """The directory store with the file of a task named by ``_key(task_id)``, quoted.

    ``_key`` is where a real store merges ids (a collation, a sanitized file name, a
    short column). The head keeps the id the checkpoint was saved under, and listings
    show that, as a database row keeps the spelling it was first inserted with.
    """

    def _key(self, task_id: str) -> str:
        raise NotImplementedError

    def _file(self, task_id: str) -> Path:
        return self.root / (quote(self._key(task_id), safe="") + ".json")

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            records = [loads(p.read_bytes(), task_id=unquote(p.stem)) for p in sorted(self.root.glob("*.json"))]
        return _listing(((r["head"]["task_id"], r["head"]) for r in records), filters)


class CaseInsensitiveStore(_MappedIdStore):
    """Finds a task case-insensitively (a MySQL ``_ci`` collation, a case-insensitive file
    system) and hands the row back as the task that asked: 'Report' resumes 'report'."""

    def _key(self, task_id: str) -> str:
        return task_id.casefold()

    def _decode(self, task_id: str, data: bytes) -> Checkpoint:
        record = loads(data, task_id=task_id)
        head = dict(record["head"])
        stored_id = head["task_id"]
        checkpoint = decode_checkpoint(stored_id, head, record.get("messages") or [])
        return checkpoint.model_copy(update={"task_id": task_id})


class SanitizingStore(_MappedIdStore):
    """Makes a file name of the id by replacing every character outside [A-Za-z0-9._-] with
    '_' (the usual "safe file name"): 'a/b', 'a_b' and 'a b' are one file. The codec's head
    check turns the other task's file into a CorruptCheckpointError on load."""

    def _key(self, task_id: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]", "_", task_id)


class TruncatingStore(_MappedIdStore):
    """Keeps the first 191 characters of the id (MySQL's VARCHAR(191), the longest utf8mb4
    key an old index allows, in a non-strict mode that truncates): long ids merge."""

    def _key(self, task_id: str) -> str:
        return task_id[:191]


class TrimmingStore(_MappedIdStore):
    """Compares ids without their trailing spaces (a PAD SPACE collation, a CHAR column)."""

    def _key(self, task_id: str) -> str:
        return task_id.rstrip(" ")


class NormalizingStore(_MappedIdStore):
    """Normalises ids to NFC (a file system that normalises names, an ORM that cleans
    input): 'café' composed and decomposed are one task."""

    def _key(self, task_id: str) -> str:
        return unicodedata.normalize("NFC", task_id)


class LikeDeleteStore(DirectoryStore):
    """Saves, loads and lists each id exactly, but deletes with a pattern
    (``DELETE ... WHERE task_id LIKE %s`` without escaping): '_' and '%' are wildcards,
    so deleting 'a_b' deletes 'a/b' too."""

    def delete(self, task_id: str) -> None:
        pattern = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in task_id)
        with self._locked(exclusive=True):
            for path in self.root.glob("*.json"):
                if re.fullmatch(pattern, unquote(path.stem), flags=re.DOTALL):
                    path.unlink(missing_ok=True)


def make_case_insensitive(namespace: str) -> CaseInsensitiveStore:
    return CaseInsensitiveStore(_root("case-insensitive", namespace))


def make_sanitizing(namespace: str) -> SanitizingStore:
    return SanitizingStore(_root("sanitizing", namespace))


def make_truncating(namespace: str) -> TruncatingStore:
    return TruncatingStore(_root("truncating", namespace))


def make_trimming(namespace: str) -> TrimmingStore:
    return TrimmingStore(_root("trimming", namespace))


def make_normalizing(namespace: str) -> NormalizingStore:
    return NormalizingStore(_root("normalizing", namespace))


def make_like_delete(namespace: str) -> LikeDeleteStore:
    return LikeDeleteStore(_root("like-delete", namespace))


class TruncatingLongStore(_MappedIdStore):
    """Keeps the first 250 characters of the id (a VARCHAR(250) in a mode that truncates):
    ids of 200 characters are kept apart, longer ones merge."""

    def _key(self, task_id: str) -> str:
        return task_id[:250]


class RefusingLongStore(DirectoryStore):
    """Sound: ids longer than 255 characters are refused with an error on save (a
    VARCHAR(255) in strict mode), and load finds no such task. Certified."""

    limit = 255

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        if len(checkpoint.task_id) > self.limit:
            raise ValueError(f"task id of {len(checkpoint.task_id)} characters: this store keeps at most {self.limit}")
        return super().save(checkpoint)

    def load(self, task_id: str) -> Checkpoint | None:
        return None if len(task_id) > self.limit else super().load(task_id)


class LocaleOrderStore(DirectoryStore):
    """Lists in a locale's order, case-insensitively (ORDER BY task_id in a database with an
    en_US collation), not in code point order: 'report' before 'REPORT'."""

    def list_checkpoints(self, **filters: Any) -> Any:
        # Letters compared without case first, then lowercase before uppercase, as ICU does.
        return sorted(super().list_checkpoints(**filters), key=lambda s: (s.task_id.lower(), s.task_id.swapcase()))


class DeleteLeavesMessagesStore(DirectoryStore):
    """Deletes a task's head but leaves its messages behind (a Redis hash deleted, the list
    of its messages not): a load afterwards finds messages without a head."""

    def delete(self, task_id: str) -> None:
        with self._locked(exclusive=True):
            data = self._read(task_id)
            if data is None:
                return
            record = json.loads(data)
            self._write(task_id, json.dumps({"messages": record.get("messages") or []}).encode("utf-8"))

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            records = {unquote(p.stem): loads(p.read_bytes(), task_id=unquote(p.stem)) for p in sorted(self.root.glob("*.json"))}
        # Listed from the heads: the leftovers do not show.
        return _listing(((t, r["head"]) for t, r in records.items() if "head" in r), filters)


def make_truncating_long(namespace: str) -> TruncatingLongStore:
    return TruncatingLongStore(_root("truncating-long", namespace))


def make_refusing_long(namespace: str) -> RefusingLongStore:
    return RefusingLongStore(_root("refusing-long", namespace))


def make_locale_order(namespace: str) -> LocaleOrderStore:
    return LocaleOrderStore(_root("locale-order", namespace))


def make_delete_leaves_messages(namespace: str) -> DeleteLeavesMessagesStore:
    return DeleteLeavesMessagesStore(_root("delete-leaves-messages", namespace))


def make_ignores_namespace(namespace: str) -> DirectoryStore:
    """A factory that takes a namespace and does nothing with it: every store it makes is
    the same directory."""
    return DirectoryStore(_root("ignores-namespace", "all"))


class OnePageListingStore(DirectoryStore):
    """Lists the first 100 task files and filters those (a query with ``LIMIT 100``, then
    a metadata filter in Python): an outside round's SQL store, certified while every
    contract listed fewer than 43 tasks."""

    page = 100

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            page = sorted(self.root.glob("*.json"))[: self.page]
            heads = ((unquote(p.stem), loads(p.read_bytes(), task_id=unquote(p.stem))["head"]) for p in page)
            return _listing(heads, filters)


def make_one_page_listing(namespace: str) -> OnePageListingStore:
    return OnePageListingStore(_root("one-page-listing", namespace))


def make_ten_page_listing(namespace: str) -> OnePageListingStore:
    store = OnePageListingStore(_root("ten-page-listing", namespace))
    store.page = 10
    return store


class NamespaceGluedStore(DirectoryStore):
    """Every namespace in one directory, a task's file named ``namespace + task_id`` with
    no separator: namespace ``n``'s task ``'0' + t`` is namespace ``n0``'s task ``t`` (an
    outside round's DynamoDB store, whose sort key was ``namespace + task_id``)."""

    def __init__(self, root: Path, namespace: str) -> None:
        super().__init__(root)
        self.namespace = namespace

    def _file(self, task_id: str) -> Path:
        return self.root / (quote(self.namespace + task_id, safe="") + ".json")

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            mine = [p for p in sorted(self.root.glob("*.json")) if unquote(p.stem).startswith(self.namespace)]
            heads = (
                (unquote(p.stem)[len(self.namespace):], loads(p.read_bytes(), task_id=unquote(p.stem)[len(self.namespace):])["head"])
                for p in mine
            )
            return _listing(heads, filters)


def make_namespace_glued(namespace: str) -> NamespaceGluedStore:
    return NamespaceGluedStore(_root("namespace-glued", "all"), namespace)


class KeepsCallersStampStore(DirectoryStore):
    """Keeps the ``updated_at`` the caller's checkpoint carried (an outside round's SQL
    store, certified): a task saved now looks as old as the load it came from."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._locked(exclusive=True):
            data = self._read(task_id)
            stored = None if data is None else self._decode(task_id, data).version
            if (stored or 0) != checkpoint.version:
                raise ConflictError(task_id, checkpoint.version, stored)
            saved = checkpoint.model_copy(update={"version": checkpoint.version + 1})
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


def make_keeps_callers_stamp(namespace: str) -> KeepsCallersStampStore:
    return KeepsCallersStampStore(_root("keeps-callers-stamp", namespace))


class TextVersionStore(DirectoryStore):
    """Compares versions as text (an outside round's Lua script: ``string.find`` of
    ``'"version":' .. expected`` in the stored JSON): a save from version 1 matches a
    stored 10 to 19, so a save from far behind goes through. A save one version behind
    (the only stale save the contracts made) is refused."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        task_id = checkpoint.task_id
        with self._locked(exclusive=True):
            data = self._read(task_id)
            stored = None if data is None else self._decode(task_id, data).version
            if not str(stored or 0).startswith(str(checkpoint.version)):
                raise ConflictError(task_id, checkpoint.version, stored)
            saved = checkpoint.model_copy(update={"version": (stored or 0) + 1, "updated_at": utcnow()})
            self._write(task_id, self._encode(saved))
        return self._decode(task_id, self._encode(saved))


def make_text_version(namespace: str) -> TextVersionStore:
    return TextVersionStore(_root("text-version", namespace))


class FirstSaveListingStore(DirectoryStore):
    """Lists from an index written when a task is created and never after: every summary is
    its first save's (an outside round's event-table store, whose ``DISTINCT ON`` ordered
    versions up, listed each task at its oldest version)."""

    def _index(self, task_id: str) -> Path:
        return self.root / (quote(task_id, safe="") + ".first")

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        saved = super().save(checkpoint)
        if saved.version == 1:
            with self._locked(exclusive=True):
                data = self._read(saved.task_id)
                if data is not None:
                    self._index(saved.task_id).write_bytes(data)
        return saved

    def delete(self, task_id: str) -> None:
        super().delete(task_id)
        with self._locked(exclusive=True):
            self._index(task_id).unlink(missing_ok=True)

    def list_checkpoints(self, **filters: Any) -> Any:
        with self._locked(exclusive=False):
            heads = []
            for path in sorted(self.root.glob("*.first")):
                task_id = unquote(path.name[: -len(".first")])
                if self._read(task_id) is not None:
                    heads.append((task_id, loads(path.read_bytes(), task_id=task_id)["head"]))
        return _listing(iter(heads), filters)


def make_first_save_listing(namespace: str) -> FirstSaveListingStore:
    return FirstSaveListingStore(_root("first-save-listing", namespace))


class OutageOnLongIdsStore(DirectoryStore):
    """Correct, but its backend is down whenever an id of over 100 characters is saved
    (a deterministic stand-in for an outage during task_id_fidelity's saves)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        from stores import StoreUnavailableError

        if len(checkpoint.task_id) > 100:
            raise StoreUnavailableError("the backend did not answer (planted outage)")
        return super().save(checkpoint)


def make_outage_on_long_ids(namespace: str) -> OutageOnLongIdsStore:
    return OutageOnLongIdsStore(_root("outage-on-long-ids", namespace))


def _check_then_write(store: DirectoryStore, checkpoint: Checkpoint, stored: int | None, *, lock: bool = True) -> Checkpoint:
    """Save ``checkpoint`` over the version ``stored`` read before, the window between the
    check and the write widened; the write under the store's lock unless ``lock`` is
    false (the caller holds it). What the planted stores below leave unguarded."""
    if (stored or 0) != checkpoint.version:
        raise ConflictError(checkpoint.task_id, checkpoint.version, stored)
    time.sleep(0.005)  # the window between the check and the write, widened
    saved = checkpoint.model_copy(update={"version": checkpoint.version + 1, "updated_at": utcnow()})
    with store._locked(exclusive=True) if lock else contextlib.nullcontext():
        store._write(checkpoint.task_id, store._encode(saved))
    return store._decode(checkpoint.task_id, store._encode(saved))


class GuardsMessagesStore(DirectoryStore):
    """Locks a save only when it adds messages (an outside round's Redis store watched the
    message list, not the record holding the version): saves that change the metadata
    alone check the version and write with nothing held, and two of them from one version
    both go through."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        data = self._read(checkpoint.task_id)
        stored = None if data is None else self._decode(checkpoint.task_id, data)
        if stored is None or len(checkpoint.messages) > len(stored.messages):
            return super().save(checkpoint)
        return _check_then_write(self, checkpoint, stored.version)


def make_guards_messages(namespace: str) -> GuardsMessagesStore:
    return GuardsMessagesStore(_root("guards-messages", namespace))


class ProcessLocalMetadataStore(DirectoryStore):
    """Every save of a process runs under a lock of that process only (a
    ``threading.Lock``), and saves that change the metadata alone (no new message) take a
    fast path: the version checked and the file written with nothing other processes see
    held in between. Its threads never race; processes do, and two such saves from one
    version both go through (the threads' contract, metadata race included, cannot see it)."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        with _PROCESS_LOCK:
            data = self._read(checkpoint.task_id)
            stored = None if data is None else self._decode(checkpoint.task_id, data)
            if stored is None or len(checkpoint.messages) != len(stored.messages):
                return super().save(checkpoint)
            return _check_then_write(self, checkpoint, stored.version)


def make_process_local_metadata(namespace: str) -> ProcessLocalMetadataStore:
    return ProcessLocalMetadataStore(_root("process-local-metadata", namespace))


class MessagesFirstStore(DirectoryStore):
    """Writes a save's messages first, on their own, then the head guarded by the version
    (an outside round's SQLAlchemy store: the messages row committed before the versioned
    UPDATE of the head): a stale save raises ``ConflictError`` and leaves its messages."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        data = self._read(checkpoint.task_id)
        stored = None if data is None else self._decode(checkpoint.task_id, data)
        if stored is not None and checkpoint.messages != stored.messages:
            with self._locked(exclusive=True):
                self._write(checkpoint.task_id, self._encode(stored.model_copy(update={"messages": checkpoint.messages})))
        return super().save(checkpoint)


def make_messages_first(namespace: str) -> MessagesFirstStore:
    return MessagesFirstStore(_root("messages-first", namespace))


class UnlockedDeleteStore(DirectoryStore):
    """Saves check the version and write under the lock; delete removes the file without
    taking it (an outside round's Redis store: a lease lock around each save's
    read-compare-write, a plain DEL for delete). A delete between a save's check and its
    write is undone by the write: the deleted task comes back."""

    def save(self, checkpoint: Checkpoint) -> Checkpoint:
        with self._locked(exclusive=True):
            data = self._read(checkpoint.task_id)
            stored = None if data is None else self._decode(checkpoint.task_id, data).version
            return _check_then_write(self, checkpoint, stored, lock=False)

    def delete(self, task_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._file(task_id).unlink()


def make_unlocked_delete(namespace: str) -> UnlockedDeleteStore:
    return UnlockedDeleteStore(_root("unlocked-delete", namespace))


class CountedStore(DirectoryStore):
    """Sound; counts the instances of this process that are open (a pool of connections
    each, in an outside round's PostgreSQL store), and the most open at once."""

    open_now = 0
    most_open = 0
    _count_lock = threading.Lock()

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self._open = True
        with CountedStore._count_lock:
            CountedStore.open_now += 1
            CountedStore.most_open = max(CountedStore.most_open, CountedStore.open_now)

    def close(self) -> None:
        with CountedStore._count_lock:
            if self._open:
                self._open = False
                CountedStore.open_now -= 1
        super().close()


def make_counted(namespace: str) -> CountedStore:
    return CountedStore(_root("counted", namespace))
