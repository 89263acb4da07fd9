"""Factories for the built-in stores, ready for ``agentckpt certify``.

.. code-block:: console

    $ agentckpt certify pytest_agentckpt.certify.builtin:memory --quick
    $ agentckpt certify pytest_agentckpt.certify.builtin:sqlite
    $ AGENTCKPT_CERTIFY_URL=redis://127.0.0.1:6379/0 \\
          agentckpt certify pytest_agentckpt.certify.builtin:from_env

Each factory puts the namespace into the URL (a file name, a table or key prefix, an S3
prefix), so certification runs never touch anyone else's data.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from stores import CheckpointStore, InvalidStoreURLError, open_store
from stores.memory import MemoryStore

__all__ = ["from_env", "memory", "namespaced_url", "sqlite"]

#: The URL :func:`from_env` certifies.
URL_VARIABLE = "AGENTCKPT_CERTIFY_URL"
#: Where :func:`sqlite` keeps its files (default: a folder in the temp directory).
DIR_VARIABLE = "AGENTCKPT_CERTIFY_DIR"


def _with_query(url: str, key: str, value: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    query.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(query)))


def namespaced_url(url: str, namespace: str) -> str:
    """``url`` moved into ``namespace``: a separate file, table prefix, key prefix or folder.

    >>> namespaced_url("redis://127.0.0.1:6379/0", "ns1")
    'redis://127.0.0.1:6379/0?key_prefix=ns1%3A'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower().split("+", 1)[0]
    if scheme == "memory":
        return f"memory://{namespace}" + (f"?{parts.query}" if parts.query else "")
    if scheme == "sqlite":
        path = Path(parts.path[1:] if parts.path.startswith("/") else parts.path)
        moved = path.with_name(f"{path.stem}-{namespace}{path.suffix or '.db'}")
        query = f"?{parts.query}" if parts.query else ""
        return f"sqlite:///{moved}{query}"
    if scheme in ("postgresql", "postgres"):
        return _with_query(url, "table_prefix", f"{namespace}_")
    if scheme in ("redis", "rediss"):
        return _with_query(url, "key_prefix", f"{namespace}:")
    if scheme == "s3":
        prefix = parts.path.strip("/")
        return urlunsplit(parts._replace(path=f"/{prefix}/{namespace}" if prefix else f"/{namespace}"))
    raise InvalidStoreURLError(f"cannot put a namespace into {scheme!r} store URLs")


def memory(namespace: str) -> CheckpointStore:
    """An in-process :class:`~stores.memory.MemoryStore` (process contracts do not apply)."""
    return MemoryStore(namespace)


def sqlite(namespace: str) -> CheckpointStore:
    """A SQLite file per namespace under ``$AGENTCKPT_CERTIFY_DIR`` or the temp directory."""
    base = Path(os.environ.get(DIR_VARIABLE) or Path(tempfile.gettempdir()) / "agentckpt-certify")
    return open_store(f"sqlite:///{base / (namespace + '.db')}")


def from_env(namespace: str) -> CheckpointStore:
    """The store at ``$AGENTCKPT_CERTIFY_URL``, moved into ``namespace``."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        raise InvalidStoreURLError(
            f"set {URL_VARIABLE} to the store URL to certify, e.g. "
            f"{URL_VARIABLE}=postgresql://user@127.0.0.1:5432/db"
        )
    return open_store(namespaced_url(url, namespace))
