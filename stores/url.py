"""Store URLs: the one parser, the one redaction, and ``open_store``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import SplitResult, parse_qs, urlsplit, urlunsplit

from .errors import InvalidStoreURLError

if TYPE_CHECKING:
    from .protocol import CheckpointStore

__all__ = ["DEFAULT_STORE_URL", "SUPPORTED_SCHEMES", "open_store", "query_params", "redact_url"]

#: Where the reference agent keeps checkpoints when no URL is given.
DEFAULT_STORE_URL = "sqlite:///.agentckpt/checkpoints.db"

SUPPORTED_SCHEMES = {
    "memory": "memory://[name]  (in-process, for tests)",
    "sqlite": "sqlite:///relative/path.db or sqlite:////absolute/path.db",
    "postgresql": "postgresql://user:password@host:5432/dbname[?table_prefix=agentckpt_]",
    "redis": "redis://[:password@]host:6379/0[?key_prefix=agentckpt:]",
    "s3": "s3://bucket/prefix?endpoint_url=http://127.0.0.1:8333",
}
_ALIASES = {"postgres": "postgresql", "rediss": "redis"}


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``, safe to print or log."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def query_params(parts: SplitResult) -> dict[str, str]:
    """The query string of a store URL as single values (the last one wins)."""
    return {key: values[-1] for key, values in parse_qs(parts.query).items()}


def _supported() -> str:
    return "; ".join(SUPPORTED_SCHEMES.values())


def open_store(url: str | None = None) -> CheckpointStore:
    """Open the checkpoint store a URL names.

    ``None`` means ``$AGENTCKPT_STORE_URL`` or, failing that, the embedded SQLite file
    :data:`DEFAULT_STORE_URL`.

    >>> store = open_store("memory://")
    >>> store.info().backend
    'memory'
    """
    if url is None:
        url = os.environ.get("AGENTCKPT_STORE_URL") or DEFAULT_STORE_URL
    if not isinstance(url, str) or "://" not in url:
        raise InvalidStoreURLError(f"{redact_url(str(url))!r} is not a store URL; use one of: {_supported()}")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidStoreURLError(f"malformed store URL {redact_url(url)!r}: {exc}") from None
    scheme = parts.scheme.lower().split("+", 1)[0]
    scheme = _ALIASES.get(scheme, scheme)
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore.from_url(url)
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if scheme == "postgresql":
        from .postgresql import PostgresStore

        return PostgresStore.from_url(url)
    if scheme == "redis":
        from .redis import RedisStore

        return RedisStore.from_url(url)
    if scheme == "s3":
        from .s3 import S3Store

        return S3Store.from_url(url)
    raise InvalidStoreURLError(
        f"unknown store scheme {parts.scheme!r} in {redact_url(url)!r}; supported: {_supported()}"
    )
