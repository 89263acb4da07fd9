"""Durability across a server restart: the optional ``durable_restart`` contract.

For the built-in Redis and PostgreSQL stores the suite starts a private server of its
own, saves, kills the server with SIGKILL, starts it again and loads: it never touches a
server it did not start. A store of another kind offers ``certify_restart()``; without
it, durability is checked across closing the store and opening a new instance.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stores import Checkpoint, CheckpointStore, open_store

from .builtin import namespaced_url
from .comparison import first_difference
from .context import CertifyContext, ContractFailed, NotApplicable, NotCheckable
from .factory import new_namespace
from .sharing import needs_cross_process

__all__ = ["check_durable_restart"]


def _save_some(store: CheckpointStore, ctx: CertifyContext) -> list[Checkpoint]:
    saved = []
    for index in range(3):
        task_id = ctx.task_id("durable")
        first = store.save(Checkpoint(task_id=task_id, goal=f"durable {index}",
                                      messages=[{"role": "user", "content": "one"}]))
        # A second, incremental save: the appended suffix must survive too.
        saved.append(store.save(first.model_copy(update={
            "messages": [*first.messages, {"role": "assistant", "content": "two ✓"}]})))
    return saved


def _all_there(store: CheckpointStore, saved: list[Checkpoint], when: str) -> None:
    for checkpoint in saved:
        loaded = store.load(checkpoint.task_id)
        if loaded is None:
            raise ContractFailed(f"{when}, the acknowledged save of {checkpoint.task_id} is gone")
        difference = first_difference(
            checkpoint.model_dump(mode="json"), loaded.model_dump(mode="json")
        )
        if difference:
            raise ContractFailed(f"{when}, {checkpoint.task_id} came back changed", difference)


@contextlib.contextmanager
def _private_server(backend: str, base: Path, **options: Any) -> Iterator[Any]:
    try:
        if backend == "redis":
            from ..services.redis import PrivateRedis

            server: Any = PrivateRedis(base, **options)
        else:
            from ..services.postgres import PrivatePostgres

            server = PrivatePostgres(base, **options)
        server.start()
    except Exception as exc:
        raise NotCheckable(f"cannot start a private {backend} server to restart: {exc}") from None
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()


def _restart_private(ctx: CertifyContext, backend: str) -> str:
    with tempfile.TemporaryDirectory(prefix="agentckpt-restart-") as tmp:
        with _private_server(backend, Path(tmp) / "durable") as server:
            url = namespaced_url(server.url, new_namespace())
            store = open_store(url)
            try:
                saved = _save_some(store, ctx)
                server.kill()
                server.start()
                _all_there(store, saved, f"after SIGKILL and restart of a private {backend} "
                           "server (same instance, reconnecting)")
                fresh = open_store(url)
                try:
                    _all_there(fresh, saved, "after a restart (new instance)")
                finally:
                    fresh.close()
            finally:
                store.close()
        note = f"private {backend} server killed with SIGKILL and restarted: saves survived"
        if backend == "redis":
            note += "; " + _redis_without_aof_is_reported(Path(tmp) / "no-aof")
    return note


def _redis_without_aof_is_reported(base: Path) -> str:
    with _private_server("redis", base, appendonly=False) as server:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(namespaced_url(server.url, new_namespace()))
        try:
            info = store.info()
        finally:
            store.close()
    if info.durable is not False:
        raise ContractFailed(
            f"a Redis server with AOF off is reported as durable={info.durable}: its saves are "
            "lost on restart, and info() must say so"
        )
    return "a server without AOF is reported as not durable"


def check_durable_restart(ctx: CertifyContext) -> str:
    """The ``durable_restart`` check (see the module docstring)."""
    namespace = new_namespace()
    store = ctx.new_store(namespace)
    hooks = ctx.hooks(store)
    info = store.info()
    declared = "durable-restart" in hooks.capabilities
    notes = " ".join(info.notes)
    if info.backend in ("redis", "postgresql"):
        # The backend's code is certified on a private server whatever this server's
        # configuration; the store under test's own declaration is reported as it is.
        verdict = _restart_private(ctx, info.backend)
        if not declared:
            verdict = (f"the server under test is reported NOT durable (info().durable is "
                       f"{info.durable}{': ' + notes if notes else ''}); {verdict}")
        return verdict
    if not declared:
        why = f"info().durable is {info.durable}"
        raise NotApplicable(f"the store does not declare durability ({why}){': ' + notes if notes else ''}")
    if hooks.restart is None:
        # Close-and-reopen inside one process proves nothing for a store whose data never
        # leaves the process: durability needs a save that outlives its process.
        needs_cross_process(ctx)
    saved = _save_some(store, ctx)
    if hooks.restart is not None:
        hooks.restart()
        _all_there(store, saved, "after certify_restart() (same instance)")
        how = "restarted through certify_restart()"
    else:
        how = "no server to restart: checked across close and a new instance"
    ctx.close_store(store)
    reopened = ctx.new_store(namespace)
    _all_there(reopened, saved, "in a new instance")
    return how
