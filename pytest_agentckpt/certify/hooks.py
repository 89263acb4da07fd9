"""Optional hooks through which a store lets the suite check what the protocol cannot reach.

The :class:`~stores.CheckpointStore` protocol has no way to damage stored bytes, to
write a head from the future or to count bytes written, and it should not have one.
A store that wants those contracts checked offers them as extra methods:

.. code-block:: python

    class MyStore:
        certify_capabilities = {"incremental"}     # optional contracts it declares

        def certify_corrupt(self, task_id: str) -> None:
            '''Overwrite the stored bytes of task_id with something undecodable.'''

        def certify_bump_schema(self, task_id: str) -> None:
            '''Rewrite the stored head of task_id with schema_version + 1.'''

        @property
        def bytes_written(self) -> int:
            '''Bytes the saves of this instance have written so far.'''

        def certify_restart(self) -> None:
            '''Restart the backend server (acknowledged saves must survive).'''

        def certify_purge(self) -> None:
            '''Remove everything this instance's namespace holds (run clean-up).'''

A contract whose hook is missing is reported as *not checkable*, never as passed. The
built-in stores get their hooks from adapters here, so they certify without them.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from stores import CheckpointStore

__all__ = [
    "CAPABILITIES",
    "StoreHooks",
    "SupportsCorruption",
    "SupportsPurge",
    "SupportsRestart",
    "SupportsSchemaBump",
    "hooks_for",
]

#: Optional contracts a store may declare in ``certify_capabilities``. ``incremental``
#: and ``durable-restart`` are also implied by ``info().incremental`` and
#: ``info().durable``.
CAPABILITIES = frozenset({"durable-restart", "incremental", "ttl"})

#: What the corruption hooks of the built-in adapters write: not JSON at all.
GARBAGE = b"\x00\xffnot a checkpoint{"


@runtime_checkable
class SupportsCorruption(Protocol):
    """A store that can damage its own stored bytes for the corruption contract."""

    def certify_corrupt(self, task_id: str) -> None:
        """Make the stored checkpoint of ``task_id`` undecodable (it must exist)."""
        ...


@runtime_checkable
class SupportsSchemaBump(Protocol):
    """A store that can rewrite a stored head as a newer schema version."""

    def certify_bump_schema(self, task_id: str) -> None:
        """Set the stored ``schema_version`` of ``task_id`` to the current one + 1."""
        ...


@runtime_checkable
class SupportsRestart(Protocol):
    """A store whose backend server the suite may restart."""

    def certify_restart(self) -> None:
        """Restart the server; return once it accepts connections again."""
        ...


@runtime_checkable
class SupportsPurge(Protocol):
    """A store that can remove everything its namespace holds, so runs leave nothing."""

    def certify_purge(self) -> None:
        """Delete every checkpoint and structure of this instance's namespace."""
        ...


@dataclass(frozen=True)
class StoreHooks:
    """The hooks found for one store instance (``None`` where there is none)."""

    corrupt: Callable[[str], None] | None = None
    bump_schema: Callable[[str], None] | None = None
    bytes_written: Callable[[], int] | None = None
    restart: Callable[[], None] | None = None
    purge: Callable[[], None] | None = None
    capabilities: frozenset[str] = frozenset()


def bump_schema_bytes(head: bytes | str) -> bytes:
    """A stored JSON head with its ``schema_version`` raised by one."""
    fields = json.loads(head)
    fields["schema_version"] = int(fields["schema_version"]) + 1
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _declared(store: CheckpointStore) -> frozenset[str]:
    declared: Iterable[str] = getattr(store, "certify_capabilities", ()) or ()
    capabilities = set(declared)
    info = store.info()
    if info.incremental:
        capabilities.add("incremental")
    if info.durable:
        capabilities.add("durable-restart")
    return frozenset(capabilities)


def _counter(store: Any) -> Callable[[], int] | None:
    if isinstance(getattr(store, "bytes_written", None), int):
        return lambda: int(store.bytes_written)
    return None


def hooks_for(store: CheckpointStore) -> StoreHooks:
    """The hooks of ``store``: its own ``certify_*`` methods, else a built-in adapter."""
    adapter = _builtin_adapter(store)
    corrupt = store.certify_corrupt if isinstance(store, SupportsCorruption) else adapter.corrupt
    bump = (
        store.certify_bump_schema if isinstance(store, SupportsSchemaBump) else adapter.bump_schema
    )
    restart = store.certify_restart if isinstance(store, SupportsRestart) else None
    return StoreHooks(
        corrupt=corrupt,
        bump_schema=bump,
        bytes_written=_counter(store) or adapter.bytes_written,
        restart=restart,
        purge=store.certify_purge if isinstance(store, SupportsPurge) else adapter.purge,
        capabilities=_declared(store),
    )


