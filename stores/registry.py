"""The backend registry: which store a URL names, and ``open_store``.

Each backend is imported only when a URL names it, so ``import stores`` works with no
driver installed. The backends import :mod:`stores.url` for parsing and redaction; this
module imports the backends: the imports point one way.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .errors import InvalidStoreURLError
from .url import redact_url, resolve_url, split_url

if TYPE_CHECKING:
    from .protocol import CheckpointStore

__all__ = ["BACKENDS", "SUPPORTED_SCHEMES", "open_store"]

#: URL scheme -> (module, class) of its backend.
BACKENDS: dict[str, tuple[str, str]] = {
    "memory": ("stores.memory", "MemoryStore"),
    "sqlite": ("stores.sqlite", "SQLiteStore"),
    "postgresql": ("stores.postgresql", "PostgresStore"),
    "redis": ("stores.redis", "RedisStore"),
    "s3": ("stores.s3", "S3Store"),
}

SUPPORTED_SCHEMES = {
    "memory": "memory://[name]  (in-process, for tests)",
    "sqlite": "sqlite:///relative/path.db or sqlite:////absolute/path.db",
    "postgresql": "postgresql://user:password@host:5432/dbname[?table_prefix=agentckpt_]",
    "redis": "redis://[:password@]host:6379/0[?key_prefix=agentckpt:]",
    "s3": "s3://bucket/prefix?endpoint_url=http://127.0.0.1:8333",
}
_ALIASES = {"postgres": "postgresql", "rediss": "redis"}


def _supported() -> str:
    return "; ".join(SUPPORTED_SCHEMES.values())


def open_store(url: str | None = None, *, create: bool = True) -> CheckpointStore:
    """Open the checkpoint store a URL names.

    ``None`` means ``$AGENTCKPT_STORE_URL`` or, failing that, the embedded SQLite file
    :data:`~stores.url.DEFAULT_STORE_URL`.

    ``create=False`` opens only a store that already exists and creates nothing: no
    directory, no file, no table (for read-only uses such as listing and inspecting). A
    SQLite file that does not exist (or holds no checkpoint tables) and PostgreSQL
    tables that do not exist raise :class:`~stores.StoreNotFoundError`; Redis, S3 and
    memory stores create nothing when they are opened, so for them it changes nothing.

    >>> store = open_store("memory://")
    >>> store.info().backend
    'memory'
    >>> open_store("sqlite:///no/such/dir/checkpoints.db", create=False)
    Traceback (most recent call last):
    ...
    stores.errors.StoreNotFoundError: no SQLite store at no/such/dir/checkpoints.db ...
    """
    url = resolve_url(url)
    if not isinstance(url, str) or "://" not in url:
        raise InvalidStoreURLError(
            f"{redact_url(str(url))!r} is not a store URL; use one of: {_supported()}"
        )
    parts = split_url(url)
    scheme = parts.scheme.lower().split("+", 1)[0]
    scheme = _ALIASES.get(scheme, scheme)
    if scheme not in BACKENDS:
        raise InvalidStoreURLError(
            f"unknown store scheme {parts.scheme!r} in {redact_url(url)!r}; supported: {_supported()}"
        )
    module_name, class_name = BACKENDS[scheme]
    backend = getattr(importlib.import_module(module_name), class_name)
    store: CheckpointStore = backend.from_url(url, create=create)
    return store