# -- adapters for the built-in stores ------------------------------------------------------
# They reach into each backend's layout on purpose: certification must be able to damage
# what the store wrote, and the protocol rightly offers no way to do it.


def _builtin_adapter(store: CheckpointStore) -> StoreHooks:
    backend = type(store).__module__
    if backend == "stores.memory":
        return _memory_hooks(store)
    if backend == "stores.sqlite":
        return _sqlite_hooks(store)
    if backend == "stores.redis":
        return _redis_hooks(store)
    if backend == "stores.postgresql":
        return _postgres_hooks(store)
    if backend == "stores.s3":
        return _s3_hooks(store)
    return StoreHooks()


def _memory_hooks(store: Any) -> StoreHooks:
    def record(task_id: str) -> Any:
        found = store._raw_record(task_id)
        if found is None:
            raise KeyError(task_id)
        return found

    def corrupt(task_id: str) -> None:
        with store._lock:
            record(task_id).head = GARBAGE

    def bump(task_id: str) -> None:
        with store._lock:
            found = record(task_id)
            found.head = bump_schema_bytes(found.head)

    def purge() -> None:
        with store._lock:
            store._records.clear()

    return StoreHooks(corrupt=corrupt, bump_schema=bump, purge=purge)


def _sqlite_hooks(store: Any) -> StoreHooks:
    def rewrite(task_id: str, change: Callable[[bytes], bytes]) -> None:
        # A connection of our own: the store's are per thread and private.
        conn = sqlite3.connect(str(store.path), timeout=10)
        try:
            with conn:
                row = conn.execute(
                    "SELECT head FROM checkpoints WHERE task_id = ?", (task_id,)
                ).fetchone()
                if row is None:
                    raise KeyError(task_id)
                conn.execute(
                    "UPDATE checkpoints SET head = ? WHERE task_id = ?",
                    (change(bytes(row[0])), task_id),
                )
        finally:
            conn.close()

    def purge() -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(str(store.path) + suffix).unlink()

    return StoreHooks(
        corrupt=lambda task_id: rewrite(task_id, lambda _head: GARBAGE),
        bump_schema=lambda task_id: rewrite(task_id, bump_schema_bytes),
        purge=purge,
    )


def _redis_hooks(store: Any) -> StoreHooks:
    def rewrite(task_id: str, change: Callable[[bytes], bytes]) -> None:
        head_key = store.raw_keys(task_id)[0]
        body = store.client.hget(head_key, "body")
        if body is None:
            raise KeyError(task_id)
        store.client.hset(head_key, "body", change(body))

    def purge() -> None:
        keys = list(store.client.scan_iter(match=store.key_prefix + "*", count=500))
        for start in range(0, len(keys), 500):
            store.client.delete(*keys[start : start + 500])

    return StoreHooks(
        corrupt=lambda task_id: rewrite(task_id, lambda _head: GARBAGE),
        bump_schema=lambda task_id: rewrite(task_id, bump_schema_bytes),
        purge=purge,
    )


def _postgres_hooks(store: Any) -> StoreHooks:
    def rewrite(task_id: str, change: Callable[[bytes], bytes]) -> None:
        table = store._sql.Identifier(*store.tables["checkpoints"].split(".", 1))
        with store._connect() as conn, conn.transaction():
            row = conn.execute(
                store._sql.SQL("SELECT head FROM {} WHERE task_id = %s FOR UPDATE").format(table),
                (task_id,),
            ).fetchone()
            if row is None:
                raise KeyError(task_id)
            conn.execute(
                store._sql.SQL("UPDATE {} SET head = %s WHERE task_id = %s").format(table),
                (change(bytes(row[0])), task_id),
            )

    return StoreHooks(
        corrupt=lambda task_id: rewrite(task_id, lambda _head: GARBAGE),
        bump_schema=lambda task_id: rewrite(task_id, bump_schema_bytes),
        purge=store.drop_tables,
    )


def _s3_hooks(store: Any) -> StoreHooks:
    def rewrite(task_id: str, change: Callable[[bytes], bytes]) -> None:
        key = store.head_key(task_id)
        body = store.client.get_object(Bucket=store.bucket, Key=key)["Body"].read()
        store.client.put_object(Bucket=store.bucket, Key=key, Body=change(body))

    def bump_envelope(body: bytes) -> bytes:
        envelope = json.loads(body)
        envelope["head"]["schema_version"] = int(envelope["head"]["schema_version"]) + 1
        return json.dumps(envelope, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    def purge() -> None:
        prefix = f"{store.prefix}/" if store.prefix else ""
        paginator = store.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=store.bucket, Prefix=prefix):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", ())]
            if keys:
                store.client.delete_objects(Bucket=store.bucket, Delete={"Objects": keys})

    return StoreHooks(
        corrupt=lambda task_id: rewrite(task_id, lambda _body: GARBAGE),
        bump_schema=lambda task_id: rewrite(task_id, bump_envelope),
        purge=purge,
    )
